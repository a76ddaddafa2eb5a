"""Type discovery: the column type of values nobody declared, with Druid's ``auto`` types.

A value's *observed* type is one of LONG, DOUBLE, STRING, ARRAY of an element type (or of no
element yet: ``[]``, ``[null]``), or JSON (objects, arrays holding arrays or objects). Booleans
are LONG 0/1, as in Druid. Observed types of one column meet through ``widen`` (the table in
docs/schemaless.md); null never decides. ``finish`` turns what is left into a storable
``ColumnType``: an array that never showed an element type is ARRAY<LONG> and a column that was
only ever null is STRING, which is what Druid's schema discovery reports for such columns.

``ColumnDiscovery`` follows one column across rows (of a file, a Spark partition, or the whole
input), remembering for each type it saw the first place it was seen, so a conflict can name an
example of both sides. ``SchemaDiscovery`` holds the columns of one scan in first-seen order;
scans merge with ``merge`` (the driver does this for the Spark partitions) and serialize with
``to_json`` / ``from_json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from common.types.column_type import DOUBLE, JSON, LONG, STRING, ColumnType, TypeKind

# Observed types, as small tuples so they hash and serialize cheaply:
#   ("LONG",) ("DOUBLE",) ("STRING",) ("JSON",) ("ARRAY", elem) with elem in LONG/DOUBLE/STRING or None.
Observed = tuple
NULL: Observed = ()
O_LONG: Observed = ("LONG",)
O_DOUBLE: Observed = ("DOUBLE",)
O_STRING: Observed = ("STRING",)
O_JSON: Observed = ("JSON",)

# The rules, in the order docs/schemaless.md lists them; each decision names the one it applied.
RULE_SAME = "same type"
RULE_NUMBERS = "LONG+DOUBLE -> DOUBLE"
RULE_STRING = "number+string -> STRING"
RULE_ARRAY = "scalar+array -> ARRAY of the widened element"
RULE_ARRAYS = "array+array -> ARRAY of the widened element"
RULE_JSON = "anything+object or nested array -> COMPLEX<json>"
RULE_DECLARED = "declared type"
RULE_EMPTY_ARRAY = "only empty or null arrays -> ARRAY<LONG>"
RULE_ALL_NULL = "only nulls -> STRING"


def _scalar(elem: str, other: str) -> tuple[str, str]:
    if elem == other:
        return elem, RULE_SAME
    if "STRING" in (elem, other):
        return "STRING", RULE_STRING
    return "DOUBLE", RULE_NUMBERS


def observe(value) -> Observed:
    """The observed type of one decoded JSON (or Parquet, as Python) value."""
    if value is None:
        return NULL
    if isinstance(value, (bool, int)):
        return O_LONG
    if isinstance(value, float):
        return O_DOUBLE
    if isinstance(value, str):
        return O_STRING
    if isinstance(value, dict):
        return O_JSON
    if isinstance(value, (list, tuple)):
        elem = None
        for v in value:
            if v is None:
                continue
            if isinstance(v, (dict, list, tuple)):
                return O_JSON
            t = observe(v)[0]
            elem = t if elem is None else _scalar(elem, t)[0]
        return ("ARRAY", elem)
    return O_STRING  # dates and other scalars a reader hands over as text


def widen(a: Observed, b: Observed) -> tuple[Observed, str]:
    """The observed type both fit in, and the rule that decided it."""
    if a == b:
        return a, RULE_SAME
    if a == NULL:
        return b, RULE_SAME
    if b == NULL:
        return a, RULE_SAME
    if a == O_JSON or b == O_JSON:
        return O_JSON, RULE_JSON
    if a[0] == "ARRAY" and b[0] == "ARRAY":
        if a[1] is None or b[1] is None:  # an empty array has no element type to disagree with
            return ("ARRAY", a[1] or b[1]), RULE_SAME
        return ("ARRAY", _scalar(a[1], b[1])[0]), RULE_ARRAYS
    if a[0] == "ARRAY" or b[0] == "ARRAY":
        arr, scalar = (a, b) if a[0] == "ARRAY" else (b, a)
        elem = scalar[0] if arr[1] is None else _scalar(arr[1], scalar[0])[0]
        return ("ARRAY", elem), RULE_ARRAY
    merged, rule = _scalar(a[0], b[0])
    return (merged,), rule


_KINDS = {"LONG": LONG, "DOUBLE": DOUBLE, "STRING": STRING}
_MAX_SHAPES = 10_000
_SCALARS = {type(None): NULL, bool: O_LONG, int: O_LONG, float: O_DOUBLE, str: O_STRING}


def finish(t: Observed) -> tuple[ColumnType, str | None]:
    """The storable type of an observed type, and the rule when one was needed to choose it."""
    if t == NULL:
        return STRING, RULE_ALL_NULL
    if t == O_JSON:
        return JSON, None
    if t[0] == "ARRAY":
        if t[1] is None:
            return ColumnType(TypeKind.ARRAY, LONG), RULE_EMPTY_ARRAY
        return ColumnType(TypeKind.ARRAY, _KINDS[t[1]]), None
    return _KINDS[t[0]], None


def observed_of(ctype: ColumnType) -> Observed:
    """The observed type a declared type stands for (COMPLEX is JSON; TIMESTAMP/FLOAT as numbers)."""
    if ctype.kind is TypeKind.COMPLEX:
        return O_JSON
    if ctype.kind is TypeKind.ARRAY:
        return ("ARRAY", ctype.element.kind.value)
    if ctype.kind is TypeKind.STRING:
        return O_STRING
    if ctype.kind is TypeKind.LONG or ctype.kind is TypeKind.TIMESTAMP:
        return O_LONG
    return O_DOUBLE


def describe(t: Observed) -> str:
    if t == NULL:
        return "null"
    if t == O_JSON:
        return "COMPLEX<json>"
    if t[0] == "ARRAY":
        return f"ARRAY<{t[1] or '?'}>"
    return t[0]


@dataclass
class ColumnDiscovery:
    """One column's observed type so far, and for each distinct observed type the first
    (file, line) it appeared at."""

    name: str
    observed: Observed = NULL
    examples: dict[Observed, tuple[str, int]] = field(default_factory=dict)
    rules: set[str] = field(default_factory=set)

    def add(self, t: Observed, file: str, line: int) -> None:
        if t == NULL:
            return
        if t not in self.examples:
            self.examples[t] = (file, line)
            merged, rule = widen(self.observed, t)
            if rule != RULE_SAME:
                self.rules.add(rule)
            self.observed = merged

    def merge(self, other: ColumnDiscovery) -> None:
        for t, where in other.examples.items():
            self.examples[t] = min(self.examples[t], where) if t in self.examples else where
            merged, rule = widen(self.observed, t)
            if rule != RULE_SAME:
                self.rules.add(rule)
            self.observed = merged
        self.rules |= other.rules

    @property
    def column_type(self) -> ColumnType:
        return finish(self.observed)[0]

    @property
    def rule(self) -> str:
        """The rules that decided this column's type, ``same type`` when its values agreed."""
        rules = sorted(self.rules)
        end = finish(self.observed)[1]
        if end:
            rules.append(end)
        return "; ".join(rules) or RULE_SAME

    def conflict(self) -> tuple[tuple[Observed, tuple[str, int]], tuple[Observed, tuple[str, int]]] | None:
        """The first two observed types (in file and line order) that needed a widening rule, each
        with where it was first seen; None when every value agreed."""
        seen = sorted((where, t) for t, where in self.examples.items())
        for i, (where, t) in enumerate(seen):
            for where2, t2 in seen[i + 1:]:
                if widen(t, t2)[1] != RULE_SAME:
                    return (t, where), (t2, where2)
        return None

    def to_json(self) -> dict:
        return {"name": self.name, "examples": [[list(t), f, ln] for t, (f, ln) in self.examples.items()],
                "rules": sorted(self.rules)}

    @staticmethod
    def from_json(data: Mapping) -> ColumnDiscovery:
        col = ColumnDiscovery(str(data["name"]))
        for t, f, ln in data.get("examples") or ():
            col.add(_observed(t), str(f), int(ln))
        col.rules |= set(data.get("rules") or ())
        return col


def _observed(items) -> Observed:
    items = list(items)
    if len(items) == 2 and items[0] == "ARRAY":
        return ("ARRAY", items[1])
    return tuple(items)


@dataclass
class SchemaDiscovery:
    """The discovered columns of one scan (or of several, merged), in first-seen order."""

    columns: dict[str, ColumnDiscovery] = field(default_factory=dict)
    # Row shapes (keys, value classes) already seen: a row of a known shape without lists cannot
    # show a new observed type, so it is skipped (most rows of a file share a few shapes).
    _shapes: set = field(default_factory=set, repr=False, compare=False)

    def column(self, name: str) -> ColumnDiscovery:
        col = self.columns.get(name)
        if col is None:
            col = self.columns[name] = ColumnDiscovery(name)
        return col

    def add_row(self, row: Mapping, file: str, line: int) -> None:
        classes = tuple(map(type, row.values()))
        if list not in classes:
            shape = (tuple(row), classes)
            if shape in self._shapes:
                return
            if len(self._shapes) < _MAX_SHAPES:
                self._shapes.add(shape)
        columns = self.columns
        for name, value in row.items():
            # Hot loop (every value of every row): scalars by their class, containers walked.
            t = _SCALARS.get(value.__class__)
            if t is None:
                t = observe(value)
            col = columns.get(name)
            if col is None:
                col = columns[name] = ColumnDiscovery(name)
            if t and t not in col.examples:
                col.add(t, file, line)

    def merge(self, other: SchemaDiscovery) -> SchemaDiscovery:
        for name, col in other.columns.items():
            self.column(name).merge(col)
        return self

    def signature(self) -> tuple[tuple[str, ColumnType], ...]:
        return tuple((name, col.column_type) for name, col in self.columns.items())

    def to_json(self) -> list:
        return [c.to_json() for c in self.columns.values()]

    @staticmethod
    def from_json(items: Iterable) -> SchemaDiscovery:
        out = SchemaDiscovery()
        for item in items:
            out.column(str(item["name"])).merge(ColumnDiscovery.from_json(item))
        return out


def discover_rows(rows: Iterable[Mapping], file: str = "input") -> SchemaDiscovery:
    """Discovery over decoded rows (line numbers from 1), e.g. for tests and small inputs."""
    out = SchemaDiscovery()
    for line, row in enumerate(rows, 1):
        out.add_row(row, file, line)
    return out


__all__ = ["ColumnDiscovery", "NULL", "Observed", "SchemaDiscovery", "describe", "discover_rows", "finish",
           "observe", "observed_of", "widen"]
