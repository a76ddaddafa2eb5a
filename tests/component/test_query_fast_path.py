"""The broker's fast path (issue 16), on a cluster of two historicals.

Queries that touch no segment never call a historical: ``SELECT 1``, system tables,
INFORMATION_SCHEMA, a catalog-only table and an interval with no segment, through the real ADBC
Flight SQL driver. Each historical counts the RunQuery calls it answers (its ``queries``
metric); the count must not move, while a query over served segments moves it (so the counter
is the right witness).

A query served by one historical is read on the caller's thread; killing it (or its client
leaving) still stops it, through the broker's call watchdog."""

from __future__ import annotations

import threading
import time

import adbc_driver_flightsql.dbapi as adbc
import pytest

from common.demo import table as demo_table
from tests.harness.embedded_cluster import EmbeddedCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("segfree")), historicals=2)
    try:
        segments = c.publish(demo_table(5_000, days=2), "wiki")
        c.wait_queryable("wiki", len(segments), replicas=2)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def conn(cluster):
    connection = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    yield connection
    connection.close()


def run(conn, sql: str):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def run_query_calls(cluster) -> float:
    """RunQuery calls answered by all historicals, whatever their outcome."""
    total = 0.0
    for h in cluster.historicals:
        for metric in h.metrics.queries.collect():
            total += sum(s.value for s in metric.samples if s.name.endswith("_total"))
    return total


def _eventually(check, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except Exception:  # noqa: BLE001 - the catalog reaches the broker a moment later
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("sql, rows", [
    ("SELECT 1 AS one", 1),
    ("SELECT 1 + 2 AS three, 'x' AS s", 1),
    ("SELECT COUNT(*) AS c FROM sys.segments", 1),
    ("SELECT server_type FROM sys.servers", None),
    ("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'", None),
    ("SELECT COUNT(*) AS c FROM wiki WHERE __time >= TIMESTAMP '2001-01-01' AND __time < TIMESTAMP '2001-01-02'", 1),
])
def test_a_segment_free_query_never_calls_a_historical(cluster, conn, sql, rows):
    before = run_query_calls(cluster)
    for _ in range(3):  # planning, the plan cache and execution: none of them may call out
        got = run(conn, sql)
    if rows is not None:
        assert got.num_rows == rows
    else:
        assert got.num_rows >= 1
    assert run_query_calls(cluster) == before


def test_a_catalog_only_table_never_calls_a_historical(cluster, conn):
    run(conn, "CREATE TABLE planned (__time TIMESTAMP, region VARCHAR, score BIGINT) PARTITIONED BY HOUR")
    _eventually(lambda: run(conn, "SELECT * FROM planned"))
    before = run_query_calls(cluster)
    assert run(conn, "SELECT * FROM planned").num_rows == 0
    assert run(conn, "SELECT COUNT(*) AS c, MAX(score) AS m FROM planned").to_pylist() == [{"c": 0, "m": None}]
    assert run_query_calls(cluster) == before


def test_a_query_over_segments_is_counted(cluster, conn):
    before = run_query_calls(cluster)
    got = run(conn, "SELECT COUNT(*) AS c FROM wiki")
    assert got.column("c")[0].as_py() == 5_000
    assert run_query_calls(cluster) > before


def test_a_stalled_one_historical_query_is_cancelled_by_the_watchdog(cluster, monkeypatch):
    from services.broker.query_executor import Cancelled
    from services.historical import server as historical_server

    release = threading.Event()
    started = threading.Event()
    real_run = historical_server.engine.run

    released = []  # True when the test let the stalled call go, False when its wait ran out

    def stalled(*args, **kwargs):  # the historical is slow: it waits until the test lets it go
        started.set()
        released.append(release.wait(60))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(historical_server.engine, "run", stalled)
    killed = threading.Event()
    query = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
             "granularity": "all", "aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"}]}
    # (a sum: a plain count is answered from the segment's metadata, without the engine's run)
    assert len(cluster.broker.executor.view.plan("wiki", [_interval(query)]).by_server) == 1
    threading.Thread(target=lambda: (started.wait(30), killed.set()), daemon=True).start()
    try:
        with pytest.raises(Cancelled, match="cancelled"):
            cluster.broker.executor.execute(query, 120.0, "q-watchdog", is_active=lambda: not killed.is_set())
    finally:
        release.set()
    # Cancelled, not waited out: the stalled call was still waiting when the query gave up (the
    # test released it only afterwards), which no wall-clock figure has to show.
    deadline = time.monotonic() + 30
    while not released:
        assert time.monotonic() < deadline, "the stalled historical call never returned"
        time.sleep(0.02)
    assert released == [True]


def _interval(query):
    from common.types.interval import Interval

    return Interval.parse(query["intervals"][0])
