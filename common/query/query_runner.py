"""QueryRunner: the one schedule of a query's per-segment work, used by ``execute`` (in-process) and
by the historical's servicer alike, and ``execute`` itself.

Given a ``PreparedQuery`` (its segments' row sources chosen), the runner decides where each
segment runs and how: little work in all (one segment, a few thousand projection rows, small
segments) runs on the caller's thread, as handing it to worker threads costs more than the work;
the projection rows of several segments run as one pass (``engine.run_together``); larger base
segments go to the pool to run in parallel. Every run holds a query slot when the runner has
slots (a historical bounds its concurrent scans that way, wherever they run), and checks the
deadline before it starts and while it waits for a slot. An exact topN's later rounds are
answered from the merged partial of its first (``rounds``), pruned per round. What it ran is
told to an observer (a historical's metrics).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from common.bounded_cache import BoundedCache
from common.query import engine, topn_threshold
from common.query.engine import Result
from common.query.memory_budget import UNLIMITED, MemoryBudget
from common.query.model import Query, query_from_json
from common.query.partial import Partial
from common.query.prepared_query import PreparedCache, PreparedKey, PreparedQuery
from common.segment.segment import Segment
from common.segment.segment_lease import leased

# Below this many rows to read in all (projection rows, small segments), segments run in the caller.
INLINE_ROWS = 200_000
# How often a run waiting for a query slot asks whether it is still wanted.
SLOT_POLL_S = 0.05


class RunObserver:
    """Told about every run a QueryRunner makes; this one ignores them (a historical counts them)."""

    def ran(self, prepared: PreparedQuery, positions: Sequence[int], partial: Partial, seconds: float) -> None:
        """``partial`` answers the sources at ``positions`` of ``prepared`` (one, or a batch run
        together), in ``seconds``."""


class Deadline:
    """No deadline: never expires. A historical's reads its call's (still active, time left)."""

    def check(self) -> None:
        """Raise TimeoutError when the query is no longer wanted."""

    def remaining(self) -> float | None:
        return None


NO_DEADLINE = Deadline()
_QUIET = RunObserver()


class QueryRunner:
    def __init__(self, pool: Executor | None = None, slots: int | None = None) -> None:
        self._pool = pool
        # Runs hold a slot, on the pool or on the caller's thread: the slots, not the pool, bound
        # how many segment scans run at once, so a one-segment query can run on the thread that
        # received it without lifting the bound.
        self.slots = threading.BoundedSemaphore(slots) if slots else None

    @property
    def pool(self) -> Executor:
        return self._pool or default_pool()

    def run(self, prepared: PreparedQuery, budget: MemoryBudget = UNLIMITED, deadline: Deadline = NO_DEADLINE,
            observer: RunObserver = _QUIET, rounds: BoundedCache | None = None, round_id: str = "") -> Partial:
        """The merged partial of ``prepared`` over its sources (its segments leased by the caller).
        ``rounds``: merged partials kept between the rounds of one exact topN (``round_id``: the
        query id its rounds share)."""
        query = prepared.query
        directive = query.context.get(topn_threshold.PHASE_KEY)
        if not (isinstance(directive, dict) and topn_threshold.eligible(query)):
            return self._merged(prepared, budget, deadline, observer)
        merged = round_key = None
        if rounds is not None:
            round_key = (round_id, prepared.reuse("round_base", None, lambda: _round_base(prepared)))
            merged = rounds.get(round_key)
        if merged is None:
            merged = self._merged(prepared, budget, deadline, observer)
            if round_key is not None:
                rounds.put(round_key, merged)
        return topn_threshold.prune(query, merged, directive)

    def _merged(self, prepared: PreparedQuery, budget: MemoryBudget, deadline: Deadline,
                observer: RunObserver) -> Partial:
        query, sources = prepared.query, prepared.sources
        partials: list[Partial] = []
        # Sources whose answer is their row count (a plain COUNT(*)) are answered together from
        # metadata, on this thread: no column read, no hand-off to the pool, one partial.
        counted = [i for i, src in enumerate(sources) if engine.counts_rows(query, src)]
        if counted:
            with self._slot(deadline):  # a run like any other: it holds a query slot
                t0 = time.perf_counter()
                partial = engine.row_counts(query, [sources[i] for i in counted], prepared)
            observer.ran(prepared, counted, partial, time.perf_counter() - t0)
            partials.append(partial)
        rest = set(range(len(sources))) - set(counted)
        total = sum(sources[i].num_rows for i in rest)
        pre_rows = sum(sources[i].num_rows for i in rest if sources[i].pre_aggregated)
        here = [i not in rest or len(rest) == 1 or total <= INLINE_ROWS
                or (src.pre_aggregated and pre_rows <= INLINE_ROWS) for i, src in enumerate(sources)]
        futures = []
        try:
            futures = [self.pool.submit(self._run, prepared, [i], budget, deadline, observer)
                       for i, h in enumerate(here) if not h]
            mine = [i for i, h in enumerate(here) if h and i in rest]
            for batch in engine.batches(query, [sources[i] for i in mine]):
                partials.extend(self._run(prepared, [mine[i] for i in batch], budget, deadline, observer))
            for fut in futures:
                remaining = deadline.remaining()
                partials.extend(fut.result(timeout=None if remaining is None else max(remaining, 0.001)))
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
        if len(partials) == 1 and len(sources) > 1:
            return partials[0]  # one pass over several segments' projection rows: merged already
        return engine.merge(query, partials, budget)

    def _run(self, prepared: PreparedQuery, positions: list[int], budget: MemoryBudget, deadline: Deadline,
             observer: RunObserver) -> list[Partial]:
        """The partials of the sources at ``positions``: one when they run together, else one each."""
        query, schema = prepared.query, prepared.schema
        sources = [prepared.sources[i] for i in positions]
        if len(positions) > 1:
            with self._slot(deadline):
                t0 = time.perf_counter()
                together = engine.run_together(query, sources, schema, budget, prepared)
            if together is not None:
                observer.ran(prepared, positions, together, time.perf_counter() - t0)
                return [together]
        out = []
        for i, src in zip(positions, sources):
            with self._slot(deadline):
                t0 = time.perf_counter()
                partial = engine.run(query, src, schema, budget, prepared)
            observer.ran(prepared, [i], partial, time.perf_counter() - t0)
            out.append(partial)
        return out

    @contextlib.contextmanager
    def _slot(self, deadline: Deadline):
        deadline.check()
        if self.slots is None:
            yield
            return
        while not self.slots.acquire(timeout=SLOT_POLL_S):
            deadline.check()
        try:
            yield
        finally:
            self.slots.release()


def _round_base(prepared: PreparedQuery) -> tuple:
    """The query without its topN round directive, and its segments: what one exact topN's rounds share."""
    return (json.dumps(topn_threshold.without_directive(prepared.query).to_json(), sort_keys=True, default=str),
            tuple(str(s) for s in prepared.segment_ids))


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
# The in-process preparations (a historical has its own, see services/historical/server.py).
PREPARED = PreparedCache()
_RUNNER = QueryRunner()


def default_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="strata-engine")
        return _POOL


def fingerprint(query: Query | dict) -> str | None:
    """The text that names a native query in a PreparedKey (None: not plain JSON, not kept)."""
    try:
        if isinstance(query, dict):
            return json.dumps(query, sort_keys=True, allow_nan=True)
        return "parsed:" + query.json_text()
    except (TypeError, ValueError):
        return None


def prepare(query: Query | dict, segments: Sequence[Segment], cache: PreparedCache = PREPARED) -> PreparedQuery:
    """``query`` prepared over ``segments`` (leased by the caller): kept in ``cache`` for the next
    run of the same text over the same segment objects; a bad query raises every time."""
    text = fingerprint(query)

    def make() -> PreparedQuery:
        return prepared_over(query if isinstance(query, Query) else query_from_json(query), segments)

    if text is None:
        return make()
    return cache.prepared(PreparedKey(text, (), tuple(s.generation for s in segments)), segments, make)


def prepared_over(query: Query, segments: Sequence[Segment]) -> PreparedQuery:
    """The schema of the query's datasource over ``segments`` (the query checked against it) and
    the row sources of the segments it reads."""
    table = query.table
    if table is None:
        return PreparedQuery(None, query, {})  # a subquery: prepared when its inner query runs
    chosen = [s for s in segments if s.id.datasource == table
              and any(iv.overlaps(s.interval) for iv in query.intervals)]
    schema = engine.union_schema(s for s in segments if s.id.datasource == table)
    engine.validate(query, schema)
    return PreparedQuery(None, query, schema, chosen, [engine.source_for(query, s) for s in chosen])


def execute(query: Query | dict, segments: Sequence[Segment], pool: Executor | None = None) -> Result:
    """Run a native query over segments in-process (what a one-node cluster does)."""
    with leased(segments):  # a segment closed meanwhile keeps its file open until this run ends
        prepared = prepare(query, segments)
        query = prepared.query
        if query.table is None:
            inner = execute(query.datasource, segments, pool)
            return engine.execute_on_table(query, inner.table, inner.stats)
        merged = (_RUNNER if pool is None else QueryRunner(pool)).run(prepared)
        return Result(engine.finalize(query, merged, prepared.schema), merged.stats)


__all__ = ["Deadline", "INLINE_ROWS", "NO_DEADLINE", "PREPARED", "QueryRunner", "RunObserver", "default_pool",
           "execute", "fingerprint", "prepare", "prepared_over"]
