"""ResultStream: a query's rows handed from the thread that runs it to the thread that sends them.

Flight's DoGet must return its stream before the first row is sent, while a query is tracked,
logged and killed on the one thread that runs it from start to end (services/broker/
query_registry.py). A streamed query therefore runs on a thread of its own and puts its rows,
a piece at a time, into a queue of a few pieces that DoGet's reader takes from: a client that
reads slowly holds the query back (``put`` waits) instead of the broker holding the rows, and a
client that goes away closes the reader, after which the query's next ``put`` ends it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa

from common.errors import QueryTimeoutError, StrataError
from services.broker.query_executor import Cancelled

_WAKE_S = 0.25  # how often a waiting side looks whether the other one is gone


class ResultStream:
    def __init__(self, max_pieces: int = 4, timeout_s: float | None = None) -> None:
        # A reader that neither reads nor goes away holds the query at most until its timeout.
        self._deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self._queue: queue.Queue = queue.Queue(maxsize=max_pieces)
        self._closed = threading.Event()  # the reader is gone (finished, failed, or its client left)
        self._ended = threading.Event()  # the producer put its last item
        self._first = None
        self.rows = 0

    # ---- the producing side (the query's thread) -------------------------------------------------
    def is_active(self) -> bool:
        """False once nobody reads the rows any more."""
        return not self._closed.is_set()

    def put(self, table: pa.Table, is_active: Callable[[], bool] = lambda: True) -> None:
        """Hand on rows; waits while the reader is behind. Raises when the reader is gone or the
        query stopped being active (KILL QUERY) meanwhile."""
        self._put(("rows", table), is_active)
        self.rows += table.num_rows

    def finish(self) -> None:
        self._end(("end", None))

    def fail(self, exc: BaseException) -> None:
        self._end(("error", exc))

    def _end(self, item) -> None:
        try:
            self._put(item, lambda: True)
        except Cancelled:
            pass  # nobody reads: nothing to tell
        finally:
            self._ended.set()

    def _put(self, item, is_active) -> None:
        while True:
            if self._closed.is_set():
                raise Cancelled("the client stopped reading the result")
            if not is_active():
                raise Cancelled("the query was cancelled while its result was being sent")
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise QueryTimeoutError("the query timed out while its client was not reading the result")
            try:
                self._queue.put(item, timeout=_WAKE_S)
                return
            except queue.Full:
                continue

    # ---- the reading side (DoGet) -----------------------------------------------------------------
    def _take(self, is_active: Callable[[], bool] = lambda: True):
        while True:
            try:
                return self._queue.get(timeout=_WAKE_S)
            except queue.Empty:
                if not is_active():  # the client left before the first rows: the query stops
                    self._closed.set()
                    raise Cancelled("the client went away before the first rows") from None
                if self._ended.is_set() and self._queue.empty():
                    raise StrataError("the query's thread ended without finishing its result") from None

    def wait_first(self, is_active: Callable[[], bool] = lambda: True) -> None:
        """Wait for the first rows (or the end): a failure before any row is raised here, where
        the caller can still answer with an error status instead of a broken stream. ``is_active``
        (the caller's call, asked on the caller's thread only) stops the query if it ends first."""
        self._first = self._take(is_active)
        if self._first[0] == "error":
            self._closed.set()
            raise self._first[1]

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows as record batches until the end; a failure on the way is raised."""
        try:
            item, self._first = self._first, None
            while True:
                if item is None:
                    item = self._take()
                kind, value = item
                if kind == "end":
                    return
                if kind == "error":
                    raise value
                yield from value.to_batches()
                item = None
        finally:
            self._closed.set()


__all__ = ["ResultStream"]
