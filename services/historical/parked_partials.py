"""ParkedPartials: merged partials too large for RunQueryOnce's one message, kept until the broker
fetches them with RunQuery (the same request), which streams them in chunks.

The broker asks right after the reply, so entries live milliseconds; the few kept expire after
``ttl_s`` (a broker that went away) and the oldest go first past ``max_entries``, so a partial
fetched late is computed again rather than held without bound. Each is taken once.
"""

from __future__ import annotations

import time

from common.bounded_cache import BoundedCache


class ParkedPartials:
    def __init__(self, max_entries: int = 4, ttl_s: float = 10.0, clock=time.monotonic) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._entries = BoundedCache(max_entries, ttl_s=ttl_s, clock=clock)  # key -> (query id, partial)

    def put(self, key, partial, query_id: str) -> None:
        self._entries.put(key, (query_id, partial))

    def holds(self, query_id: str) -> bool:
        """Whether a partial of this query may be kept (cheap: no key is built for other queries)."""
        if not len(self._entries):
            return False
        self._entries.expire()
        return any(entry[0] == query_id for _, entry in self._entries.items())

    def take(self, key):
        """The partial kept under ``key`` (forgotten here), or None."""
        self._entries.expire()
        entry = self._entries.pop(key)
        return entry[1] if entry is not None else None

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["ParkedPartials"]
