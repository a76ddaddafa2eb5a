"""RoundCache: a historical's merged partials of a multi-round query, kept between its rounds.

The broker's exact topN (common/query/topn_threshold.py) asks each historical up to three times
about the same query and segments, for different rows of the same merged partial. Computing it
once and answering the later rounds from here keeps the rounds cheap. Entries are few (a round
follows the previous one within milliseconds) and expire quickly, so memory stays bounded.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict


class RoundCache:
    def __init__(self, max_entries: int = 8, ttl_s: float = 30.0) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._entries: OrderedDict = OrderedDict()  # key -> (expires at, partial)
        self._lock = threading.Lock()

    def get(self, key):
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] < now:
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key, partial) -> None:
        now = time.monotonic()
        with self._lock:
            self._entries[key] = (now + self.ttl_s, partial)
            self._entries.move_to_end(key)
            for stale in [k for k, (expires, _) in self._entries.items() if expires < now]:
                del self._entries[stale]
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)


__all__ = ["RoundCache"]
