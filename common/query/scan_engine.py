"""The scan engine: selected rows and columns, optionally ordered by time, with offset/limit.

Segments are time-sorted, so ordering by time never sorts a whole segment: ascending takes the
head, descending takes the tail reversed. Each segment returns at most offset+limit rows.
"""

from __future__ import annotations

import pyarrow as pa

from common.query.memory_budget import UNLIMITED, MemoryBudget, table_bytes
from common.query.model import ScanQuery
from common.query.ordering import SortKey, sort_table
from common.query.partial import Partial, RunStats, union_coverage
from common.query.row_source import RowSource
from common.query.selection import select
from common.types.column_type import TIME_COLUMN, ColumnType


def output_columns(query: ScanQuery, schema: dict[str, ColumnType]) -> list[str]:
    if query.columns is not None:
        return list(query.columns)
    names = [TIME_COLUMN] + [c for c in schema if c != TIME_COLUMN]
    return names + [vc.name for vc in query.virtual_columns if vc.name not in names]


def _cap(query: ScanQuery) -> int | None:
    return None if query.limit is None else query.offset + query.limit


def run(query: ScanQuery, source: RowSource, schema: dict[str, ColumnType], coverage=None,
        budget: MemoryBudget = UNLIMITED) -> Partial:
    # Filters run first (on every selected row); the OFFSET+LIMIT rows this segment can return are
    # taken next, and only then are the projected columns read and their expressions evaluated, so
    # `SELECT <20,000 expressions> .. LIMIT 1` computes each expression for one row, not the segment.
    flt = source.residual_filter if source.replaces_filter else query.filter
    sel = select(source, flt, list(query.intervals), query.virtual_columns, schema)
    cols = sel.columns
    matched = cols.num_rows
    cap = _cap(query)
    if cap is not None and cols.num_rows > cap:
        import numpy as np

        keep = np.zeros(cols.num_rows, dtype=bool)
        if query.order == "descending":
            keep[cols.num_rows - cap:] = True
        else:
            keep[:cap] = True
        cols = cols.subset(keep)
    names = output_columns(query, schema)
    if query.order != "none" and TIME_COLUMN not in names:
        names = names + [TIME_COLUMN]  # carried for ordering across segments, dropped in finalize
    data = {}
    for name in names:
        arr = cols[name] if name != TIME_COLUMN else cols[TIME_COLUMN]
        if pa.types.is_dictionary(arr.type):
            arr = arr.cast(arr.type.value_type)
        data[name] = arr
    table = pa.table(data) if data else pa.table({})
    if cap is not None and table.num_rows > cap:
        table = table.slice(table.num_rows - cap) if query.order == "descending" else table.slice(0, cap)
    budget.charge(table_bytes(table), f"the {table.num_rows:,} rows a scan took from one segment")
    stats = RunStats(1, source.num_rows, sel.rows_after_prefilter, sel.rows_after_prefilter, matched,
                     cols.bytes_read)
    return Partial(table, stats, coverage)


def merge(query: ScanQuery, partials: list[Partial], budget: MemoryBudget = UNLIMITED) -> Partial:
    stats = RunStats()
    for p in partials:
        stats = stats + p.stats
    tables = [p.table for p in partials if p.table.num_columns]
    if not tables:
        return Partial(pa.table({}), stats, union_coverage(partials))
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    if query.order != "none" and TIME_COLUMN in table.column_names:
        budget.check(table_bytes(table), f"ordering {table.num_rows:,} scanned rows by time")  # the sort copies
        table = sort_table(table, [SortKey(TIME_COLUMN, query.order == "descending")])
    cap = _cap(query)
    if cap is not None:
        table = table.slice(0, cap)
    return Partial(table, stats, union_coverage(partials))


def finalize(query: ScanQuery, partial: Partial, schema: dict[str, ColumnType]) -> pa.Table:
    table = partial.table
    if table.num_columns == 0:
        # No segment was read: the requested columns, typed, with no rows.
        types = dict(schema)
        types.setdefault(TIME_COLUMN, ColumnType.parse("TIMESTAMP"))
        return pa.table({c: pa.array([], (types.get(c) or ColumnType.parse("STRING")).to_arrow())
                         for c in output_columns(query, schema)})
    if query.order != "none" and TIME_COLUMN in table.column_names:
        table = sort_table(table, [SortKey(TIME_COLUMN, query.order == "descending")])
    end = None if query.limit is None else query.offset + query.limit
    if query.offset or end is not None:
        table = table.slice(query.offset, None if end is None else end - query.offset)
    wanted = output_columns(query, schema)
    if TIME_COLUMN in table.column_names and TIME_COLUMN not in wanted:
        table = table.drop_columns([TIME_COLUMN])
    return table.combine_chunks()


class StreamFinalizer:
    """``finalize`` for a scan whose rows arrive in pieces, in the result's order (the broker
    streaming historicals' partials; ordered ones through ``take_in_time_order``): OFFSET and LIMIT
    counted across pieces, ``__time`` dropped when not asked for. ``done`` says that the limit is
    reached and nothing more is needed."""

    def __init__(self, query: ScanQuery, schema: dict[str, ColumnType]) -> None:
        self.skip = query.offset
        self.left = query.limit
        self.wanted = output_columns(query, schema)

    @property
    def done(self) -> bool:
        return self.left is not None and self.left <= 0

    def __call__(self, table: pa.Table) -> pa.Table | None:
        if self.skip:
            cut = min(self.skip, table.num_rows)
            table = table.slice(cut)
            self.skip -= cut
        if self.left is not None:
            table = table.slice(0, max(self.left, 0))
            self.left -= table.num_rows
        if table.num_rows == 0:
            return None
        if TIME_COLUMN in table.column_names and TIME_COLUMN not in self.wanted:
            table = table.drop_columns([TIME_COLUMN])
        return table


def _times(table: pa.Table):
    return table.column(TIME_COLUMN).combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False)


def take_in_time_order(currents: list[pa.Table], descending: bool) -> tuple[pa.Table, list[pa.Table]]:
    """One step of merging streams each sorted by time (historicals' partials of an ordered scan),
    given each stream's current rows (none empty): the rows that may go now, in order, and what is
    left of each stream's rows. Every row up to the earliest of the streams' last times (the latest,
    descending) may go: no stream can still send one before it. The stream that set that bound is
    used up, so the next step reads from it; each step holds one piece per stream."""
    import numpy as np

    lasts = [int(_times(t)[-1]) for t in currents]
    bound = max(lasts) if descending else min(lasts)
    pieces, rest = [], []
    for table in currents:
        times = _times(table)
        n = int(np.searchsorted(-times, -bound, side="right") if descending else
                np.searchsorted(times, bound, side="right"))
        if n:
            pieces.append(table.slice(0, n))
        rest.append(table.slice(n))
    ready = pa.concat_tables(pieces, promote_options="permissive") if len(pieces) > 1 else pieces[0]
    if len(pieces) > 1:
        ready = sort_table(ready, [SortKey(TIME_COLUMN, descending)])
    return ready, rest
