"""Projection rows of several segments answered in one pass on a historical (issue 11): through a
one-historical cluster (so every segment lands on the one historical, which batches the projection
sources of a query), native queries over gRPC and SQL through the ADBC Flight SQL driver give the
same rows with projections as with ``noProjections``, over day segments of which one has no
projection; the historical's metrics still count every segment the projection served."""

from __future__ import annotations

import math
import os
import re
import urllib.request

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pytest

from common.query.projection import ProjectionSpec, projection_rows
from common.segment.builder import build_segment
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from services.deep_storage.deep_storage import deep_storage_key
from tests.conftest import day_interval, make_events_table
from tests.harness.embedded_cluster import EmbeddedCluster

DAYS = 4
NO_PROJECTION_DAY = 2
INTERVAL = "2020-01-01/2020-01-05"
HOURLY = ProjectionSpec.from_json({
    "type": "aggregate", "name": "hourly_channel",
    "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
    "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"},
                    {"type": "doubleSum", "name": "price", "fieldName": "price"},
                    {"type": "longMin", "name": "dmin", "fieldName": "delta"},
                    {"type": "longMax", "name": "dmax", "fieldName": "delta"}],
})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("projection-batches")
    c = EmbeddedCluster(str(directory / "cluster"), historicals=1)
    try:
        table = make_events_table(rows_per_day=1500, days=DAYS, seed=11)
        times = table.column("__time").cast(pa.int64()).to_numpy()
        storage = c.storage()
        descriptors = []
        for d in range(DAYS):
            iv = day_interval(d)
            part = table.filter(pa.array((times >= iv.start) & (times < iv.end)))
            path = str(directory / f"day{d}.sseg")
            manifest = build_segment(part, path, SegmentId("events", iv, "v1", 0),
                                     projections=[] if d == NO_PROJECTION_DAY else [projection_rows(HOURLY, part)])
            key = deep_storage_key(manifest.segment_id)
            size = storage.push(path, key)
            descriptors.append(SegmentDescriptor.of(manifest, key, 1, os.path.getsize(path) if size is None else size))
        c.client.publish(descriptors)
        c.wait_queryable("events", DAYS)
        yield c
    finally:
        c.stop()


def _native(granularity: str, **extra) -> dict:
    return {"queryType": "timeseries", "dataSource": "events", "intervals": [INTERVAL], "granularity": granularity,
            "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"},
                             {"type": "doubleSum", "name": "p", "fieldName": "price"},
                             {"type": "longMin", "name": "lo", "fieldName": "delta"}], **extra}


QUERIES = [
    _native("hour"),
    _native("day", filter={"type": "in", "dimension": "channel", "values": ["#en.wikipedia", "", "é漢字"]}),
    _native("all", intervals=["2020-01-01T05:00/2020-01-04T07:00"]),
    {"queryType": "topN", "dataSource": "events", "intervals": [INTERVAL], "granularity": "day",
     "dimension": "channel", "metric": "a", "threshold": 3,
     "aggregations": [{"type": "longSum", "name": "a", "fieldName": "added"},
                      {"type": "longMax", "name": "hi", "fieldName": "delta"}]},
    {"queryType": "groupBy", "dataSource": "events", "intervals": [INTERVAL], "granularity": "all",
     "dimensions": ["channel"], "filter": {"type": "selector", "dimension": "channel", "value": None},
     "aggregations": [{"type": "count", "name": "c"}, {"type": "doubleSum", "name": "p", "fieldName": "price"}]},
    {"queryType": "groupBy", "dataSource": "events", "intervals": [INTERVAL], "granularity": "day",
     "dimensions": ["channel"], "aggregations": [{"type": "count", "name": "c"}]},
]


def _rows(table: pa.Table) -> list:
    out = []
    for row in table.to_pylist():
        out.append(tuple(round(v, 6) if isinstance(v, float) and math.isfinite(v) else v for v in row.values()))
    return sorted(out, key=repr)


def _served_by_projection(cluster) -> float:
    url = f"http://127.0.0.1:{cluster.historicals[0].http.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    found = re.search(r'^strata_segments_queried_total\{datasource="events",projection="hourly_channel"\}\s+(\S+)$',
                      text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q['queryType']}-{q['granularity']}")
def test_native_queries_answer_the_same_with_projection_rows_in_one_pass(cluster, query):
    base, _ = cluster.client.native({**query, "context": {"noProjections": True}})
    before = _served_by_projection(cluster)
    got, _ = cluster.client.native(query)
    assert _rows(got) == _rows(base) and got.num_rows > 0
    # Every segment but the one without the projection was read from projection rows.
    assert _served_by_projection(cluster) - before == DAYS - 1


def test_sql_through_adbc_answers_the_same(cluster):
    sql = ("SELECT TIME_FLOOR(__time, 'PT1H') AS t, channel, COUNT(*) AS c, SUM(added) AS a FROM events "
           "WHERE channel IN ('#en.wikipedia', '#fr.wikipedia') GROUP BY 1, 2")
    with adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            got = cur.fetch_arrow_table()
            cur.execute("SET noProjections = true; " + sql)
            base = cur.fetch_arrow_table()
    assert got.num_rows > 0 and _rows(got) == _rows(base)


# Issue 23: what reads __time other than as hour floors or hour-edge bounds is not answered from the
# hourly projection's buckets; filtered aggregators over its stored sums are (their filter runs on
# projection rows, one segment at a time).
TIME_READING_SQL = [
    "SELECT COUNT(*) AS c FROM events WHERE TIME_EXTRACT(__time, 'MINUTE') < 30",
    "SELECT COUNT(*) AS c FROM events WHERE TIMESTAMP_TO_MILLIS(__time) >= 1577838600000",
    "SELECT COUNT(*) AS c FROM events WHERE CAST(__time AS BIGINT) >= 1577838600000",
    "SELECT COUNT(*) AS c FROM events WHERE __time NOT BETWEEN TIMESTAMP '2020-01-02 00:30:00' "
    "AND TIMESTAMP '2020-01-02 05:30:00'",
    "SELECT COUNT(*) AS c FROM events WHERE NOT (__time >= TIMESTAMP '2020-01-02 00:30:00')",
    "SELECT COUNT(*) AS c FROM events WHERE __time >= TIMESTAMP '2020-01-02 00:30:00' OR channel = '#en.wikipedia'",
    "SELECT __time, channel, COUNT(*) AS c FROM events GROUP BY 1, 2",
    "SELECT TIME_FLOOR(__time, 'P1D', NULL, 'Asia/Kolkata') AS d, SUM(added) AS a FROM events GROUP BY 1",
]
SERVED_SQL = [
    "SELECT TIME_FLOOR(__time, 'P1D', NULL, 'America/New_York') AS d, channel, SUM(added) AS a "
    "FROM events GROUP BY 1, 2",
    "SELECT channel, SUM(added) FILTER (WHERE channel = '#en.wikipedia') AS a, "
    "COUNT(*) FILTER (WHERE channel <> '#fr.wikipedia') AS c FROM events GROUP BY 1",
    "SELECT COUNT(*) AS c FROM events WHERE __time >= TIMESTAMP '2020-01-02 07:00:00' OR channel = '#en.wikipedia'",
]


@pytest.mark.parametrize("sql", TIME_READING_SQL + SERVED_SQL, ids=[f"q{i}" for i in range(len(TIME_READING_SQL)
                                                                                         + len(SERVED_SQL))])
def test_sql_reading_time_answers_as_base_rows_do(cluster, sql):
    before = _served_by_projection(cluster)
    with adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute(sql)
            got = cur.fetch_arrow_table()
            served = _served_by_projection(cluster) - before
            cur.execute("SET noProjections = true; " + sql)
            base = cur.fetch_arrow_table()
    assert got.num_rows > 0 and _rows(got) == _rows(base)
    if sql in SERVED_SQL:
        assert served == DAYS - 1  # every segment with the projection read it
    elif "2020-01-02" not in sql:
        assert served == 0  # no segment could: each reads __time inside the hours
    else:
        assert served <= DAYS - 2  # the bound is inside an hour of 2020-01-02 only
