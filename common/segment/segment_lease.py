"""SegmentLease: a count of the queries using an open segment (Druid's ReferenceCountingSegment).

Every use of a segment's files holds a lease: ``acquire`` before, ``release`` after. Whoever owns
the segment (a historical's cache, a caller of ``execute``) ``retire``s it when it evicts or
drops it; the file is closed when the last holder releases (at once when none does), and from
then on no lease is granted. (Between the two, a holder may lease it again, say ``execute``
under a caller's lease; the owner no longer hands the segment to new queries.) Closing releases the descriptor, so an evicted file that was
unlinked gives its disk blocks back as soon as the queries reading it finish, whatever still
refers to the segment object (a prepared query, a plan kept for the next run): keeping the object
is not keeping the file.

Retirement also tells the listeners registered with ``on_retire`` (the prepared-query cache drops
what it prepared over the segment). What is kept for the segment's sake lives on its lease
(``hold``): the prepared-query cache refers to a prepared query only weakly and the leases of its
segments hold it, so a segment dropped without ``close()`` takes its prepared queries with it
(and its file, once the collector frees the segment) instead of pinning it until they are pushed
out of the cache.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from common.errors import StrataError


class SegmentRetiredError(StrataError):
    """A lease asked of a segment that was evicted or dropped: the caller treats it as not served."""


class SegmentLease:
    def __init__(self, close: Callable[[], None], label: str) -> None:
        self._close = close
        self.label = label
        self._lock = threading.Lock()
        self._holders = 0
        self._retired = False
        self._closed = False
        self._listeners: list[Callable[[], None]] = []
        self._held: dict = {}  # what lives as long as the segment does (``hold``)

    def acquire(self) -> bool:
        """Count one more use; False when the segment's file is closed."""
        with self._lock:
            if self._closed:
                return False
            self._holders += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            close = self._retired and self._holders == 0 and not self._closed
            if close:
                self._closed = True
        if close:
            self._close()

    def retire(self) -> None:
        """No new use from now on; the file closes when the current ones end. Idempotent."""
        with self._lock:
            if self._retired:
                return
            self._retired = True
            close = self._holders == 0
            if close:
                self._closed = True
            listeners, self._listeners = self._listeners, []
            self._held = {}
        for listener in listeners:
            listener()
        if close:
            self._close()

    def on_retire(self, listener: Callable[[], None]) -> bool:
        """Call ``listener`` once when the segment retires; False (and no call) if it already has."""
        with self._lock:
            if self._retired:
                return False
            self._listeners.append(listener)
            return True

    def hold(self, key, value) -> bool:
        """Keep ``value`` alive as long as the segment (until ``unhold`` or retirement); False
        (not kept) when the segment has retired."""
        with self._lock:
            if self._retired:
                return False
            self._held[key] = value
            return True

    def unhold(self, key) -> None:
        with self._lock:
            self._held.pop(key, None)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A lease for the block; SegmentRetiredError if the segment's file was closed before it."""
        if not self.acquire():
            raise SegmentRetiredError(f"segment {self.label} was evicted or dropped while the query started")
        try:
            yield
        finally:
            self.release()

    @property
    def retired(self) -> bool:
        return self._retired

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def holders(self) -> int:
        return self._holders


@contextlib.contextmanager
def leased(segments) -> Iterator[None]:
    """Leases on every one of ``segments`` for the block (all or none: SegmentRetiredError)."""
    with contextlib.ExitStack() as stack:
        for segment in segments:
            stack.enter_context(segment.lease.held())
        yield


__all__ = ["SegmentLease", "SegmentRetiredError", "leased"]
