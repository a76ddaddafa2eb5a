"""CallLiveness: a Flight call's liveness asked from any thread never touches the call's context
after its RPC handler returned (issue 23: the broker crashed asking a freed context)."""

from __future__ import annotations

import threading

from services.broker.call_liveness import CallLiveness


class Context:
    """A ServerCallContext stand-in that counts how often it is asked and fails once freed."""

    def __init__(self, cancelled: bool = False) -> None:
        self.cancelled = cancelled
        self.asked = 0
        self.freed = False

    def is_cancelled(self) -> bool:
        assert not self.freed, "asked a call context after its RPC ended"
        self.asked += 1
        return self.cancelled


def test_asks_the_context_while_the_call_runs_and_remembers_a_cancellation():
    context = Context()
    alive = CallLiveness(context)
    assert alive() is True and context.asked == 1
    context.cancelled = True
    assert alive() is False
    asked = context.asked
    assert alive() is False and context.asked == asked  # seen once, never asked again


def test_after_close_the_context_is_never_asked_and_answers_stay():
    for cancelled in (False, True):
        context = Context(cancelled)
        alive = CallLiveness(context)
        assert alive() is (not cancelled)
        alive.close()
        context.freed = True
        results = []
        checker = threading.Thread(target=lambda: results.extend(alive() for _ in range(100)))
        checker.start()
        checker.join(10)
        assert results == [not cancelled] * 100


def test_close_waits_for_a_check_that_started_before_it():
    entered, release, events = threading.Event(), threading.Event(), []

    class SlowContext(Context):
        def is_cancelled(self) -> bool:
            entered.set()
            assert release.wait(10)
            events.append("checked")
            return super().is_cancelled()

    context = SlowContext()
    alive = CallLiveness(context)
    checker = threading.Thread(target=alive)  # the watchdog, asking
    checker.start()
    assert entered.wait(10)

    def handler_returns():
        alive.close()
        events.append("closed")  # from here on the RPC may free its context
        context.freed = True

    closer = threading.Thread(target=handler_returns)
    closer.start()
    closer.join(0.2)  # a close that did not wait would be done by now
    release.set()
    checker.join(10)
    closer.join(10)
    assert events == ["checked", "closed"]


def test_is_a_context_manager_that_closes():
    context = Context()
    with CallLiveness(context) as alive:
        assert alive()
    context.freed = True
    assert alive() is True
