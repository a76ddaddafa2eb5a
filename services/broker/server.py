"""The broker's gRPC edge: BrokerService.Query streams a query's result as Arrow IPC chunks."""

from __future__ import annotations

import json
import time

import grpc
import pyarrow as pa

from common.errors import QueryTimeoutError, StrataError, UnsupportedError, ValidationError
from common.query.partial import RunStats
from common.rpc.arrow_stream import table_to_chunks
from common.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc
from services.broker.query_executor import Cancelled
from services.broker.query_control import QueryControl
from services.broker.query_origin import announce_query_id


def status_for(exc: Exception) -> grpc.StatusCode:
    from services.security.authorizer import Unauthenticated

    if isinstance(exc, Unauthenticated):
        return grpc.StatusCode.UNAUTHENTICATED
    if isinstance(exc, ValidationError):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(exc, QueryTimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED
    if isinstance(exc, Cancelled):
        return grpc.StatusCode.CANCELLED
    if isinstance(exc, UnsupportedError):
        return grpc.StatusCode.UNIMPLEMENTED
    return grpc.StatusCode.INTERNAL


class BrokerServicer(QueryControl, broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self, executor, metrics, default_timeout_ms: int, sql=None, authorizer=None) -> None:
        self.executor = executor
        self.metrics = metrics
        self.default_timeout_ms = default_timeout_ms
        self.sql = sql  # (sql, context, timeout_s, is_active, user) -> pa.Table
        self.authorizer = authorizer

    def run(self, request, is_active=lambda: True, remaining=None, user=None):
        timeout_ms = request.timeout_ms or self.default_timeout_ms
        timeout_s = timeout_ms / 1000
        if remaining is not None:
            timeout_s = min(timeout_s, remaining)
        which = request.WhichOneof("statement")
        if which == "native_json":
            try:
                query = json.loads(request.native_json)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"native query is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
            if self.authorizer is not None and self.authorizer.enabled:
                from services.security.secure_catalog import require_native

                require_native(self.authorizer, user, query)
            return self.executor.execute(query, timeout_s, request.query_id or None, is_active)
        if which == "sql":
            if self.sql is None:
                raise UnsupportedError("SQL is not available on this broker yet; send a native query")
            return self.sql(request.sql, dict(request.context), timeout_s, is_active, user)
        raise ValidationError("QueryRequest needs native_json or sql")

    def Query(self, request, context):
        started = time.perf_counter()
        try:
            label = _labels(request)
            user = None
            if self.authorizer is not None and self.authorizer.enabled:
                user = self.authorizer.user_from_headers(context.invocation_metadata())
            announce_query_id(context, request, user)  # query log: origin, and the id sent back
            result = self.run(request, context.is_active, context.time_remaining(), user)
        except PermissionError as exc:
            self.metrics.queries.labels(*label, "denied").inc()
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except StrataError as exc:
            self.metrics.queries.labels(*label, "error").inc()
            context.abort(status_for(exc), str(exc))
        self.metrics.queries.labels(*label, "ok").inc()
        self.metrics.query_seconds.labels(*label).observe(time.perf_counter() - started)
        if isinstance(result, pa.Table):  # SQL results carry no per-segment stats
            yield from table_to_chunks(result, RunStats())
        else:
            yield from table_to_chunks(result.table, result.stats)


def _labels(request) -> tuple[str, str]:
    """(datasource, query type) for metrics; the query itself is validated in ``run``."""
    if request.WhichOneof("statement") != "native_json":
        return ("sql", "sql")
    try:
        obj = json.loads(request.native_json)
        ds = obj.get("dataSource")
        return (ds if isinstance(ds, str) else "subquery", str(obj.get("queryType")))
    except (ValueError, AttributeError):
        return ("?", "?")


def add_to_server(grpc_server, servicer: BrokerServicer) -> None:
    grpc_server.add(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer,
                    broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name)
