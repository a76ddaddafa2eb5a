"""EventRecorder: a watch callback that keeps every event and waits (with a deadline) for conditions."""

from __future__ import annotations

import threading
import time
from typing import Callable

from services.discovery import WatchEvent


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str, poll_s: float = 0.02):
    """Poll ``predicate`` until it returns something truthy (which is returned) or fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(poll_s)  # the poll interval of a loop bounded by the deadline above


class EventRecorder:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.events: list[WatchEvent] = []

    def __call__(self, event: WatchEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def snapshot(self) -> list[WatchEvent]:
        with self._cond:
            return list(self.events)

    def state(self) -> dict[str, bytes]:
        """The key-value view the events describe."""
        view: dict[str, bytes] = {}
        for event in self.snapshot():
            if event.type == "put":
                view[event.key] = event.value
            else:
                view.pop(event.key, None)
        return dict(sorted(view.items()))

    def wait_for(self, predicate: Callable[[list[WatchEvent]], bool], timeout_s: float, what: str) -> list[WatchEvent]:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self.events):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; events: {self.events}")
                self._cond.wait(remaining)
            return list(self.events)

    def wait_state(self, expected: dict[str, bytes], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.state() != expected:
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout_s}s: watched state {self.state()} != {expected}")
            with self._cond:
                self._cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))


def holds_for(predicate: Callable[[], object], duration_s: float, what: str, poll_s: float = 0.05) -> None:
    """Fail as soon as ``predicate`` turns falsy during the next ``duration_s`` seconds."""
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        if not predicate():
            raise AssertionError(f"{what} stopped holding within {duration_s}s")
        time.sleep(poll_s)  # the poll interval of a loop bounded by ``end``
