"""A rollup ingestion's aggregated output columns become the segments' metrics, typed as Druid's
aggregators; a plain ingestion has none."""

from __future__ import annotations

import pyarrow as pa
import pytest

from common.ingest.rollup_metrics import aggregator_type, rollup_metrics
from common.ingest.statement import parse_ingestion
from common.segment import Segment, SegmentId
from common.types import Interval
from services.deep_storage import LocalDeepStorage
from services.ingestion.build import BuildSpec, PlannedSegment, build_one, descriptor_of

EXTERN = ("TABLE(EXTERN('{\"type\":\"local\",\"files\":[\"/x.json\"]}', '{\"type\":\"json\"}', "
          "'[{\"name\":\"ts\",\"type\":\"string\"},{\"name\":\"channel\",\"type\":\"string\"},"
          "{\"name\":\"added\",\"type\":\"long\"},{\"name\":\"delta\",\"type\":\"double\"},"
          "{\"name\":\"page\",\"type\":\"string\"},{\"name\":\"user\",\"type\":\"string\"}]'))")


def _metrics(select_list: str, group: str = " GROUP BY 1, 2") -> dict:
    stmt = parse_ingestion(f"INSERT INTO t SELECT TIME_FLOOR(TIME_PARSE(ts), 'PT1H') AS __time, channel, {select_list} "
                           f"FROM {EXTERN}{group} PARTITIONED BY DAY")
    assert stmt.is_rollup == bool(group)
    return rollup_metrics(stmt.select)


def test_each_aggregate_gets_its_kind_and_grouping_columns_are_not_metrics():
    got = _metrics("COUNT(*) AS cnt, SUM(added) AS added, MIN(delta) AS lo, MAX(added) AS hi, "
                   "EARLIEST(page) AS first_page, LATEST_BY(page, TIME_PARSE(ts)) AS last_page, "
                   "ANY_VALUE(user) AS any_user, COUNT(user) AS users_seen")
    assert got == {"cnt": "count", "added": "sum", "lo": "min", "hi": "max", "first_page": "first",
                   "last_page": "last", "any_user": "any", "users_seen": "count"}


def test_aggregates_stored_finalized_or_combined_are_metrics_of_unknown_aggregator():
    got = _metrics("APPROX_COUNT_DISTINCT_BUILTIN(user) AS uniques, COUNT(DISTINCT page) AS pages, "
                   "SUM(added) / COUNT(*) AS mean, CAST(SUM(delta) AS BIGINT) AS delta_sum")
    assert got == {"uniques": None, "pages": None, "mean": None, "delta_sum": "sum"}


def test_no_group_by_means_no_metrics_even_for_expressions():
    assert _metrics("added * 2 AS doubled, UPPER(page) AS p", group="") == {}


@pytest.mark.parametrize("kind,arrow_type,expected", [
    ("sum", pa.int64(), "longSum"), ("sum", pa.float64(), "doubleSum"), ("sum", pa.float32(), "floatSum"),
    ("min", pa.int32(), "longMin"), ("max", pa.float64(), "doubleMax"), ("count", pa.int64(), "count"),
    ("first", pa.string(), "stringFirst"), ("last", pa.dictionary(pa.int32(), pa.string()), "stringLast"),
    ("any", pa.float64(), "doubleAny"), ("first", pa.int64(), "longFirst"),
    ("sum", pa.string(), None), ("max", pa.string(), None), (None, pa.int64(), None),
    ("sum", pa.list_(pa.int64()), None)])
def test_aggregator_type_follows_the_stored_type(kind, arrow_type, expected):
    assert aggregator_type(kind, arrow_type) == expected


def test_the_builder_records_typed_metrics_in_the_manifest_and_descriptor(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    iv = Interval.parse("2020-01-01/2020-01-02")
    spec = BuildSpec({0: PlannedSegment(SegmentId("ds", iv, "v1", 0), 1)}, "ds/_ingest/job/",
                     metrics={"cnt": "count", "added": "sum", "delta": "sum", "uniques": None, "gone": "sum"})
    batch = pa.record_batch({"__time": pa.array([iv.start, iv.start + 1], pa.int64()), "channel": ["#en", None],
                             "cnt": pa.array([2, 1], pa.int64()), "added": pa.array([5, -3], pa.int64()),
                             "delta": pa.array([0.5, -0.0], pa.float64()), "uniques": pa.array([1, 1], pa.int64())})
    out = build_one([batch], 0, spec.segments[0], spec, storage, str(tmp_path))
    descriptor = descriptor_of(out.to_pylist()[0], spec)
    expected = {"cnt": "count", "added": "longSum", "delta": "doubleSum", "uniques": None}
    assert descriptor.metrics() == expected  # a metric the rows lack ("gone") is not recorded
    seg = Segment.open(storage.root + "/" + out.column("location")[0].as_py())
    assert seg.manifest.metrics == expected


def test_kept_metrics_are_recorded_as_they_are(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    iv = Interval.parse("2020-01-01/2020-01-02")
    spec = BuildSpec({0: PlannedSegment(SegmentId("ds", iv, "v2", 0), 1)}, "ds/_ingest/compact/",
                     kept_metrics={"cnt": "count", "added": None, "gone": "longSum"})
    batch = pa.record_batch({"__time": pa.array([iv.start], pa.int64()), "cnt": pa.array([2], pa.int64()),
                             "added": pa.array([1.5], pa.float64())})
    out = build_one([batch], 0, spec.segments[0], spec, storage, str(tmp_path))
    assert descriptor_of(out.to_pylist()[0], spec).metrics() == {"cnt": "count", "added": None}
