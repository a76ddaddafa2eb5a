"""Multi-value strings through the real cluster: a multi-value column in two segments on two
historicals, queried over Flight SQL with the ADBC driver. The column is VARCHAR to clients (a row
reads as Druid shows it), filters match any value on the historicals, and GROUP BY gives one
group per value with the historicals' partial groups merged."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from common.types.column_type import MULTI_VALUE_STRING
from tests.harness.embedded_cluster import EmbeddedCluster

T0 = 1577836800000  # 2020-01-01
DAY = 86_400_000
TAGS = [["b", "a"], [], None, ["c"], ["a", "a", None], ["é", "b"]]
# As stored (SORTED_ARRAY: sorted, null first; no values: null) and as Druid shows a row.
SHOWN = ['["a","b"]', None, None, "c", '[null,"a","a"]', '["b","é"]']


def _day(day: int) -> pa.Table:
    n = len(TAGS)
    times = pa.array([T0 + day * DAY + i * 1000 for i in range(n)], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    return pa.table({"__time": times, "tags": pa.array(TAGS, pa.list_(pa.string())),
                     "n": pa.array(range(n), pa.int64())})


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    cluster = EmbeddedCluster(str(tmp_path_factory.mktemp("mv")), historicals=2)
    try:
        for day in (0, 1):
            cluster.publish(_day(day), "mv", column_types={"tags": MULTI_VALUE_STRING})
        cluster.wait_queryable("mv", 2, replicas=1)
        connection = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
        yield connection
        connection.close()
    finally:
        cluster.stop()


def _sql(conn, sql: str) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def test_rows_read_as_druid_shows_them(conn):
    got = _sql(conn, "SELECT tags FROM mv ORDER BY __time")
    assert got.schema.field("tags").type == pa.string()
    assert got.column("tags").to_pylist() == SHOWN * 2


def test_filters_match_any_value_on_the_historicals(conn):
    got = _sql(conn, "SELECT COUNT(*) AS c FROM mv WHERE tags = 'a'")
    assert got.column("c").to_pylist() == [4]
    got = _sql(conn, "SELECT n FROM mv WHERE tags IN ('c', 'é') OR tags LIKE 'z%' ORDER BY __time")
    assert got.column("n").to_pylist() == [3, 5, 3, 5]
    got = _sql(conn, "SELECT n FROM mv WHERE tags IS NULL ORDER BY __time")  # no values, or a null value
    assert got.column("n").to_pylist() == [1, 2, 4, 1, 2, 4]


def test_group_by_one_group_per_value_across_historicals(conn):
    got = _sql(conn, "SELECT tags, COUNT(*) AS c, SUM(n) AS s FROM mv GROUP BY tags")
    # per day: a in rows 0 and 4 (twice in row 4), b in 0 and 5, c in 3, é in 5; null for rows 1, 2
    # and the null value of row 4
    assert {r["tags"]: (r["c"], r["s"]) for r in got.to_pylist()} == {
        None: (6, 14), "a": (6, 16), "b": (4, 10), "c": (2, 6), "é": (2, 10)}


def test_information_schema_says_varchar(conn):
    got = _sql(conn, "SELECT DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'mv' AND COLUMN_NAME = 'tags'")
    assert got.column("DATA_TYPE").to_pylist() == ["VARCHAR"]
