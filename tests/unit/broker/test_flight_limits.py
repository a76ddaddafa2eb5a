"""flight_limits: the size check and the per-caller count of open result streams."""

from __future__ import annotations

import gc

import pyarrow.flight as flight
import pytest

from common.errors import ValidationError
from services.broker.flight_limits import StreamSlots, check_size


def test_check_size_names_the_limit():
    check_size(b"x" * 1024, "ticket", limit=1024)
    with pytest.raises(ValidationError, match=r"the ticket is 2048 bytes; .* at most 1024 bytes per ticket"):
        check_size(b"x" * 2048, "ticket", limit=1024)


def test_streams_count_per_caller_and_free_when_done_closed_or_dropped():
    slots = StreamSlots(per_caller=2, total=3)
    done = slots.hold("a", iter([1, 2]))
    closed = slots.hold("a", iter([1]))
    with pytest.raises(flight.FlightUnavailableError, match=r"the most one caller may have \(2\)"):
        slots.hold("a", iter([]))
    with pytest.raises(flight.FlightUnavailableError):
        slots.check("a")
    dropped = slots.hold("b", iter([1]))
    with pytest.raises(flight.FlightUnavailableError, match=r"its limit \(3\)"):
        slots.check("c")
    assert slots.refused == 3 and slots.open_count() == 3 and slots.open_count("a") == 2
    assert list(done) == [1, 2]  # read to the end
    closed.close()
    del dropped  # never read: the client went away
    gc.collect()
    assert slots.open_count() == 0
    slots.check("a")


def test_a_failing_stream_frees_its_slot():
    def failing():
        yield 1
        raise RuntimeError("boom")

    slots = StreamSlots(per_caller=1, total=1)
    stream = slots.hold("a", failing())
    assert next(stream) == 1
    with pytest.raises(RuntimeError):
        next(stream)
    assert slots.open_count() == 0
