"""The keying of a batch of projection sources, prepared once per query and kept between runs.

``grouped_engine.run_together`` answers one query over several segments' projection rows in one
pass: select each source's rows, build the group keys (time buckets, dimensions) over all of
them, group, then combine the stored intermediates per group. Everything before the combine
depends only on the query, on the declared types and on the stored rows of the sources, which
never change: over projection rows that part was most of a query's time (seven reads of the time
column, bucketing, encoding the keys of seven dictionaries together, grouping), so it is kept as
a ``BatchPlan`` on the query's ``PreparedQuery`` (common/query/prepared_query.py), whose key names
the query, the declared types and the segments. A run that finds its plan still reads every
aggregator's stored column and combines it, counts the same bytes read, and checks each segment
file is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.query.grouping import Groups

# A batch with more rows than this is not kept: past it the query's own work dwarfs the keying.
MAX_ROWS = 200_000


@dataclass
class BatchPlan:
    rows: tuple  # per source: the selected row ids, or None for all rows
    touched: tuple  # per source: the (column, roles) a run reads (selection, keys, intermediates)
    key_bytes: tuple  # per source: the bytes those reads count
    names: list[str]  # the key columns of the partial
    groups: Groups
    in_segments: int
    after_prefilter: int
    matched: int
    take: object = None  # pa.Array: the rows' positions in the sources' whole columns end to end
    direct: bool = False  # intermediates read as stored: whole columns, then one ``take``
    # pa.Array: the order of the selected rows that ``groups`` follows, when not as read
    # (``groups.gid`` sorted, so sums reduce runs); ``take`` already follows it.
    reorder: object = None
    kept: bool = False  # prepared for the runs that find it (``take``, ``reorder``)
    # Each source's slice of the group ids (Aggregator.combine_parts).
    gids: list = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        out = self.groups.gid.nbytes + sum(k.nbytes for k in self.groups.keys)
        if self.groups.run_starts is not None:
            out += self.groups.run_starts.nbytes
        out += 0 if self.take is None else self.take.nbytes
        out += 0 if self.reorder is None else self.reorder.nbytes
        return out + sum(r.nbytes for r in self.rows if r is not None)


__all__ = ["BatchPlan", "MAX_ROWS"]
