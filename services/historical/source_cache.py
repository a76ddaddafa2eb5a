"""SourceCache: a historical's choice of table (base rows or a projection) per segment and query.

Choosing means matching every projection of the segment against the query (grouping columns,
virtual columns by expression, aggregators, granularity, filter implication): about a fifth of a
historical's time for a query over a few segments' projection rows. The choice depends only on the
query and the segment, and the broker sends the same query JSON for every run of a cached SQL
plan, so it is made once per (query JSON, segment) and kept, bounded, least recently used first.
An entry answers only for the very segment object it was made for: a segment dropped and loaded
again is a new object and gets a new choice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class SourceCache:
    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict = OrderedDict()  # (query json, id(segment)) -> (segment, source)
        self._lock = threading.Lock()

    def source(self, query_json: str, segment, make):
        """The row source for ``segment``: the kept one, else ``make()``'s, which is kept."""
        # Keyed by the segment object's identity (the entry holds the object, so the id is not
        # reused while it is kept): hashing a SegmentId (its interval, version, partition) twice
        # per segment and query cost more than the lookup itself.
        key = (query_json, id(segment))
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] is segment:
                self._entries.move_to_end(key)
                return hit[1]
        source = make()
        with self._lock:
            self._entries[key] = (segment, source)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return source

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["SourceCache"]
