"""PreparedQuery: what the runs of one query over one set of segments may reuse, and PreparedCache,
the node's one cache of them.

A dashboard, a cached SQL plan or a benchmark runs the same native query again and again over the
same segments. Parsing it, validating it, choosing each segment's table (matching every projection
against it), selecting projection rows and keying a batch of projection sources gave the same
answer every time and was most of a small query's time, so it is prepared once and kept, under a
typed key that names everything the preparation depends on:

- ``fingerprint``: the query's JSON text (keys sorted; it tells 1 from 1.0 and true);
- ``types``: the declared (column, type) pairs the query runs under (a historical's are the
  broker's; a declared type that differs from the stored one changes which rows a filter selects
  and how keys group, so another declaration is another preparation);
- ``segments``: each segment's generation (``Segment.generation``, new at every open): the version
  of the segment set. A segment loaded again is a new generation and prepares again.

What a run reuses lives on its PreparedQuery and nowhere else (``kept``/``keep``: per-source
selections, coverage, batch plans); no aggregate's result is kept (a run always reads the stored
intermediates and combines them). The cache is bounded in entries and bytes, its bytes are
charged to the node's memory budget (the decoded-part cache's, ``part_cache.PROCESS_CACHE``), and
a prepared query is dropped as soon as one of its segments is retired (``SegmentLease``), so it
never outlives its segments' files. The cache refers to a prepared query only weakly; the leases of
its segments hold it (``SegmentLease.hold``). So the cache never keeps a segment alive: a caller of
``execute`` that drops its segments without ``close()`` drops what was prepared over them, and
their files close when the collector frees them, not when later queries push the entries out.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from common.bounded_cache import BoundedCache
from common.segment.part_cache import PROCESS_CACHE, DecodedPartCache

# What a prepared query's fixed parts are taken to hold (objects, the parsed query, the sources);
# the arrays it keeps later (selections, plans) are counted exactly.
BASE_BYTES = 4096
# A single kept array larger than this is not kept: past it the query's own work dwarfs the
# preparation, and one query must not push out the others.
MAX_KEPT_BYTES = 16 << 20


@dataclass(frozen=True)
class PreparedKey:
    fingerprint: str
    types: tuple
    segments: tuple[int, ...]


class PreparedQuery:
    """One query prepared over one set of segments: the parsed query, the schema it runs under,
    the segments it reads, each one's row source (its table: base rows or a projection), and what
    its runs keep for the next ones."""

    def __init__(self, key: PreparedKey | None, query, schema: dict, segments: Sequence = (),
                 sources: Sequence = ()) -> None:
        self.key = key
        self.query = query
        self.schema = schema
        self.segments = tuple(segments)  # the segments read, in run order
        self.segment_ids = tuple(s.id for s in self.segments)
        self.sources = list(sources)  # one per segment
        self.nbytes = BASE_BYTES
        self._kept: dict[tuple, Any] = {}
        self._sizes: dict[tuple, int] = {}
        self._lock = threading.Lock()
        self._grew: Callable[[PreparedQuery], None] | None = None  # the cache's, to charge growth

    def kept(self, kind: str, owner: Hashable):
        """What ``keep`` kept for ``kind`` of ``owner`` (a source, a tuple of sources), or None."""
        return self._kept.get((kind, owner))

    def keep(self, kind: str, owner: Hashable, value, nbytes: int = 0) -> None:
        """Keep ``value`` for the next runs; refused (silently) when it is too large to be worth it."""
        if self.key is None or nbytes > MAX_KEPT_BYTES:
            return  # not cached: nothing would find it again
        with self._lock:
            self.nbytes += nbytes - self._sizes.get((kind, owner), 0)
            self._kept[(kind, owner)] = value
            self._sizes[(kind, owner)] = nbytes
        if self._grew is not None and nbytes:
            self._grew(self)

    def reuse(self, kind: str, owner: Hashable, make: Callable[[], Any], nbytes: int = 0):
        """``kept(kind, owner)``, else ``make()``'s value, kept."""
        hit = self.kept(kind, owner)
        if hit is None:
            hit = make()
            self.keep(kind, owner, hit, nbytes)
        return hit


class PreparedCache:
    def __init__(self, max_entries: int = 512, max_bytes: int = 64 << 20,
                 memory: DecodedPartCache | None = PROCESS_CACHE) -> None:
        # key -> weak reference to the PreparedQuery (its segments' leases hold it)
        self._entries = BoundedCache(max_entries, max_bytes, on_evict=self._forget)
        self._memory = memory  # the node's budget the cache's bytes are charged to
        self._charged = 0
        self._by_segment: dict[int, set] = {}  # segment generation -> keys prepared over it
        # Keys whose prepared query was collected (its segments were dropped). The collector
        # reports them at any allocation, on any thread, maybe while this cache holds a lock, so
        # they are only queued here (an atomic append) and dropped by the next call.
        self._dead: deque = deque()
        self._lock = threading.Lock()

    def prepared(self, key: PreparedKey, segments: Sequence, make: Callable[[], PreparedQuery]) -> PreparedQuery:
        """The kept preparation for ``key``, else ``make()``'s (kept; a bad query raises from
        ``make`` every time). ``segments``: the segments ``key.segments`` names, leased by the
        caller."""
        self._purge()
        ref = self._entries.get(key)
        hit = ref() if ref is not None else None
        if hit is not None:
            return hit
        made = make()
        made.key = key
        with self._lock:
            for segment in segments:
                keys = self._by_segment.get(segment.generation)
                if keys is None:
                    if not segment.lease.on_retire(lambda g=segment.generation: self._retired(g)):
                        self._release(key, made)
                        return made  # retired meanwhile: not kept
                    keys = self._by_segment[segment.generation] = set()
                keys.add(key)
                if not segment.lease.hold(key, made):
                    self._release(key, made)
                    return made
        made._grew = self._grow
        dead = self._dead
        self._entries.put(key, weakref.ref(made, lambda _, k=key: dead.append(k)), made.nbytes)
        self._charge()
        return made

    def _grow(self, prepared: PreparedQuery) -> None:
        self._entries.resize(prepared.key, prepared.nbytes)
        self._charge()

    @staticmethod
    def _release(key: PreparedKey, prepared: PreparedQuery | None) -> None:
        """The segments' leases stop holding ``prepared``."""
        if prepared is not None:
            for segment in prepared.segments:
                segment.lease.unhold(key)

    def _drop(self, key: PreparedKey) -> None:
        ref = self._entries.pop(key)
        if ref is not None:
            self._forget(key, ref)

    def _retired(self, generation: int) -> None:
        with self._lock:
            keys = self._by_segment.pop(generation, ())
        for key in keys:
            self._drop(key)  # and the other segments' leases let it go
        self._charge()

    def _purge(self) -> None:
        """Drop the entries whose prepared query was collected."""
        if not self._dead:
            return
        while self._dead:
            key = self._dead.popleft()
            ref = self._entries.get(key, touch=False)
            if ref is not None and ref() is None:
                self._entries.pop(key)
                self._forget(key, ref)
        self._charge()

    def _forget(self, key: PreparedKey, ref) -> None:
        """``key`` left the cache (pushed out, retired, collected): no segment holds it for it."""
        prepared = ref() if ref is not None else None
        if prepared is not None and prepared.key == key:
            self._release(key, prepared)
        with self._lock:
            for generation in key.segments:
                keys = self._by_segment.get(generation)
                if keys is not None:
                    keys.discard(key)

    def _charge(self) -> None:
        if self._memory is None:
            return
        with self._lock:
            delta = self._entries.nbytes - self._charged
            self._charged += delta
        if delta:
            self._memory.charge(delta)

    def items(self) -> list[tuple[PreparedKey, PreparedQuery]]:
        self._purge()
        return [(key, prepared) for key, ref in self._entries.items() if (prepared := ref()) is not None]

    def clear(self) -> None:
        for key, ref in self._entries.items():
            self._release(key, ref())
        self._entries.clear()
        with self._lock:
            self._by_segment.clear()
        self._dead.clear()
        self._charge()

    def __len__(self) -> int:
        self._purge()
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        self._purge()
        return self._entries.nbytes


__all__ = ["PreparedCache", "PreparedKey", "PreparedQuery"]
