"""The historical's gRPC edge: run native queries on served segments and send the partial: in one
message (RunQueryOnce) when it is small, else streamed in chunks (RunQuery)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from common.errors import NotFoundError, QueryTimeoutError, SegmentCorruptError, StrataError, ValidationError
from common.bounded_cache import BoundedCache
from common.query import engine
from common.query.memory_budget import DEFAULT_MAX_QUERY_BYTES, MemoryBudget
from common.query.model import query_from_json
from common.query.prepared_query import PreparedCache, PreparedKey, PreparedQuery
from common.query.query_runner import Deadline, QueryRunner
from services.historical.client import missing_segments_metadata
from services.historical.parked_partials import ParkedPartials
from services.historical.query_metrics import QueryMetrics
from services.rpc.arrow_stream import table_to_chunks, table_to_message
from services.rpc.convert import schema_from_proto, segment_id_from_proto, segment_id_to_proto
from services.rpc.gen.strata.v1 import historical_pb2, historical_pb2_grpc, types_pb2
from services.query_errors import client_error, grpc_status

# The largest partial RunQueryOnce sends in its one message; a larger one is streamed by RunQuery
# in chunks, so neither side builds one huge message.
ONE_MESSAGE_BYTES = 4 << 20


class HistoricalServicer(historical_pb2_grpc.HistoricalServiceServicer):
    def __init__(self, node, metrics, threads: int, max_query_bytes: int | None = DEFAULT_MAX_QUERY_BYTES) -> None:
        self.node = node
        self.max_query_bytes = max_query_bytes
        self.metrics = metrics
        self.threads = threads
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="strata-query")
        # At most ``threads`` segment scans at once, on the pool or on the gRPC thread.
        self.runner = QueryRunner(self.pool, slots=threads)
        self.prepared = PreparedCache()  # each query prepared once over its segments
        # Merged partials between the rounds of an exact topN (a round follows the previous one
        # within milliseconds): few, and short-lived.
        self.rounds = BoundedCache(8, ttl_s=30.0)
        # Partials too large for RunQueryOnce's one message, until RunQuery streams them.
        self.parked = ParkedPartials()
        self.children = QueryMetrics(metrics)  # label children, looked up once; observes the runs

    def RunQuery(self, request, context):
        # The tail of a RunQueryOnce whose partial was too large for one message, if still kept.
        parked = self.parked.take(_parked_key(request)) if self.parked.holds(request.query_id) else None
        merged, budget = parked if parked is not None else self._answer(request, context)
        try:
            yield from table_to_chunks(merged.table, merged.stats, budget)
        except StrataError as exc:  # a slice over the query's memory limit, or a row over one message
            self._abort(context, exc)

    def RunQueryOnce(self, request, context):
        return self._once(request, context)

    def run_query_once_raw(self, data: bytes, context) -> bytes:
        """RunQueryOnce as gRPC hands it over with no (de)serializer: the request's bytes in, the
        reply's bytes out (gRPC's Python builds no message objects around the handler)."""
        try:
            request = historical_pb2.RunQueryRequest.FromString(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError, or a string field that is not UTF-8
            self._abort(context, ValidationError(
                f"the request is not a valid strata.v1.RunQueryRequest protobuf message "
                f"({type(exc).__name__}); send it with the generated client of protos/strata/v1"))
        return self._once(request, context).SerializeToString()

    def _once(self, request, context):
        merged, budget = self._answer(request, context)
        message = table_to_message(merged.table, merged.stats, ONE_MESSAGE_BYTES)
        if message is not None:
            return message
        self.parked.put(_parked_key(request), (merged, budget), request.query_id)
        return types_pb2.ArrowChunk(last=False)

    def _answer(self, request, context):
        """The merged partial of the request's query over its segments and the budget it was
        charged to (the call ends with the status of the error's kind when it fails)."""
        started = time.perf_counter()
        try:
            wanted = [segment_id_from_proto(s) for s in request.segments]
            declared = schema_from_proto(request.schema)
        except Exception as exc:  # noqa: BLE001 - every failure leaves with the status of its kind
            self._abort(context, exc, "bad query: ")
        segments, missing = self.node.leases(wanted)
        try:  # every segment's file stays open until the query is done with it, evicted or not
            if missing:
                self.metrics.queries.labels(*_labels_of(request), "missing_segments").inc()
                # NOT_FOUND: the broker asks another replica (its view was behind this node's) for
                # just these, named in the trailing metadata.
                context.set_trailing_metadata(missing_segments_metadata(missing))
                self._abort(context, NotFoundError(
                    f"historical {self.node.server_id} does not serve {', '.join(map(str, missing))}"))
            types = tuple(declared.items())
            if any(s.loaded_projections is not None for s in segments):
                # A partial copy's projections are part of the key: its table choice depends on them.
                types += (("loaded_projections", tuple(s.loaded_projections for s in segments)),)
            key = PreparedKey(request.query_json, types, tuple(s.generation for s in segments))
            try:
                prepared = self.prepared.prepared(key, segments, lambda: _prepare(request.query_json, declared, segments))
            except Exception as exc:  # noqa: BLE001 - every failure leaves with the status of its kind
                self._abort(context, exc, "bad query: ")
            try:
                budget = MemoryBudget.for_query(prepared.query.context, self.max_query_bytes, request.query_id,
                                                f"historical {self.node.server_id}")
            except Exception as exc:  # noqa: BLE001 - a bad maxBytesInMemory value is the user's error
                self._abort(context, exc)
            return self._run(prepared, budget, request.query_id, context, started), budget
        finally:
            for segment in segments:
                segment.lease.release()

    def _run(self, prepared, budget, query_id: str, context, started: float):
        datasource, qtype = prepared.query.datasource_name, prepared.query.query_type
        try:
            merged = self.runner.run(prepared, budget, _CallDeadline(context), self.children, self.rounds, query_id)
        except SegmentCorruptError as exc:  # DATA_LOSS: the broker asks another replica
            self.node.report_corrupt(exc)
            self.metrics.queries.labels(datasource, qtype, "corrupt").inc()
            self._abort(context, exc)
        except TimeoutError:
            self.metrics.queries.labels(datasource, qtype, "timeout").inc()
            self._abort(context, QueryTimeoutError("query timed out on the historical"))
        except Exception as exc:  # noqa: BLE001
            error = self._abort(context, exc)
            self.metrics.queries.labels(datasource, qtype, "invalid" if error.is_user_error else "error").inc()
        counted = self.children.query(datasource, qtype)
        counted.ok.inc()
        counted.query_seconds.observe(time.perf_counter() - started)
        counted.bytes_read.inc(merged.stats.bytes_read)
        return merged

    def _abort(self, context, exc: BaseException, prefix: str = ""):
        """End the call with the status of the error's kind (common/errors.STATUSES): INVALID_ARGUMENT,
        NOT_FOUND, DEADLINE_EXCEEDED or UNIMPLEMENTED for the user's errors (the broker reports
        them at once; NOT_FOUND, a segment not served, it asks elsewhere), DATA_LOSS (a corrupt
        segment) and INTERNAL with an error id logged here (the broker tries another replica)."""
        error = client_error(exc, where=f"historical {self.node.server_id}")
        context.abort(grpc_status(error), prefix + error.message if error.is_user_error else error.message)
        return error  # not reached: abort raises

    def GetLoadStatus(self, request, context):
        status = self.node.status()
        return historical_pb2.HistoricalLoadStatusResponse(
            served=[segment_id_to_proto(s) for s in status["served"]],
            loading=[segment_id_to_proto(s) for s in status["loading"]],
            cache_bytes=status["cache_bytes"], max_cache_bytes=status["max_cache_bytes"])


class _CallDeadline(Deadline):
    """The call's: over when the broker cancelled it, went away or its deadline passed."""

    def __init__(self, context) -> None:
        self._context = context

    def check(self) -> None:
        remaining = self._context.time_remaining()
        if not self._context.is_active() or (remaining is not None and remaining <= 0):
            raise TimeoutError("query cancelled")

    def remaining(self) -> float | None:
        return self._context.time_remaining()


def _prepare(query_json: str, declared: dict, segments) -> PreparedQuery:
    """The request's query over its segments, under the broker's declared types (empty: the
    segments' own), each segment's table chosen."""
    query = query_from_json(json.loads(query_json))
    schema = declared or engine.union_schema(segments)
    return PreparedQuery(None, query, schema, segments, [engine.source_for(query, s) for s in segments])


def _labels_of(request) -> tuple[str, str]:
    """(datasource, query type) of a request whose query was not prepared, for its metrics."""
    try:
        obj = json.loads(request.query_json)
        return str(obj.get("dataSource", "unknown")), str(obj.get("queryType", "unknown"))
    except (ValueError, AttributeError):
        return "unknown", "unknown"


def _parked_key(request) -> bytes:
    return request.SerializeToString(deterministic=True)


_SERVICE = historical_pb2.DESCRIPTOR.services_by_name["HistoricalService"].full_name


def _register(servicer: HistoricalServicer, server) -> None:
    """The generated registration, but RunQueryOnce takes and returns bytes: gRPC's Python then
    builds no request or reply message around the handler; the other methods are as generated."""
    handlers = {
        "RunQuery": grpc.unary_stream_rpc_method_handler(
            servicer.RunQuery, request_deserializer=historical_pb2.RunQueryRequest.FromString,
            response_serializer=types_pb2.ArrowChunk.SerializeToString),
        "RunQueryOnce": grpc.unary_unary_rpc_method_handler(servicer.run_query_once_raw),
        "GetLoadStatus": grpc.unary_unary_rpc_method_handler(
            servicer.GetLoadStatus, request_deserializer=historical_pb2.HistoricalLoadStatusRequest.FromString,
            response_serializer=historical_pb2.HistoricalLoadStatusResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, handlers),))


def add_to_server(grpc_server, servicer: HistoricalServicer) -> None:
    grpc_server.add(_register, servicer, _SERVICE)


__all__ = ["HistoricalServicer", "add_to_server"]
