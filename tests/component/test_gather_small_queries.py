"""A query that reads few rows goes to as few historicals as hold its segments (issue 11's floor):
through a two-historical cluster where every segment has two replicas, a projection query is
answered by one historical (taking turns across queries), the same query with ``noProjections``
(more rows than the broker's limit) by both, with the same rows over gRPC and through the ADBC
Flight SQL driver; when the historical chosen stops answering, the other replica answers."""

from __future__ import annotations

import os

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from common.query import execute
from common.query.projection import ProjectionSpec, projection_rows
from common.segment import Segment
from common.segment.builder import build_segment
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from services.deep_storage.deep_storage import deep_storage_key
from tests.conftest import day_interval, make_events_table
from tests.harness.embedded_cluster import EmbeddedCluster

DAYS = 4
INTERVAL = "2020-01-01/2020-01-05"
HOURLY = ProjectionSpec.from_json({
    "type": "aggregate", "name": "hourly_channel",
    "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
    "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
})
HOURLY_QUERY = {"queryType": "timeseries", "dataSource": "events", "intervals": [INTERVAL], "granularity": "hour",
                "aggregations": [{"type": "count", "name": "c"},
                                 {"type": "longSum", "name": "a", "fieldName": "added"}]}
SQL = "SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c, SUM(added) AS a FROM events GROUP BY 1 ORDER BY 1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gather")
    c = EmbeddedCluster(str(directory / "cluster"), historicals=2)
    try:
        table = make_events_table(rows_per_day=3000, days=DAYS, seed=5)
        times = table.column("__time").cast(pa.int64()).to_numpy()
        storage = c.storage()
        descriptors, c.local, c.base_rows, c.projection_rows = [], [], 0, 0
        for d in range(DAYS):
            iv = day_interval(d)
            part = table.filter(pa.array((times >= iv.start) & (times < iv.end)))
            path = str(directory / f"day{d}.sseg")
            manifest = build_segment(part, path, SegmentId("events", iv, "v1", 0),
                                     projections=[projection_rows(HOURLY, part)])
            c.base_rows += manifest.num_rows
            c.projection_rows += manifest.projection("hourly_channel").num_rows
            key = deep_storage_key(manifest.segment_id)
            size = storage.push(path, key)
            descriptors.append(SegmentDescriptor.of(manifest, key, 1, os.path.getsize(path) if size is None else size))
            c.local.append(Segment.open(path))
        c.client.publish(descriptors)
        c.wait_queryable("events", DAYS, replicas=2)
        # Between the projection's rows and the base rows: the first are gathered, the second spread.
        assert c.projection_rows * 2 < c.base_rows
        c.broker.executor.gather_rows = c.projection_rows * 2
        yield c
    finally:
        for segment in getattr(c, "local", []):
            segment.close()
        c.stop()


def answered(historical) -> float:
    """Queries this historical answered, whatever their outcome."""
    return sum(s.value for m in historical.metrics.queries.collect() for s in m.samples if s.name.endswith("_total"))


def replica_retries(cluster) -> float:
    return sum(s.value for m in cluster.broker.metrics.replica_retries.collect() for s in m.samples
               if s.name.endswith("_total"))


def asked(cluster, run) -> tuple[list[bool], object]:
    before = [answered(h) for h in cluster.historicals]
    out = run()
    return [answered(h) > b for h, b in zip(cluster.historicals, before)], out


def test_a_projection_query_asks_one_historical_and_they_take_turns(cluster):
    want = execute(HOURLY_QUERY, cluster.local).table.to_pylist()
    chosen = []
    for _ in range(4):
        which, (got, stats) = asked(cluster, lambda: cluster.client.native(HOURLY_QUERY))
        assert sum(which) == 1
        chosen.append(which.index(True))
        assert got.to_pylist() == want and stats.segments == DAYS
    assert set(chosen) == {0, 1}


def test_the_base_rows_are_spread_over_both_historicals(cluster):
    base = dict(HOURLY_QUERY, context={"noProjections": True})
    which, (got, _) = asked(cluster, lambda: cluster.client.native(base))
    assert which == [True, True]
    assert got.to_pylist() == execute(HOURLY_QUERY, cluster.local).table.to_pylist()


def test_sql_through_flight_gives_the_same_rows_either_way(cluster):
    with adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}") as conn, conn.cursor() as cur:
        cur.execute(SQL)
        gathered = cur.fetch_arrow_table()
        cur.execute("SET noProjections = true; " + SQL)
        spread = cur.fetch_arrow_table()
    assert gathered.to_pylist() == spread.to_pylist()
    assert gathered.num_rows == 24 * DAYS


def test_when_the_chosen_historical_stops_answering_the_other_replica_answers(cluster):
    want = execute(HOURLY_QUERY, cluster.local).table.to_pylist()
    retries = replica_retries(cluster)
    cluster.historicals[0].grpc.stop(grace=0)  # still announced: the broker finds out by asking
    for _ in range(4):  # the turns give the stopped one some of these
        got, stats = cluster.client.native(HOURLY_QUERY)
        assert got.to_pylist() == want and stats.segments == DAYS
    assert replica_retries(cluster) > retries
