"""``start_in_background``: run a call on a daemon thread, so a test can act on it (cancel, kill)
while it runs, then join the thread and assert on what it returned or raised."""

from __future__ import annotations

import threading
from collections.abc import Callable


def start_in_background(target: Callable) -> tuple[threading.Thread, dict]:
    """(thread, outcome): ``outcome`` gets ``result`` or ``error`` (the exception) when the call ends."""
    outcome: dict = {}

    def body():
        try:
            outcome["result"] = target()
        except Exception as exc:  # noqa: BLE001 - asserted by the test
            outcome["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, outcome
