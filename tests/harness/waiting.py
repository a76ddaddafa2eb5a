"""wait_until: poll a condition until it holds or a deadline passes. Tests wait for states, never
for times, and every wait names what it waited for when it gives up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.05) -> T:
    """The first truthy value of ``predicate()``; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s}s")
        time.sleep(poll_s)
