"""FlightTickets: what a Flight GetFlightInfo planned, kept under its ticket until DoGet runs it.

GetFlightInfo only plans (the schema it announces comes from the plan); DoGet executes and
streams. Between the two, the ticket names a small entry here: the request (statement text,
parameters, context, or a catalog command), the announced schema and who asked. Query results
are never kept; only statements with effects (DDL, INSERT), which run at GetFlightInfo, leave
their one-row answer here. Entries expire after a TTL, the number kept is capped (oldest first out), and a ticket serves
one DoGet: fetching it again would run the statement again (a second CREATE TABLE, a second
ingestion task), so a client asks GetFlightInfo again instead.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa


@dataclass(frozen=True)
class FlightTicket:
    request: Any  # what DoGet runs: a front-door QueryRequest or a Flight SQL catalog command; or,
    # for a statement with effects that ran at GetFlightInfo, its (one-row) result table
    schema: pa.Schema  # what GetFlightInfo announced; DoGet streams exactly this
    user: str | None  # who planned it; only they may fetch it
    expires_at: float


class FlightTickets:
    def __init__(self, ttl_s: float = 300.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[bytes, FlightTicket] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, request: Any, schema: pa.Schema, user: str | None) -> bytes:
        handle = os.urandom(16)
        with self._lock:
            self._expire()
            while len(self._entries) >= self.max_entries:
                self._entries.popitem(last=False)
            self._entries[handle] = FlightTicket(request, schema, user, self._clock() + self.ttl_s)
        return handle

    def get(self, handle: bytes) -> FlightTicket | None:
        with self._lock:
            self._expire()
            return self._entries.get(handle)

    def take(self, handle: bytes) -> FlightTicket | None:
        """The entry, removed: its one DoGet is under way."""
        with self._lock:
            self._expire()
            return self._entries.pop(handle, None)

    def __len__(self) -> int:
        return len(self._entries)

    def _expire(self) -> None:
        now = self._clock()
        # Entries are in insertion order and share one TTL, so the expired ones are a prefix.
        while self._entries:
            handle, entry = next(iter(self._entries.items()))
            if entry.expires_at > now:
                break
            del self._entries[handle]
