"""Arrays through the real cluster: ARRAY columns published in two segments on two historicals,
queried over Flight SQL with the ADBC driver. Arrays arrive as Arrow list columns (whole arrays,
nulls inside kept), array functions and arrayContainsElement filters run on the historicals, and
grouping on an array merges the historicals' partial groups by whole arrays."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from tests.harness.embedded_cluster import EmbeddedCluster

T0 = 1577836800000  # 2020-01-01
DAY = 86_400_000
LONGS = [[1, 2], [], None, [None, 3], [1, 2], [2]]
TEXTS = [["a", "é"], None, [], ["a"], [None], ["b", "a"]]


def _day(day: int) -> pa.Table:
    n = len(LONGS)
    times = pa.array([T0 + day * DAY + i * 1000 for i in range(n)], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    return pa.table({"__time": times, "al": pa.array(LONGS, pa.list_(pa.int64())),
                     "astr": pa.array(TEXTS, pa.list_(pa.string())), "s": pa.array(["x", "y"] * (n // 2))})


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    cluster = EmbeddedCluster(str(tmp_path_factory.mktemp("arrays")), historicals=2)
    try:
        cluster.publish(_day(0), "arrays")
        cluster.publish(_day(1), "arrays")
        cluster.wait_queryable("arrays", 2, replicas=1)
        connection = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
        yield connection
        connection.close()
    finally:
        cluster.stop()


def _sql(conn, sql: str) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def test_array_columns_are_flight_sql_list_columns(conn):
    got = _sql(conn, "SELECT al, astr, ARRAY_APPEND(al, 9) AS more FROM arrays ORDER BY __time")
    assert pa.types.is_list(got.schema.field("al").type) and got.schema.field("al").type.value_type == pa.int64()
    assert pa.types.is_list(got.schema.field("astr").type)
    assert got.column("al").to_pylist() == LONGS * 2
    assert got.column("astr").to_pylist() == TEXTS * 2
    assert got.column("more").to_pylist() == [None if a is None else a + [9] for a in LONGS] * 2


def test_group_by_whole_arrays_across_historicals(conn):
    got = _sql(conn, "SELECT al, COUNT(*) AS c FROM arrays GROUP BY al ORDER BY c DESC, ARRAY_LENGTH(al)")
    counts = {None if r["al"] is None else tuple(r["al"]): r["c"] for r in got.to_pylist()}
    assert counts == {(1, 2): 4, (): 2, None: 2, (None, 3): 2, (2,): 2}


def test_array_filters_and_aggregates(conn):
    got = _sql(conn, "SELECT COUNT(*) AS c FROM arrays WHERE ARRAY_CONTAINS(al, 2) AND NOT ARRAY_OVERLAP(astr, "
                     "ARRAY['é'])")
    assert got.column("c").to_pylist() == [4]  # [1, 2] with [null] and [2] with ['b', 'a'], on both days
    got = _sql(conn, "SELECT s, ARRAY_AGG(DISTINCT ARRAY_LENGTH(al)) AS lens, MIN(ARRAY_TO_STRING(astr, '+')) AS lo "
                     "FROM arrays GROUP BY s ORDER BY s")
    assert got.to_pylist() == [{"s": "x", "lens": [None, 2], "lo": ""}, {"s": "y", "lens": [0, 1, 2], "lo": "a"}]


def test_unnest_through_the_cluster(conn):
    got = _sql(conn, "SELECT x, COUNT(*) AS c FROM arrays CROSS JOIN UNNEST(astr) AS u(x) GROUP BY x ORDER BY x")
    # per day: 'a' three times, 'é' and 'b' once, one null element; [] and null arrays give no rows
    assert got.to_pylist() == [{"x": None, "c": 2}, {"x": "a", "c": 6}, {"x": "b", "c": 2}, {"x": "é", "c": 2}]


def test_array_to_mv_groups_per_value_across_historicals(conn):
    got = _sql(conn, "SELECT ARRAY_TO_MV(astr) AS v, COUNT(*) AS c FROM arrays GROUP BY 1")
    # per day: 'a' three times, 'é' and 'b' once; the null array, [] and the null element in the null group
    assert {r["v"]: r["c"] for r in got.to_pylist()} == {None: 6, "a": 6, "b": 2, "é": 2}
    got = _sql(conn, "SELECT JSON_PATHS(s) AS p, MV_TO_ARRAY(ARRAY_TO_MV(al)) AS m FROM arrays ORDER BY __time LIMIT 6")
    assert got.column("p").to_pylist() == [["$"]] * 6
    assert got.column("m").to_pylist() == [None if a is None else [None if x is None else str(x) for x in a]
                                           for a in LONGS]
