"""Unordered scans stream through the broker (issue 15), on a cluster of two historicals through
the real ADBC Flight SQL driver: every row arrives (OFFSET/LIMIT counted across pieces), a client
that pauses holds the query back instead of the broker buffering its rows, a client that closes
its reader early or a KILL QUERY ends the query (logged as cancelled), errors before the first row
are clean statuses, and the broker keeps serving."""

from __future__ import annotations

import threading
import time

import adbc_driver_flightsql.dbapi as adbc
import duckdb
import pytest

from common.demo import table as demo_table
from services.broker import front_door as front_door_module
from services.broker.result_stream import ResultStream
from tests.harness.embedded_cluster import EmbeddedCluster

ROWS = 300_000


class CountingStream(ResultStream):
    """A ResultStream that remembers how many rows the query handed on (the witness of streaming)."""

    last: CountingStream | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        CountingStream.last = self


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("streaming")), historicals=2)
    try:
        c.data = demo_table(ROWS, days=3)
        segments = c.publish(c.data, "wiki")
        c.wait_queryable("wiki", len(segments), replicas=2)
        yield c
    finally:
        c.stop()


@pytest.fixture(autouse=True)
def counting(monkeypatch):
    monkeypatch.setattr(front_door_module, "ResultStream", CountingStream)
    CountingStream.last = None


def connect(cluster):
    return adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)


def run(conn, sql: str):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def logged(conn, sql_text: str, timeout_s: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        rows = [r for r in run(conn, "SELECT sql, status, result_rows, error_message FROM sys.queries").to_pylist()
                if r["sql"] == sql_text and r["status"] != "running"]
        if rows:
            return rows[-1]
        assert time.monotonic() < deadline, f"{sql_text!r} not logged as finished within {timeout_s} s"
        time.sleep(0.05)


def test_a_scan_streams_every_row(cluster):
    with connect(cluster) as conn:
        got = run(conn, "SELECT __time, channel, added AS a FROM wiki")
        assert CountingStream.last is not None and CountingStream.last.rows == ROWS
        con = duckdb.connect()
        con.register("wiki", cluster.data)
        want = con.sql("SELECT channel, count(*), sum(added), min(__time), max(__time) FROM wiki GROUP BY 1").fetchall()
        con.register("got", got)
        have = con.sql("SELECT channel, count(*), sum(a), min(__time), max(__time) FROM got GROUP BY 1").fetchall()
        assert sorted(have, key=repr) == sorted(want, key=repr)
        assert got.schema.names == ["__time", "channel", "a"]
        assert logged(conn, "SELECT __time, channel, added AS a FROM wiki")["result_rows"] == ROWS


@pytest.mark.parametrize("sql, rows", [
    ("SELECT page FROM wiki LIMIT 7 OFFSET 3", 7),
    ("SELECT page FROM wiki LIMIT 5 OFFSET 299998", 2),
    ("SELECT page FROM wiki WHERE channel = 'no such channel'", 0),
])
def test_offset_and_limit_across_pieces(cluster, sql, rows):
    with connect(cluster) as conn:
        table = run(conn, sql)
        assert table.num_rows == rows and table.schema.names == ["page"]


def test_grouped_and_sorted_queries_do_not_stream(cluster):
    with connect(cluster) as conn:
        assert run(conn, "SELECT COUNT(*) AS c FROM wiki").to_pylist() == [{"c": ROWS}]
        assert run(conn, "SELECT page FROM wiki ORDER BY page LIMIT 3").num_rows == 3
        assert CountingStream.last is None


@pytest.mark.parametrize("descending", [False, True])
def test_a_scan_ordered_by_time_streams_in_order(cluster, descending):
    direction = "DESC" if descending else "ASC"
    with connect(cluster) as conn:
        got = run(conn, f"SELECT __time, added FROM wiki ORDER BY __time {direction}")
        assert CountingStream.last is not None and CountingStream.last.rows == ROWS
        times = got.column("__time").cast("int64").to_pylist()
        assert times == sorted(times, reverse=descending)
        assert sum(got.column("added").to_pylist()) == sum(cluster.data.column("added").to_pylist())
        page = run(conn, f"SELECT __time FROM wiki ORDER BY __time {direction} LIMIT 1000 OFFSET 500")
        whole = sorted(cluster.data.column("__time").cast("int64").to_pylist(), reverse=descending)
        assert page.column("__time").cast("int64").to_pylist() == whole[500:1500]


def test_a_paused_client_holds_the_query_back(cluster):
    sql = "SELECT * FROM wiki"
    with connect(cluster) as conn, conn.cursor() as cur:
        cur.execute(sql)
        reader = cur.fetch_record_batch()
        first = reader.read_next_batch()
        stream = CountingStream.last
        # Whatever the machine's speed, what went ahead of the reader is bounded by buffers
        # (the queue's few pieces, gRPC and Flight windows), far below the result.
        seen = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            seen.append(stream.rows)
            time.sleep(0.05)
        assert 0 < first.num_rows and max(seen) < ROWS // 2, f"{max(seen)} of {ROWS} rows went ahead of the client"
        total = first.num_rows + sum(b.num_rows for b in reader)
        assert total == ROWS


def test_closing_the_reader_early_cancels_the_query(cluster):
    sql = "SELECT page, comment FROM wiki"
    with connect(cluster) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            reader = cur.fetch_record_batch()
            reader.read_next_batch()
            reader.close()
        row = logged(conn, sql)
        assert row["status"] == "cancelled" and row["result_rows"] < ROWS
        assert run(conn, "SELECT COUNT(*) AS c FROM wiki").to_pylist() == [{"c": ROWS}]


def test_kill_query_ends_a_stream_its_client_does_not_read(cluster):
    sql = "SET sqlQueryId = 'stream-to-kill'; SELECT page, comment, \"user\" FROM wiki"
    outcome = {}
    with connect(cluster) as conn, connect(cluster) as other:
        cur = conn.cursor()
        cur.execute(sql)
        reader = cur.fetch_record_batch()
        reader.read_next_batch()  # then the client stops reading
        assert run(other, "KILL QUERY 'stream-to-kill'").to_pylist() == [{"result": "query stream-to-kill is being killed"}]

        def drain():
            try:
                outcome["rows"] = sum(b.num_rows for b in reader)
            except Exception as exc:  # noqa: BLE001 - the expected end of a killed stream
                outcome["error"] = exc

        t = threading.Thread(target=drain)
        t.start()
        t.join(timeout=30)
        assert not t.is_alive(), "a killed stream did not end"
        row = logged(other, sql)
        assert (row["status"], row["error_message"]) == ("cancelled", "killed by an anonymous user (KILL QUERY)")
        assert "error" in outcome or outcome["rows"] < ROWS
        cur.close()


def test_an_error_before_the_first_row_is_a_clean_status(cluster):
    with connect(cluster) as conn:
        with pytest.raises(adbc.Error) as err:
            run(conn, "SET maxBytesInMemory = 1000; SELECT page, comment FROM wiki")
        message = str(err.value)
        assert "maxBytesInMemory = 1,000 bytes" in message and "Traceback" not in message
        assert run(conn, "SELECT page FROM wiki LIMIT 2").num_rows == 2
