"""``POST /druid/v2``: Druid's native JSON queries (what ``strata query`` takes) answered in Druid's
result shapes, and ``DELETE /druid/v2/{id}`` to cancel one.

The query runs through the QueryFrontDoor like every other (grants, query registry, timeouts);
its result table is then reshaped the way Druid's clients (PyDruid, the console) read it:

- timeseries: ``[{"timestamp", "result": {aggregators...}}]``
- topN: ``[{"timestamp", "result": [{dimension, aggregators...}, ...]}]``, one entry per bucket
- groupBy: ``[{"version": "v1", "timestamp", "event": {...}}]``; with context ``resultAsArray``,
  arrays ``[timestamp millis (unless granularity is all), dimensions..., aggregators...]``
- scan: ``[{"segmentId", "columns", "events"}]``, events objects (``list``) or arrays
  (``compactedList``), ``__time`` as epoch millis as Druid's scan returns it. A scan of a
  datasource streams (``scan_body``): rows are written as the historicals send them, with the
  SQL endpoint's bounded memory and its truncated body on a failure part way.

timeBoundary and dataSourceMetadata run as the timeseries of the least and greatest ``__time``
(through the front door, so grants and the query log apply); segmentMetadata answers from the
broker's view of the served segments (their columns, types, sizes and rows), after a READ check.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.types.interval import _ETERNITY_END, _ETERNITY_START, format_instant, parse_instant
from services import query_errors as qe
from services.broker.druid_http.druid_errors import druid_error
from services.broker.druid_http.result_format import ResultWriter, json_values
from services.broker.druid_http.sql_resource import chunks
from services.broker.core.call_origin import CallOrigin
from services.broker.front_door import QueryFrontDoor, QueryRequest
from services.http_endpoint import REMOTE_HEADER, USER_HEADER

JSON = "application/json"
QUERY_ID_HEADER = "X-Druid-Query-Id"
TIME = "__time"


def _parse_failed(message: str) -> bytes:
    return orjson.dumps({"error": "Json parse failed", "errorMessage": message,
                         "errorClass": "com.fasterxml.jackson.core.JsonParseException", "host": None})


def _columns(table: pa.Table, names: list[str], tz: str = "UTC") -> dict[str, list]:
    return {name: json_values(table.column(name), table.schema.field(name), tz) for name in names}


def _millis(table: pa.Table) -> list:
    return pc.cast(table.column(TIME).cast(pa.timestamp("ms", tz="UTC")), pa.int64()).to_pylist()


def _bucket_start(query: dict) -> str:
    """The timestamp of a granularity-all result: the start of the query's first interval."""
    intervals = query.get("intervals")
    if isinstance(intervals, dict):
        intervals = intervals.get("intervals")
    if isinstance(intervals, str):
        intervals = [intervals]
    if isinstance(intervals, list) and intervals and isinstance(intervals[0], str) and "/" in intervals[0]:
        try:
            return format_instant(parse_instant(intervals[0].split("/")[0]))
        except Exception:  # noqa: BLE001 - an interval written otherwise (a period): no better answer
            pass
    return format_instant(0)


def druid_shape(query: dict, table: pa.Table) -> list:
    """A native result table in the shape Druid answers ``query`` with."""
    kind = query.get("queryType")
    names = [n for n in table.column_names if n != TIME]
    values = _columns(table, names)
    rows = [dict(zip(names, row)) for row in zip(*(values[n] for n in names))] if names else \
        [{} for _ in range(table.num_rows)]
    has_time = TIME in table.column_names
    stamps = json_values(table.column(TIME), table.schema.field(TIME), "UTC") if has_time else \
        [_bucket_start(query)] * table.num_rows
    if kind == "timeseries":
        return [{"timestamp": t, "result": r} for t, r in zip(stamps, rows)]
    if kind == "topN":
        out: list = []
        for t, r in zip(stamps, rows):
            if not out or out[-1]["timestamp"] != t:
                out.append({"timestamp": t, "result": []})
            out[-1]["result"].append(r)
        return out
    if kind == "groupBy":
        if (query.get("context") or {}).get("resultAsArray"):
            arrays = [list(r.values()) for r in rows]
            if has_time:
                arrays = [[m, *a] for m, a in zip(_millis(table), arrays)]
            return arrays
        return [{"version": "v1", "timestamp": t, "event": r} for t, r in zip(stamps, rows)]
    if kind == "scan":
        columns = list(table.column_names)
        if not table.num_rows:
            return []
        scan_values = dict(values)
        if has_time:
            scan_values[TIME] = _millis(table)
        if query.get("resultFormat") == "compactedList":
            events = [list(row) for row in zip(*(scan_values[c] for c in columns))]
        else:
            events = [dict(zip(columns, row)) for row in zip(*(scan_values[c] for c in columns))]
        datasource = query.get("dataSource")
        segment = datasource if isinstance(datasource, str) else "query"
        return [{"segmentId": segment, "columns": columns, "events": events}]
    return table.to_pylist()


def _with_millis(batch) -> pa.Table:
    """A scan's rows with ``__time`` as epoch millis, as Druid's scan returns it."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    if TIME not in table.column_names:
        return table
    index = table.column_names.index(TIME)
    millis = pc.cast(table.column(TIME).cast(pa.timestamp("ms", tz="UTC")), pa.int64())
    return table.set_column(index, TIME, millis)


def scan_body(query: dict, batches) -> Iterator[bytes]:
    """A scan's answer, ``[{"segmentId", "columns", "events": [...]}]``, written a batch at a time
    as the rows arrive (the same text ``druid_shape`` gives). A failure part way raises out of the
    iterator after the events so far: the body lacks its closing ``]}]``, as a client can tell."""
    writer = None
    for batch in batches:
        if not batch.num_rows:
            continue
        table = _with_millis(batch)
        if writer is None:
            datasource = query.get("dataSource")
            head = {"segmentId": datasource if isinstance(datasource, str) else "query",
                    "columns": table.column_names}
            writer = ResultWriter("array" if query.get("resultFormat") == "compactedList" else "object",
                                  table.schema)
            yield b"[" + orjson.dumps(head)[:-1] + b',"events":['
        yield writer.rows(table)
    yield b"[]" if writer is None else b"]}]"


def _time_bounds_query(query: dict) -> dict:
    """The timeseries giving a datasource's least and greatest __time (timeBoundary, dataSourceMetadata)."""
    out = {"queryType": "timeseries", "dataSource": query.get("dataSource"), "granularity": "all",
           "intervals": query.get("intervals") or [f"{_ETERNITY_START}/{_ETERNITY_END}"],
           "aggregations": [{"type": "longMin", "name": "minTime", "fieldName": TIME},
                            {"type": "longMax", "name": "maxTime", "fieldName": TIME}]}
    for key in ("filter", "context"):
        if query.get(key) is not None:
            out[key] = query[key]
    return out


def _time_bounds_shape(query: dict, table: pa.Table) -> list:
    rows = table.to_pylist()
    if not rows or rows[0].get("minTime") is None or rows[0].get("maxTime") is None:
        return []
    low, high = format_instant(rows[0]["minTime"]), format_instant(rows[0]["maxTime"])
    if query.get("queryType") == "dataSourceMetadata":
        return [{"timestamp": high, "result": {"maxIngestedEventTime": high}}]
    bound = query.get("bound")
    if bound == "minTime":
        return [{"timestamp": low, "result": {"minTime": low}}]
    if bound == "maxTime":
        return [{"timestamp": high, "result": {"maxTime": high}}]
    return [{"timestamp": low, "result": {"minTime": low, "maxTime": high}}]


def _aggregator(name: str, kind: str) -> dict:
    """A metric's aggregator as Druid's segmentMetadata lists it (the factory that reads the column)."""
    return {"type": kind, "name": name} if kind == "count" else {"type": kind, "name": name, "fieldName": name}


def _merged_aggregators(entries: list[dict | None], strategy: str) -> dict | None:
    """Druid's aggregatorMergeStrategy: strict (null on any unknown or conflict), lenient (skip
    unknown segments, null out a conflicting column), latest (the newest segment's wins; entries
    come in segment id order, whose version part sorts by time)."""
    known = [e for e in entries if e is not None]
    if strategy == "strict" and len(known) < len(entries):
        return None
    out: dict = {}
    for entry in known:
        for name, agg in entry.items():
            if strategy == "latest" or name not in out:
                out[name] = agg
            elif out[name] != agg:
                if strategy == "strict":
                    return None
                out[name] = None
    return out


def segment_metadata(descriptors: list, merge: bool = False, analysis_types=None, merge_strategy: str = "strict"
                     ) -> list:
    """Druid's segmentMetadata answer for served segments (one entry each, or one merged).
    ``aggregators`` is given only when ``analysis_types`` asks for it, as in Druid: a rollup
    segment's metrics with their aggregators ({} for a segment without metrics); null when a
    metric's aggregator is unknown (Druid's "unknown aggregators")."""
    want_aggregators = analysis_types is not None and "aggregators" in analysis_types
    out = []
    for d in sorted(descriptors, key=lambda d: str(d.id)):
        columns = {name: {"typeSignature": t.native_name, "type": t.native_name, "hasMultipleValues": False,
                          "hasNulls": name != TIME, "size": 0, "cardinality": None, "minValue": None,
                          "maxValue": None, "errorMessage": None} for name, t in d.schema().items()}
        aggregators = None
        if want_aggregators:
            metrics = d.metrics()
            aggregators = None if None in metrics.values() else {n: _aggregator(n, k) for n, k in metrics.items()}
        out.append({"id": str(d.id), "intervals": [str(d.id.interval)], "columns": columns, "size": d.size,
                    "numRows": d.num_rows, "aggregators": aggregators, "projections": None, "timestampSpec": None,
                    "queryGranularity": None, "rollup": None})
    if merge and out:
        merged = dict(out[0], id="merged", intervals=sorted({i for e in out for i in e["intervals"]}),
                      size=sum(e["size"] for e in out), numRows=sum(e["numRows"] for e in out),
                      columns={k: v for e in out for k, v in e["columns"].items()},
                      aggregators=_merged_aggregators([e["aggregators"] for e in out], merge_strategy)
                      if want_aggregators else None)
        return [merged]
    return out


class DruidNativeResource:
    """``segments``: datasource -> the descriptors of its served segments (segmentMetadata)."""

    def __init__(self, front_door: QueryFrontDoor, queries=None, host: str | None = None, segments=None,
                 authorizer=None) -> None:
        self.front_door = front_door
        self.queries = queries
        self.host = host
        self.segments = segments
        self.authorizer = authorizer

    def post(self, body: bytes, headers: dict, params: dict | None = None):
        try:
            query = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return 400, JSON, _parse_failed(f"the body is not valid JSON: {exc}")
        if not isinstance(query, dict):
            return 400, JSON, _parse_failed(f"a native query is a JSON object with a queryType, got a JSON "
                                            f"{type(query).__name__}")
        context = query.get("context") if isinstance(query.get("context"), dict) else {}
        query_id = str(context.get("queryId") or uuid.uuid4())
        user = headers.get(USER_HEADER)
        origin = CallOrigin("http", headers.get(REMOTE_HEADER), user)
        reply = {QUERY_ID_HEADER: query_id}
        kind = query.get("queryType")
        pretty = bool(params and "pretty" in params)
        try:
            if kind == "segmentMetadata":
                shaped = self._segment_metadata(query, user)
            elif kind in ("timeBoundary", "dataSourceMetadata"):
                request = QueryRequest(user, native=_time_bounds_query(query), query_id=query_id, origin=origin)
                shaped = _time_bounds_shape(query, self.front_door.run(request).table)
            else:
                request = QueryRequest(user, native=query, query_id=query_id, origin=origin)
                # A scan streams: its rows are written as the historicals send them, never all held.
                streamed = self.front_door.stream(request, native=True) if kind == "scan" and not pretty else None
                if streamed is not None:
                    return 200, JSON, chunks(scan_body(query, streamed)), reply
                shaped = druid_shape(query, self.front_door.run(request).table)
        except qe.QueryFailed as exc:
            status, payload = druid_error(exc.error, self.host)
            return status, JSON, payload, reply
        except Exception as exc:  # noqa: BLE001 - never a traceback
            status, payload = druid_error(qe.client_error(exc), self.host)
            return status, JSON, payload, reply
        if pretty:
            return 200, JSON, orjson.dumps(shaped, option=orjson.OPT_INDENT_2), reply
        return 200, JSON, orjson.dumps(shaped), reply

    def _segment_metadata(self, query: dict, user) -> list:
        datasource = query.get("dataSource")
        if isinstance(datasource, dict) and datasource.get("type") == "table":
            datasource = datasource.get("name")
        if not isinstance(datasource, str) or self.segments is None:
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, "segmentMetadata needs a table dataSource (a name)"))
        if self.authorizer is not None:
            self.authorizer.require(user, "READ", "DATASOURCE", datasource)
        analysis_types = query.get("analysisTypes")
        if analysis_types is not None and (not isinstance(analysis_types, list)
                                           or not all(isinstance(a, str) for a in analysis_types)):
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, "segmentMetadata analysisTypes must be a list of names "
                                                            "such as [\"aggregators\", \"cardinality\"]"))
        strategy = query.get("aggregatorMergeStrategy")
        if strategy is None:
            strategy = "lenient" if query.get("lenientAggregatorMerge") is True else "strict"
        if strategy not in ("strict", "lenient", "latest"):
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, f"segmentMetadata aggregatorMergeStrategy {strategy!r} is "
                                                            "unknown; use strict, lenient or latest"))
        return segment_metadata(self.segments(datasource), bool(query.get("merge")), analysis_types, strategy)

    def cancel(self, query_id: str, headers: dict):
        if self.queries is not None:
            try:
                self.queries.kill(query_id, headers.get(USER_HEADER))
                return 202, JSON, b""
            except (PermissionError, ValidationError):
                pass
        status, payload = druid_error(qe.ClientError(qe.NOT_FOUND, f"no running query '{query_id}' of yours"),
                                      self.host)
        return status, JSON, payload


__all__ = ["DruidNativeResource", "druid_shape"]
