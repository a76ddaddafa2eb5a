"""Druid's grouping on a multi-value string: one group per value (an implicit UNNEST).

A groupBy or topN whose dimension is a stored multi-value column groups each row once per value
it holds, after the query's filter has chosen the rows by any value (Druid's multi-value
dimensions page: a filter on "t3" keeps row1 and row2, and then all their values group). A row
without values groups once, under null. Two multi-value dimensions give every pair of values.
Aggregators read the exploded rows, so a row counts once in each of its values' groups, as in
Druid (a value repeated in a row under ``multiValueHandling: ARRAY`` counts that row twice).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.query.row_source import ColumnSource
from common.types.column_type import STRING


class ExplodedColumns(ColumnSource):
    """Columns at repeated rows, with the exploded columns' single values held here: a subset
    (a filtered aggregator's rows) keeps them instead of reading the stored lists again."""

    def subset(self, mask: np.ndarray) -> ExplodedColumns:
        out = ExplodedColumns(self.source, self.rows[mask], self.virtual.values(), self.expected)
        out._touched, out._bytes, out._types = self._touched, self._bytes, self._types
        keep = pa.array(mask)
        out._cache = {k: v.filter(keep) for k, v in self._cache.items()}
        return out


def multi_value_dimensions(cols: ColumnSource, names) -> list[str]:
    """The stored multi-value columns among the dimension ``names`` (stored so, or single strings
    read as multi-value because newer segments made the column one)."""
    out = []
    for name in names:
        if cols.is_physical(name) and cols.type_of(name).multi_value:
            out.append(name)
    return list(dict.fromkeys(out))


def explode(cols: ColumnSource, names: list[str]) -> ColumnSource:
    """``cols`` with each row repeated once per value of each column in ``names`` (a row without
    values once), those columns holding the single values."""
    for name in names:
        lists = cols[name]
        if isinstance(lists, pa.ChunkedArray):
            lists = lists.combine_chunks()
        lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
        if (lengths == 0).any():
            lists = pc.if_else(pa.array(lengths > 0), lists, pa.scalar([None], lists.type))
        flat = pc.list_flatten(lists)
        parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
        rows = parents if cols.rows is None else cols.rows[parents]
        exploded = ExplodedColumns(cols.source, rows, cols.virtual.values(), cols.expected)
        exploded._touched, exploded._bytes = cols._touched, cols._bytes  # bytes count once per run
        # Columns already read (earlier exploded ones among them) follow the rows they belong to.
        exploded._cache = {k: v.take(pa.array(parents)) for k, v in cols._cache.items() if k != name}
        exploded._cache[name] = flat.cast(pa.string())
        exploded._types = {**cols.types(), name: STRING}
        cols = exploded
    return cols


__all__ = ["ExplodedColumns", "explode", "multi_value_dimensions"]
