"""BusyHistorical: hold every query slot of an in-process historical, so a query sent meanwhile
is really running (waiting on that historical) until released; for tests that end running queries."""

from __future__ import annotations


class BusyHistorical:
    def __init__(self, historical, hold_s: float = 120.0) -> None:
        servicer = historical.servicer
        self.slots = servicer.runner.slots
        self.held = 0
        for _ in range(servicer.threads):  # every engine run, inline or on the pool, needs a slot
            if not self.slots.acquire(timeout=hold_s):
                self.__exit__()
                raise TimeoutError("the historical's query slots stayed busy")
            self.held += 1

    def __enter__(self) -> BusyHistorical:
        return self

    def __exit__(self, *exc) -> None:
        for _ in range(self.held):
            self.slots.release()
        self.held = 0


__all__ = ["BusyHistorical"]
