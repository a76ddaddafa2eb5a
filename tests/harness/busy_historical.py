"""BusyHistorical: hold every query thread of an in-process historical, so a query sent meanwhile
is really running (waiting on that historical) until released; for tests that end running queries."""

from __future__ import annotations

import threading


class BusyHistorical:
    def __init__(self, historical, hold_s: float = 120.0) -> None:
        pool = historical.servicer.pool
        self.release = threading.Event()
        self.futures = [pool.submit(self.release.wait, hold_s) for _ in range(pool._max_workers)]

    def __enter__(self) -> BusyHistorical:
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        for f in self.futures:
            f.result(timeout=30)


__all__ = ["BusyHistorical"]
