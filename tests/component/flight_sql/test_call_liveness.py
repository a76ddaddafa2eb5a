"""A Flight call's liveness as the broker's queries see it (issue 23): asked from another thread
while the call runs (as the call watchdog does), it turns False when the client gives up; asked
after the RPC ended, it answers from what it last saw and never touches the freed call context
(the old check did, and crashed the broker under concurrent load)."""

from __future__ import annotations

import json
import queue
import threading
import time
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from services.broker.flight import BrokerFlightServer
from tests.component.flight_sql.conftest import front_door, running, uri

WAIT_S = 60  # how long a query waits for its client to give up before the test fails


class WaitingNative:
    """A native backend whose queries (those asked to ``keep`` it) hand their ``is_active`` to the
    test; a query asked to ``wait`` polls it from another thread (the watchdog's place) until the
    client is gone."""

    def __init__(self) -> None:
        self.ran: queue.Queue = queue.Queue()

    def result_schema(self, query: dict) -> pa.Schema:
        return pa.schema([("n", pa.int64())])

    def execute(self, query: dict, timeout_s: float, query_id=None, is_active=lambda: True, schemas=None,
                tracked=None, origin=None):
        seen = {}
        if query.get("wait"):
            def watchdog():
                deadline = time.monotonic() + WAIT_S
                tick = threading.Event()
                while time.monotonic() < deadline:
                    if not is_active():
                        seen["gone"] = True
                        return
                    tick.wait(0.01)

            checker = threading.Thread(target=watchdog, name="test-watchdog")
            checker.start()
            checker.join(WAIT_S + 10)
        if query.get("keep"):
            self.ran.put((is_active, seen))
        return SimpleNamespace(table=pa.table({"n": pa.array([len(seen)], pa.int64())}), stats=None)


@pytest.fixture(scope="module")
def waiting():
    native = WaitingNative()
    with running(BrokerFlightServer("grpc://127.0.0.1:0", front_door(None, native))) as server:
        yield server, native


def ticket(doc: dict) -> flight.Ticket:
    return flight.Ticket(json.dumps({"queryType": "timeseries", "dataSource": "wiki", **doc}).encode())


def hammer(server, calls: int = 20) -> None:
    """Other RPCs, so the memory of an ended call's context is reused."""
    with flight.connect(uri(server)) as client:
        for _ in range(calls):
            assert client.do_get(ticket({})).read_all().num_rows == 1


def ask_from_another_thread(is_active, times: int = 200) -> list[bool]:
    answers: list[bool] = []
    asker = threading.Thread(target=lambda: answers.extend(is_active() for _ in range(times)))
    asker.start()
    asker.join(30)
    return answers


def test_a_client_that_gives_up_is_seen_from_another_thread_and_stays_seen(waiting):
    server, native = waiting
    with flight.connect(uri(server)) as client:
        with pytest.raises((flight.FlightTimedOutError, flight.FlightCancelledError)):
            client.do_get(ticket({"wait": True, "keep": True}), flight.FlightCallOptions(timeout=0.5)).read_all()
    is_active, seen = native.ran.get(timeout=WAIT_S + 20)
    assert seen == {"gone": True}, "the query never saw its client give up"
    hammer(server)
    assert ask_from_another_thread(is_active) == [False] * 200


def test_a_finished_call_is_asked_safely_after_its_rpc_ended(waiting):
    server, native = waiting
    with flight.connect(uri(server)) as client:
        assert client.do_get(ticket({"keep": True})).read_all().num_rows == 1
    is_active, _ = native.ran.get(timeout=30)
    for _ in range(3):
        hammer(server)
        assert ask_from_another_thread(is_active) == [True] * 200
