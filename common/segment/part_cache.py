"""DecodedPartCache: the process's bounded cache of segment parts read into memory, LRU by bytes.

Parts are read from their files (never memory-mapped, see container.py) and compressed ones
decoded, so repeated queries would read and decompress them again and again; this cache keeps the most recently used decoded parts up to a byte budget (a historical
sets it with ``[historical] decompressed_cache_bytes``). Column readers never hold a decoded
part themselves: they ask their container each time, so the budget really bounds the memory that
decompressed parts pin between queries. A part larger than the whole budget is decoded for the
caller and not kept. Concurrent misses on one key decode once; the others wait for that result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    evictions: int
    bytes: int
    entries: int
    max_bytes: int


class _Loading:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class DecodedPartCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._check(max_bytes)
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._loading: dict[Hashable, _Loading] = {}
        self._bytes = 0
        self._charged = 0  # bytes other caches of this node hold against the same budget (``charge``)
        self._hits = self._misses = self._evictions = 0
        self._lock = threading.Lock()

    @staticmethod
    def _check(max_bytes: int) -> None:
        if not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"decompressed_cache_bytes must be a non-negative integer, got {max_bytes!r}")

    def get(self, key: Hashable, load: Callable[[], Any], nbytes: int) -> Any:
        """The cached value of ``key``, else ``load()`` (which decodes ``nbytes`` bytes), kept if it fits."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return hit[0]
            self._misses += 1
            pending = self._loading.get(key)
            owner = pending is None
            if owner:
                pending = self._loading[key] = _Loading()
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.value
        try:
            value = load()
        except BaseException as exc:
            pending.error = exc
            raise
        else:
            pending.value = value
            with self._lock:
                if nbytes + self._charged <= self.max_bytes:
                    self._entries[key] = (value, nbytes)
                    self._bytes += nbytes
                    self._shrink()
            return value
        finally:
            with self._lock:
                self._loading.pop(key, None)
            pending.done.set()

    def peek(self, key: Hashable) -> Any:
        """The cached value of ``key`` (counted as a hit and made most recent), or None: for
        work worth doing only when something it derives from is already decoded."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return hit[0]

    def charge(self, nbytes: int) -> None:
        """Count ``nbytes`` more (or fewer, when negative) held elsewhere against this budget: the
        node's prepared queries (common/query/prepared_query.py) share it with decoded parts."""
        with self._lock:
            self._charged += nbytes
            self._shrink()

    def _shrink(self) -> None:
        while self._bytes + self._charged > self.max_bytes and self._entries:
            _, (_, size) = self._entries.popitem(last=False)
            self._bytes -= size
            self._evictions += 1

    def set_max_bytes(self, max_bytes: int) -> None:
        self._check(max_bytes)
        with self._lock:
            self.max_bytes = max_bytes
            self._shrink()

    def evict(self, owner: Hashable) -> None:
        """Drop every entry whose key starts with ``owner`` (a container closing)."""
        with self._lock:
            for key in [k for k in self._entries if isinstance(k, tuple) and k and k[0] == owner]:
                _, size = self._entries.pop(key)
                self._bytes -= size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, self._bytes, len(self._entries),
                              self.max_bytes)


# One per process: every open segment shares the budget.
PROCESS_CACHE = DecodedPartCache()


def configure(max_bytes: int) -> None:
    """Set the process cache's budget (a historical does this from its config)."""
    PROCESS_CACHE.set_max_bytes(max_bytes)


__all__ = ["CacheStats", "DEFAULT_MAX_BYTES", "DecodedPartCache", "PROCESS_CACHE", "configure"]
