"""QueryExecutor: scatter a native query to historicals, gather partials, merge and finalize.

Each historical gets one RunQueryOnce for all of its segments in the plan. A query that reads few
rows in all (projection rows, say) goes to as few historicals as hold its segments instead of
being spread over all of them. A topN by a sum or count over a dimension is answered exactly in
up to three rounds that ship only the groups that can be in the result
(common/query/topn_threshold.py), falling back to shipping every group when the bounds do not
hold; historicals with few groups send them all in the first round and end there. A replica that
fails (unreachable, no longer serving a segment, corrupt segment) is excluded for those segments
and only they are re-planned onto other replicas. The whole query has one deadline; when it passes,
outstanding calls are cancelled and the caller gets a QueryTimeoutError.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import grpc
import pyarrow as pa

from common.errors import ErrorKind, QueryTimeoutError, StrataError, UnsupportedError, ValidationError
from common.query import engine, scan_engine, topn_threshold
from common.query.memory_budget import DEFAULT_MAX_QUERY_BYTES, UNLIMITED, MemoryBudget, table_bytes
from common.query.model import Query, ScanQuery, query_from_json
from common.query.partial import Partial, RunStats
from common.segment.segment_id import SegmentId
from services.broker.call_watchdog import CallWatchdog
from services.broker.core.missing_segment import (
    AskCoordinator,
    Cause,
    Fail,
    InView,
    LeaveOut,
    MissingSegment,
    Used,
    WaitForView,
    next_step,
)
from services.broker.core.schema_merge import check_policy
from services.broker.core.served_view import context_tiers
from services.historical.client import missing_segments
from services.query_errors import QueryCancelledError, kind_of_code

log = logging.getLogger("strata.broker")

# Errors after which another replica may succeed: the internal and unavailable kinds
# (common/errors.STATUSES), plus what a historical says when only it cannot serve the call now
# (NOT_FOUND: it no longer serves the segment; RESOURCE_EXHAUSTED: its stream limit; CANCELLED: it
# stopped). Everything else is the same on every replica and is reported at once with its kind.
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.DATA_LOSS,
              grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED,
              grpc.StatusCode.RESOURCE_EXHAUSTED}

# What a failure says about the replica (services/broker/core/missing_segment.py); other retryable
# codes (INTERNAL, UNKNOWN, DATA_LOSS) are failures reading the segment.
_CAUSES = {grpc.StatusCode.NOT_FOUND: Cause.NOT_SERVED, grpc.StatusCode.UNAVAILABLE: Cause.UNREACHABLE,
           grpc.StatusCode.CANCELLED: Cause.UNREACHABLE, grpc.StatusCode.RESOURCE_EXHAUSTED: Cause.UNREACHABLE}
# How long a query waits for the served view to catch up with a segment a historical no longer
# serves (the unannouncement travels through discovery: milliseconds, seconds under load), and
# for the coordinator to say whether it is still used.
VIEW_CATCH_UP_S = 2.0
COORDINATOR_ASK_S = 5.0
_VIEW_POLL_S = 0.01

# Each historical a query asks costs the broker a call, a partial to decode and merge, and the
# historical a request to take in and a reply to send: together about as much as reading tens of
# thousands of rows. A query that reads fewer rows than this in all (projection rows, usually) is
# answered sooner by the fewest historicals that hold its segments than by spreading it over all.
GATHER_ROWS = 100_000


class Cancelled(QueryCancelledError):
    pass


class QueryExecutor:
    def __init__(self, view, historical_client, metrics, view_lock: threading.Lock | None = None, threads: int = 16,
                 schema_for=None, max_query_bytes: int | None = DEFAULT_MAX_QUERY_BYTES,
                 gather_rows: int = GATHER_ROWS, used_states=None) -> None:
        self.view = view
        # A query whose segments read at most this many rows in all (``tables`` knows) goes to as
        # few historicals as hold them; 0: always spread.
        self.gather_rows = gather_rows
        # What one query may hold here: the partials historicals send and their merge.
        self.max_query_bytes = max_query_bytes
        # Datasource -> the schema queries see (the catalog overlay on the broker); None: unknown.
        self.schema_for = schema_for  # (datasource, columnTypeMergePolicy or None) -> schema, or None
        self.historical_client = historical_client  # server id -> HistoricalClient
        self.metrics = metrics
        self._partial_children: dict[str, tuple] = {}
        self.view_lock = view_lock or threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="strata-scatter")
        # (datasource, segments, timeout_s) -> segment -> Used, the coordinator's word (None: not asked).
        self.used_states = used_states
        self.watchdog = CallWatchdog()

    def result_schema(self, query: Query | dict) -> pa.Schema:
        """The schema ``execute`` returns for ``query``, from validation alone: the engine
        finalizes an empty partial exactly as it finalizes real ones."""
        if isinstance(query, dict):
            query = query_from_json(query)
        return self._empty_result(query).schema

    def _empty_result(self, query: Query) -> pa.Table:
        if query.table is None:
            return engine.execute_on_table(query, self._empty_result(query.datasource)).table
        schema = self._schema(query.table, query.context)
        engine.validate(query, schema)
        return engine.finalize(query, Partial(pa.table({}), RunStats()), schema)

    def _schema(self, datasource: str, context=None, schemas=None) -> dict:
        if schemas is not None:
            planned = schemas.get(datasource)
            if planned is not None:  # what the statement was planned with (SecureSqlCatalog.schemas)
                return planned
        # The schema the query was planned with: a statement's SET columnTypeMergePolicy reaches the
        # native queries' context, and historicals cast every segment's values to the types sent
        # here; under the broker's default policy instead, a column typed BIGINT when planned would
        # be read as VARCHAR (other rows, other nulls than the plan's).
        policy = (context or {}).get("columnTypeMergePolicy")
        if policy is not None:
            check_policy(policy)
        if self.schema_for is not None:
            schema = self.schema_for(datasource, policy)
        else:
            with self.view_lock:
                schema = (dict(self.view.merged(datasource, policy).schema)
                          if datasource in self.view.datasources() else None)
        if schema is None:
            with self.view_lock:
                served = ", ".join(self.view.datasources()) or "none"
            raise ValidationError(f"unknown datasource '{datasource}'; served: {served}")
        return schema

    def execute(self, query: Query | dict, timeout_s: float, query_id: str | None = None,
                is_active=lambda: True, schemas=None, tracked=None, origin=None) -> engine.Result:
        """``schemas``: datasource -> the schema a SQL statement was planned with, used instead of
        the current one so the rows match the schema its plan announced. ``tracked``: the query
        log's running query this native query belongs to (its id, and what it read is reported
        to it through ``watch``), or None. ``origin``: the query log's (``LoggedNative`` records
        it; a front door without the log passes it here)."""
        if isinstance(query, dict):
            query = query_from_json(query)
        deadline = time.monotonic() + timeout_s
        if query.table is None:
            inner = self.execute(query.datasource, max(deadline - time.monotonic(), 0.001), query_id, is_active,
                                 schemas, tracked)
            return engine.execute_on_table(query, inner.table, inner.stats)
        query = topn_threshold.without_directive(query)  # rounds are the broker's to choose, never a client's
        schema = self._schema(query.table, query.context, schemas)
        engine.validate(query, schema)
        query_id = query_id or (tracked.query_id if tracked is not None else None) or uuid.uuid4().hex
        budget = MemoryBudget.for_query(query.context, self.max_query_bytes, query_id, "broker")
        partial = self._gather(query, schema, deadline, query_id, is_active, budget, tracked)
        return engine.Result(engine.finalize(query, partial, schema), partial.stats)

    @staticmethod
    def streams(query: Query) -> bool:
        """Whether ``execute_stream`` takes the query: a scan of a datasource."""
        return isinstance(query, ScanQuery) and query.table is not None

    def execute_stream(self, query: Query | dict, timeout_s: float, emit, query_id: str | None = None,
                       is_active=lambda: True, schemas=None, tracked=None, origin=None) -> RunStats:
        """A scan's rows handed to ``emit`` (finalized tables, a batch at a time) as the historicals
        send them, never all held here: every historical is asked at once; in no order they are
        read in turn, the others waiting meanwhile under gRPC's flow control; ordered by time, their
        sorted partials are merged a piece of each at a time (``scan_engine.take_in_time_order``).
        ``emit`` blocking holds them all back. A historical that fails before any of its rows were
        used is replaced by another replica; after that the query fails (rows already sent cannot
        be taken back)."""
        if isinstance(query, dict):
            query = query_from_json(query)
        if not self.streams(query):
            raise ValueError("execute_stream runs scans of a datasource only")
        deadline = time.monotonic() + timeout_s
        schema = self._schema(query.table, query.context, schemas)
        engine.validate(query, schema)
        query_id = query_id or (tracked.query_id if tracked is not None else None) or uuid.uuid4().hex
        plan = self._plan(query, list(query.intervals))
        if self.watch is not None and tracked is not None:
            self.watch.native_started(tracked)
        finalize = scan_engine.StreamFinalizer(query, engine.query_schema(query, schema))
        query_json = query.json_text()
        calls: list = []
        exclude: dict[SegmentId, set[str]] = {}
        stats = RunStats()

        def start(server: str, segments: list[SegmentId]) -> None:
            client = self.historical_client(server)
            call = client.run_query(query_json, query_id, segments, schema,
                                    timeout_s=max(deadline - time.monotonic(), 0.001))
            calls.append((server, segments, client, call))

        try:
            for server, segments in plan.by_server.items():
                start(server, segments)
            if query.order != "none":
                stats = self._merge_in_time_order(query, query_id, calls, start, exclude, finalize, emit, deadline,
                                                  is_active)
            read = 0 if query.order == "none" else len(calls)
            while read < len(calls) and not finalize.done:
                server, segments, client, call = calls[read]
                read += 1
                used = 0
                token = self.watchdog.watch(call, is_active)  # KILL or a client gone cancels a wait
                try:
                    for item in client.read_batches(call):
                        if isinstance(item, RunStats):
                            stats = stats + item
                            break
                        if time.monotonic() > deadline:
                            raise QueryTimeoutError(f"query {query_id} timed out")
                        used += item.num_rows
                        table = finalize(pa.Table.from_batches([item]))
                        if table is not None:
                            emit(table)
                        if finalize.done:
                            break
                except (grpc.RpcError, ConnectionError, OSError) as exc:
                    self._stream_failed(query, query_id, server, segments, used, exc, exclude, is_active, start,
                                        deadline)
                finally:
                    self.watchdog.unwatch(token)
        finally:
            for *_, call in calls:
                call.cancel()  # the rest of a limit, or an error: nothing more is read
        if self.watch is not None and tracked is not None:
            self.watch.native_finished(tracked, query, stats, [s for segs in plan.by_server.values() for s in segs])
        return stats

    def _stream_failed(self, query, query_id: str, server: str, segments, used: int, exc: Exception, exclude: dict,
                       is_active, start, deadline: float) -> None:
        """A historical's stream broke: ask other replicas when none of its rows were used yet."""
        if isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.CANCELLED and not is_active():
            raise Cancelled(f"query {query_id} was cancelled") from None
        if used:
            detail = f"{exc.code().name}: {exc.details()}" if isinstance(exc, grpc.RpcError) else str(exc)
            raise StrataError(f"historical {server} failed after {used:,} of its rows were sent ({detail}); "
                              f"run the query again") from None
        for other, segs in self._replan(query, query_id, server, segments, exc, exclude, deadline).items():
            start(other, segs)

    def _merge_in_time_order(self, query, query_id: str, calls: list, start, exclude: dict, finalize, emit,
                             deadline: float, is_active) -> RunStats:
        """An ordered scan: the historicals' time-sorted partials merged, holding one piece of each."""
        stats = RunStats()
        streams: list[list] = []  # [server, segments, batches, current rows or None, rows used, watch token]
        opened = 0
        try:
            while not finalize.done:
                while opened < len(calls):  # every call (retries included) becomes a stream
                    server, segments, client, call = calls[opened]
                    opened += 1
                    streams.append([server, segments, client.read_batches(call), None, 0,
                                    self.watchdog.watch(call, is_active)])
                for stream in list(streams):
                    try:
                        while stream[3] is None or stream[3].num_rows == 0:
                            item = next(stream[2])
                            if isinstance(item, RunStats):
                                stats = stats + item
                                streams.remove(stream)
                                self.watchdog.unwatch(stream[5])
                                break
                            stream[3] = pa.Table.from_batches([item])
                    except (grpc.RpcError, ConnectionError, OSError) as exc:
                        streams.remove(stream)
                        self.watchdog.unwatch(stream[5])
                        self._stream_failed(query, query_id, stream[0], stream[1], stream[4], exc, exclude, is_active,
                                            start, deadline)
                if opened < len(calls):
                    continue  # replicas asked instead of a failed stream: read them too before merging
                if not streams:
                    break
                if time.monotonic() > deadline:
                    raise QueryTimeoutError(f"query {query_id} timed out")
                ready, rest = scan_engine.take_in_time_order([s[3] for s in streams], query.order == "descending")
                for stream, left in zip(streams, rest):
                    stream[4] += stream[3].num_rows - left.num_rows
                    stream[3] = left
                table = finalize(ready)
                if table is not None:
                    emit(table)
        finally:
            for stream in streams:
                self.watchdog.unwatch(stream[5])
        return stats

    # The query registry (services/broker/query_registry.py): told when a native query is sent
    # and what it cost; None when nothing watches.
    watch = None

    # Which table each segment reads and how many rows (services/broker/table_choice.py); None:
    # unknown, every query is spread over the replicas.
    tables = None

    def _gather(self, query: Query, schema, deadline: float, query_id: str, is_active,
                budget: MemoryBudget = UNLIMITED, tracked=None) -> Partial:
        intervals = list(query.intervals)
        spread = True
        if self.tables is not None and self.gather_rows > 0:
            with self.view_lock:
                segments = self.view.visible(query.table, intervals)
            choice = self.tables.of(query, query.table, segments)  # outside the lock: may read manifests
            spread = choice.rows is None or choice.rows > self.gather_rows
        plan = self._plan(query, intervals, spread)
        coverage = plan.coverage
        if self.watch is not None and tracked is not None:
            self.watch.native_started(tracked)
        merged = None
        if len(plan.by_server) > 1 and topn_threshold.eligible(query):
            merged = self._gather_topn(query, schema, plan.by_server, deadline, query_id, is_active)
        if merged is None:
            units = self._scatter(query, query.json_text(), schema, plan.by_server, deadline, query_id,
                                  is_active, budget)
            partials = [p for _, _, p in units]
            merged = engine.merge(query, partials, budget) if partials else Partial(pa.table({}), RunStats())
        merged.coverage = coverage
        if self.watch is not None and tracked is not None:
            read = [s for segs in plan.by_server.values() for s in segs]
            self.watch.native_finished(tracked, query, merged.stats, read)
        return merged

    def _gather_topn(self, query, schema, by_server: dict, deadline: float, query_id: str, is_active) -> Partial | None:
        """The exact topN in TPUT's three rounds; None: the bounds do not hold (or a round failed),
        ship everything instead. Historicals with few groups send them all in round 1 (marked
        whole) and are not asked again; when all did, round 1 is the answer."""
        doc = query.to_json()
        units = self._scatter(query, topn_threshold.with_directive(
            doc, {"phase": 1, "k": query.threshold, "whole": topn_threshold.ONE_ROUND_GROUPS}), schema,
            by_server, deadline, query_id, is_active)
        stats = RunStats()
        for _, _, p in units:
            stats = stats + p.stats  # later rounds re-send the same stats: the scan happened once

        def ask(directives: list[tuple[int, dict]]) -> list[pa.Table]:
            return self._ask_all(query, [(units[i][0], units[i][1], topn_threshold.with_directive(doc, d))
                                         for i, d in directives], schema, deadline, query_id, is_active)

        try:
            exact = topn_threshold.exact_parts(query, [p.table for _, _, p in units], ask)
        except (grpc.RpcError, ConnectionError, OSError, TypeError, ValueError):
            # A replica failed between rounds (or keys that JSON cannot carry): the plain path
            # has the retries.
            return None
        if exact is None:
            return None
        merged = engine.merge(query, [Partial(t) for t in exact]) if exact else Partial(pa.table({}), RunStats())
        merged.stats = stats
        return merged

    def _ask_all(self, query, asks: list[tuple[str, list[SegmentId], str]], schema, deadline: float, query_id: str,
                 is_active) -> list[pa.Table]:
        """One round: each (server, segments, query JSON) asked once, no retries; the tables in order.
        The calls are started at once and read on this thread (no pool hand-offs); the watchdog
        cancels them when the query stops being active."""
        started = []
        try:
            for server, segments, query_json in asks:
                client = self.historical_client(server)
                call = client.ask(query_json, query_id, segments, schema,
                                  timeout_s=max(deadline - time.monotonic(), 0.001))
                started.append((client, call, self.watchdog.watch(call, is_active)))
            out = []
            for client, call, _ in started:
                partial = call.read()
                self._shipped(query, partial)
                out.append(partial.table)
            return out
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise QueryTimeoutError(f"query {query_id} timed out") from None
            if exc.code() == grpc.StatusCode.CANCELLED and not is_active():
                raise Cancelled(f"query {query_id} was cancelled") from None
            raise
        finally:
            for _, call, token in started:
                self.watchdog.unwatch(token)
                call.cancel()

    def _shipped(self, query, partial: Partial, server: str = "", budget: MemoryBudget = UNLIMITED) -> None:
        """What a historical sent: the figure TPUT makes smaller; held until the merge, so it counts
        against the query's memory limit here (each historical bounds its own partial by its limit,
        so the broker holds at most one over-limit partial before refusing)."""
        budget.charge(table_bytes(partial.table), f"the partial of {partial.table.num_rows:,} rows from historical "
                                                  f"{server}")
        children = self._partial_children.get(query.query_type)
        if children is None:
            rows = getattr(self.metrics, "partial_rows", None)
            if rows is None:
                return
            # Label children kept per query type (a handful): ``labels()`` validates and locks each time.
            children = (rows.labels(query.query_type), self.metrics.partial_bytes.labels(query.query_type))
            self._partial_children[query.query_type] = children
        children[0].inc(partial.table.num_rows)
        children[1].inc(partial.table.nbytes)

    def _scatter(self, query: Query, query_json: str, schema, by_server: dict, deadline: float, query_id: str,
                 is_active, budget: MemoryBudget = UNLIMITED) -> list[tuple[str, list[SegmentId], Partial]]:
        """Every segment of the plan answered once: (server, its segments, its partial), with
        failed replicas' segments re-planned onto others."""
        exclude: dict[SegmentId, set[str]] = {}
        units: list[tuple[str, list[SegmentId], Partial]] = []
        pending: dict[Future, tuple[str, list[SegmentId], object]] = {}

        def submit(server: str, segments: list[SegmentId]) -> None:
            holder: dict = {}
            fut = self.pool.submit(self._call, server, (query_json, query_id, segments, schema), deadline, holder)
            pending[fut] = (server, segments, holder)

        # Every historical's call is started here, then read here in turn (the calls run at once:
        # starting one only sends its request). A pool hand-off per historical is a thread switch,
        # which on a busy machine is most of a small query's time; the watchdog stands in for the
        # liveness checks of the waiting loop below. Failed historicals' segments are re-planned
        # and asked again through that loop.
        retries: dict[str, list[SegmentId]] = {}
        started = []
        begun = time.monotonic()
        try:
            for server, segments in by_server.items():
                try:
                    client = self.historical_client(server)
                    call = client.ask(query_json, query_id, segments, schema,
                                      timeout_s=max(deadline - time.monotonic(), 0.001))
                except (grpc.RpcError, ConnectionError, OSError) as exc:
                    for other, segs in self._replan(query, query_id, server, segments, exc, exclude, deadline).items():
                        retries.setdefault(other, []).extend(segs)
                    continue
                started.append((server, segments, client, call, self.watchdog.watch(call, is_active)))
            while started:
                server, segments, client, call, token = started[0]
                try:
                    partial = call.read()
                    self._shipped(query, partial, server, budget)
                    units.append((server, segments, partial))
                except grpc.RpcError as exc:
                    if exc.code() == grpc.StatusCode.CANCELLED and not is_active():
                        raise Cancelled(f"query {query_id} was cancelled") from None
                    for other, segs in self._replan(query, query_id, server, segments, exc, exclude, deadline).items():
                        retries.setdefault(other, []).extend(segs)
                except (ConnectionError, OSError) as exc:
                    for other, segs in self._replan(query, query_id, server, segments, exc, exclude, deadline).items():
                        retries.setdefault(other, []).extend(segs)
                finally:
                    self.watchdog.unwatch(token)
                started.pop(0)
        finally:
            for *_, call, token in started:  # an error: what was not read is not wanted
                self.watchdog.unwatch(token)
                call.cancel()
        # As the waiting loop does: a query done within 5 ms never pays for the liveness check
        # (about 0.15 ms), a longer one is asked once here (and by the watchdog every 0.25 s
        # while blocked in a read).
        if time.monotonic() - begun > 0.005 and not is_active():
            raise Cancelled(f"query {query_id} was cancelled")
        by_server = retries
        for server, segments in by_server.items():
            submit(server, segments)
        poll = 0.005
        try:
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise QueryTimeoutError(f"query {query_id} timed out")
                done, _ = wait(list(pending), timeout=min(remaining, poll), return_when=FIRST_COMPLETED)
                # Liveness is asked only while waiting: a query done within 5 ms never pays for
                # the check (Flight's is_cancelled costs about 0.15 ms), a longer one is asked
                # at 5 ms and then every 0.25 s.
                if not done and not is_active():
                    raise Cancelled(f"query {query_id} was cancelled")
                if not done:
                    poll = 0.25
                for fut in done:
                    server, segments, _holder = pending.pop(fut)
                    try:
                        partial = fut.result()
                        self._shipped(query, partial, server, budget)
                        units.append((server, segments, partial))
                        continue
                    except (grpc.RpcError, ConnectionError, OSError) as exc:
                        retry = self._replan(query, query_id, server, segments, exc, exclude, deadline)
                    for other, segs in retry.items():
                        submit(other, segs)
        except BaseException:
            for _server, _segs, holder in pending.values():
                call = holder.get("call")
                if call is not None:
                    call.cancel()
            raise
        return units

    def _plan(self, query: Query, intervals: list, spread: bool = True):
        """The query's plan, keeping it off partial copies (a partial load rule's projections only)
        that cannot answer it; a segment with no other copy fails the query with the reason."""
        tiers = context_tiers(query.context)
        with self.view_lock:
            copies = self.view.partial_copies(self.view.visible(query.table, intervals)) \
                if self.view.partial else {}
        unfit = self._unfit_partials(query, copies)
        with self.view_lock:
            plan = self.view.plan(query.table, intervals, {s: set(v) for s, v in unfit.items()} or None,
                                  spread=spread, tiers=tiers)
        if plan.unavailable:
            raise self._unavailable(plan.unavailable, unfit)
        return plan

    def _unfit_partials(self, query: Query, copies: dict) -> dict[SegmentId, dict[str, tuple[str, str]]]:
        """segment -> server -> (why its partial copy cannot answer ``query``, the rule's type)."""
        unfit: dict[SegmentId, dict[str, tuple[str, str]]] = {}
        for sid, servers in copies.items():
            for server, (names, rule) in servers.items():
                reason = self.tables.partial_refusal(query, sid, names) if self.tables is not None else \
                    f"segment {sid} is loaded only as its projections ({', '.join(names)}) by a partial load rule"
                if reason is not None:
                    unfit.setdefault(sid, {})[server] = (reason, rule)
        return unfit

    @staticmethod
    def _unavailable(segments: list[SegmentId], unfit: dict) -> StrataError:
        partial = [sid for sid in segments if sid in unfit]
        if not partial:
            return UnsupportedError(f"segments not available on any historical: {', '.join(map(str, segments))}")
        sid = partial[0]
        reason, rule = next(iter(unfit[sid].values()))
        more = f" ({len(partial) - 1} more segments alike)" if len(partial) > 1 else ""
        return ValidationError(f"{reason}{more}. Its copies come from the rule {rule} on {', '.join(sorted(unfit[sid]))} "
                               f"and no historical holds the whole segment: query only what those projections hold, "
                               f"or load whole segments of this interval with a load rule without a matcher")

    def _replan(self, query: Query, query_id: str, server: str, segments: list[SegmentId], exc: Exception,
                exclude: dict, deadline: float) -> dict:
        """After ``server`` failed on ``segments``: where to ask again. The segments it failed on go
        to other replicas; those it does serve (a NOT_FOUND names the others) to any. A segment no
        replica is left for is decided by ``missing_segment.next_step``: left out when it is no
        longer meant to be served, else the query fails. ``exclude``: segment -> replicas that
        failed on it in this query."""
        failed = None
        if isinstance(exc, grpc.RpcError):
            code = exc.code()
            last_failure = f"{code.name}: {exc.details()}"
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise QueryTimeoutError(f"query {query_id} timed out") from None
            # The historical says whose error it is: the user's is the same on every replica,
            # so it is reported at once and never retried.
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise ValidationError(exc.details()) from None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                raise UnsupportedError(exc.details()) from None
            if code not in _RETRYABLE:
                raise StrataError(f"historical {server} failed: {code.name}: {exc.details()}",
                                  kind=kind_of_code(code)) from None
            cause = _CAUSES.get(code, Cause.FAILED)
            if code == grpc.StatusCode.NOT_FOUND:
                failed = missing_segments(exc, segments)
        else:
            code = None
            last_failure = str(exc)  # the stream broke mid-way: as retryable as UNAVAILABLE
            cause = Cause.UNREACHABLE
        self.metrics.replica_retries.inc()
        failed = failed or set(segments)
        for sid in failed:
            exclude.setdefault(sid, set()).add(server)
        kind = kind_of_code(code) if cause is Cause.FAILED else ErrorKind.UNAVAILABLE
        wait_until = min(deadline, time.monotonic() + VIEW_CATCH_UP_S)
        used: dict[SegmentId, Used] = {}
        while True:
            with self.view_lock:
                copies = self.view.partial_copies(segments) if self.view.partial else {}
            unfit = self._unfit_partials(query, copies)  # partial copies that cannot answer stay out too
            avoid = {sid: exclude.get(sid, set()) | set(unfit.get(sid, ())) for sid in set(exclude) | set(unfit)}
            steps: dict[SegmentId, object] = {}
            with self.view_lock:
                for sid in sorted(failed):
                    in_view = InView.GONE if sid not in self.view.descriptors else InView.VISIBLE \
                        if sid in self.view.visible(sid.datasource, [sid.interval]) else InView.OVERSHADOWED
                    steps[sid] = next_step(MissingSegment(
                        sid, cause, server, last_failure, frozenset(exclude.get(sid, ())),
                        frozenset(self.view.replicas.get(sid, set()) - avoid.get(sid, set())), in_view, used.get(sid),
                        time.monotonic() < wait_until, kind))
                ask = [sid for sid, step in steps.items() if isinstance(step, AskCoordinator)]
                waiting = {sid: (frozenset(self.view.replicas.get(sid, ())), sid in self.view.descriptors)
                           for sid, step in steps.items() if isinstance(step, WaitForView)}
                fails = [step for step in steps.values() if isinstance(step, Fail)]
                if not ask and not waiting and not fails:
                    keep = set(segments) - {sid for sid, step in steps.items() if isinstance(step, LeaveOut)}
                    retry = self.view.plan(query.table, list(query.intervals), avoid, keep,
                                           tiers=context_tiers(query.context))
                    break
            if fails:
                more = f" ({len(fails) - 1} more segments alike)" if len(fails) > 1 else ""
                raise StrataError(fails[0].message + more, kind=fails[0].kind)
            if ask:
                used.update(self._used_states(query.table, ask, deadline))
            elif waiting:
                self._wait_for_view(waiting, wait_until)
        for sid, step in steps.items():
            if isinstance(step, LeaveOut):
                self.metrics.segments_left_out.labels(step.reason).inc()
                log.info("query %s: answered without %s (%s)", query_id, sid, step.detail)
        if retry.unavailable:  # the view changed between the decision and the plan (it cannot: one lock)
            raise StrataError(f"no replica left for {', '.join(map(str, retry.unavailable))}; the last one, on "
                              f"{server}, failed with {last_failure}", kind=kind)
        return retry.by_server

    def _used_states(self, datasource: str, segments: list[SegmentId], deadline: float) -> dict[SegmentId, Used]:
        """The coordinator's word on ``segments``: UNKNOWN when it cannot be asked in time."""
        timeout_s = min(deadline - time.monotonic(), COORDINATOR_ASK_S)
        if self.used_states is None or timeout_s <= 0:
            return {sid: Used.UNKNOWN for sid in segments}
        try:
            answered = self.used_states(datasource, segments, timeout_s)
        except Exception as exc:  # noqa: BLE001 - unreachable, no coordinator up, a timeout: unknown
            log.info("could not ask the coordinator about %d segments of %s: %s", len(segments), datasource, exc)
            answered = {}
        return {sid: answered.get(sid, Used.UNKNOWN) for sid in segments}  # every one answered: asked once

    def _wait_for_view(self, waiting: dict, until: float) -> None:
        """Until the replicas or presence of a ``waiting`` segment change in the view, or ``until``.
        The view changes on the discovery watch's thread; polled, as a change is due within
        milliseconds (the announcement was removed before the historical dropped its copy)."""
        while time.monotonic() < until:
            time.sleep(min(_VIEW_POLL_S, max(until - time.monotonic(), 0)))
            with self.view_lock:
                if any((frozenset(self.view.replicas.get(sid, ())), sid in self.view.descriptors) != seen
                       for sid, seen in waiting.items()):
                    return

    def _call(self, server: str, request: tuple, deadline: float, holder: dict) -> Partial:
        client = self.historical_client(server)
        call = client.ask(*request, timeout_s=max(deadline - time.monotonic(), 0.001))
        holder["call"] = call
        return call.read()

