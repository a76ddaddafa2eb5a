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
never outlives its segments' files. (It does keep the segment objects it was prepared over until
then or until it is pushed out: a caller of ``execute`` closes the segments it is done with.)
"""

from __future__ import annotations

import threading
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
        self._entries = BoundedCache(max_entries, max_bytes, on_evict=self._forget)
        self._memory = memory  # the node's budget the cache's bytes are charged to
        self._charged = 0
        self._by_segment: dict[int, set] = {}  # segment generation -> keys prepared over it
        self._lock = threading.Lock()

    def prepared(self, key: PreparedKey, segments: Sequence, make: Callable[[], PreparedQuery]) -> PreparedQuery:
        """The kept preparation for ``key``, else ``make()``'s (kept; a bad query raises from
        ``make`` every time). ``segments``: the segments ``key.segments`` names, leased by the
        caller."""
        hit = self._entries.get(key)
        if hit is not None:
            return hit
        made = make()
        made.key = key
        with self._lock:
            for segment in segments:
                keys = self._by_segment.get(segment.generation)
                if keys is None:
                    if not segment.lease.on_retire(lambda g=segment.generation: self._retired(g)):
                        return made  # retired meanwhile: not kept
                    keys = self._by_segment[segment.generation] = set()
                keys.add(key)
        made._grew = self._grow
        self._entries.put(key, made, made.nbytes)
        self._charge()
        return made

    def _grow(self, prepared: PreparedQuery) -> None:
        self._entries.resize(prepared.key, prepared.nbytes)
        self._charge()

    def _retired(self, generation: int) -> None:
        with self._lock:
            keys = self._by_segment.pop(generation, ())
        for key in keys:
            self._entries.pop(key)
        self._charge()

    def _forget(self, key: PreparedKey, prepared: PreparedQuery) -> None:
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
        return list(self._entries.items())

    def clear(self) -> None:
        self._entries.clear()
        with self._lock:
            self._by_segment.clear()
        self._charge()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._entries.nbytes


__all__ = ["PreparedCache", "PreparedKey", "PreparedQuery"]
