"""BoundedCache: the one least-recently-used cache of the code base, bounded in entries and in bytes,
with an optional time to live.

Every kept thing that is not a segment part (those are in ``common/segment/part_cache.py``, the
node's memory budget) is kept here: prepared queries (``common/query/prepared_query.py``), Flight
tickets, prepared statements, tokens, parked partials, topN rounds. One class, so the bounds, the
expiry and the locking are written once; tests/unit/test_layering.py fails when a hand-rolled one
appears elsewhere.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

_MISSING = object()


class BoundedCache:
    def __init__(self, max_entries: int, max_bytes: int | None = None, ttl_s: float | None = None,
                 on_evict: Callable[[Hashable, Any], None] | None = None, *, sliding: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.sliding = sliding  # a use moves an entry's expiry out by ``ttl_s`` again
        self._clock = clock
        self._on_evict = on_evict  # called (outside the lock) for entries pushed out or expired
        self._entries: OrderedDict[Hashable, list] = OrderedDict()  # key -> [value, bytes, expires]
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, default=None, *, touch: bool = True):
        """The value kept for ``key`` (made most recent), else ``default``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return default
            now = None if entry[2] is None else self._clock()
            if now is not None and entry[2] <= now:
                self._pop_locked(key)
                gone = [(key, entry[0])]
            else:
                if touch:
                    self._entries.move_to_end(key)
                    if self.sliding and now is not None:
                        entry[2] = now + self.ttl_s
                return entry[0]
        self._evicted(gone)
        return default

    def __contains__(self, key: Hashable) -> bool:
        return self.get(key, _MISSING, touch=False) is not _MISSING

    def put(self, key: Hashable, value, nbytes: int = 0) -> bool:
        """Keep ``value`` (most recent), pushing out the least recent past the bounds; False when
        it alone passes the byte bound (then it is not kept)."""
        if self.max_bytes is not None and nbytes > self.max_bytes:
            self.pop(key)
            return False
        expires = None if self.ttl_s is None else self._clock() + self.ttl_s
        with self._lock:
            self._pop_locked(key)
            self._entries[key] = [value, nbytes, expires]
            self._bytes += nbytes
            gone = self._shrink_locked()
        self._evicted(gone)
        return True

    def resize(self, key: Hashable, nbytes: int) -> None:
        """``key``'s value now holds ``nbytes`` (it grew while kept)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            self._bytes += nbytes - entry[1]
            entry[1] = nbytes
            gone = self._shrink_locked()
        self._evicted(gone)

    def expire(self) -> int:
        """Drop the expired entries now (their ``on_evict`` called); how many."""
        with self._lock:
            gone = self._shrink_locked()
        self._evicted(gone)
        return len(gone)

    def pop(self, key: Hashable, default=None):
        with self._lock:
            entry = self._pop_locked(key)
        return default if entry is None else entry[0]

    def pop_where(self, keep: Callable[[Hashable, Any], bool]) -> list:
        """Drop the entries ``keep`` says no to; their values."""
        with self._lock:
            doomed = [k for k, e in self._entries.items() if not keep(k, e[0])]
            return [self._pop_locked(k)[0] for k in doomed]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def items(self) -> Iterator[tuple[Hashable, Any]]:
        """A snapshot of (key, value), least recent first (expired ones included until dropped)."""
        with self._lock:
            return iter([(k, e[0]) for k, e in self._entries.items()])

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def _pop_locked(self, key: Hashable):
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry[1]
        return entry

    def _shrink_locked(self) -> list:
        gone = []
        if self.ttl_s is not None:
            # Entries are in the order of their last put (or use, when sliding), so with one TTL
            # the expired ones are at the least recent end. (A use that only reorders may leave
            # an expired one behind a live one: it is dropped when found, never returned.)
            now = self._clock()
            while self._entries:
                key, entry = next(iter(self._entries.items()))
                if entry[2] > now:
                    break
                gone.append((key, self._pop_locked(key)[0]))
        while self._entries and (len(self._entries) > self.max_entries
                                 or (self.max_bytes is not None and self._bytes > self.max_bytes)):
            key, entry = self._entries.popitem(last=False)
            self._bytes -= entry[1]
            gone.append((key, entry[0]))
        return gone

    def _evicted(self, gone: list) -> None:
        if self._on_evict is not None:
            for key, value in gone:
                self._on_evict(key, value)


__all__ = ["BoundedCache"]
