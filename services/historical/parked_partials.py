"""ParkedPartials: merged partials too large for RunQueryOnce's one message, kept until the broker
fetches them with RunQuery (the same request), which streams them in chunks.

The broker asks right after the reply, so entries live milliseconds; the few kept expire after
``ttl_s`` (a broker that went away) and the oldest go first past ``max_entries``, so a partial
fetched late is computed again rather than held without bound. Each is taken once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict


class ParkedPartials:
    def __init__(self, max_entries: int = 4, ttl_s: float = 10.0, clock=time.monotonic) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict = OrderedDict()  # key -> (expires at, query id, partial)
        self._lock = threading.Lock()

    def put(self, key, partial, query_id: str) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + self.ttl_s, query_id, partial)
            self._entries.move_to_end(key)
            self._expire()
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def holds(self, query_id: str) -> bool:
        """Whether a partial of this query may be kept (cheap: no key is built for other queries)."""
        if not self._entries:
            return False
        with self._lock:
            self._expire()
            return any(entry[1] == query_id for entry in self._entries.values())

    def take(self, key):
        """The partial kept under ``key`` (forgotten here), or None."""
        with self._lock:
            self._expire()
            entry = self._entries.pop(key, None)
        return entry[2] if entry is not None else None

    def _expire(self) -> None:
        now = self._clock()
        for stale in [k for k, (expires, _, _) in self._entries.items() if expires < now]:
            del self._entries[stale]

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["ParkedPartials"]
