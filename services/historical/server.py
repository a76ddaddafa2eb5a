"""The historical's gRPC edge: run native queries on served segments and send the partial: in one
message (RunQueryOnce) when it is small, else streamed in chunks (RunQuery)."""

from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from common.errors import SegmentCorruptError
from common.query import engine, topn_threshold
from common.query.memory_budget import DEFAULT_MAX_QUERY_BYTES, MemoryBudget
from common.query.projection_match import reason_kind
from services.historical.parked_partials import ParkedPartials
from services.historical.query_metrics import QueryMetrics
from services.historical.query_request import RequestCache
from services.historical.round_cache import RoundCache
from services.historical.source_cache import SourceCache
from services.rpc.arrow_stream import table_to_chunks, table_to_message
from services.rpc.convert import segment_id_to_proto
from services.rpc.gen.strata.v1 import historical_pb2, historical_pb2_grpc, types_pb2
from services.query_errors import client_error, grpc_status

# How often a query waiting for a query slot asks whether it is still wanted.
_SLOT_POLL_S = 0.05
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
        # Engine runs hold a slot, on the pool or on the gRPC thread: the slots, not the pool,
        # bound how many segment scans run at once, so a one-segment query can run on the
        # thread that received it (a pool hand-off is a thread switch, about 0.15 ms) without
        # lifting the bound.
        self.slots = threading.BoundedSemaphore(threads)
        self.rounds = RoundCache()  # merged partials between the rounds of an exact topN
        # Partials too large for RunQueryOnce's one message, until RunQuery streams them.
        self.parked = ParkedPartials()
        self.sources = SourceCache()  # each segment's table for a query, chosen once
        self.requests = RequestCache()  # each distinct request parsed once
        self.children = QueryMetrics(metrics)  # label children, looked up once

    def RunQuery(self, request, context):
        # The tail of a RunQueryOnce whose partial was too large for one message, if still kept.
        merged = self.parked.take(_parked_key(request)) if self.parked.holds(request.query_id) else None
        if merged is None:
            merged = self._answer(request, None, context)
        yield from table_to_chunks(merged.table, merged.stats)

    def RunQueryOnce(self, request, context):
        return self._once(request, None, context)

    def run_query_once_raw(self, data: bytes, context) -> bytes:
        """RunQueryOnce as gRPC hands it over with no (de)serializer: the request's bytes in (they
        also find the request's parse again, see query_request.py), the reply's bytes out."""
        try:
            request = historical_pb2.RunQueryRequest.FromString(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError, or a string field that is not UTF-8
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"the request is not a valid strata.v1.RunQueryRequest protobuf message "
                          f"({type(exc).__name__}); send it with the generated client of protos/strata/v1")
        return self._once(request, data, context).SerializeToString()

    def _once(self, request, data: bytes | None, context):
        merged = self._answer(request, data, context)
        message = table_to_message(merged.table, merged.stats, ONE_MESSAGE_BYTES)
        if message is not None:
            return message
        self.parked.put(_parked_key(request), merged, request.query_id)
        return types_pb2.ArrowChunk(last=False)

    def _answer(self, request, data: bytes | None, context):
        """The merged partial of the request's query over its segments (the call ends with the
        status of the error's kind when it fails). ``data``: the request's bytes, when received
        as bytes."""
        started = time.perf_counter()
        try:
            asked = self.requests.get(request, data)
        except Exception as exc:  # noqa: BLE001 - every failure leaves with the status of its kind
            self._abort(context, exc, "bad query: ")
        segments, missing = self.node.leases(asked.wanted)
        try:  # every segment's file stays open until the query is done with it, evicted or not
            if missing:
                self.metrics.queries.labels(asked.query.datasource_name, asked.query.query_type,
                                            "missing_segments").inc()
                context.abort(grpc.StatusCode.NOT_FOUND,
                              f"historical {self.node.server_id} does not serve {', '.join(map(str, missing))}")
            return self._answer_leased(request, asked, segments, context, started)
        finally:
            for segment in segments:
                segment.lease.release()

    def _answer_leased(self, request, asked, segments, context, started):
        query = asked.query
        datasource, qtype = query.datasource_name, query.query_type
        schema = asked.schema or engine.union_schema(segments)
        try:
            budget = MemoryBudget.for_query(query.context, self.max_query_bytes, request.query_id,
                                            f"historical {self.node.server_id}")
        except Exception as exc:  # noqa: BLE001 - a bad maxBytesInMemory value is the user's error
            self._abort(context, exc)

        def wanted_still() -> None:
            remaining = context.time_remaining()
            if not context.is_active() or (remaining is not None and remaining <= 0):
                raise TimeoutError("query cancelled")

        def run_one(segment, source):
            wanted_still()
            while not self.slots.acquire(timeout=_SLOT_POLL_S):
                wanted_still()
            try:
                t0 = time.perf_counter()
                partial = engine.run(query, source, schema, budget)
            finally:
                self.slots.release()
            counted = self.children.table(datasource, partial.projection or "base")
            counted.segment_query_seconds.observe(time.perf_counter() - t0)
            counted.segments_queried.inc()
            counted.rows_scanned.inc(partial.stats.rows_scanned)
            if partial.projection:  # what base rows the query would have read: the rows saved, per projection
                counted.projection_base_rows.inc(segment.num_rows)
            for name, reason in partial.rejected:
                self.metrics.projection_misses.labels(datasource, name, reason_kind(reason)).inc()
            return partial

        def run_together(batch_segments, batch_sources):
            """Projection rows of several segments in one pass (engine.run_together), holding one
            slot; None: they run one by one. Per-segment metrics get the batch's time in equal shares."""
            wanted_still()
            while not self.slots.acquire(timeout=_SLOT_POLL_S):
                wanted_still()
            try:
                t0 = time.perf_counter()
                partial = engine.run_together(query, batch_sources, schema, budget)
            finally:
                self.slots.release()
            if partial is None:
                return None
            share = (time.perf_counter() - t0) / len(batch_sources)
            counted = self.children.table(datasource, partial.projection)
            for segment, source in zip(batch_segments, batch_sources):
                counted.segment_query_seconds.observe(share)
                for name, reason in source.rejected:
                    self.metrics.projection_misses.labels(datasource, name, reason_kind(reason)).inc()
            counted.segments_queried.inc(len(batch_sources))
            counted.rows_scanned.inc(partial.stats.rows_scanned)
            counted.projection_base_rows.inc(sum(s.num_rows for s in batch_segments))
            return partial

        directive = query.context.get(topn_threshold.PHASE_KEY)
        round_key = None
        if isinstance(directive, dict) and topn_threshold.eligible(query):
            round_key = (request.query_id, *asked.round_base())
        futures = []
        try:
            cached = self.rounds.get(round_key) if round_key is not None else None
            sources = [] if cached is not None else [
                self.sources.source(asked.query_json, s, functools.partial(engine.source_for, query, s))
                for s in segments]
            # One segment, or projection rows (a few thousand per segment), are read on this
            # thread: handing them to the pool's threads costs more than the work. The projection
            # rows of several segments run as one pass (engine.run_together). Several base
            # segments go to the pool, to run in parallel. Either way a run holds a query slot.
            pre_rows = sum(src.num_rows for src in sources if src.pre_aggregated)
            here = [len(sources) == 1 or (src.pre_aggregated and pre_rows <= engine.INLINE_ROWS) for src in sources]
            partials = []
            if cached is not None:
                partials = [cached]
            else:
                futures = [self.pool.submit(run_one, s, src) for s, src, h in zip(segments, sources, here) if not h]
                mine = [i for i, h in enumerate(here) if h]
                for batch in engine.batches(query, [sources[i] for i in mine]):
                    batch = [mine[i] for i in batch]
                    together = run_together([segments[i] for i in batch], [sources[i] for i in batch]) \
                        if len(batch) > 1 else None
                    partials.extend([together] if together is not None else
                                    [run_one(segments[i], sources[i]) for i in batch])
                for fut in futures:
                    remaining = context.time_remaining()
                    partials.append(fut.result(timeout=None if remaining is None else max(remaining, 0.001)))
            if cached is not None:
                merged = cached
            elif len(partials) == 1 and len(sources) > 1:
                merged = partials[0]  # one pass over several segments' projection rows: merged already
            else:
                merged = engine.merge(query, partials, budget)
            if round_key is not None:
                if cached is None:
                    self.rounds.put(round_key, merged)
                merged = topn_threshold.prune(query, merged, directive)
        except SegmentCorruptError as exc:
            self.node.report_corrupt(exc)
            self.metrics.queries.labels(datasource, qtype, "corrupt").inc()
            context.abort(grpc.StatusCode.DATA_LOSS, str(exc))
        except TimeoutError:
            for fut in futures:
                fut.cancel()
            self.metrics.queries.labels(datasource, qtype, "timeout").inc()
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "query timed out on the historical")
        except Exception as exc:  # noqa: BLE001
            for fut in futures:
                fut.cancel()
            error = self._abort(context, exc)
            self.metrics.queries.labels(datasource, qtype, "invalid" if error.is_user_error else "error").inc()
        counted = self.children.query(datasource, qtype)
        counted.ok.inc()
        counted.query_seconds.observe(time.perf_counter() - started)
        counted.bytes_read.inc(merged.stats.bytes_read)
        return merged

    def _abort(self, context, exc: BaseException, prefix: str = ""):
        """End the call with the status of the error's kind: INVALID_ARGUMENT or UNIMPLEMENTED for
        the user's errors (the broker reports them at once), INTERNAL with an error id logged here
        for anything else (the broker tries another replica)."""
        error = client_error(exc, where=f"historical {self.node.server_id}")
        context.abort(grpc_status(error), prefix + error.message if error.is_user_error else error.message)
        return error  # not reached: abort raises

    def GetLoadStatus(self, request, context):
        status = self.node.status()
        return historical_pb2.HistoricalLoadStatusResponse(
            served=[segment_id_to_proto(s) for s in status["served"]],
            loading=[segment_id_to_proto(s) for s in status["loading"]],
            cache_bytes=status["cache_bytes"], max_cache_bytes=status["max_cache_bytes"])


def _parked_key(request) -> bytes:
    return request.SerializeToString(deterministic=True)


_SERVICE = historical_pb2.DESCRIPTOR.services_by_name["HistoricalService"].full_name


def _register(servicer: HistoricalServicer, server) -> None:
    """The generated registration, but RunQueryOnce takes and returns bytes: gRPC's Python then
    builds no request or reply message around the handler (and the request's bytes find its
    parse again); the other methods are as generated."""
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
