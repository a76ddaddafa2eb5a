"""ResultCache: query results kept between a Flight GetFlightInfo and the DoGet that streams them.

Flight splits "run a query" into two calls. Running at GetFlightInfo and keeping the table is what
makes the schema in the FlightInfo *the* schema of the stream (planning alone cannot promise
that), so results wait here under an unguessable handle. Memory is bounded two ways: entries
expire after a TTL, and the bytes held stay under a budget (oldest first out). A result too big
for the budget on its own is not kept: its entry holds how to run the query again, and DoGet
re-runs it and checks it against the schema already announced.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa


@dataclass
class CachedResult:
    schema: pa.Schema
    table: pa.Table | None  # None when it did not fit: `rerun` produces it at DoGet
    rerun: Callable[[], pa.Table] | None
    user: str | None  # who ran it; only they may fetch it
    expires_at: float
    nbytes: int


class ResultCache:
    def __init__(self, max_bytes: int = 512 << 20, ttl_s: float = 300.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[bytes, CachedResult] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, table: pa.Table, rerun: Callable[[], pa.Table] | None = None, user: str | None = None) -> bytes:
        """Keep ``table`` (or, if it is over the whole budget and ``rerun`` is given, only how to
        make it again) and return the handle that fetches it."""
        handle = os.urandom(16)
        nbytes = table.nbytes
        keep = nbytes <= self.max_bytes or rerun is None
        entry = CachedResult(table.schema, table if keep else None, None if keep else rerun, user,
                             self._clock() + self.ttl_s, nbytes if keep else 0)
        with self._lock:
            self._expire()
            while self._entries and (self._bytes + entry.nbytes > self.max_bytes
                                     or len(self._entries) >= self.max_entries):
                self._drop(next(iter(self._entries)))
            self._entries[handle] = entry
            self._bytes += entry.nbytes
        return handle

    def get(self, handle: bytes) -> CachedResult | None:
        with self._lock:
            self._expire()
            return self._entries.get(handle)

    def discard(self, handle: bytes) -> None:
        with self._lock:
            if handle in self._entries:
                self._drop(handle)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def _expire(self) -> None:
        now = self._clock()
        # Entries are in insertion order and share one TTL, so the expired ones are a prefix.
        while self._entries:
            handle, entry = next(iter(self._entries.items()))
            if entry.expires_at > now:
                break
            self._drop(handle)

    def _drop(self, handle: bytes) -> None:
        entry = self._entries.pop(handle)
        self._bytes -= entry.nbytes
