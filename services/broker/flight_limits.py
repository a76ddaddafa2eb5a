"""Size limits on what a Flight client sends the broker.

Arrow's Flight server accepts gRPC messages of any length (it sets no maximum receive size and
pyarrow offers no way to set one), so the broker checks sizes itself before it parses anything: a
DoGet ticket, a GetFlightInfo/GetSchema command, a DoAction body are each at most
MAX_REQUEST_BYTES, and the parameters a DoPut binds are read batch by batch and refused as soon as
they pass the same limit, so a client cannot make the broker hold an unbounded upload. SQL text
this long is far past anything the planner takes in reasonable time anyway (a 20,000-value IN list
is about 150 KiB).
"""

from __future__ import annotations

import pyarrow as pa

from common.errors import ValidationError

MAX_REQUEST_BYTES = 16 << 20


def _mib(n: int) -> str:
    if n < 1 << 20:
        return f"{n} bytes"
    return f"{n / (1 << 20):.1f} MiB" if n % (1 << 20) else f"{n >> 20} MiB"


def check_size(payload: bytes | None, what: str, limit: int = MAX_REQUEST_BYTES) -> None:
    """ValidationError when ``payload`` is over ``limit``; the message names the limit."""
    size = len(payload) if payload is not None else 0
    if size > limit:
        raise ValidationError(f"the {what} is {_mib(size)}; strata's Flight server takes at most {_mib(limit)} "
                              f"per {what}: send less (bind large value lists as a prepared statement's "
                              f"parameters in several calls, or load data through ingestion)")


def read_bounded(reader, what: str = "DoPut upload", limit: int = MAX_REQUEST_BYTES) -> pa.Table:
    """Everything a DoPut ``reader`` sends, refused once it passes ``limit`` bytes."""
    batches, total = [], 0
    schema = reader.schema
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            break
        if chunk.data is None:
            continue
        total += chunk.data.nbytes
        if total > limit:
            raise ValidationError(f"the {what} passed {_mib(limit)}; strata's Flight server takes at most "
                                  f"{_mib(limit)} per {what}: bind fewer or shorter values per call")
        batches.append(chunk.data)
    return pa.Table.from_batches(batches, schema=schema)


# ---- open result streams ---------------------------------------------------------------------------
# A DoGet's result stays in the broker (the table, and gRPC's send buffers) until the client reads
# it. A client that opens streams and never reads them would otherwise make the broker hold every
# result at once. Each caller (the user when authenticated, else the client's connection) may have
# at most MAX_STREAMS_PER_CALLER results open, and the whole server MAX_STREAMS; over either, a
# DoGet is refused as UNAVAILABLE (retry once streams are read or closed) before its query runs.
# A stream's slot is freed when it is fully sent, when the client cancels or disconnects (Flight
# then drops the stream), or when its deadline passes.
MAX_STREAMS_PER_CALLER = 64
MAX_STREAMS = 1024


def stream_owner(context, user: str | None) -> str:
    """Whom a DoGet's stream counts against: the user, else the connection (address and port)."""
    if user is not None:
        return f"user {user!r}"
    try:
        return f"connection {context.peer()}"
    except Exception:  # noqa: BLE001 - no peer known: every anonymous caller shares one budget
        return "anonymous callers"


class StreamSlots:
    """Counts open DoGet result streams per owner and in all."""

    def __init__(self, per_caller: int = MAX_STREAMS_PER_CALLER, total: int = MAX_STREAMS) -> None:
        import threading

        self.per_caller, self.total = per_caller, total
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}
        self.refused = 0  # DoGets refused for a limit, since start

    def open_count(self, owner: str | None = None) -> int:
        with self._lock:
            return self._open.get(owner, 0) if owner is not None else sum(self._open.values())

    def check(self, owner: str) -> None:
        """Refuses (before any work) when ``owner`` or the server is at its limit."""
        with self._lock:
            self._refuse_if_full(owner)

    def hold(self, owner: str, batches):
        """``batches`` as an iterator that holds one of ``owner``'s slots until it is exhausted,
        closed or dropped."""
        with self._lock:
            self._refuse_if_full(owner)
            self._open[owner] = self._open.get(owner, 0) + 1
        return _HeldStream(self, owner, batches)

    def try_acquire(self, owner: str) -> bool:
        """Take one of ``owner``'s slots if one is free (a result prefetched before its DoGet); False
        when a limit is reached (not counted as a refusal: the query then runs in DoGet)."""
        with self._lock:
            mine, everyone = self._open.get(owner, 0), sum(self._open.values())
            if mine >= self.per_caller or everyone >= self.total:
                return False
            self._open[owner] = mine + 1
            return True

    def adopt(self, owner: str, batches):
        """Like ``hold``, for a slot ``try_acquire`` already took."""
        return _HeldStream(self, owner, batches)

    def release(self, owner: str) -> None:
        """Give back a slot ``try_acquire`` took, when no stream adopted it."""
        self._release(owner)

    def _release(self, owner: str) -> None:
        with self._lock:
            left = self._open.get(owner, 0) - 1
            if left > 0:
                self._open[owner] = left
            else:
                self._open.pop(owner, None)

    def _refuse_if_full(self, owner: str) -> None:
        import pyarrow.flight as flight

        mine, everyone = self._open.get(owner, 0), sum(self._open.values())
        if mine >= self.per_caller or everyone >= self.total:
            self.refused += 1
        if mine >= self.per_caller:
            raise flight.FlightUnavailableError(
                f"{owner} already has {mine} result streams open, the most one caller may have "
                f"({self.per_caller}): read or cancel them (or wait for their deadline), then retry")
        if everyone >= self.total:
            raise flight.FlightUnavailableError(
                f"the broker has {everyone} result streams open, its limit ({self.total}); retry shortly")


class _HeldStream:
    def __init__(self, slots: StreamSlots, owner: str, batches) -> None:
        self._slots, self._owner = slots, owner
        self._batches = iter(batches)
        self._held = True

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._batches)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._held:
            self._held = False
            self._slots._release(self._owner)
            close = getattr(self._batches, "close", None)
            if close is not None:
                close()

    def __del__(self) -> None:  # the stream dropped before it was read to the end
        self.close()
