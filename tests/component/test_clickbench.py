"""ClickBench's 43 queries, in Druid's text, through a cluster (in-process servers, Flight SQL via
ADBC) on a small generated hits table, each answer checked against DuckDB over the same rows
(ClickBench's DuckDB text). The rows are stored as Druid's ClickBench ingestion spec stores them:
EventTime is __time, every integer a long, EventDate and the other times strings. The Spark load
path for the same rows is exercised by bench/clickbench.py."""

from __future__ import annotations

import duckdb
import pytest

from bench.clickbench import QUERIES, compare, druid_rows, druid_text, rows_of
from bench.hits_generator import generate
from tests.harness.embedded_cluster import EmbeddedCluster

ROWS = 20_000


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    import adbc_driver_flightsql.dbapi as adbc

    hits = generate(ROWS, seed=3)
    cluster = EmbeddedCluster(str(tmp_path_factory.mktemp("clickbench")), historicals=2)
    try:
        descriptors = cluster.publish(druid_rows(hits), "hits", segment_granularity="day")
        cluster.wait_queryable("hits", len(descriptors), timeout_s=120, replicas=2)
        duck = duckdb.connect()
        duck.execute("SET TimeZone = 'UTC'")
        duck.register("hits_arrow", hits)
        duck.execute("CREATE TABLE hits AS SELECT * FROM hits_arrow")
        conn = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
        yield conn, duck
        conn.close()
        duck.close()
    finally:
        cluster.stop()


def _marks(n: int):
    if n == 4:
        return [pytest.mark.xfail(reason="AVG(UserID) disagrees: strata answers -2.3e14 where DuckDB answers 3.5e18; "
                                         "the BIGINT sum behind AVG wraps in int64 (UserID values reach 2^63), as Druid's longSum and ClickHouse's avg do",
                                  strict=True)]
    return []


@pytest.mark.parametrize("n", [pytest.param(n, marks=_marks(n), id=f"Q{n}") for n in range(1, len(QUERIES) + 1)])
def test_clickbench_query_agrees_with_duckdb(env, n):
    conn, duck = env
    query = QUERIES[n - 1]
    want = duck.sql(query).to_arrow_table()
    cur = conn.cursor()
    try:
        cur.execute(druid_text(query))
        got = cur.fetch_arrow_table()
    finally:
        cur.close()
    if "LIMIT" in query and "ORDER BY" not in query:
        # Any LIMIT groups are a right answer (Q18): each must be one of the full answer's rows.
        full = rows_of(duck.sql(query[:query.index(" LIMIT")]).to_arrow_table())
        got_rows = rows_of(got)
        assert len(got_rows) == min(len(full), int(query.rsplit("LIMIT", 1)[1]))
        assert set(got_rows) <= set(full), f"Q{n}: rows not in the full answer"
        return
    ok, how = compare(got, want)
    assert ok, f"Q{n}: {how}\n{druid_text(query)}"
