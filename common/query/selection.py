"""Row selection: query intervals and filters turned into the rows a query reads.

Two tiers, as in Druid:
- the *pre-filter* is answered from indexes alone: time ranges of the time-sorted segment and
  the filters whose columns have an index (a stored dictionary column's sorted dictionary and
  per-value Roaring bitmaps, or a virtual column that maps one indexed column through its
  expression); each filter asks the ``IndexSelector`` for its column's index;
- the *post-filter* evaluates the remaining filters on values of just the pre-selected rows.

Null handling is SQL's three-valued logic (see ``Filter``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from common.query.filters import And, Filter
from common.query.row_source import ColumnSource, RowSource, declared_types, interval_rows
from common.segment.column_reader import ColumnIndex, Ids, all_rows, bitmap_of_rows, id_array
from common.types.column_type import ColumnType
from common.types.interval import Interval


@dataclass
class Selection:
    columns: ColumnSource
    rows_after_prefilter: int


class AllNullIndex:
    """The index of a column the source lacks: every row is null, no value matches."""

    def __init__(self, num_rows: int) -> None:
        self.num_rows = num_rows
        self.cardinality = 0
        self.dictionary = pa.array([], pa.string())

    def lookup(self, value) -> Ids:
        return np.array([], dtype=np.int64)

    def range(self, lower, upper, lower_strict, upper_strict) -> Ids:
        return np.array([], dtype=np.int64)

    def prefix(self, prefix) -> Ids:
        return np.array([], dtype=np.int64)

    def bitmap(self, ids: Ids) -> BitMap:
        # Id 0 is the null pseudo-id (cardinality 0): asking for it asks for the null rows.
        return self.null_bitmap() if 0 in id_array(ids) else BitMap()

    def null_bitmap(self) -> BitMap:
        return all_rows(self.num_rows)


class SourceIndexes:
    """The ``IndexSelector`` of one row source under one query: virtual columns first, then
    stored columns read as stored (a declared type that differs means values must be compared)."""

    def __init__(self, source: RowSource, virtual_columns=(), expected: dict[str, ColumnType] | None = None) -> None:
        self.source = source
        self.num_rows = source.num_rows
        self.virtual = {vc.name: vc for vc in virtual_columns}
        self.expected = dict(expected or {})
        self._cache: dict[str, ColumnIndex | None] = {}

    def index_for(self, column: str) -> ColumnIndex | None:
        if column not in self._cache:
            self._cache[column] = self._find(column)
        return self._cache[column]

    def _find(self, column: str) -> ColumnIndex | None:
        if column in self.source.aliases:
            return self.source.index(self.source.aliases[column])
        if column in self.virtual:
            return self.virtual[column].index(self)
        if column not in self.source.schema:
            return AllNullIndex(self.num_rows)
        if column in self.expected and self.expected[column] != self.source.schema[column]:
            return None
        return self.source.index(column)

    def element_index_for(self, column: str):
        """A stored ARRAY column's per-element index, read as stored, or that of a nested JSON
        field read through a nested-field virtual column; None when values must answer (another
        virtual column, a declared type that differs, a segment without the index)."""
        if column in self.virtual:
            find = getattr(self.virtual[column], "element_index", None)
            return find(self) if find is not None else None
        if column in self.source.aliases or column not in self.source.schema:
            return None
        if column in self.expected and self.expected[column] != self.source.schema[column]:
            return None
        return self.source.element_index(column)

    def is_virtual(self, column: str) -> bool:
        return column in self.virtual

    def types(self) -> dict[str, ColumnType]:
        out = declared_types(self.source.schema, self.expected)
        for name, vc in self.virtual.items():
            out[name] = vc.output_type_for(out)
        return out


def evaluate_values(f: Filter, cols: ColumnSource, include_unknown: bool = False) -> np.ndarray:
    return f.matches(cols, include_unknown)


def _split_and(f: Filter | None) -> list[Filter]:
    if f is None:
        return []
    if isinstance(f, And):
        out = []
        for child in f.fields:
            out.extend(_split_and(child))
        return out
    return [f]


def select(source: RowSource, filter_: Filter | None, intervals: list[Interval] | None, virtual_columns=(),
           expected: dict[str, ColumnType] | None = None) -> Selection:
    """Rows of ``source`` inside ``intervals`` (None = all time) that pass ``filter_``."""
    expected = dict(expected or {})
    selector = SourceIndexes(source, virtual_columns, expected)
    n = source.num_rows

    pre: BitMap | None = None
    bounds = source.time_bounds()
    if intervals is not None and bounds is not None:
        lo_t, hi_t = bounds
        if not any(iv.start <= lo_t and hi_t < iv.end for iv in intervals):
            pre = BitMap()
            if source.time_sorted:
                for lo, hi in interval_rows(source.time(), intervals):
                    pre.add_range(lo, hi)
            else:
                t = source.time()
                inside = np.zeros(len(t), dtype=bool)
                for iv in intervals:
                    inside |= (t >= iv.start) & (t < iv.end)
                pre = bitmap_of_rows(np.flatnonzero(inside))

    parts = _split_and(filter_)
    indexed = [p for p in parts if p.supports_index(selector)]
    residual = [p for p in parts if not p.supports_index(selector)]
    for p in indexed:
        bm = p.index(selector, include_unknown=False)
        pre = bm if pre is None else pre & bm
        if not pre:
            break

    if pre is None:
        rows = None
        after_pre = n
    else:
        rows = np.frombuffer(pre.to_array(), dtype=np.uint32).astype(np.int64)
        after_pre = len(rows)
    cols = ColumnSource(source, rows, virtual_columns, expected)
    for i, part in enumerate(residual):
        if not cols.num_rows:
            break
        mask = evaluate_values(part, cols)
        if i + 1 < len(residual) and np.count_nonzero(mask) * 2 > len(mask):
            # Most rows pass: AND the rest in on these rows rather than taking them first.
            mask &= evaluate_values(And(tuple(residual[i + 1:])), cols)
            cols = cols.subset(mask)
            break
        # Each further condition reads its columns at the rows still selected only.
        cols = cols.subset(mask)
    return Selection(cols, after_pre)


# A remembered selection holds at most this many row ids (128 KiB): past that the query's own
# work dwarfs the selection's fixed cost, and a historical keeps thousands of sources.
MEMO_MAX_ROWS = 16_384


def select_projection_rows(source: RowSource, filter_: Filter | None, intervals, virtual_columns, expected,
                           prepared=None) -> Selection:
    """``select`` for a projection's rows (a pre-aggregated source), kept on the ``prepared`` query
    (common/query/prepared_query.py) for its next runs: the filter's work on projection rows
    (dictionary lookups, bitmap unions, a residual filter over the values) was about 40% of a
    historical's time for the bench's 3-channel hourly query. The stored rows never change, so the
    rows selected depend only on the query and the declared types, both in the prepared query's
    key. Bytes the selection read are counted again on each run."""
    memo = prepared.kept("selection", source) if prepared is not None else None
    if memo is not None:
        rows, after_pre, touched, nbytes = memo
        cols = ColumnSource(source, rows, virtual_columns, expected)
        cols._touched.update(touched)
        cols._bytes[0] = nbytes
        return Selection(cols, after_pre)
    sel = select(source, filter_, intervals, virtual_columns, expected)
    if prepared is None:
        return sel
    rows = sel.columns.rows
    if rows is not None:
        if len(rows) > MEMO_MAX_ROWS:
            return sel
        rows.flags.writeable = False  # shared by every later run of the query
    prepared.keep("selection", source, (rows, sel.rows_after_prefilter, frozenset(sel.columns._touched),
                                        sel.columns.bytes_read), 0 if rows is None else rows.nbytes)
    return sel
