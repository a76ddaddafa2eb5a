"""QueryMetrics: the label children a historical's query path counts into, kept per label set.

Each query touches about ten labelled metrics (per table read, per datasource and query type);
``labels()`` validates the values and takes a lock every time, a noticeable share of a small
query's handling. The children are kept here (a handful of label sets per datasource) and fall
back to ``labels()`` past a bound, so a flood of datasources cannot grow this without limit.
"""

from __future__ import annotations

from common.query.projection_match import reason_kind
from common.query.query_runner import RunObserver

_MAX_SETS = 1024


class _TableChildren:
    __slots__ = ("segment_query_seconds", "segments_queried", "rows_scanned", "projection_base_rows")

    def __init__(self, metrics, datasource: str, table: str) -> None:
        self.segment_query_seconds = metrics.segment_query_seconds.labels(datasource, table)
        self.segments_queried = metrics.segments_queried.labels(datasource, table)
        self.rows_scanned = metrics.rows_scanned.labels(datasource, table)
        self.projection_base_rows = metrics.projection_base_rows.labels(datasource, table)


class _QueryChildren:
    __slots__ = ("ok", "query_seconds", "bytes_read")

    def __init__(self, metrics, datasource: str, query_type: str) -> None:
        self.ok = metrics.queries.labels(datasource, query_type, "ok")
        self.query_seconds = metrics.query_seconds.labels(datasource, query_type)
        self.bytes_read = metrics.bytes_read.labels(datasource)


class QueryMetrics(RunObserver):
    """Also the observer of the historical's QueryRunner: each run counted per table read."""

    def __init__(self, metrics) -> None:
        self.metrics = metrics
        self._tables: dict[tuple[str, str], _TableChildren] = {}
        self._queries: dict[tuple[str, str], _QueryChildren] = {}

    def table(self, datasource: str, table: str) -> _TableChildren:
        """The per-table children (segment time, segments, rows scanned, base rows saved)."""
        return _kept(self._tables, (datasource, table), lambda: _TableChildren(self.metrics, datasource, table))

    def query(self, datasource: str, query_type: str) -> _QueryChildren:
        """The per-query children of a query that answered (its count, latency, bytes read)."""
        return _kept(self._queries, (datasource, query_type),
                     lambda: _QueryChildren(self.metrics, datasource, query_type))


    def ran(self, prepared, positions, partial, seconds: float) -> None:
        datasource = prepared.query.datasource_name
        counted = self.table(datasource, partial.projection or "base")
        share = seconds / len(positions)  # a batch run together: its time in equal shares
        for i in positions:
            counted.segment_query_seconds.observe(share)
            for name, reason in prepared.sources[i].rejected:
                self.metrics.projection_misses.labels(datasource, name, reason_kind(reason)).inc()
        counted.segments_queried.inc(len(positions))
        counted.rows_scanned.inc(partial.stats.rows_scanned)
        if partial.projection:  # what base rows the query would have read: the rows saved, per projection
            counted.projection_base_rows.inc(sum(prepared.segments[i].num_rows for i in positions))


def _kept(children: dict, key: tuple, make):
    found = children.get(key)
    if found is None:
        found = make()
        if len(children) < _MAX_SETS:
            children[key] = found
    return found


__all__ = ["QueryMetrics"]
