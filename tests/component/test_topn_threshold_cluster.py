"""Exact topN through a cluster of three historicals (issue 16): the broker's three-round
threshold algorithm gives the same rows as the in-process engine over the same segments and as
DuckDB over the same table, while historicals send far fewer rows than with the rounds turned
off (``topNThreshold: false``); metrics that can be negative fall back and stay exact. Native
queries over gRPC and SQL through the ADBC Flight SQL driver."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import duckdb
import numpy as np
import pyarrow as pa
import pytest

from common.query import execute
from common.segment import Segment
from tests.harness.embedded_cluster import EmbeddedCluster

ROWS = 60_000
URLS = 8_000
DAY_MS = 86_400_000
START = 1_442_016_000_000  # 2015-09-12


def _table() -> pa.Table:
    rng = np.random.default_rng(16)
    url = rng.zipf(1.2, ROWS) % URLS
    return pa.table({
        "__time": pa.array(START + rng.integers(0, 6 * DAY_MS, ROWS), pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "url": pa.array([f"https://site{u % 97}.example/{u}" for u in url]),
        "bytes": pa.array(rng.integers(0, 5_000, ROWS), pa.int64()),
        "score": pa.array(np.round(rng.random(ROWS) * 10, 3), pa.float64()),  # fractions
        "delta": pa.array(rng.integers(-300, 300, ROWS), pa.int64()),  # negative: no bounds, fall back
    })


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("tput")), historicals=3, replication=1)
    try:
        c.data = _table()
        descriptors = c.publish(c.data, "hits")
        c.descriptors = descriptors
        c.wait_queryable("hits", len(descriptors), replicas=1)
        storage = c.storage()
        c.local = [Segment.open(storage.uri(d.location).removeprefix("file://")) for d in descriptors]
        yield c
    finally:
        c.stop()


def shipped_rows(cluster) -> float:
    total = 0.0
    for metric in cluster.broker.metrics.partial_rows.collect():
        total += sum(s.value for s in metric.samples if s.name.endswith("_total"))
    return total


def topn(metric: dict, k: int, **context) -> dict:
    return {"queryType": "topN", "dataSource": "hits", "intervals": ["2015-09-01/2015-10-01"], "granularity": "all",
            "dimension": "url", "metric": metric["name"], "threshold": k,
            "aggregations": [metric, {"type": "count", "name": "n"}], "context": context}


def duck(cluster, agg: str, k: int) -> list:
    con = duckdb.connect()
    con.register("hits", cluster.data)
    return con.sql(f"SELECT url, {agg} AS m, count(*) AS n FROM hits GROUP BY url ORDER BY m DESC, url LIMIT {k}"
                   ).fetchall()


@pytest.mark.parametrize("metric, agg", [
    ({"type": "longSum", "name": "m", "fieldName": "bytes"}, "sum(bytes)"),
    ({"type": "count", "name": "m"}, "count(*)"),
    ({"type": "doubleSum", "name": "m", "fieldName": "score"}, "sum(score)"),
])
@pytest.mark.parametrize("k", [1, 10, 100])
def test_exact_topn_with_far_fewer_rows(cluster, metric, agg, k):
    before = shipped_rows(cluster)
    got, _ = cluster.client.native(topn(metric, k))
    rounds = shipped_rows(cluster) - before
    before = shipped_rows(cluster)
    everything, _ = cluster.client.native(topn(metric, k, topNThreshold=False))
    plain = shipped_rows(cluster) - before
    assert got.column("url").to_pylist() == everything.column("url").to_pylist()
    assert got.column("n").to_pylist() == everything.column("n").to_pylist()
    local = execute(topn(metric, k), cluster.local).table  # the in-process engine over the same segments
    assert got.column("url").to_pylist() == local.column("url").to_pylist()
    want = duck(cluster, agg, k)
    assert [(r["url"], r["n"]) for r in got.to_pylist()] == [(u, n) for u, m, n in want]
    assert np.allclose(got.column("m").to_numpy(zero_copy_only=False).astype(float), [m for _, m, _ in want],
                       rtol=1e-9)
    assert plain >= URLS / 2  # every historical sent every group it has
    assert rounds < plain / 4, (rounds, plain)


def test_a_metric_with_negative_values_falls_back_and_stays_exact(cluster):
    metric = {"type": "longSum", "name": "m", "fieldName": "delta"}
    got, _ = cluster.client.native(topn(metric, 10))
    want = duck(cluster, "sum(delta)", 10)
    assert [(r["url"], r["m"], r["n"]) for r in got.to_pylist()] == want


def test_sql_topn_through_adbc_is_exact(cluster):
    with adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT url, SUM(bytes) AS m, COUNT(*) AS n FROM hits GROUP BY url ORDER BY m DESC LIMIT 25")
            got = cur.fetch_arrow_table()
    assert [tuple(r.values()) for r in got.to_pylist()] == duck(cluster, "sum(bytes)", 25)


def serving(cluster) -> int:
    """How many historicals serve a segment of ``hits`` (each gets one call per round)."""
    return sum(any(node.node.segment(d.id) is not None for d in cluster.descriptors) for node in cluster.historicals)


def historical_calls(cluster) -> float:
    """RunQuery calls the historicals answered for topNs over ``hits`` (one per round each)."""
    total = 0.0
    for node in cluster.historicals:
        for metric in node.metrics.queries.collect():
            total += sum(s.value for s in metric.samples if s.name.endswith("_total")
                         and s.labels.get("datasource") == "hits" and s.labels.get("query_type") == "topN")
    return total


@pytest.mark.parametrize("k", [1, 5, 40])
def test_a_topn_over_few_groups_takes_one_round_and_stays_exact(cluster, k):
    # 30 URLs in all: every historical has at most 30 groups, so each sends them all in round 1
    # and the broker asks no more (three historicals: three calls, where the rounds make up to nine).
    few = sorted(set(cluster.data.column("url").to_pylist()))[:30]
    metric = {"type": "longSum", "name": "m", "fieldName": "bytes"}
    query = {**topn(metric, k), "filter": {"type": "in", "dimension": "url", "values": few}}
    before = historical_calls(cluster)
    got, _ = cluster.client.native(query)
    assert historical_calls(cluster) - before == serving(cluster)
    everything, _ = cluster.client.native({**query, "context": {"topNThreshold": False}})
    assert got.to_pylist() == everything.to_pylist()
    con = duckdb.connect()
    con.register("hits", cluster.data)
    urls = ", ".join("'" + u + "'" for u in few)
    want = con.sql(f"SELECT url, sum(bytes) AS m, count(*) AS n FROM hits WHERE url IN ({urls}) GROUP BY url "
                   f"ORDER BY m DESC, url LIMIT {k}").fetchall()
    assert [(r["url"], r["m"], r["n"]) for r in got.to_pylist()] == want


def test_many_groups_still_take_the_rounds(cluster):
    metric = {"type": "longSum", "name": "m", "fieldName": "bytes"}
    before = historical_calls(cluster)
    cluster.client.native(topn(metric, 10))
    assert historical_calls(cluster) - before > serving(cluster)  # 8,000 URLs: rounds 2 (and 3) asked
