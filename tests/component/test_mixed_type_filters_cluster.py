"""Filters on a column whose type changed between segments, through the real cluster: a broker
merging the segments' schemas (by ``columnTypeMergePolicy``) and two historicals reading each
segment cast to the merged type. Through the ADBC Flight SQL driver and native JSON over gRPC,
string and numeric filters answer instead of failing with an Arrow type error."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from tests.harness.embedded_cluster import EmbeddedCluster

T0 = 1577836800000  # 2020-01-01
DAY = 86_400_000


def _day(day: int, x: pa.Array) -> pa.Table:
    n = len(x)
    times = pa.array([T0 + day * DAY + i * 1000 for i in range(n)], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    return pa.table({"__time": times, "x": x, "s": pa.array(["a", "b", "a", "b", "a", "b"][:n])})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("mixedtypes")), historicals=2)
    try:
        # Text on the first day, numbers on the second (as a schemaless ingestion may discover).
        c.publish(_day(0, pa.array(["5", "abc", None, "7", "5.0", "6"])), "mixed")
        c.publish(_day(1, pa.array([5, 6, None, 7, 5, 10], pa.int64())), "mixed")
        c.wait_queryable("mixed", 2, replicas=1)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def conn(cluster):
    connection = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    yield connection
    connection.close()


def _count(conn, sql: str) -> int:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table().column("c")[0].as_py()


@pytest.mark.parametrize("where,count", [
    ("x = '5'", 3),  # "5" on the first day, 5 and 5 read as "5" on the second
    ("x IN ('5', '7', 'abc')", 6),
    ("x LIKE '1%'", 1),
    ("x >= '6' AND x < '7'", 2),  # text order: "6" and "6"
    ("NOT (x = '5')", 7),
])
def test_sql_with_the_least_restrictive_type(conn, where, count):
    # STRING (the default policy): the second day's numbers read as text.
    assert _count(conn, f"SELECT COUNT(*) AS c FROM mixed WHERE {where}") == count


@pytest.mark.parametrize("where,count", [
    ("x = 5", 4),  # "5" and "5.0" on the first day, 5 and 5 on the second
    ("x = '5'", 4),
    ("x IN (5, 7)", 6),
    ("x > 5 AND x <= 7", 4),
    ("x IS NULL", 3),  # the null on each day and "abc", which is no number
])
def test_sql_with_the_latest_type(conn, where, count):
    sql = f"SET columnTypeMergePolicy = 'latestInterval'; SELECT COUNT(*) AS c FROM mixed WHERE {where}"
    assert _count(conn, sql) == count


def test_native_string_filters(cluster):
    for flt, count in (({"type": "selector", "dimension": "x", "value": "5"}, 3),
                       ({"type": "in", "dimension": "x", "values": ["5", "7"]}, 5),
                       ({"type": "equals", "column": "x", "matchValue": 5, "matchValueType": "LONG"}, 4)):
        table, _ = cluster.client.native({
            "queryType": "timeseries", "dataSource": "mixed", "intervals": ["2020-01-01/2020-01-03"],
            "granularity": "all", "filter": flt, "aggregations": [{"type": "count", "name": "c"}]})
        assert table.column("c").to_pylist() == [count], flt
