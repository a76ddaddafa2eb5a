"""QueryFrontDoor: the one path every query takes on the broker, whichever protocol brought it
(Arrow Flight / Flight SQL, the gRPC BrokerService).

- ``schema(request)`` plans without running: authorization, SQL planning (or native validation)
  and the result schema. Flight's GetFlightInfo calls only this.
- ``run(request)`` is where a query starts and ends: it gets its query id, is authorized and
  run, its outcome is counted, and a failure is classified once (``query_errors``: a user error,
  or an internal one logged under an error id) and raised as ``QueryFailed``. Flight's DoGet and
  gRPC's Query call it; a query log or KILL QUERY hooks in here.

SQL goes to a SqlBackend (the broker's SqlService; tests use a DuckDB-backed one), native JSON
queries to a NativeBackend (the broker's scatter/gather QueryExecutor).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from common.errors import StrataError, UnsupportedError, ValidationError
from services.broker.core.call_origin import CallOrigin
from services.broker.core.sql_backend import SqlBackend, StatementInfo
from services.broker.result_stream import ResultStream
from services.query_errors import DENIED, QueryFailed, client_error
from services.security.authorizer import ALLOW_ALL

log = logging.getLogger(__name__)

_MAX_LABEL_CHILDREN = 1024


class NativeBackend(Protocol):
    def execute(self, query: dict, timeout_s: float, query_id: str | None = None,
                is_active: Callable[[], bool] = lambda: True, *, origin: CallOrigin | None = None) -> Any:
        """Run a native query; the result has ``table`` (pa.Table) and ``stats`` (RunStats).
        ``origin``: who sent it, for a backend that logs queries (the others ignore it)."""

    def result_schema(self, query: dict) -> pa.Schema:
        """Validate a native query and say the schema of its result, without running it."""


@dataclass(frozen=True)
class QueryRequest:
    """One statement as a protocol delivered it. ``parameter_rows``: values for the ``?``
    markers, one tuple per execution (several rows run as one statement, results concatenated)."""

    user: str | None
    sql: str | None = None
    native: dict | None = None
    parameter_rows: tuple[tuple, ...] = ()
    context: Mapping | None = None
    timeout_s: float | None = None  # the transport's deadline, if it has one
    query_id: str | None = None  # fixed by the client or the front door; else the backend picks one
    # Who sent it and what answers with its id: set by the front door that built the request,
    # recorded by the query log (``core/call_origin``).
    origin: CallOrigin | None = field(default=None, compare=False)
    # The SQL backend's plan from ``QueryFrontDoor.planned`` (a statement without parameters whose
    # plan may run again as it is): run as planned, so what runs is what was described.
    plan: Any = field(default=None, compare=False, repr=False)

    def with_query_id(self, query_id: str) -> QueryRequest:
        """This request under ``query_id`` (what ``dataclasses.replace`` gives, built directly)."""
        return QueryRequest(self.user, self.sql, self.native, self.parameter_rows, self.context, self.timeout_s,
                            query_id, self.origin, self.plan)

    def with_plan(self, plan: Any) -> QueryRequest:
        return QueryRequest(self.user, self.sql, self.native, self.parameter_rows, self.context, self.timeout_s,
                            self.query_id, self.origin, plan)

    def with_origin(self, origin: CallOrigin | None) -> QueryRequest:
        """This request as run by another call (Flight: the DoGet that runs what GetFlightInfo planned)."""
        return QueryRequest(self.user, self.sql, self.native, self.parameter_rows, self.context, self.timeout_s,
                            self.query_id, origin, self.plan)

    @property
    def label(self) -> tuple[str, str]:
        """(datasource, query type) for metrics."""
        if self.native is None:
            return ("sql", "sql")
        ds = self.native.get("dataSource") if isinstance(self.native, dict) else None
        while isinstance(ds, dict) and ds.get("type") in ("unnest", "table"):  # an unnest counts as its table's
            ds = ds.get("base") if ds.get("type") == "unnest" else ds.get("name")
        return (ds if isinstance(ds, str) else "subquery", str(self.native.get("queryType")))


@dataclass
class QueryResult:
    query_id: str
    table: pa.Table
    stats: Any = None  # RunStats for native queries; None for SQL
    seconds: float = 0.0


class QueryFrontDoor:
    def __init__(self, sql: SqlBackend | None = None, native: NativeBackend | None = None,
                 authorizer=ALLOW_ALL, metrics=None, default_timeout_s: float = 300.0) -> None:
        self.sql = sql
        self.native = native
        self.authorizer = authorizer
        self.metrics = metrics
        self.default_timeout_s = default_timeout_s
        # Prometheus label children by label values: ``labels()`` validates and locks on every
        # call; a query only needs the child it counted last time. Bounded (native queries name
        # their datasource); past the bound ``labels()`` is asked each time, as before.
        self._children: dict[tuple, tuple] = {}

    # ---- planning -------------------------------------------------------------------------------

    def schema(self, request: QueryRequest) -> pa.Schema | None:
        """The schema ``run(request)`` will return, from planning alone; None when it depends on
        parameter values not bound yet. Raises QueryFailed."""
        return self.planned(request)[0]

    def planned(self, request: QueryRequest) -> tuple[pa.Schema | None, QueryRequest]:
        """``schema(request)``, and the request to run: with the SQL backend's plan when it can
        run as it is (no parameters, no transport deadline), so a later ``run`` executes what
        this described even if the catalog or the segments changed meanwhile. Raises QueryFailed."""
        try:
            if request.native is not None:
                self._authorize_native(request)
                return self._native_backend().result_schema(request.native), request
            row = request.parameter_rows[0] if request.parameter_rows else None
            info = self._sql_backend().describe(request.sql, context=_context(request), user=request.user,
                                                parameters=row, origin=request.origin, query_id=request.query_id)
            plan = getattr(info, "plan", None)
            if plan is not None and not request.parameter_rows and request.timeout_s is None:
                request = request.with_plan(plan)
            return info.dataset_schema, request
        except Exception as exc:  # noqa: BLE001 - classified once, here
            raise QueryFailed(client_error(exc)) from None

    def prepare(self, sql: str, user: str | None, origin: CallOrigin | None = None) -> StatementInfo:
        """What a prepared statement needs to announce: its ``?`` count and, when known, schema."""
        try:
            return self._sql_backend().describe(sql, context=None, user=user, origin=origin)
        except Exception as exc:  # noqa: BLE001
            raise QueryFailed(client_error(exc)) from None

    # ---- running --------------------------------------------------------------------------------

    def run(self, request: QueryRequest, is_active: Callable[[], bool] = lambda: True,
            expected_schema: pa.Schema | None = None, emit=None) -> QueryResult:
        """Run one query from start to end (the only place queries start). With
        ``expected_schema`` (what GetFlightInfo announced) the result is checked against it. With
        ``emit``, rows a backend streams go there (see ``stream``) and the table returned is empty."""
        query_id = request.query_id or uuid.uuid4().hex
        started = time.perf_counter()
        label = request.label
        log.debug("query %s started (%s, user %s)", query_id, request.origin.protocol if request.origin else "-",
                  request.user)
        try:
            table, stats = self._execute(request, query_id, is_active, emit)
            if expected_schema is not None:
                table = _conform(table, expected_schema)
        except Exception as exc:  # noqa: BLE001 - classified once, here
            error = client_error(exc)
            self._count(label, "denied" if error.kind == DENIED else "error", None)
            log.info("query %s failed: %s: %s", query_id, error.kind, error.message)
            raise QueryFailed(error) from None
        seconds = time.perf_counter() - started
        self._count(label, "ok", seconds)
        log.debug("query %s finished in %.3f s, %d rows", query_id, seconds, table.num_rows)
        return QueryResult(query_id, table, stats, seconds)

    def streams(self, request: QueryRequest, native: bool = False) -> bool:
        """Whether ``stream`` would stream this request (asked after planning it: a cache lookup);
        ``native``: whether a native scan may stream."""
        if request.native is not None:
            # Native scans stream only for callers that ask (Druid's HTTP API); Flight's native
            # tickets keep running whole.
            native_streams = getattr(self.native, "streams", None)
            return bool(native and native_streams is not None and native_streams(request.native))
        if request.sql is None or request.parameter_rows:
            return False
        streams = getattr(self.sql, "streams", None)
        if streams is None:
            return False
        if request.plan is not None:
            return bool(streams(request.sql, (), _context(request), request.user, plan=request.plan))
        return bool(streams(request.sql, (), _context(request), request.user))

    def stream(self, request: QueryRequest, expected_schema: pa.Schema | None = None,
               is_active: Callable[[], bool] = lambda: True, native: bool = False) -> Iterator[pa.RecordBatch] | None:
        """The rows of a statement the SQL backend streams (one scan, unordered or by time, see
        ``SqlService.streams``) as record batches, produced by a thread of its own while the
        caller sends them, a few pieces ahead: the broker never holds the whole result. None for
        every other request (``run`` it). A failure before the first rows raises QueryFailed here;
        one later is raised by the iterator. The query stops when the iterator is closed, or when
        ``is_active`` (asked on this thread only, until the first rows) turns False. With
        ``native``, a native scan of a datasource streams too (``QueryExecutor.execute_stream``)."""
        if not self.streams(request, native):
            return None
        stream = ResultStream(timeout_s=request.timeout_s if request.timeout_s is not None else self.default_timeout_s)
        # The query's thread needs nothing of the caller's: who called and the id are on the request.
        threading.Thread(target=self._produce, args=(request, stream, expected_schema),
                         name="strata-result-stream", daemon=True).start()
        try:
            stream.wait_first(is_active)
        except QueryFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the client left while waiting: classified like any failure
            raise QueryFailed(client_error(exc)) from None
        return stream.batches()

    def _produce(self, request: QueryRequest, stream: ResultStream, expected_schema: pa.Schema | None) -> None:
        try:
            def emit(table: pa.Table, is_active=lambda: True) -> None:
                stream.put(_conform(table, expected_schema) if expected_schema is not None else table, is_active)

            result = self.run(request, stream.is_active, expected_schema, emit)
            if result.table.num_rows:  # the backend chose not to stream after all
                stream.put(result.table)
            stream.finish()
        except QueryFailed as exc:
            stream.fail(exc)
        except BaseException as exc:  # noqa: BLE001 - every failure reaches the reader, classified
            stream.fail(QueryFailed(client_error(exc)))

    def _execute(self, request: QueryRequest, query_id: str, is_active, emit=None) -> tuple[pa.Table, Any]:
        timeout_s = request.timeout_s if request.timeout_s is not None else self.default_timeout_s
        if request.native is not None:
            self._authorize_native(request)
            if emit is not None:  # a scan (``streams``): its rows go to emit, none are held here
                stats = self._native_backend().execute_stream(request.native, timeout_s, emit, query_id, is_active,
                                                              origin=request.origin)
                return pa.table({}), stats
            result = self._native_backend().execute(request.native, timeout_s, query_id, is_active,
                                                    origin=request.origin)
            return result.table, getattr(result, "stats", None)
        context = _context(request)
        if request.timeout_s is not None:
            context.setdefault("timeout", max(int(request.timeout_s * 1000), 1))
        rows = request.parameter_rows or ((),)
        backend = self._sql_backend()
        pinned = {"plan": request.plan} if request.plan is not None else {}  # only backends that gave one
        if emit is not None:
            return backend.execute(request.sql, parameters=rows[0], context=context or None, user=request.user,
                                   is_active=is_active, emit=emit, origin=request.origin, query_id=request.query_id,
                                   **pinned), None
        tables = [backend.execute(request.sql, parameters=row, context=context or None, user=request.user,
                                  is_active=is_active, origin=request.origin, query_id=request.query_id, **pinned)
                  for row in rows]
        return _concat(tables), None

    # ---- helpers --------------------------------------------------------------------------------

    def _authorize_native(self, request: QueryRequest) -> None:
        if not isinstance(request.native, dict):
            raise ValidationError("a native query must be a JSON object")
        if getattr(self.authorizer, "enabled", False):
            from services.security.secure_catalog import require_native

            require_native(self.authorizer, request.user, request.native)

    def _sql_backend(self) -> SqlBackend:
        if self.sql is None:
            raise UnsupportedError("SQL is not available on this server; send a native JSON query")
        return self.sql

    def _native_backend(self) -> NativeBackend:
        if self.native is None:
            raise UnsupportedError("this server does not run native JSON queries; send SQL")
        return self.native

    def _count(self, label: tuple[str, str], status: str, seconds: float | None) -> None:
        if self.metrics is None:
            return
        key = (label, status)
        children = self._children.get(key)
        if children is None:
            children = (self.metrics.queries.labels(*label, status), self.metrics.query_seconds.labels(*label))
            if len(self._children) < _MAX_LABEL_CHILDREN:
                self._children[key] = children
        children[0].inc()
        if seconds is not None:
            children[1].observe(seconds)


def _context(request: QueryRequest) -> dict:
    return dict(request.context or {})


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    first = tables[0].schema
    for i, table in enumerate(tables[1:], start=2):
        if not table.schema.equals(first):
            raise ValidationError(f"parameter row {i} gives result columns {table.schema.types} but row 1 "
                                  f"gave {first.types}; bind rows whose results share one schema")
    return pa.concat_tables(tables)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    if table.schema.equals(schema):
        return table
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise StrataError(f"the result does not match the schema its plan announced ({exc}); this is a "
                          f"planner bug") from None


__all__ = ["QueryFrontDoor", "QueryRequest", "QueryResult", "NativeBackend"]
