"""The historical's gRPC edge: run native queries on served segments and send the partial: in one
message (RunQueryOnce) when it is small, else streamed in chunks (RunQuery)."""

from __future__ import annotations

import functools
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from common.errors import SegmentCorruptError
from common.query import engine, topn_threshold
from common.query.memory_budget import DEFAULT_MAX_QUERY_BYTES, MemoryBudget
from common.query.model import query_from_json
from common.query.projection_match import reason_kind
from services.historical.parked_partials import ParkedPartials
from services.historical.round_cache import RoundCache
from services.historical.source_cache import SourceCache
from services.rpc.arrow_stream import table_to_chunks, table_to_message
from services.rpc.convert import schema_from_proto, segment_id_from_proto, segment_id_to_proto
from services.rpc.gen.strata.v1 import historical_pb2, historical_pb2_grpc, types_pb2
from services.query_errors import client_error, grpc_status

# How often a query waiting for a query slot asks whether it is still wanted.
_SLOT_POLL_S = 0.05
# The largest partial RunQueryOnce sends in its one message; a larger one is streamed by RunQuery
# in chunks, so neither side builds one huge message.
ONE_MESSAGE_BYTES = 4 << 20


@functools.lru_cache(maxsize=256)
def _parsed(query_json: str):
    """The broker sends the same JSON for every run of a cached SQL plan; Query objects are
    immutable, so one parse serves them all (a parse is about 0.06 ms of a 0.3 ms query)."""
    return query_from_json(json.loads(query_json))


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

    def RunQuery(self, request, context):
        # The tail of a RunQueryOnce whose partial was too large for one message, if still kept.
        merged = self.parked.take(_parked_key(request)) if self.parked.holds(request.query_id) else None
        if merged is None:
            merged = self._answer(request, context)
        yield from table_to_chunks(merged.table, merged.stats)

    def RunQueryOnce(self, request, context):
        merged = self._answer(request, context)
        message = table_to_message(merged.table, merged.stats, ONE_MESSAGE_BYTES)
        if message is not None:
            return message
        self.parked.put(_parked_key(request), merged, request.query_id)
        return types_pb2.ArrowChunk(last=False)

    def _answer(self, request, context):
        """The merged partial of the request's query over its segments (the call ends with the
        status of the error's kind when it fails)."""
        started = time.perf_counter()
        try:
            query = _parsed(request.query_json)
        except Exception as exc:  # noqa: BLE001 - every failure leaves with the status of its kind
            self._abort(context, exc, "bad query: ")
        datasource, qtype = query.datasource_name, query.query_type
        wanted = [segment_id_from_proto(s) for s in request.segments]
        segments, missing = [], []
        for sid in wanted:
            seg = self.node.segment(sid)
            (segments if seg is not None else missing).append(seg if seg is not None else sid)
        if missing:
            self.metrics.queries.labels(datasource, qtype, "missing_segments").inc()
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"historical {self.node.server_id} does not serve {', '.join(map(str, missing))}")
        schema = schema_from_proto(request.schema) or engine.union_schema(segments)
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
            table = partial.projection or "base"
            self.metrics.segment_query_seconds.labels(datasource, table).observe(time.perf_counter() - t0)
            self.metrics.segments_queried.labels(datasource, table).inc()
            self.metrics.rows_scanned.labels(datasource, table).inc(partial.stats.rows_scanned)
            if partial.projection:  # what base rows the query would have read: the rows saved, per projection
                self.metrics.projection_base_rows.labels(datasource, table).inc(segment.num_rows)
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
            table = partial.projection
            for segment, source in zip(batch_segments, batch_sources):
                self.metrics.segment_query_seconds.labels(datasource, table).observe(share)
                for name, reason in source.rejected:
                    self.metrics.projection_misses.labels(datasource, name, reason_kind(reason)).inc()
            self.metrics.segments_queried.labels(datasource, table).inc(len(batch_sources))
            self.metrics.rows_scanned.labels(datasource, table).inc(partial.stats.rows_scanned)
            self.metrics.projection_base_rows.labels(datasource, table).inc(sum(s.num_rows for s in batch_segments))
            return partial

        directive = query.context.get(topn_threshold.PHASE_KEY)
        round_key = None
        if isinstance(directive, dict) and topn_threshold.eligible(query):
            round_key = (request.query_id, json.dumps(topn_threshold.without_directive(query).to_json(), sort_keys=True,
                                                      default=str), tuple(str(s) for s in wanted))
        futures = []
        try:
            cached = self.rounds.get(round_key) if round_key is not None else None
            sources = [] if cached is not None else [
                self.sources.source(request.query_json, s, functools.partial(engine.source_for, query, s))
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
        self.metrics.queries.labels(datasource, qtype, "ok").inc()
        self.metrics.query_seconds.labels(datasource, qtype).observe(time.perf_counter() - started)
        self.metrics.bytes_read.labels(datasource).inc(merged.stats.bytes_read)
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


def add_to_server(grpc_server, servicer: HistoricalServicer) -> None:
    grpc_server.add(historical_pb2_grpc.add_HistoricalServiceServicer_to_server, servicer,
                    historical_pb2.DESCRIPTOR.services_by_name["HistoricalService"].full_name)


__all__ = ["HistoricalServicer", "add_to_server"]
