"""CallWatchdog: cancels in-flight historical calls of queries that stopped being active.

A query served by one historical is read on the thread that runs it (no pool hand-off: each
hand-off costs a thread switch, which on a busy machine is most of a small query's time). That
thread blocks in the call, so it cannot ask whether the query was killed or its client left;
the watchdog asks for it, every ``period_s``, and cancels the call, which ends the read with
CANCELLED. Watching costs a dict insert, and one shared thread does the asking.

The asking happens outside the lock (a slow check must not hold up every query's watch and
unwatch), so a check may run just after its query unwatched and its RPC ended: an ``is_active``
must be safe to call from any thread at any time, and never asks a Flight or gRPC call context
itself. The broker's checks are plain flags and ``CallLiveness`` (``call_liveness``: the context
is asked under a lock that its RPC closes before returning). A call unwatched meanwhile is left
alone: its query is done with it.
"""

from __future__ import annotations

import itertools
import threading


class CallWatchdog:
    def __init__(self, period_s: float = 0.25) -> None:
        self.period_s = period_s
        self._calls: dict[int, tuple[object, object]] = {}  # token -> (call, is_active)
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, call, is_active) -> int:
        token = next(self._ids)
        with self._lock:
            self._calls[token] = (call, is_active)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="strata-call-watchdog", daemon=True)
                self._thread.start()
        return token

    def unwatch(self, token: int) -> None:
        with self._lock:
            self._calls.pop(token, None)

    def _run(self) -> None:
        while not self._wake.wait(self.period_s):
            with self._lock:
                watched = list(self._calls.items())
            for token, (call, is_active) in watched:
                try:
                    active = is_active()
                except Exception:  # noqa: BLE001 - a broken liveness check must not stop the watchdog
                    active = True
                if not active:
                    with self._lock:
                        watched_still = self._calls.pop(token, None) is not None
                    if watched_still:
                        call.cancel()

    def close(self) -> None:
        self._wake.set()


__all__ = ["CallWatchdog"]
