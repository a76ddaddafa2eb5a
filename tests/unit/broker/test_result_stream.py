"""ResultStream: rows handed from a query's thread to the sender's through a queue of a few pieces;
the producer waits while the reader is behind and stops when the reader is gone, the query is
killed or its timeout passes; failures before the first rows reach the caller of wait_first."""

import threading

import pyarrow as pa
import pytest

from common.errors import QueryTimeoutError
from services.broker.query_executor import Cancelled
from services.broker.result_stream import ResultStream

PIECE = pa.table({"x": list(range(10))})


def produce(stream: ResultStream, pieces: int, done: dict) -> threading.Thread:
    def run():
        try:
            for _ in range(pieces):
                stream.put(PIECE)
            stream.finish()
            done["ok"] = True
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            done["error"] = exc
            stream.fail(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_every_piece_arrives_in_order():
    stream, done = ResultStream(max_pieces=2), {}
    t = produce(stream, 50, done)
    stream.wait_first()
    rows = sum(b.num_rows for b in stream.batches())
    t.join(10)
    assert rows == 500 and done == {"ok": True} and stream.rows == 500


def test_the_producer_waits_for_a_slow_reader():
    stream, done = ResultStream(max_pieces=3), {}
    t = produce(stream, 50, done)
    stream.wait_first()
    t.join(0.5)  # the producer cannot run ahead: it is blocked on a full queue
    assert t.is_alive() and stream.rows <= 4 * PIECE.num_rows
    assert sum(b.num_rows for b in stream.batches()) == 500
    t.join(10)
    assert not t.is_alive()


def test_a_reader_gone_stops_the_producer():
    stream, done = ResultStream(max_pieces=1), {}
    t = produce(stream, 1000, done)
    stream.wait_first()
    batches = stream.batches()
    next(batches)
    batches.close()  # the client left
    t.join(10)
    assert not t.is_alive() and isinstance(done.get("error"), Cancelled)


def test_a_killed_query_stops_waiting_to_send():
    stream = ResultStream(max_pieces=1)
    stream.put(PIECE)
    killed = threading.Event()
    killed.set()
    with pytest.raises(Cancelled, match="cancelled while its result was being sent"):
        stream.put(PIECE, lambda: not killed.is_set())


def test_a_reader_that_never_reads_is_bounded_by_the_timeout():
    stream = ResultStream(max_pieces=1, timeout_s=0.3)
    stream.put(PIECE)
    with pytest.raises(QueryTimeoutError):
        stream.put(PIECE)


def test_a_failure_before_the_first_rows_is_raised_by_wait_first():
    stream = ResultStream()
    stream.fail(ValueError("bad column"))
    with pytest.raises(ValueError, match="bad column"):
        stream.wait_first()


def test_a_caller_gone_before_the_first_rows_stops_the_query():
    stream = ResultStream()
    with pytest.raises(Cancelled):
        stream.wait_first(lambda: False)
    with pytest.raises(Cancelled):
        stream.put(PIECE)  # the query's next piece finds nobody reading
