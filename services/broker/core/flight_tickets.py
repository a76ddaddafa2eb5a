"""FlightTickets: what a Flight GetFlightInfo planned, kept under its ticket until DoGet runs it.

GetFlightInfo only plans (the schema it announces comes from the plan); DoGet executes and
streams. Between the two, the ticket names a small entry here: the request (statement text,
parameters, context, or a catalog command), the announced schema and who asked. Query results
are not kept here, with two exceptions: statements with effects (DDL, INSERT), which run at
GetFlightInfo, leave their one-row answer; and a read query GetFlightInfo started early carries
its ``Prefetch`` (core/result_prefetch), which holds the result until DoGet takes it. An entry
that leaves unfetched (expired, evicted, cleared) is handed to ``on_drop``, which cancels its
prefetch. Entries expire after a TTL (checked at every put, get and take), the number kept is
capped (oldest first out), and a ticket serves one DoGet: fetching it again would run the
statement again (a second CREATE TABLE, a second ingestion task), so a client asks GetFlightInfo
again instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from common.bounded_cache import BoundedCache


@dataclass(frozen=True)
class FlightTicket:
    request: Any  # what DoGet runs: a front-door QueryRequest or a Flight SQL catalog command; or,
    # for a statement with effects that ran at GetFlightInfo, its (one-row) result table
    schema: pa.Schema  # what GetFlightInfo announced; DoGet streams exactly this
    user: str | None  # who planned it; only they may fetch it
    expires_at: float
    prefetch: Any = None  # a running or finished Prefetch of the query, or None: DoGet runs it


class FlightTickets:
    def __init__(self, ttl_s: float = 300.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic,
                 on_drop: Callable[[FlightTicket], None] | None = None) -> None:
        self.on_drop = on_drop  # called, outside the lock, for each entry that leaves unfetched
        self.max_entries = max_entries
        self._clock = clock
        self._entries = BoundedCache(max_entries, ttl_s=ttl_s, clock=clock, on_evict=self._dropped)

    @property
    def ttl_s(self) -> float:
        return self._entries.ttl_s

    @ttl_s.setter
    def ttl_s(self, value: float) -> None:
        self._entries.ttl_s = value  # for tickets issued from now on

    def put(self, request: Any, schema: pa.Schema, user: str | None, prefetch: Any = None) -> bytes:
        handle = os.urandom(16)
        self._entries.put(handle, FlightTicket(request, schema, user, self._clock() + self.ttl_s, prefetch))
        return handle

    def get(self, handle: bytes) -> FlightTicket | None:
        self._entries.expire()
        return self._entries.get(handle, touch=False)

    def take(self, handle: bytes) -> FlightTicket | None:
        """The entry, removed: its one DoGet is under way."""
        self._entries.expire()
        return self._entries.pop(handle)

    def take_for(self, handle: bytes, user: str | None) -> FlightTicket | None:
        """``get`` and then ``take`` in one: the entry, removed when it is ``user``'s; left in
        place for its own user when it is another's (the caller refuses that one)."""
        entry = self.get(handle)
        if entry is not None and entry.user == user:
            return self._entries.pop(handle)  # None when another DoGet took it meanwhile
        return entry

    def expire(self) -> int:
        """Drop the expired entries now; how many were dropped."""
        return self._entries.expire()

    def clear(self) -> None:
        """Drop every entry (the server is stopping)."""
        for handle, _ in self._entries.items():
            entry = self._entries.pop(handle)
            if entry is not None:
                self._dropped(handle, entry)

    def __len__(self) -> int:
        return len(self._entries)

    def _dropped(self, handle: bytes, entry: FlightTicket) -> None:
        if self.on_drop is not None:
            self.on_drop(entry)
