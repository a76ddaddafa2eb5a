"""The catalog laid over segment schemas, end to end through Flight SQL (the real ADBC driver):
DDL statements, declared order and types, hidden columns, catalog-only tables, input tables."""

from __future__ import annotations

import time

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pytest

from common.demo import table as demo_table
from tests.harness.embedded_cluster import EmbeddedCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("overlay")), historicals=1)
    data = demo_table(5_000, days=2)
    c.descriptors = c.publish(data, "wiki")
    c.wait_queryable("wiki", len(c.descriptors))
    c.data = data
    yield c
    c.stop()


@pytest.fixture(scope="module")
def conn(cluster):
    with flight_sql.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}") as connection:
        yield connection


def sql(conn, text: str, parameters=None) -> pa.Table:
    cur = conn.cursor()
    try:
        cur.execute(text, parameters=parameters)
        return cur.fetch_arrow_table()
    finally:
        cur.close()


def eventually(check, timeout_s: float = 5.0):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_declared_columns_order_types_and_hidden_columns(cluster, conn):
    sql(conn, "CREATE TABLE wiki (channel VARCHAR, added DOUBLE, page VARCHAR) PARTITIONED BY DAY "
              "WITH (description = 'edits')")
    sql(conn, "ALTER TABLE wiki HIDE COLUMN comment")

    def check():
        got = sql(conn, "SELECT * FROM wiki LIMIT 3")
        assert got.column_names[:4] == ["__time", "channel", "added", "page"]
        assert "comment" not in got.column_names
        assert got.schema.field("added").type == pa.float64()  # declared DOUBLE over LONG segments
    eventually(check)
    cols = sql(conn, "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'wiki' "
                     "ORDER BY ORDINAL_POSITION").to_pylist()
    assert cols[:4] == [{"COLUMN_NAME": "__time", "DATA_TYPE": "TIMESTAMP"}, {"COLUMN_NAME": "channel", "DATA_TYPE": "VARCHAR"},
                        {"COLUMN_NAME": "added", "DATA_TYPE": "DOUBLE"}, {"COLUMN_NAME": "page", "DATA_TYPE": "VARCHAR"}]
    assert "comment" not in {c["COLUMN_NAME"] for c in cols}
    with pytest.raises(Exception, match="comment"):
        sql(conn, "SELECT comment FROM wiki")
    # Values are cast in filters too: a DOUBLE comparison on the declared type.
    total = sql(conn, "SELECT SUM(added) AS s FROM wiki WHERE added > 10.5").column("s")[0].as_py()
    assert total == float(sum(a for a in cluster.data.column("added").to_pylist() if a > 10.5))
    props = sql(conn, "SELECT SEGMENT_GRANULARITY, DESCRIPTION FROM INFORMATION_SCHEMA.TABLES "
                      "WHERE TABLE_NAME = 'wiki'").to_pylist()
    assert props == [{"SEGMENT_GRANULARITY": "P1D", "DESCRIPTION": "edits"}]


def test_a_catalog_only_table_is_queryable_with_typed_nulls(conn):
    sql(conn, "CREATE TABLE planned (__time TIMESTAMP, region VARCHAR, score BIGINT) PARTITIONED BY HOUR")
    got = eventually(lambda: _nonfailing(conn, "SELECT * FROM planned"))
    assert got.num_rows == 0 and got.column_names == ["__time", "region", "score"]
    assert got.schema.field("score").type == pa.int64()
    count = sql(conn, "SELECT COUNT(*) AS c, MAX(score) AS m FROM planned").to_pylist()
    assert count == [{"c": 0, "m": None}]
    tables = sql(conn, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid' "
                       "ORDER BY 1").column(0).to_pylist()
    assert "planned" in tables


def _nonfailing(conn, text):
    try:
        return sql(conn, text)
    except Exception as exc:
        raise AssertionError(str(exc)) from exc


def test_a_declared_column_missing_from_segments_reads_as_nulls(conn):
    sql(conn, "ALTER TABLE wiki ADD COLUMN rating BIGINT")
    got = eventually(lambda: _nonfailing(conn, "SELECT rating, COUNT(*) AS c FROM wiki GROUP BY 1"))
    assert got.to_pylist() == [{"rating": None, "c": 5_000}]


def test_input_tables_and_templates(conn, tmp_path):
    (tmp_path / "a.csv").write_text("x,1\ny,2\n")
    (tmp_path / "b.csv").write_text("z,3\n")
    sql(conn, f"CREATE EXTERNAL TABLE ext.letters (letter VARCHAR, n BIGINT) "
              f"WITH (source = 'local', baseDir = '{tmp_path}', format = 'csv')")
    got = eventually(lambda: _nonfailing(conn, "SELECT letter, n FROM TABLE(ext.letters(files => 'a.csv')) ORDER BY n"))
    assert got.to_pylist() == [{"letter": "x", "n": 1}, {"letter": "y", "n": 2}]
    both = sql(conn, "SELECT SUM(n) AS s FROM TABLE(ext.letters(files => ARRAY['a.csv', 'b.csv']))")
    assert both.to_pylist() == [{"s": 6}]
    with pytest.raises(Exception, match="template.*missing parameters: files, filePattern"):
        sql(conn, "SELECT * FROM ext.letters")


def test_drop_table_keeps_data_unless_purged(conn):
    sql(conn, "DROP TABLE planned")
    with pytest.raises(Exception, match="planned"):
        eventually(lambda: _expect_error(conn, "SELECT * FROM planned"))
    sql(conn, "DROP TABLE IF EXISTS planned")  # no error the second time


def _expect_error(conn, text):
    sql(conn, text)
    raise AssertionError("still there")


def test_a_rest_change_reaches_planning_through_the_version_watch(cluster, conn):
    """A catalog change reaches planning because the coordinator bumps the catalog version and the
    broker watches it, not because of the slow periodic reload: the reload is put an hour away
    first, so nothing but the watch can bring the change (no race with the reload's timer)."""
    import json
    import urllib.request

    cache = cluster.broker.catalog_cache
    base = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/coordinator/v1/catalog"
    spec = {"type": "datasource", "columns": [{"name": "fresh", "sqlType": "DOUBLE"}]}
    # This test stands alone: action=Force creates or replaces the entry whatever ran before.
    request = urllib.request.Request(f"{base}/tables/druid/wiki?action=Force", data=json.dumps(spec).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    refresh_s = cache.refresh_s
    cache.refresh_s = 3600.0
    try:
        loads = cache.loads
        cache._wake.set()  # one reload now, then the loop waits out the hour-long period
        deadline = time.monotonic() + 30
        while cache.loads == loads:
            assert time.monotonic() < deadline, "the catalog cache did not reload when woken"
            time.sleep(0.02)
        events_before = cache.watch_events
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
        deadline = time.monotonic() + 30
        while "fresh" not in sql(conn, "SELECT * FROM wiki LIMIT 1").column_names:
            assert time.monotonic() < deadline, "the broker did not see the catalog change through the watch"
            time.sleep(0.02)
    finally:
        cache.refresh_s = refresh_s
        cache._wake.set()
    assert cache.watch_events > events_before, "the change arrived without a catalog version event"
