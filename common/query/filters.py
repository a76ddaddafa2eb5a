"""Filters: the native filter model (Druid's JSON forms, new and legacy), as frozen dataclasses,
each answering from column indexes or from values.

``selection.py`` decides which filters run on indexes (the pre-filter) and which on values;
``filter_values.py`` holds how filter values are compared with column values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.errors import ValidationError
from common.query.filter_values import (
    any_value,
    check_like,
    check_regex,
    as_string,
    as_strings,
    coerce,
    comparable,
    equal_mask,
    in_value_set,
    is_numeric_match,
    like_to_arrow,
    numeric_dictionary_ids,
    per_value,
    range_mask,
    to_double,
    to_mask,
)
from common.segment.column_reader import ColumnIndex, Ids, all_rows, id_array
from common.types.column_type import STRING, ColumnType


@dataclass(frozen=True)
class Filter:
    """A filter answers in two ways, as Druid's filters do: from column indexes alone
    (``index``: a bitmap of matching rows, when ``supports_index`` says the indexes can) and from
    values (``matches``: a mask over the selected rows). ``include_unknown`` says whether rows
    where the predicate is unknown (null inputs) count as matches; NOT flips it."""

    def columns(self) -> frozenset[str]:
        return frozenset()

    def supports_index(self, selector: IndexSelector) -> bool:
        return False

    def index(self, selector: IndexSelector, include_unknown: bool) -> BitMap:
        raise ValidationError(f"filter {self!r} cannot use an index")

    def matches(self, cols, include_unknown: bool) -> np.ndarray:
        raise ValidationError(f"unsupported filter {self!r}")


class IndexSelector(Protocol):
    """Where filters find indexes: ``index_for`` gives a stored or virtual column's index, an
    all-null index for a column the source lacks, or None when only values can answer."""

    num_rows: int

    def index_for(self, column: str) -> ColumnIndex | None: ...


@dataclass(frozen=True)
class TrueFilter(Filter):
    def supports_index(self, selector) -> bool:
        return True

    def index(self, selector, include_unknown) -> BitMap:
        return all_rows(selector.num_rows)

    def matches(self, cols, include_unknown) -> np.ndarray:
        return np.ones(cols.num_rows, dtype=bool)


@dataclass(frozen=True)
class FalseFilter(Filter):
    def supports_index(self, selector) -> bool:
        return True

    def index(self, selector, include_unknown) -> BitMap:
        return BitMap()

    def matches(self, cols, include_unknown) -> np.ndarray:
        return np.zeros(cols.num_rows, dtype=bool)


@dataclass(frozen=True)
class ColumnFilter(Filter):
    """A filter on one column. Subclasses say which dictionary ids match (``matching_ids``) and
    how values match (``value_predicate``); null handling is shared here."""

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])

    def matches_null(self) -> bool:
        return False

    def supports_index(self, selector) -> bool:
        return selector.index_for(self.column) is not None

    def index(self, selector, include_unknown) -> BitMap:
        idx = selector.index_for(self.column)
        out = idx.bitmap(self.matching_ids(idx))
        if include_unknown or self.matches_null():
            out |= idx.null_bitmap()
        return out

    def matches(self, cols, include_unknown) -> np.ndarray:
        ctype = cols.type_of(self.column)
        if ctype.multi_value:  # any value matching matches the row, as Druid filters them
            return to_mask(any_value(cols[self.column], self.value_predicate(STRING)), include_unknown)
        return to_mask(per_value(cols[self.column], self.value_predicate(ctype)), include_unknown)

    def matching_ids(self, idx: ColumnIndex) -> Ids:
        raise NotImplementedError

    def value_predicate(self, ctype: ColumnType):
        raise NotImplementedError


@dataclass(frozen=True)
class Equals(ColumnFilter):
    column: str
    value: Any  # never None: IS NULL is NullFilter
    value_type: str | None = None  # STRING, LONG, DOUBLE; None = infer from the value

    def matching_ids(self, idx) -> Ids:
        if is_numeric_match(self.value, self.value_type):
            return numeric_dictionary_ids(idx.dictionary, lambda d: pc.equal(d, float(self.value)))
        return idx.lookup(as_string(self.value))

    def value_predicate(self, ctype):
        if ctype.is_string and is_numeric_match(self.value, self.value_type):
            return lambda v: pc.equal(to_double(v), float(self.value))
        target = coerce(self.value, ctype, self.column)
        return lambda v: equal_mask(comparable(v, ctype), target)


MANY_VALUES = 64  # above this many IN values, matching ids come from one pass over the dictionary


@dataclass(frozen=True)
class In(ColumnFilter):
    column: str
    values: tuple  # may contain None, meaning "or IS NULL" (Druid's legacy in-filter)

    def matches_null(self) -> bool:
        # Druid's IN matches null rows when its list holds a null.
        return any(v is None for v in self.values)

    def matches(self, cols, include_unknown) -> np.ndarray:
        out = super().matches(cols, include_unknown)
        if self.matches_null():
            # A dictionary column answers per dictionary value, and null rows have none: they
            # would come out unknown instead of matching the list's null.
            out = out | cols[self.column].is_null().to_numpy(zero_copy_only=False)
        return out

    def matching_ids(self, idx) -> Ids:
        wanted = [as_string(v) for v in self.values if v is not None]
        if len(wanted) > MANY_VALUES:
            # One vectorized membership pass over the dictionary instead of a search per value.
            hits = pc.is_in(idx.dictionary, value_set=pa.array(wanted, pa.string()))
            return np.flatnonzero(hits.fill_null(False).to_numpy(zero_copy_only=False))
        found = [id_array(idx.lookup(w)) for w in wanted]
        return np.unique(np.concatenate(found)) if found else np.array([], dtype=np.int64)

    def value_predicate(self, ctype):
        wants_null = self.matches_null()
        value_set = in_value_set(self.values, ctype, self.column)
        value_set = value_set if len(value_set) else None
        # A few integers: comparisons in numpy, a tenth of the time of Arrow's hashed is_in.
        few = value_set.to_pylist() if value_set is not None and len(value_set) <= 8 \
            and pa.types.is_integer(value_set.type) else None

        def pred(v):
            comp = comparable(v, ctype)
            if few is not None and comp.null_count == 0 and pa.types.is_integer(comp.type):
                values = (comp.combine_chunks() if isinstance(comp, pa.ChunkedArray) else comp).to_numpy()
                hit = values == few[0]
                for x in few[1:]:
                    hit |= values == x
                return pa.array(hit)
            hit = pc.is_in(comp, value_set=value_set) if value_set is not None else pc.and_(comp.is_null(), False)
            if comp.null_count == 0:
                return hit  # no row is unknown: nothing to mark
            hit = pc.if_else(comp.is_null(), pa.scalar(None, pa.bool_()), hit)
            return pc.or_kleene(hit, comp.is_null()) if wants_null else hit
        return pred


@dataclass(frozen=True)
class Range(ColumnFilter):
    column: str
    lower: Any = None
    upper: Any = None
    lower_open: bool = False
    upper_open: bool = False
    value_type: str | None = None  # None: strings compare as strings, numbers as numbers

    def _numeric(self) -> bool:
        return bool(self.value_type) and self.value_type.upper() in ("LONG", "DOUBLE", "FLOAT")

    def matching_ids(self, idx) -> Ids:
        if self._numeric():
            return numeric_dictionary_ids(idx.dictionary, lambda d: range_mask(d, self, float))
        lower = None if self.lower is None else as_string(self.lower)
        upper = None if self.upper is None else as_string(self.upper)
        return idx.range(lower, upper, self.lower_open, self.upper_open)

    def value_predicate(self, ctype):
        if ctype.is_string and self._numeric():
            return lambda v: range_mask(to_double(v), self, float)
        return lambda v: range_mask(comparable(v, ctype), self, lambda x: coerce(x, ctype, self.column))


@dataclass(frozen=True)
class Like(ColumnFilter):
    column: str
    pattern: str
    escape: str | None = None

    def __post_init__(self) -> None:
        check_like(self.pattern, self.escape)

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

    def matching_ids(self, idx) -> Ids:
        prefix, is_prefix_only = self.literal_prefix()
        candidates = idx.prefix(prefix)
        if is_prefix_only:
            return candidates
        ids = id_array(candidates)
        hits = pc.match_like(idx.dictionary.take(pa.array(ids)), like_to_arrow(self.pattern, self.escape))
        return ids[hits.fill_null(False).to_numpy(zero_copy_only=False)]

    def value_predicate(self, ctype):
        pattern = like_to_arrow(self.pattern, self.escape)
        return lambda v: pc.match_like(as_strings(v), pattern)


@dataclass(frozen=True)
class Regex(ColumnFilter):
    column: str
    pattern: str

    def __post_init__(self) -> None:
        check_regex(self.pattern, f"the regex filter on '{self.column}'")

    def matching_ids(self, idx) -> Ids:
        hits = pc.match_substring_regex(idx.dictionary, self.pattern)
        return np.flatnonzero(hits.fill_null(False).to_numpy(zero_copy_only=False))

    def value_predicate(self, ctype):
        return lambda v: pc.match_substring_regex(as_strings(v), self.pattern)


@dataclass(frozen=True)
class NullFilter(ColumnFilter):
    column: str

    def index(self, selector, include_unknown) -> BitMap:
        return selector.index_for(self.column).null_bitmap()

    def matches(self, cols, include_unknown) -> np.ndarray:
        values = cols[self.column]
        if cols.type_of(self.column).multi_value:
            # A row without values is null, and so is a row holding a null value (any value).
            return any_value(values, lambda flat: flat.is_null()).to_numpy(zero_copy_only=False)
        return values.is_null().to_numpy(zero_copy_only=False)


@dataclass(frozen=True)
class And(Filter):
    fields: tuple[Filter, ...]

    def columns(self) -> frozenset[str]:
        return frozenset().union(*(f.columns() for f in self.fields))

    def supports_index(self, selector) -> bool:
        return all(c.supports_index(selector) for c in self.fields)

    def index(self, selector, include_unknown) -> BitMap:
        out = None
        for child in self.fields:
            bm = child.index(selector, include_unknown)
            out = bm if out is None else out & bm
            if not out:
                break
        return out

    def matches(self, cols, include_unknown) -> np.ndarray:
        out = np.ones(cols.num_rows, dtype=bool)
        for child in self.fields:
            out &= child.matches(cols, include_unknown)
        return out


@dataclass(frozen=True)
class Or(Filter):
    fields: tuple[Filter, ...]

    def columns(self) -> frozenset[str]:
        return frozenset().union(*(f.columns() for f in self.fields))

    def supports_index(self, selector) -> bool:
        return all(c.supports_index(selector) for c in self.fields)

    def index(self, selector, include_unknown) -> BitMap:
        return BitMap.union(*(c.index(selector, include_unknown) for c in self.fields))

    def matches(self, cols, include_unknown) -> np.ndarray:
        out = np.zeros(cols.num_rows, dtype=bool)
        for child in self.fields:
            out |= child.matches(cols, include_unknown)
        return out


@dataclass(frozen=True)
class Not(Filter):
    field: Filter

    def columns(self) -> frozenset[str]:
        return self.field.columns()

    def supports_index(self, selector) -> bool:
        return self.field.supports_index(selector)

    def index(self, selector, include_unknown) -> BitMap:
        return all_rows(selector.num_rows) - self.field.index(selector, not include_unknown)

    def matches(self, cols, include_unknown) -> np.ndarray:
        return ~self.field.matches(cols, not include_unknown)


@dataclass(frozen=True)
class ExpressionFilter(Filter):
    expression: str

    def columns(self) -> frozenset[str]:
        from common.expr import parse

        return frozenset(parse(self.expression).columns())

    def matches(self, cols, include_unknown) -> np.ndarray:
        from common.expr import evaluate_predicate, parse

        return to_mask(evaluate_predicate(parse(self.expression), cols, cols.num_rows), include_unknown)


@dataclass(frozen=True)
class ArrayContainsElement(Filter):
    """Druid's ``arrayContainsElement``: rows whose array holds ``value`` (compared in the array's
    element type; numbers by value, so 2 matches 2.0). A null array is unknown. A stored ARRAY
    column's per-element index answers it (common/segment/element_index.py); a segment without
    one, or a computed array, answers from values."""

    column: str
    value: Any  # never None
    value_type: str | None = None  # STRING, LONG, DOUBLE

    def columns(self) -> frozenset[str]:
        return frozenset([self.column])

    def supports_index(self, selector) -> bool:
        find = getattr(selector, "element_index_for", None)
        return find is not None and find(self.column) is not None

    def index(self, selector, include_unknown) -> BitMap:
        idx = selector.element_index_for(self.column)
        out = idx.rows_with(self.value)
        if include_unknown:
            out |= idx.null_bitmap()
        return out

    def matches(self, cols, include_unknown) -> np.ndarray:
        arr = cols[self.column]
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        n = len(arr)
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise ValidationError(f"'arrayContainsElement' filter needs an array column, but '{self.column}' is "
                                  f"{arr.type}; use an 'equals' filter on single values")
        flat = pc.list_flatten(arr)
        parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
        if pa.types.is_string(flat.type) or pa.types.is_large_string(flat.type):
            hit = pc.equal(flat, pa.scalar(str(self.value)))
        else:
            try:
                number = float(self.value)
            except (TypeError, ValueError):
                return np.zeros(n, dtype=bool) | (include_unknown & ~arr.is_valid().to_numpy(zero_copy_only=False))
            if pa.types.is_integer(flat.type) and isinstance(self.value, int) and not isinstance(self.value, bool):
                hit = pc.equal(flat, pa.scalar(self.value, pa.int64()))
            else:
                hit = pc.equal(flat.cast(pa.float64()), pa.scalar(number))
        hit = hit.fill_null(False).to_numpy(zero_copy_only=False)
        out = np.zeros(n, dtype=bool)
        out[parents[hit]] = True
        if include_unknown:
            out |= ~arr.is_valid().to_numpy(zero_copy_only=False)
        return out


FILTER_TYPES = ("true", "false", "equals", "selector", "in", "inType", "range", "bound", "like", "regex",
                "null", "and", "or", "not", "expression", "arrayContainsElement")


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
    for key in ("value", "matchValue", "lower", "upper"):
        if isinstance(obj.get(key), (list, dict)):
            raise ValidationError(f"'{kind}' filter '{key}' must be a single value, got {obj[key]!r:.200}")
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
        if any(isinstance(v, (list, dict)) for v in values):
            raise ValidationError(f"'{kind}' filter 'values' must be single values, got {values!r:.200}")
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
        if not isinstance(fields, list) or not fields or any(f is None for f in fields):
            raise ValidationError(f"'{kind}' filter needs a non-empty list 'fields' of filters, got {fields!r:.200}")
        children = tuple(filter_from_json(f) for f in fields)
        return And(children) if kind == "and" else Or(children)
    if kind == "not":
        if obj.get("field") is None:
            raise ValidationError("'not' filter needs a filter in 'field'")
        return Not(filter_from_json(obj.get("field")))
    if kind == "arrayContainsElement":
        if obj.get("elementMatchValue") is None or isinstance(obj["elementMatchValue"], (list, dict)):
            raise ValidationError("'arrayContainsElement' filter needs a single non-null 'elementMatchValue', got "
                                  f"{obj.get('elementMatchValue')!r:.200}")
        return ArrayContainsElement(_column(obj, kind), obj["elementMatchValue"], obj.get("elementMatchValueType"))
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
    if isinstance(f, ArrayContainsElement):
        return {"type": "arrayContainsElement", "column": f.column,
                "elementMatchValueType": f.value_type or _infer_type_name(f.value), "elementMatchValue": f.value}
    raise ValidationError(f"cannot serialize filter {f!r}")


def _infer_type_name(value) -> str:
    if isinstance(value, bool) or isinstance(value, int):
        return "LONG"
    if isinstance(value, float):
        return "DOUBLE"
    return "STRING"
