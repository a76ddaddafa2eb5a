"""Rollup segments on a real cluster: the metrics their manifests record reach Druid's HTTP API.

The segments are built by the ingestion builder (``services.ingestion.build.build_one``, what
Spark's executors call) with the metrics the INSERT's SELECT names; DuckDB does the GROUP BY
Spark would do. One day comes from a SELECT with an approximate distinct count (a metric whose
aggregator Druid cannot name, as strata stores it finalized), the other without it, so the
datasource's metrics are a union and segmentMetadata's merge strategies differ. A plain
datasource beside it keeps every column a dimension."""

from __future__ import annotations

import duckdb
import orjson
import pyarrow as pa
import pytest
import requests

from common.demo import table as demo_table
from common.ingest.rollup_metrics import rollup_metrics
from common.ingest.statement import parse_ingestion
from common.segment.segment_id import SegmentId
from common.types.interval import Interval, parse_instant
from services.ingestion.build import BuildSpec, PlannedSegment, build_one, descriptor_of
from tests.harness.embedded_cluster import EmbeddedCluster

DAYS = ("2015-09-12", "2015-09-13")
EXTERN = ("TABLE(EXTERN('{\"type\":\"local\",\"files\":[\"/wiki.json\"]}', '{\"type\":\"json\"}', "
          "'[{\"name\":\"timestamp\",\"type\":\"string\"},{\"name\":\"channel\",\"type\":\"string\"},"
          "{\"name\":\"namespace\",\"type\":\"string\"},{\"name\":\"page\",\"type\":\"string\"},"
          "{\"name\":\"user\",\"type\":\"string\"},{\"name\":\"added\",\"type\":\"long\"},"
          "{\"name\":\"deleted\",\"type\":\"long\"},{\"name\":\"delta\",\"type\":\"long\"}]'))")
# (Druid SQL of the SELECT list after __time, channel, namespace; DuckDB's equivalent, its integer sums
# cast back to BIGINT as Spark's are)
AGGREGATES = [("COUNT(*) AS cnt", "COUNT(*) AS cnt"),
              ("SUM(added) AS added", "CAST(SUM(added) AS BIGINT) AS added"),
              ("SUM(CAST(delta AS DOUBLE)) AS delta_sum", "SUM(CAST(delta AS DOUBLE)) AS delta_sum"),
              ("MAX(deleted) AS max_deleted", "MAX(deleted) AS max_deleted"),
              ("EARLIEST(page) AS first_page", "arg_min(page, __time) AS first_page")]
UNIQUES = ("APPROX_COUNT_DISTINCT_BUILTIN(\"user\") AS users", "approx_count_distinct(\"user\") AS users")
TYPED = {"cnt": "count", "added": "longSum", "delta_sum": "doubleSum", "max_deleted": "longMax",
         "first_page": "stringFirst"}


def _rollup_segment(cluster, wiki: pa.Table, day: str, aggregates: list[tuple[str, str]]):
    """One day of ``wiki`` rolled up by hour, channel and namespace, built as ingestion builds it."""
    druid = ", ".join(a for a, _ in aggregates)
    stmt = parse_ingestion(f"INSERT INTO wiki_rollup SELECT TIME_FLOOR(TIME_PARSE(\"timestamp\"), 'PT1H') AS __time, "
                           f"channel, namespace, {druid} FROM {EXTERN} GROUP BY 1, 2, 3 PARTITIONED BY DAY")
    iv = Interval(parse_instant(day), parse_instant(day) + 86_400_000)
    rows = duckdb.sql(
        f"SELECT time_bucket(INTERVAL 1 HOUR, __time) AS __time, channel, namespace, "
        f"{', '.join(d for _, d in aggregates)} FROM wiki "
        f"WHERE epoch_ms(__time) >= {iv.start} AND epoch_ms(__time) < {iv.end} GROUP BY 1, 2, 3").to_arrow_table()
    rows = rows.set_column(0, "__time", rows.column("__time").cast(pa.timestamp("ms", tz="UTC")))
    spec = BuildSpec({0: PlannedSegment(SegmentId("wiki_rollup", iv, "v1", 0), 1)}, "wiki_rollup/_ingest/job/",
                     metrics=rollup_metrics(stmt.select))
    out = build_one(rows.to_batches(), 0, spec.segments[0], spec, cluster.storage(), cluster.work_dir)
    return descriptor_of(out.to_pylist()[0], spec)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("rollupmetrics")
    c = EmbeddedCluster(str(root), historicals=1)
    try:
        c.work_dir = str(root)
        c.wiki = wiki = demo_table(3_000, days=2)  # noqa: F841 - read by DuckDB
        c.rollup = [_rollup_segment(c, wiki, DAYS[0], AGGREGATES),
                    _rollup_segment(c, wiki, DAYS[1], [*AGGREGATES, UNIQUES])]
        c.client.publish(c.rollup)
        c.plain = c.publish(c.wiki, "wiki")
        c.wait_queryable("wiki_rollup", 2)
        c.wait_queryable("wiki", len(c.plain))
        c.url = f"http://127.0.0.1:{c.broker.http.port}"
        yield c
    finally:
        c.stop()


def _get(cluster, path: str):
    r = requests.get(cluster.url + path, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _sql(cluster, query: str) -> list[dict]:
    r = requests.post(cluster.url + "/druid/v2/sql", json={"query": query}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_builder_recorded_typed_metrics(cluster):
    assert cluster.rollup[0].metrics() == TYPED
    assert cluster.rollup[1].metrics() == {**TYPED, "users": None}
    assert all(d.metrics() == {} for d in cluster.plain)


def test_datasource_endpoints_split_dimensions_from_metrics(cluster):
    shape = _get(cluster, "/druid/v2/datasources/wiki_rollup")
    assert sorted(shape) == ["dimensions", "metrics"]
    assert sorted(shape["dimensions"]) == ["channel", "namespace"]
    assert sorted(shape["metrics"]) == sorted([*TYPED, "users"])  # the union over both days' segments
    assert _get(cluster, "/druid/v2/datasources/wiki_rollup/dimensions") == shape["dimensions"]
    assert _get(cluster, "/druid/v2/datasources/wiki_rollup/metrics") == shape["metrics"]
    plain = _get(cluster, "/druid/v2/datasources/wiki")
    assert plain["metrics"] == [] and set(plain["dimensions"]) == set(cluster.wiki.column_names) - {"__time"}
    assert _get(cluster, "/druid/v2/datasources/wiki/metrics") == []


def test_sys_segments_dimensions_and_metrics(cluster):
    rows = _sql(cluster, "SELECT datasource, \"start\", dimensions, metrics FROM sys.segments "
                         "WHERE datasource IN ('wiki', 'wiki_rollup') ORDER BY datasource, \"start\"")
    rollup = [r for r in rows if r["datasource"] == "wiki_rollup"]
    assert [r["start"][:10] for r in rollup] == list(DAYS)
    for r, extra in zip(rollup, ([], ["users"])):
        assert r["dimensions"] == '["channel","namespace"]'  # Druid's compact JSON text
        assert sorted(orjson.loads(r["metrics"])) == sorted([*TYPED, *extra])
        assert " " not in r["metrics"]
    plain = [r for r in rows if r["datasource"] == "wiki"]
    assert plain and all(r["metrics"] == "[]" for r in plain)
    assert all(set(orjson.loads(r["dimensions"])) == set(cluster.wiki.column_names) - {"__time"} for r in plain)


def test_segment_metadata_aggregators(cluster):
    def metadata(**extra) -> list[dict]:
        r = requests.post(cluster.url + "/druid/v2", json={"queryType": "segmentMetadata",
                                                           "dataSource": "wiki_rollup", **extra}, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    expected = {n: ({"type": t, "name": n} if t == "count" else {"type": t, "name": n, "fieldName": n})
                for n, t in TYPED.items()}
    assert [e["aggregators"] for e in metadata()] == [None, None]  # not among Druid's default analysisTypes
    first, second = metadata(analysisTypes=["aggregators"])
    assert first["aggregators"] == expected
    assert second["aggregators"] is None  # "users" has no Druid aggregator: unknown
    assert metadata(analysisTypes=["aggregators"], merge=True)[0]["aggregators"] is None  # strict
    [lenient] = metadata(analysisTypes=["aggregators"], merge=True, aggregatorMergeStrategy="lenient")
    assert lenient["aggregators"] == expected
    bad = requests.post(cluster.url + "/druid/v2", json={"queryType": "segmentMetadata", "dataSource": "wiki_rollup",
                                                         "aggregatorMergeStrategy": "newest"}, timeout=60)
    assert bad.status_code == 400 and "aggregatorMergeStrategy 'newest'" in bad.json()["errorMessage"]


def test_the_rolled_up_rows_answer_as_the_raw_rows_do(cluster):
    wiki = cluster.wiki  # noqa: F841 - read by DuckDB
    got = _sql(cluster, "SELECT channel, SUM(cnt) AS n, SUM(added) AS added, MAX(max_deleted) AS d "
                        "FROM wiki_rollup GROUP BY channel ORDER BY channel")
    expected = duckdb.sql("SELECT channel, COUNT(*), SUM(added), MAX(deleted) FROM wiki GROUP BY 1 "
                          "ORDER BY 1 NULLS FIRST").fetchall()
    assert [(r["channel"], r["n"], r["added"], r["d"]) for r in got] == [tuple(e) for e in expected]
