"""UNNEST through the real cluster: mean array rows (null, empty, null-holding and long arrays) in
three day segments on two historicals. SQL's CROSS JOIN UNNEST plans to a native ``unnest`` data
source that the historicals explode (the broker only merges), and Druid's own unnest JSON posted
to /druid/v2 runs the same way; every answer is compared with DuckDB's ``unnest`` and
``list_contains`` over the same rows."""

from __future__ import annotations

import json

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest
import requests

from tests.conftest import duck_connect
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.query.test_unnest_datasource import rows

DAY = 86_400_000
INTERVALS = ["2020-01-01/2020-01-04"]


def _table() -> pa.Table:
    table = rows(360).drop_columns(["tags"])
    times = table.column("__time").to_numpy() + (pa.array(range(table.num_rows)).to_numpy() // 120) * DAY
    return table.set_column(0, "__time", pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("unnest")), historicals=2)
    try:
        c.table = _table()
        c.publish(c.table, "arr")  # one segment per day
        c.wait_queryable("arr", 3, replicas=1)
        c.url = f"http://127.0.0.1:{c.broker.http.port}"
        c.flight = adbc.connect(f"grpc://127.0.0.1:{c.broker.flight.port}", autocommit=True)
        c.duck = duck_connect()
        plain = c.table.set_column(0, "__time", c.table.column("__time").cast(pa.int64()))
        c.duck.register("arr_arrow", plain)
        c.duck.execute("CREATE TABLE arr AS SELECT * FROM arr_arrow")
        c.duck.unregister("arr_arrow")
        yield c
        c.flight.close()
        c.duck.close()
    finally:
        c.stop()


def _flight(cluster, sql: str) -> pa.Table:
    with cluster.flight.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def _rows(table: pa.Table) -> list[tuple]:
    return [tuple(json.dumps(v) if isinstance(v, list) else v for v in row) for row in engine_rows(table)]


CASES = [
    ("SELECT s, x FROM arr CROSS JOIN UNNEST(al) AS u(x)", "SELECT s, unnest(al) FROM arr"),
    ("SELECT x, COUNT(*) AS c, SUM(n) AS t FROM arr CROSS JOIN UNNEST(astr) AS u(x) WHERE x IN ('a', 'é') "
     "AND n > 0 GROUP BY x",
     "SELECT x, COUNT(*), SUM(n) FROM (SELECT n, unnest(astr) AS x FROM arr) WHERE x IN ('a', 'é') AND n > 0 "
     "GROUP BY x"),
    ("SELECT COUNT(*) AS c FROM arr CROSS JOIN UNNEST(ad) AS u(d) WHERE d IS NULL OR d < 0",
     "SELECT COUNT(*) FROM (SELECT unnest(ad) AS d FROM arr) WHERE d IS NULL OR d < 0"),
    ("SELECT TIME_FLOOR(__time, 'P1D') AS d, COUNT(*) AS c FROM arr CROSS JOIN UNNEST(al) AS u(x) WHERE x = 2 "
     "GROUP BY 1",
     "SELECT __time // 86400000 * 86400000, COUNT(*) FROM (SELECT __time, unnest(al) AS x FROM arr) WHERE x = 2 "
     "GROUP BY 1"),
    ("SELECT x, y FROM arr CROSS JOIN UNNEST(ARRAY['p', 'q']) AS u(x) CROSS JOIN UNNEST(astr) AS v(y) "
     "WHERE y = 'zz'",
     "SELECT x, y FROM (SELECT unnest(['p', 'q']) AS x, astr FROM arr) CROSS JOIN (SELECT unnest(astr) AS y) "
     "WHERE y = 'zz'"),
    ("SELECT COUNT(*) AS c FROM arr WHERE ARRAY_CONTAINS(astr, 'ключ') AND NOT ARRAY_CONTAINS(al, 0)",
     "SELECT COUNT(*) FROM arr WHERE list_contains(astr, 'ключ') AND NOT list_contains(al, 0)"),
]


@pytest.mark.parametrize("sql,duck_sql", CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_sql_over_flight_matches_duckdb(cluster, sql, duck_sql):
    got = _rows(_flight(cluster, sql))
    want = [tuple(json.dumps(v) if isinstance(v, list) else v for v in r) for r in duck_rows(cluster.duck, duck_sql)]
    assert_rows_equal(got, want, ordered=False)


def test_unnest_plans_to_a_native_unnest_data_source(cluster):
    r = requests.post(cluster.url + "/druid/v2/sql", json={
        "query": "EXPLAIN PLAN FOR SELECT x, COUNT(*) FROM arr CROSS JOIN UNNEST(astr) AS u(x) WHERE x = 'a' "
                 "GROUP BY x"}, timeout=60)
    assert r.status_code == 200, r.text
    plan = json.loads(r.json()[0]["PLAN"])
    assert len(plan) == 1 and "brokerOperation" not in plan[0]  # no explosion on the broker
    ds = plan[0]["query"]["dataSource"]
    assert ds["type"] == "unnest" and ds["base"] == {"type": "table", "name": "arr"}
    assert ds["unnestFilter"]["column"] == "j0.unnest" and ds["unnestFilter"]["matchValue"] == "a"


def _unnest(column: str, unnest_filter=None) -> dict:
    ds = {"type": "unnest", "base": {"type": "table", "name": "arr"},
          "virtualColumn": {"type": "expression", "name": "j0.unnest", "expression": f"\"{column}\""}}
    if unnest_filter is not None:
        ds["unnestFilter"] = unnest_filter
    return ds


def test_druid_native_unnest_group_by(cluster):
    query = {"queryType": "groupBy", "dataSource": _unnest("astr", {"type": "not", "field": {
        "type": "equals", "column": "j0.unnest", "matchValue": "a"}}), "intervals": INTERVALS, "granularity": "all",
        "filter": {"type": "range", "column": "n", "matchValueType": "LONG", "lower": 1},
        "dimensions": [{"type": "default", "dimension": "j0.unnest", "outputName": "x"}],
        "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "t", "fieldName": "n"}]}
    r = requests.post(cluster.url + "/druid/v2", json=query, timeout=60)
    assert r.status_code == 200, r.text
    got = [(e["event"]["x"], e["event"]["c"], e["event"]["t"]) for e in r.json()]
    want = duck_rows(cluster.duck, "SELECT x, COUNT(*), SUM(n) FROM (SELECT n, unnest(astr) AS x FROM arr) "
                                   "WHERE x <> 'a' AND n >= 1 GROUP BY x")
    assert_rows_equal(got, want, ordered=False)


def test_druid_native_unnest_scan_streams(cluster):
    query = {"queryType": "scan", "dataSource": _unnest("al", {"type": "range", "column": "j0.unnest",
                                                                "matchValueType": "LONG", "lower": 2}),
             "intervals": INTERVALS, "columns": ["__time", "s", "j0.unnest"], "resultFormat": "compactedList"}
    r = requests.post(cluster.url + "/druid/v2", json=query, timeout=60)
    assert r.status_code == 200, r.text
    got = [tuple(e) for part in r.json() for e in part["events"]]
    want = duck_rows(cluster.duck, "SELECT __time, s, x FROM (SELECT __time, s, unnest(al) AS x FROM arr) "
                                   "WHERE x >= 2")
    assert_rows_equal(got, want, ordered=False)


def test_a_bad_unnest_query_is_a_clear_error(cluster):
    query = {"queryType": "scan", "dataSource": _unnest("missing"), "intervals": INTERVALS}
    r = requests.post(cluster.url + "/druid/v2", json=query, timeout=60)
    assert r.status_code == 400, r.text
    assert "missing" in r.text and "Traceback" not in r.text
