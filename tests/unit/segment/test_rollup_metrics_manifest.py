"""A rollup segment's manifest records its metric columns; older and plain segments have none."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.segment import Segment, SegmentId, build_segment
from common.segment.descriptor import SegmentDescriptor
from common.segment.manifest import SegmentManifest
from common.types import Interval

IV = Interval.parse("2020-01-01/2020-01-02")
SID = SegmentId("ds", IV, "v1", 0)
OLD_FILE = os.path.join(os.path.dirname(__file__), "data", "before_compression.sseg")
T0 = IV.start


def _rollup_table() -> pa.Table:
    return pa.table({"__time": pa.array([T0, T0, T0 + 3_600_000], pa.int64()),
                     "channel": ["#en", "#fr", None],
                     "cnt": pa.array([3, 1, 2], pa.int64()),
                     "added": pa.array([1.5, -0.0, float("nan")], pa.float64()),
                     "first_page": ["a", None, "c"]})


def test_metrics_round_trip_through_the_file_and_the_descriptor(tmp_path):
    path = str(tmp_path / "rollup.sseg")
    metrics = {"cnt": "count", "added": "doubleSum", "first_page": None}
    built = build_segment(_rollup_table(), path, SID, metrics=metrics)
    assert built.metrics == metrics
    seg = Segment.open(path, verify=True)
    assert seg.manifest.metrics == metrics
    assert list(seg.manifest.metrics) == ["cnt", "added", "first_page"]  # the SELECT's order kept
    again = SegmentManifest.from_json(json.loads(seg.manifest.to_bytes()), "again")
    assert again.metrics == metrics
    assert SegmentDescriptor.of(seg.manifest, "k", 1).metrics() == metrics
    # An older reader ignores the key: no required feature names it.
    assert seg.manifest.required_features == built.required_features and "metrics" not in built.required_features


def test_a_plain_segment_has_no_metrics_key(tmp_path):
    path = str(tmp_path / "plain.sseg")
    built = build_segment(_rollup_table(), path, SID)
    assert built.metrics == {} and "metrics" not in built.to_json()
    assert SegmentDescriptor.of(built, "k", 1).metrics() == {}


def test_a_segment_written_before_metrics_existed_opens_with_none():
    seg = Segment.open(OLD_FILE, verify=True)
    assert seg.manifest.metrics == {}
    assert SegmentDescriptor.of(seg.manifest, "k", 1).metrics() == {}
    assert seg.column("n").values().to_pylist()[:2] == [None, 3 - 700]  # and reads as before


def test_a_metric_that_is_not_a_column_is_refused_naming_it(tmp_path):
    with pytest.raises(ValidationError, match="metric 'missing' is not a column"):
        build_segment(_rollup_table(), str(tmp_path / "x.sseg"), SID, metrics={"missing": "longSum"})
    with pytest.raises(ValidationError, match="metric '__time'"):
        build_segment(_rollup_table(), str(tmp_path / "x.sseg"), SID, metrics={"__time": "longMax"})
    assert not os.path.exists(tmp_path / "x.sseg")
