"""Prefetch state (core/result_prefetch) and the ticket lifecycle around it (core/flight_tickets):
outcomes handed to DoGet, cancellation of unfetched tickets, the bounded pool, stream slots."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from common.errors import QueryTimeoutError, ValidationError
from services.broker.core.flight_tickets import FlightTickets
from services.broker.core.result_prefetch import Prefetch, Prefetcher
from services.broker.flight_limits import StreamSlots

SCHEMA = pa.schema([("n", pa.int64())])


def until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.001)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_wait_returns_the_result_and_hands_it_over():
    released = []
    p = Prefetch("user 'a'", lambda: released.append(1))
    p.finish(result="table")
    assert p.wait(lambda: True, timeout_s=1) == "table"
    assert p.hand_over() and not p.hand_over()
    p.release_slot()
    assert released == []  # the stream that took the slot frees it, not the prefetch


def test_wait_raises_the_query_error_itself():
    p = Prefetch("o")
    error = ValidationError("column 'x' not found")
    p.finish(error=error)
    with pytest.raises(ValidationError) as caught:
        p.wait(lambda: True, timeout_s=1)
    assert caught.value is error


def test_the_waiting_client_joins_the_query_liveness():
    p = Prefetch("o")
    assert p.is_active()
    client_alive = [True]
    outcome = {}

    def doget():
        try:
            p.wait(lambda: client_alive[0], timeout_s=30, poll_s=0.01)
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["error"] = exc

    t = threading.Thread(target=doget)
    t.start()
    until(lambda: p._outer is not None)  # noqa: SLF001 - DoGet attached
    client_alive[0] = False
    assert not p.is_active()  # the query sees the client gone
    p.finish(error=RuntimeError("cancelled"))
    t.join(10)
    assert not t.is_alive() and str(outcome["error"]) == "cancelled"


def test_wait_has_a_backstop_deadline():
    clock = Clock()
    p = Prefetch("o")

    def tick(timeout=None):
        clock.now += 10
        return False

    p._done.wait = tick  # noqa: SLF001 - time passes without an outcome
    with pytest.raises(QueryTimeoutError, match="did not finish within 5 s"):
        p.wait(lambda: True, timeout_s=5, clock=clock)
    assert not p.is_active()


def test_cancel_stops_the_query_drops_the_result_and_frees_the_slot_once():
    released = []
    p = Prefetch("o", lambda: released.append(1))
    p.finish(result="big table")
    p.cancel()
    p.cancel()
    assert not p.is_active() and p.cancelled
    assert p._result is None  # noqa: SLF001 - released
    assert released == [1]
    late = Prefetch("o")
    late.cancel()
    late.finish(result="arrives after the ticket was dropped")
    assert late._result is None  # noqa: SLF001


def test_expired_and_evicted_tickets_cancel_their_prefetch():
    clock = Clock()
    dropped = []
    tickets = FlightTickets(ttl_s=10, max_entries=2, clock=clock, on_drop=lambda e: dropped.append(e.prefetch))
    first, second, third = Prefetch("o"), Prefetch("o"), Prefetch("o")
    tickets.put("q1", SCHEMA, None, first)
    h2 = tickets.put("q2", SCHEMA, None, second)
    tickets.put("q3", SCHEMA, None, third)  # over max_entries: the oldest leaves
    assert dropped == [first]
    taken = tickets.take(h2)  # fetched: not a drop
    assert taken.prefetch is second and dropped == [first]
    clock.now = 11
    assert tickets.expire() == 1 and dropped == [first, third]
    tickets.put("q4", SCHEMA, None)
    tickets.clear()
    assert dropped == [first, third, None] and len(tickets) == 0


def test_the_pool_is_bounded_and_refuses_rather_than_queues():
    pool = Prefetcher(2)
    gate = threading.Event()
    started = [Prefetch("o"), Prefetch("o")]
    try:
        for p in started:
            assert pool.start(p, lambda is_active: gate.wait(10) and "done")
        assert pool.running() == 2
        assert not pool.start(Prefetch("o"), lambda is_active: "never")
        assert pool.refused == 1
        gate.set()
        assert [p.wait(lambda: True, timeout_s=10) for p in started] == ["done", "done"]
        again = Prefetch("o")
        until(lambda: pool.running() == 0)
        assert pool.start(again, lambda is_active: is_active())
        assert again.wait(lambda: True, timeout_s=10) is True
    finally:
        gate.set()
        pool.shutdown()
    assert not Prefetcher(0).enabled and not Prefetcher(0).start(Prefetch("o"), lambda a: 1)


def test_a_prefetch_takes_a_stream_slot_or_falls_back():
    slots = StreamSlots(per_caller=2, total=3)
    assert slots.try_acquire("a") and slots.try_acquire("a")
    assert not slots.try_acquire("a")  # the caller's limit: this query runs in DoGet
    assert slots.refused == 0
    stream = slots.adopt("a", iter([1]))
    assert list(stream) == [1] and slots.open_count("a") == 1
    slots.release("a")
    assert slots.open_count() == 0
