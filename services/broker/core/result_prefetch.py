"""Result prefetch: a read query started when Flight SQL's GetFlightInfo plans it, collected at DoGet.

A Flight SQL client asks GetFlightInfo, receives the FlightInfo, then sends DoGet for its ticket:
that round trip is a fixed cost of every query, close to a small query's whole run time (a
projection answers in a few milliseconds). So for a read query whose result is not streamed,
GetFlightInfo starts the run on a small bounded pool (``Prefetcher``) and leaves a ``Prefetch``
under the ticket; DoGet waits for it and sends the table, exactly as if it had run the query itself
(the same result, and the same exception for a failure).

A ``Prefetch`` is the state shared by the running query, the ticket and DoGet:
- ``is_active`` is what the query polls: False once the ticket was dropped (expired, evicted,
  server stopping) or, after DoGet took it over, once DoGet's client cancelled or left;
- ``cancel()`` (the ticket dropped unfetched) stops the query and releases its result and slot;
- ``wait()`` (DoGet) blocks until the outcome, with a deadline, and returns it or raises it;
- ``release_slot`` is called once, whoever ends last (the result stream, a failure, a cancel).

Pure: threads and events only, no I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from common.errors import QueryTimeoutError


class Prefetch:
    def __init__(self, owner: str, release_slot: Callable[[], None] = lambda: None) -> None:
        self.owner = owner  # whose stream slot the prefetched result holds (flight_limits)
        self._release = release_slot
        self._released = False
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._outer: Callable[[], bool] | None = None  # DoGet's liveness, once DoGet waits
        self._lock = threading.Lock()

    # ---- the running query's side ---------------------------------------------------------------
    def is_active(self) -> bool:
        if self._cancelled.is_set():
            return False
        outer = self._outer
        return outer is None or outer()

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        with self._lock:
            if not self._cancelled.is_set():  # a dropped ticket's result is not kept
                self._result, self._error = result, error
        self._done.set()

    # ---- the ticket's side ----------------------------------------------------------------------
    def cancel(self) -> None:
        """The ticket is gone unfetched: stop the query, drop its result, free its slot."""
        with self._lock:
            self._cancelled.set()
            self._result = self._error = None
        self.release_slot()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def hand_over(self) -> bool:
        """The slot passes to DoGet's result stream (which frees it when sent): True when it was
        still held, and this Prefetch will not free it."""
        with self._lock:
            if self._released:
                return False
            self._released = True
            return True

    def release_slot(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._release()

    # ---- DoGet's side ---------------------------------------------------------------------------
    def wait(self, is_active: Callable[[], bool], timeout_s: float, poll_s: float = 0.05,
             clock: Callable[[], float] = time.monotonic) -> Any:
        """The query's result, or its exception raised. ``is_active`` (the DoGet's client) joins
        the query's own liveness, so a client that cancels stops it. Past ``timeout_s`` (a
        backstop: the query enforces its own timeout) the query is stopped and QueryTimeoutError
        raised."""
        self._outer = is_active
        deadline = clock() + timeout_s
        while not self._done.wait(poll_s):
            if clock() > deadline:
                self._cancelled.set()
                raise QueryTimeoutError(f"the query did not finish within {timeout_s:g} s")
        with self._lock:
            result, error = self._result, self._error
            self._result = self._error = None  # handed over: DoGet's stream holds it now
        if error is not None:
            raise error
        if self._cancelled.is_set():
            raise QueryTimeoutError("the query's ticket was dropped while it ran")
        return result


class Prefetcher:
    """At most ``workers`` prefetched queries run at once; ``start`` refuses (returns False) rather
    than queue, and the caller then runs the query in DoGet as without prefetch."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._free = threading.BoundedSemaphore(workers) if workers > 0 else None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.refused = 0  # prefetches not started because the pool was busy, since start

    @property
    def enabled(self) -> bool:
        return self._free is not None

    def start(self, prefetch: Prefetch, run: Callable[[Callable[[], bool]], Any]) -> bool:
        """Run ``run(prefetch.is_active)`` in the background; its outcome goes to ``prefetch``."""
        if self._free is None or not self._free.acquire(blocking=False):
            self.refused += 1
            return False

        def body() -> None:
            try:
                prefetch.finish(result=run(prefetch.is_active))
            except BaseException as exc:  # noqa: BLE001 - the outcome DoGet raises
                prefetch.finish(error=exc)
            finally:
                self._free.release()

        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="strata-prefetch")
            pool = self._pool
        try:
            pool.submit(body)
        except RuntimeError:  # shut down meanwhile
            self._free.release()
            return False
        return True

    def running(self) -> int:
        if self._free is None:
            return 0
        return self.workers - self._free._value  # noqa: SLF001 - a gauge, read without the lock

    def shutdown(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["Prefetch", "Prefetcher"]
