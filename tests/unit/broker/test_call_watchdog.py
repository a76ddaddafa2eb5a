"""CallWatchdog: a watched call is cancelled once its query stops being active, and only then."""

from __future__ import annotations

import threading
import time

from services.broker.call_watchdog import CallWatchdog


class Call:
    def __init__(self) -> None:
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()


def test_cancels_a_call_whose_query_stopped_and_leaves_others():
    dog = CallWatchdog(period_s=0.01)
    active = {"a": True, "b": True}
    a, b = Call(), Call()
    dog.watch(a, lambda: active["a"])
    token_b = dog.watch(b, lambda: active["b"])
    time.sleep(0.05)
    assert not a.cancelled.is_set() and not b.cancelled.is_set()
    active["a"] = False
    assert a.cancelled.wait(5)
    dog.unwatch(token_b)
    active["b"] = False
    time.sleep(0.05)
    assert not b.cancelled.is_set()  # no longer watched: its query finished
    dog.close()


def test_a_failing_liveness_check_does_not_stop_the_watchdog():
    dog = CallWatchdog(period_s=0.01)
    bad, good = Call(), Call()
    state = {"good": True}

    def broken():
        raise RuntimeError("client context gone")

    dog.watch(bad, broken)
    dog.watch(good, lambda: state["good"])
    state["good"] = False
    assert good.cancelled.wait(5)
    assert not bad.cancelled.is_set()
    dog.close()


def test_a_call_unwatched_while_its_check_ran_is_not_cancelled():
    dog = CallWatchdog(period_s=0.01)
    call, checked = Call(), threading.Event()
    token = {}

    def finished_meanwhile():  # the query ended (and unwatched) while the watchdog was asking
        dog.unwatch(token["t"])
        checked.set()
        return False

    token["t"] = dog.watch(call, finished_meanwhile)
    other = Call()
    dog.watch(other, lambda: False)
    assert other.cancelled.wait(5) and checked.wait(5)
    assert not call.cancelled.is_set()
    dog.close()
