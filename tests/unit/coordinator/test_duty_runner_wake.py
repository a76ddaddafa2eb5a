"""DutyRunner.wake: a publish (or a new leadership) runs the segment duties at once instead of
at the end of the period; the extra duties (supervisors, compaction, ...) keep their period."""

from __future__ import annotations

import threading
import time

from services.coordinator.duty_runner import DutyRunner

LONG_PERIOD_MS = 600_000  # no pass in a test's lifetime comes from the period running out


def _wait(predicate, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout_s}s")
        time.sleep(0.01)


class _Counting(DutyRunner):
    def __init__(self) -> None:
        super().__init__(store=None, discovery=None, metrics=None, period_ms=LONG_PERIOD_MS)
        self.passes = 0
        self.extras = 0
        self.gate = threading.Event()  # a pass waits on it while a test holds it cleared
        self.gate.set()
        self.entered = threading.Event()  # set when a pass has begun
        self.extra_duties.append(self._extra)

    def run_once(self) -> list:
        self.entered.set()
        self.gate.wait(30)
        self.passes += 1
        return []

    def _extra(self) -> None:
        self.extras += 1


def test_leadership_and_each_wake_run_a_pass_without_waiting_for_the_period():
    runner = _Counting().start()
    try:
        assert runner.passes == 0  # not a leader yet
        runner.set_leader(True)
        _wait(lambda: runner.passes == 1, "the new leader's first pass")
        for n in (2, 3):
            runner.wake()
            _wait(lambda: runner.passes == n, f"pass {n} after a wake")
        # The extra duties ran with the first pass only: a wake does not bring them forward.
        assert runner.extras == 1
    finally:
        runner.stop()


def test_wakes_during_a_pass_coalesce_into_one_more_pass():
    runner = _Counting().start()
    try:
        runner.gate.clear()
        runner.set_leader(True)  # the first pass starts and waits on the gate
        assert runner.entered.wait(30)
        for _ in range(5):
            runner.wake()
        runner.gate.set()
        _wait(lambda: runner.passes == 2, "one pass for the five wakes")
        time.sleep(0.2)  # room for a wrong third pass (no wake came after the second began)
        assert runner.passes == 2
    finally:
        runner.stop()


def test_stop_ends_the_loop_without_waiting_for_the_period():
    runner = _Counting().start()
    runner.set_leader(True)
    _wait(lambda: runner.passes == 1, "the first pass")
    started = time.monotonic()
    runner.stop()
    assert not runner._thread.is_alive()
    assert time.monotonic() - started < 5  # stop() joins with 5 s; the period is ten minutes
