"""UnnestRowSource: one segment's rows exploded by an unnest data source's array, as a row source.

The explosion reads as little as it can. Before any array is read, the base rows are narrowed by
the query's intervals and by the conjuncts of its filter that do not read the unnested column,
through the base's indexes as any query's filter would be; an ``unnestFilter`` equality (or IN) on
the element also narrows them, as ``arrayContainsElement`` on the array column (which the column's
per-element index answers) or as the same equality on a string column unnested as itself. Only
then is the array evaluated for the remaining rows and flattened. The engines then run on the
exploded rows with the rest of the filter (``residual_filter``), reading base columns through the
element's parent row: a base column's dictionary codes and a nested field's values are taken per
parent, so grouping on a base column stays a pass over codes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.expr.node import Call, Identifier
from common.query.filters import And, ArrayContainsElement, Equals, Filter, In, Or
from common.query.row_source import RowSource
from common.query.selection import select
from common.query.unnest_datasource import UnnestDataSource
from common.query.virtual_column import VirtualColumn
from common.types.column_type import ColumnType
from common.types.interval import Interval


def split_and(f: Filter | None) -> list[Filter]:
    if f is None:
        return []
    if isinstance(f, And):
        return [c for child in f.fields for c in split_and(child)]
    return [f]


def _and(parts: list[Filter]) -> Filter | None:
    return None if not parts else parts[0] if len(parts) == 1 else And(tuple(parts))


def _reads_output(columns: frozenset[str], output: str, virtual: dict) -> bool:
    """Whether columns (through the query's virtual columns) read the unnested column."""
    seen: set[str] = set()
    todo = list(columns)
    while todo:
        col = todo.pop()
        if col == output:
            return True
        if col in virtual and col not in seen:
            seen.add(col)
            todo.extend(virtual[col].columns())
    return False


def _element_prefilter(unnest: UnnestDataSource, base: RowSource) -> list[Filter]:
    """Base-row filters implied by the unnestFilter's equalities on the element: a row can give a
    matching element only when its array holds the value. Added only where the base can answer
    them from an index (else reading the array once, in the explosion, is cheaper)."""
    parsed = unnest.virtual_column.parsed
    if isinstance(parsed, Call) and parsed.name == "cast" and len(parsed.args) == 2 and \
            isinstance(parsed.args[0], Identifier) and base.schema.get(parsed.args[0].name) is not None and \
            base.schema[parsed.args[0].name].is_string:
        parsed = parsed.args[0]  # SQL's UNNEST(s) of a string: the string as a one-element array
    if not isinstance(parsed, Identifier) or parsed.name not in base.schema:
        return []
    column, ctype = parsed.name, base.schema[parsed.name]
    out: list[Filter] = []
    for part in split_and(unnest.unnest_filter):
        if isinstance(part, Equals) and part.column == unnest.output:
            values, value_type = (part.value,), part.value_type
        elif isinstance(part, In) and part.column == unnest.output and all(v is not None for v in part.values) \
                and part.values:
            values, value_type = part.values, None
        else:
            continue
        element = ctype.element if ctype.is_array else ctype
        # Only values that compare alike both ways: text with a string, numbers with numbers (an
        # equality of a string element with the number 2 matches '2.0', which the text '2' does not).
        if element.is_string:
            alike = all(isinstance(v, str) for v in values) and value_type in (None, "STRING")
        else:
            alike = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if not alike:
            continue
        if ctype.is_array and base.element_index(column) is not None:
            terms = [ArrayContainsElement(column, v, value_type) for v in values]
        elif ctype.is_string and base.index(column) is not None:
            terms = [In(column, (v,)) for v in values]
        else:
            continue
        out.append(terms[0] if len(terms) == 1 else Or(tuple(terms)))
    return out


def unnest_row_source(unnest: UnnestDataSource, base: RowSource, query_filter: Filter | None,
                      intervals: list[Interval] | None, virtual_columns=(), expected=None) -> UnnestRowSource:
    """``base`` exploded by ``unnest`` (a nested unnest explodes its base first). The source's
    ``residual_filter`` is what is left to run on the exploded rows: the unnestFilter and the
    conjuncts of ``query_filter`` that read the element."""
    expected = dict(expected or {})
    virtual = {vc.name: vc for vc in virtual_columns}
    inner_filter = None
    if isinstance(unnest.base, UnnestDataSource):
        # Conjuncts not reading this level's element are the inner level's to narrow by.
        parts = [p for p in split_and(query_filter) if not _reads_output(p.columns(), unnest.output, virtual)]
        base = unnest_row_source(unnest.base, base, _and(parts), intervals,
                                 [vc for vc in virtual_columns if not _reads_output(vc.columns(), unnest.output, virtual)],
                                 expected)
        inner_filter = base.residual_filter
        intervals = None  # applied by the inner level
    base_parts, element_parts = [], []
    for p in split_and(query_filter):
        (element_parts if _reads_output(p.columns(), unnest.output, virtual) else base_parts).append(p)
    if inner_filter is not None:
        base_parts.append(inner_filter)
    pre = base_parts + _element_prefilter(unnest, base)
    base_vcs = [vc for vc in virtual_columns if not _reads_output(vc.columns(), unnest.output, virtual)]
    sel = select(base, _and(pre), intervals, base_vcs, expected)
    cols = sel.columns
    vc = unnest.virtual_column
    if vc.declared_type is not None and not vc.declared_type.is_array:
        # Druid writes a multi-value string's unnest as "outputType": "STRING": the element's type,
        # which the elements are cast to, not the array's.
        vc = VirtualColumn(vc.name, vc.expression)
    arrays = vc.evaluate(cols) if cols.num_rows else None
    parents, element = _explode(arrays, unnest.element_type(cols.types()))
    rows = cols.rows
    if rows is not None:
        parents = rows[parents]
    out = UnnestRowSource(base, unnest.output, parents, element, unnest.element_type(cols.types()))
    out.residual_filter = _and(split_and(unnest.unnest_filter) + element_parts)
    out.base_rows_read = sel.rows_after_prefilter
    out.bytes_read = cols.bytes_read
    return out


def _explode(arrays: pa.Array | None, element_type: ColumnType) -> tuple[np.ndarray, pa.Array]:
    """(the row of each element, the elements) of an array per row; a single value is a
    one-element array, a null (or empty array) gives no element."""
    target = element_type.to_arrow()
    if arrays is None or len(arrays) == 0:
        return np.array([], dtype=np.int64), pa.array([], target)
    if isinstance(arrays, pa.ChunkedArray):
        arrays = arrays.combine_chunks()
    if pa.types.is_dictionary(arrays.type):
        arrays = arrays.cast(arrays.type.value_type)
    if not (pa.types.is_list(arrays.type) or pa.types.is_large_list(arrays.type)):
        valid = arrays.is_valid().to_numpy(zero_copy_only=False)
        parents = np.flatnonzero(valid).astype(np.int64)
        return parents, _cast(arrays.filter(pa.array(valid)), target)
    if arrays.null_count:
        # A null list may still span values in its offsets; rebuilt, it spans none.
        arrays = pc.if_else(arrays.is_valid(), arrays, pa.scalar([], arrays.type))
    flat = pc.list_flatten(arrays)
    parents = pc.list_parent_indices(arrays).to_numpy(zero_copy_only=False).astype(np.int64)
    return parents, _cast(flat, target)


def _cast(values: pa.Array, target: pa.DataType) -> pa.Array:
    if values.type == target:
        return values
    return values.cast(target, safe=False)


class _ParentRows:
    """A base column reader (a nested field) read at the exploded rows' parents."""

    def __init__(self, reader, parents: np.ndarray) -> None:
        self._reader = reader
        self._parents = parents
        self.type = reader.type

    def take(self, rows):
        return self._reader.take(self._parents if rows is None else self._parents[rows])

    def part_bytes(self, roles):
        return self._reader.part_bytes(roles)

    def index(self):
        return None


class UnnestRowSource(RowSource):
    residual_filter: Filter | None = None
    replaces_filter = True
    base_rows_read = 0
    bytes_read = 0

    def __init__(self, base: RowSource, output: str, parents: np.ndarray, element: pa.Array,
                 element_type: ColumnType) -> None:
        self.base = base
        self.output = output
        self.parents = parents
        self.element = element
        self.num_rows = len(parents)
        self.schema = dict(base.schema)
        self.schema[output] = element_type
        self.time_sorted = base.time_sorted  # parents never go back
        self.interval = base.interval
        self._time = None

    @property
    def label(self) -> str:
        return f"unnest of {self.base.label}"

    def time(self) -> np.ndarray:
        if self._time is None:
            self._time = self.base.time()[self.parents]
        return self._time

    def time_bounds(self):
        t = self.time()
        return (int(t.min()), int(t.max())) if len(t) else None

    def dictionary_codes(self, name: str):
        if name == self.output:
            return None
        found = self.base.dictionary_codes(name)
        if found is None:
            return None
        codes, dictionary = found
        return codes[self.parents], dictionary

    def take(self, name: str, rows: np.ndarray | None) -> pa.Array:
        if name == self.output:
            return self.element if rows is None else self.element.take(pa.array(rows))
        return self.base.take(name, self.parents if rows is None else self.parents[rows])

    def nested_field(self, name: str, path: str):
        reader = self.base.nested_field(name, path)
        return None if reader is None else _ParentRows(reader, self.parents)

    def nested_paths_complete(self, name: str) -> bool:
        return self.base.nested_paths_complete(name)

    def part_bytes(self, name: str, roles: tuple[str, ...]) -> int:
        return 0 if name == self.output else self.base.part_bytes(name, roles)

    def check_unchanged(self) -> None:
        self.base.check_unchanged()


__all__ = ["UnnestRowSource", "split_and", "unnest_row_source"]
