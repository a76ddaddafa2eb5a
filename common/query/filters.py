"""Filters: the native filter model (Druid's JSON forms, new and legacy), as frozen dataclasses.

Evaluation lives in ``selection.py``; this module only defines what a filter *is*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.errors import ValidationError


@dataclass(frozen=True)
class Filter:
    def columns(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True)
class TrueFilter(Filter):
    pass


@dataclass(frozen=True)
class FalseFilter(Filter):
    pass


@dataclass(frozen=True)
class Equals(Filter):
    column: str
    value: Any  # never None: IS NULL is NullFilter
    value_type: str | None = None  # STRING, LONG, DOUBLE; None = infer from the value

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])


@dataclass(frozen=True)
class In(Filter):
    column: str
    values: tuple  # may contain None, meaning "or IS NULL" (Druid's legacy in-filter)

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])


@dataclass(frozen=True)
class Range(Filter):
    column: str
    lower: Any = None
    upper: Any = None
    lower_open: bool = False
    upper_open: bool = False
    value_type: str | None = None  # None: strings compare as strings, numbers as numbers

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])


@dataclass(frozen=True)
class Like(Filter):
    column: str
    pattern: str
    escape: str | None = None

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])

    def literal_prefix(self) -> tuple[str, bool]:
        """The pattern's literal prefix, and whether the pattern is exactly ``prefix%``."""
        out = []
        i = 0
        p = self.pattern
        while i < len(p):
            ch = p[i]
            if self.escape and ch == self.escape and i + 1 < len(p):
                out.append(p[i + 1])
                i += 2
                continue
            if ch in "%_":
                break
            out.append(ch)
            i += 1
        rest = p[i:]
        return "".join(out), rest == "%"


@dataclass(frozen=True)
class Regex(Filter):
    column: str
    pattern: str

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])


@dataclass(frozen=True)
class NullFilter(Filter):
    column: str

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])


@dataclass(frozen=True)
class And(Filter):
    fields: tuple[Filter, ...]

    def columns(self) -> frozenset[str]:
        return frozenset().union(*(f.columns() for f in self.fields))


@dataclass(frozen=True)
class Or(Filter):
    fields: tuple[Filter, ...]

    def columns(self) -> frozenset[str]:
        return frozenset().union(*(f.columns() for f in self.fields))


@dataclass(frozen=True)
class Not(Filter):
    field: Filter

    def columns(self) -> frozenset[str]:
        return self.field.columns()


@dataclass(frozen=True)
class ExpressionFilter(Filter):
    expression: str

    def columns(self) -> frozenset[str]:
        from common.expr import parse

        return frozenset(parse(self.expression).columns())


FILTER_TYPES = ("true", "false", "equals", "selector", "in", "inType", "range", "bound", "like", "regex",
                "null", "and", "or", "not", "expression")


def _column(obj: dict, kind: str) -> str:
    col = obj.get("column", obj.get("dimension"))
    if not isinstance(col, str) or not col:
        raise ValidationError(f"'{kind}' filter needs a 'column' (or 'dimension'): {obj}")
    return col


def filter_from_json(obj: dict | None) -> Filter | None:
    if obj is None:
        return None
    if isinstance(obj, Filter):
        return obj
    if not isinstance(obj, dict) or "type" not in obj:
        raise ValidationError(f"a filter must be an object with a 'type', got {obj!r}")
    kind = obj["type"]
    if kind == "true":
        return TrueFilter()
    if kind == "false":
        return FalseFilter()
    if kind == "equals":
        if "matchValue" not in obj or obj["matchValue"] is None:
            raise ValidationError("'equals' filter needs a non-null 'matchValue'; use a 'null' filter for IS NULL")
        return Equals(_column(obj, kind), obj["matchValue"], obj.get("matchValueType"))
    if kind == "selector":
        col = _column(obj, kind)
        return NullFilter(col) if obj.get("value") is None else Equals(col, obj["value"])
    if kind in ("in", "inType"):
        values = obj.get("values", obj.get("sortedValues"))
        if not isinstance(values, list):
            raise ValidationError(f"'{kind}' filter needs a list 'values': {obj}")
        return In(_column(obj, kind), tuple(values))
    if kind == "range":
        return Range(_column(obj, kind), obj.get("lower"), obj.get("upper"), bool(obj.get("lowerOpen", False)),
                     bool(obj.get("upperOpen", False)), obj.get("matchValueType"))
    if kind == "bound":
        numeric = obj.get("ordering") in ("numeric", {"type": "numeric"})
        return Range(_column(obj, kind), obj.get("lower"), obj.get("upper"), bool(obj.get("lowerStrict", False)),
                     bool(obj.get("upperStrict", False)), "DOUBLE" if numeric else None)
    if kind == "like":
        return Like(_column(obj, kind), str(obj["pattern"]), obj.get("escape"))
    if kind == "regex":
        return Regex(_column(obj, kind), str(obj["pattern"]))
    if kind == "null":
        return NullFilter(_column(obj, kind))
    if kind in ("and", "or"):
        fields = obj.get("fields")
        if not isinstance(fields, list) or not fields:
            raise ValidationError(f"'{kind}' filter needs a non-empty list 'fields'")
        children = tuple(filter_from_json(f) for f in fields)
        return And(children) if kind == "and" else Or(children)
    if kind == "not":
        return Not(filter_from_json(obj.get("field")))
    if kind == "expression":
        from common.expr import parse

        parse(obj["expression"])  # syntax errors surface when the query is built, not per segment
        return ExpressionFilter(obj["expression"])
    raise ValidationError(f"unknown filter type '{kind}'; valid types: {', '.join(FILTER_TYPES)}")


def filter_to_json(f: Filter | None) -> dict | None:
    if f is None:
        return None
    if isinstance(f, TrueFilter):
        return {"type": "true"}
    if isinstance(f, FalseFilter):
        return {"type": "false"}
    if isinstance(f, Equals):
        out = {"type": "equals", "column": f.column, "matchValue": f.value}
        out["matchValueType"] = f.value_type or _infer_type_name(f.value)
        return out
    if isinstance(f, In):
        return {"type": "in", "dimension": f.column, "values": list(f.values)}
    if isinstance(f, Range):
        out = {"type": "range", "column": f.column}
        if f.value_type:
            out["matchValueType"] = f.value_type
        if f.lower is not None:
            out["lower"] = f.lower
        if f.upper is not None:
            out["upper"] = f.upper
        if f.lower_open:
            out["lowerOpen"] = True
        if f.upper_open:
            out["upperOpen"] = True
        return out
    if isinstance(f, Like):
        out = {"type": "like", "dimension": f.column, "pattern": f.pattern}
        if f.escape:
            out["escape"] = f.escape
        return out
    if isinstance(f, Regex):
        return {"type": "regex", "dimension": f.column, "pattern": f.pattern}
    if isinstance(f, NullFilter):
        return {"type": "null", "column": f.column}
    if isinstance(f, And):
        return {"type": "and", "fields": [filter_to_json(x) for x in f.fields]}
    if isinstance(f, Or):
        return {"type": "or", "fields": [filter_to_json(x) for x in f.fields]}
    if isinstance(f, Not):
        return {"type": "not", "field": filter_to_json(f.field)}
    if isinstance(f, ExpressionFilter):
        return {"type": "expression", "expression": f.expression}
    raise ValidationError(f"cannot serialize filter {f!r}")


def _infer_type_name(value) -> str:
    if isinstance(value, bool) or isinstance(value, int):
        return "LONG"
    if isinstance(value, float):
        return "DOUBLE"
    return "STRING"
