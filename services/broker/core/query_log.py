"""The broker's query log (pure): one record per SQL statement or native query, what it cost, and
how each group of segments was served (a projection, or base rows and why no projection could).

``QueryRecord`` is one entry, as ``sys.queries`` shows it and as one JSON line of the log file.
``QueryLog`` keeps finished records in memory, bounded by count and by age; the clock is passed
in, so the bounds are tested without waiting. ``query_shape`` reduces a native query to what the
projection advisor groups workloads by (grouping columns, time granularity, aggregators, filter
columns). Writing the file is the I/O part (``services/broker/query_log_file.py``).
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field, fields

import pyarrow as pa

RUNNING, OK, ERROR, CANCELLED, TIMEOUT, DENIED = "running", "ok", "error", "cancelled", "timeout", "denied"


@dataclass
class TableUse:
    """Segments of one datasource that read the same table for one native query."""

    datasource: str
    projection: str  # a projection's name, or "base"
    segments: int
    rejected: dict[str, str] = field(default_factory=dict)  # projection -> why it could not serve

    def to_json(self) -> dict:
        return {"datasource": self.datasource, "projection": self.projection, "segments": self.segments,
                "rejected": dict(self.rejected)}


@dataclass
class QueryRecord:
    query_id: str
    user: str | None
    remote_address: str | None
    protocol: str  # grpc, flight, or "" (called in-process)
    kind: str  # "sql" or "native"
    sql: str | None
    start_ms: int
    native_types: list[str] = field(default_factory=list)
    datasources: list[str] = field(default_factory=list)
    status: str = RUNNING
    duration_ms: int | None = None
    planning_ms: int | None = None
    error_class: str | None = None
    error_message: str | None = None
    result_rows: int | None = None
    segments: int = 0
    rows_scanned: int = 0
    bytes_read: int = 0
    tables: list[TableUse] = field(default_factory=list)
    shapes: list[dict] = field(default_factory=list)  # see query_shape

    def note_native(self, query_type: str, datasource: str | None, segments: int, rows_scanned: int,
                    bytes_read: int, tables: list[TableUse], shape: dict | None) -> None:
        """Account one native query run for this record (a SQL statement may run several)."""
        self.native_types.append(query_type)
        if datasource is not None and datasource not in self.datasources:
            self.datasources.append(datasource)
        self.segments += segments
        self.rows_scanned += rows_scanned
        self.bytes_read += bytes_read
        self.tables.extend(tables)
        if shape is not None:
            self.shapes.append(dict(shape, rows_scanned=rows_scanned))

    def finish(self, now_ms: int, status: str, result_rows: int | None = None, error: BaseException | None = None,
               planning_ms: int | None = None) -> None:
        self.status = status
        self.duration_ms = max(0, now_ms - self.start_ms)
        self.result_rows = result_rows
        if planning_ms is not None:
            self.planning_ms = planning_ms
        if error is not None:
            self.error_class = type(error).__name__
            self.error_message = str(error)[:4000]

    @property
    def projection_hits(self) -> tuple[int, int]:
        """(segments read from a projection, segments in all) over this record's native queries."""
        hit = sum(t.segments for t in self.tables if t.projection != "base")
        return hit, sum(t.segments for t in self.tables)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["tables"] = [t.to_json() for t in self.tables]
        return out

    @staticmethod
    def from_json(obj: dict) -> QueryRecord:
        known = {f.name for f in fields(QueryRecord)}
        values = {k: v for k, v in obj.items() if k in known}
        values["tables"] = [TableUse(**t) for t in obj.get("tables", [])]
        return QueryRecord(**values)


class QueryLog:
    """Finished records, newest last, at most ``max_entries`` and none older than ``max_age_ms``."""

    def __init__(self, max_entries: int = 10_000, max_age_ms: int = 3_600_000) -> None:
        if max_entries <= 0 or max_age_ms <= 0:
            raise ValueError("the query log needs positive max_entries and max_age_ms")
        self.max_entries = max_entries
        self.max_age_ms = max_age_ms
        self._records: deque[QueryRecord] = deque()

    def add(self, record: QueryRecord, now_ms: int) -> None:
        self._records.append(record)
        while len(self._records) > self.max_entries:
            self._records.popleft()
        self.prune(now_ms)

    def prune(self, now_ms: int) -> None:
        # Records arrive in the order they finish, so the oldest finish is always first.
        while self._records and _end_ms(self._records[0]) < now_ms - self.max_age_ms:
            self._records.popleft()

    def records(self, now_ms: int) -> list[QueryRecord]:
        self.prune(now_ms)
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)


def _end_ms(record: QueryRecord) -> int:
    return record.start_ms + (record.duration_ms or 0)


# ---- native query shapes (what the projection advisor groups by) ----------------------------------------

_TIME_FLOOR = re.compile(r"^\s*timestamp_floor\(\s*__time\s*,\s*'([^']+)'\s*(?:,\s*null\s*(?:,\s*'UTC'\s*)?)?\)\s*$",
                         re.IGNORECASE)


def query_shape(query_json: dict) -> dict | None:
    """The shape of one grouped native query on a table datasource, or None (scans, subqueries).

    A dimension on a ``timestamp_floor(__time, P)`` virtual column groups by time like a granularity
    does. A dimension on any other virtual column makes the shape ``advisable: False`` with the
    reason, because a projection would have to store that expression."""
    kind = query_json.get("queryType")
    datasource = query_json.get("dataSource")
    if kind not in ("groupBy", "timeseries", "topN") or not isinstance(datasource, str):
        return None
    dims = query_json.get("dimensions") or ([query_json["dimension"]] if query_json.get("dimension") else [])
    grouping, granularity, why_not = [], _granularity_name(query_json.get("granularity", "all")), None
    virtual = {vc.get("name"): vc for vc in query_json.get("virtualColumns", [])}
    time_floors = {}
    for name, vc in virtual.items():
        match = _TIME_FLOOR.match(str(vc.get("expression", "")))
        if match:
            time_floors[name] = match.group(1)
    for d in dims:
        column = d if isinstance(d, str) else d.get("dimension")
        if column in time_floors:
            granularity = _finer(granularity, time_floors[column])
        elif column in virtual:
            why_not = f"groups by the expression {virtual[column].get('expression')!r}"
        elif column is not None and column not in grouping:
            grouping.append(column)
    filter_columns = sorted(_filter_columns(query_json.get("filter")))
    for column in filter_columns:
        if column in virtual:
            why_not = why_not or f"filters on the expression {virtual[column].get('expression')!r}"
    aggregators = list(query_json.get("aggregations", []))
    return {"datasource": datasource, "grouping": sorted(grouping), "granularity": granularity,
            "aggregators": sorted(aggregators, key=lambda a: json.dumps(a, sort_keys=True)),
            "filter_columns": [c for c in filter_columns if c not in virtual],
            "intervals": list(query_json.get("intervals", [])), "advisable": why_not is None, "why_not": why_not}


def _granularity_name(g) -> str:
    if isinstance(g, dict):
        return canonical_period(g.get("period") or g.get("type", "all"))
    return canonical_period(str(g))


_ORDER = {"none": 0, "PT1S": 1, "PT1M": 2, "PT5M": 3, "PT15M": 4, "PT30M": 5, "PT1H": 6, "PT6H": 7, "P1D": 8,
          "P1W": 9, "P1M": 10, "P3M": 11, "P1Y": 12, "all": 99}
_NAMES = {"second": "PT1S", "minute": "PT1M", "five_minute": "PT5M", "fifteen_minute": "PT15M",
          "thirty_minute": "PT30M", "hour": "PT1H", "six_hour": "PT6H", "day": "P1D", "week": "P1W", "month": "P1M",
          "quarter": "P3M", "year": "P1Y"}


def canonical_period(g: str) -> str:
    """"day" -> "P1D"; ISO periods as they are; "all" and "none" in lower case."""
    if g.lower() in ("all", "none"):
        return g.lower()
    return _NAMES.get(g.lower(), g)


def _finer(a: str, b: str) -> str:
    a, b = canonical_period(a), canonical_period(b)
    return a if _ORDER.get(a, 50) <= _ORDER.get(b, 50) else b


def _filter_columns(f) -> set[str]:
    if not isinstance(f, dict):
        return set()
    out = set()
    for key in ("dimension", "column"):
        if isinstance(f.get(key), str):
            out.add(f[key])
    for key in ("fields",):
        for sub in f.get(key) or []:
            out |= _filter_columns(sub)
    if isinstance(f.get("field"), dict):
        out |= _filter_columns(f["field"])
    return out


# ---- sys.queries ------------------------------------------------------------------------------------------

QUERIES_SCHEMA = pa.schema([
    ("query_id", pa.string()), ("user", pa.string()), ("remote_address", pa.string()), ("protocol", pa.string()),
    ("kind", pa.string()), ("sql", pa.string()), ("native_type", pa.string()), ("datasources", pa.string()),
    ("start_time", pa.string()), ("duration_ms", pa.int64()), ("planning_ms", pa.int64()), ("status", pa.string()),
    ("error_class", pa.string()), ("error_message", pa.string()), ("result_rows", pa.int64()),
    ("segments", pa.int64()), ("rows_scanned", pa.int64()), ("bytes_read", pa.int64()),
    ("projection_segments", pa.int64()), ("tables", pa.string())])


def queries_table(records: list[QueryRecord], now_ms: int, format_instant) -> pa.Table:
    """sys.queries: running queries (duration so far) and the log, newest first."""
    rows = []
    for r in sorted(records, key=lambda r: r.start_ms, reverse=True):
        hit, _ = r.projection_hits
        rows.append({
            "query_id": r.query_id, "user": r.user, "remote_address": r.remote_address, "protocol": r.protocol,
            "kind": r.kind, "sql": r.sql, "native_type": ",".join(dict.fromkeys(r.native_types)) or None,
            "datasources": ",".join(r.datasources) or None, "start_time": format_instant(r.start_ms),
            "duration_ms": r.duration_ms if r.status != RUNNING else max(0, now_ms - r.start_ms),
            "planning_ms": r.planning_ms, "status": r.status, "error_class": r.error_class,
            "error_message": r.error_message, "result_rows": r.result_rows, "segments": r.segments,
            "rows_scanned": r.rows_scanned, "bytes_read": r.bytes_read, "projection_segments": hit,
            "tables": json.dumps([t.to_json() for t in _grouped(r.tables)], sort_keys=True)})
    return pa.Table.from_pylist(rows, schema=QUERIES_SCHEMA)


def _grouped(tables: list[TableUse]) -> list[TableUse]:
    """Segment groups with the same outcome across a statement's native queries, summed."""
    out: dict[tuple, TableUse] = {}
    for t in tables:
        key = (t.datasource, t.projection, tuple(sorted(t.rejected.items())))
        if key in out:
            out[key].segments += t.segments
        else:
            out[key] = TableUse(t.datasource, t.projection, t.segments, dict(t.rejected))
    return list(out.values())


__all__ = ["CANCELLED", "DENIED", "ERROR", "OK", "QUERIES_SCHEMA", "RUNNING", "TIMEOUT", "QueryLog", "QueryRecord",
           "TableUse", "canonical_period", "queries_table", "query_shape"]
