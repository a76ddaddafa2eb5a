"""Issue 14's hostile inputs on the real path: the broker's Flight SQL endpoint (ADBC driver) over
a real cluster. The plan cache must not serve a stale NOW () whatever its spelling, a 20,000-value
IN list plans and answers, fractions in IN lists on BIGINT are not truncated, nesting past the
limit is refused with a message that names the limit, and planning stops at the query timeout."""

from __future__ import annotations

import time

import adbc_driver_flightsql.dbapi as adbc
import adbc_driver_manager
import pyarrow as pa
import pytest

from tests.harness.embedded_cluster import EmbeddedCluster

ROWS = 5_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("hostile")), historicals=2)
    try:
        start = 1442016000000
        table = pa.table({
            "__time": pa.array([start + i * 10_000 for i in range(ROWS)], pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")),
            "n": pa.array(range(ROWS), pa.int64()),
            "d": pa.array([(i % 7) / 2 for i in range(ROWS)], pa.float64())})
        c.segments = c.publish(table, "t")
        c.wait_queryable("t", len(c.segments), replicas=2)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def conn(cluster):
    connection = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    yield connection
    connection.close()


def run(conn, sql: str) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table().to_pylist()


@pytest.mark.parametrize("spelling", ["NOW ()", "now()", "CURRENT_TIMESTAMP", "now /* c */ ( )"])
def test_now_is_never_served_from_a_stale_plan(conn, spelling):
    sql = f"SELECT {spelling} AS t"
    first = run(conn, sql)[0]["t"]
    deadline = time.monotonic() + 10
    while True:
        later = run(conn, sql)[0]["t"]
        if later > first:
            break
        assert time.monotonic() < deadline, f"{spelling} kept returning {first}"
        time.sleep(0.01)  # lets the clock pass a millisecond; bounded by the deadline


def test_twenty_thousand_value_in_list(conn):
    values = ", ".join(str(i * 2) for i in range(20_000))
    [row] = run(conn, f"SELECT COUNT(*) AS c, SUM(n) AS s FROM t WHERE n IN ({values})")
    evens = [i for i in range(0, ROWS, 2)]
    assert (row["c"], row["s"]) == (len(evens), sum(evens))


def test_fractions_in_in_lists_on_bigint(conn):
    assert run(conn, "SELECT n FROM t WHERE n IN (2.5, 3)") == [{"n": 3}]
    [row] = run(conn, "SELECT COUNT(*) AS c FROM t WHERE n NOT IN (2.5)")
    assert row["c"] == ROWS


def test_nesting_past_the_limit_is_refused_with_the_limit(conn):
    expr = "n"
    for _ in range(300):
        expr = f"ABS({expr})"
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as info:
            cur.execute(f"SELECT {expr} FROM t")
            cur.fetch_arrow_table()
    assert "the limit is 200 levels" in str(info.value)
    expr = "n"
    for _ in range(150):
        expr = f"ABS({expr})"
    assert len(run(conn, f"SELECT {expr} AS v FROM t")) == ROWS


def test_a_statement_that_plans_past_its_timeout_stops_with_the_timeout_error(conn):
    # 10,000 CASE branches take over a second to plan; with a 50 ms timeout the planner stops at
    # the deadline and the client gets the timeout error (not an internal one, not a late answer).
    case = "CASE " + " ".join(f"WHEN n = {i} THEN {i}" for i in range(10_000)) + " END"
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as info:
            cur.execute(f"SET timeout = 50; SELECT {case} AS v FROM t")
            cur.fetch_arrow_table()
    message = str(info.value)
    assert "timed out" in message and "while planning" in message, message
    assert "Traceback" not in message
    # The same statement with room to plan answers.
    rows = run(conn, f"SELECT {case} AS v FROM t WHERE n < 3 ORDER BY v")
    assert rows == [{"v": 0}, {"v": 1}, {"v": 2}]


def _flight_sql(client, sql: str) -> list[dict]:
    """A Flight SQL statement sent by hand: the protobuf string carries the text byte for byte,
    U+0000 included (ADBC's C API takes the text as a NUL-terminated char*, so it cannot)."""
    import pyarrow.flight as flight
    from google.protobuf import any_pb2

    from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql

    packed = any_pb2.Any()
    packed.Pack(fsql.CommandStatementQuery(query=sql))
    info = client.get_flight_info(flight.FlightDescriptor.for_command(packed.SerializeToString()))
    return client.do_get(info.endpoints[0].ticket).read_all().to_pylist()


def test_string_literals_may_hold_nul_through_flight(cluster):
    import pyarrow.flight as flight

    with flight.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}") as client:
        assert _flight_sql(client, "SELECT 'a\x00b' AS s, LENGTH('a\x00b') AS l") == [{"s": "a\x00b", "l": 3}]
        # Through the native engine on the historicals: a computed column and a filter.
        rows = _flight_sql(client, "SELECT CONCAT('x\x00', CAST(n AS VARCHAR)) AS s FROM t WHERE n < 2 ORDER BY n")
        assert rows == [{"s": "x\x000"}, {"s": "x\x001"}]
        [row] = _flight_sql(client, "SELECT COUNT(*) AS c FROM t WHERE CONCAT(CAST(n AS VARCHAR), '\x00') = '7\x00'")
        assert row == {"c": 1}
        # The raw command-bytes form as well.
        info = client.get_flight_info(flight.FlightDescriptor.for_command("SELECT 'z\x00' AS s".encode()))
        assert client.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [{"s": "z\x00"}]


def test_nul_as_a_parameter_through_adbc(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) AS c FROM t WHERE CONCAT(CAST(n AS VARCHAR), ?) = ?", parameters=("\x00", "7\x00"))
        assert cur.fetch_arrow_table().to_pylist() == [{"c": 1}]


def test_nul_written_as_a_unicode_escape_through_adbc(conn):
    # ADBC passes the text as a C string, so U+0000 typed in a literal would end the statement
    # there; Calcite's U&'..' spelling says it in ASCII, and a cut statement's error says so.
    assert run(conn, "SELECT U&'a\\0000b' AS s, CHAR_LENGTH(U&'\\0000') AS n") == [{"s": "a\x00b", "n": 1}]
    [row] = run(conn, "SELECT COUNT(*) AS c FROM t WHERE CONCAT(CAST(n AS VARCHAR), U&'\\0000') = U&'7\\0000'")
    assert row == {"c": 1}
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match=r"write that one as U&'\\0000'"):
            cur.execute("SELECT 'a\x00b' AS s")
            cur.fetch_arrow_table()
