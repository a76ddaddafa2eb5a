"""segmentMetadata's ``aggregators``: a rollup segment's metrics as Druid's aggregator factories,
given only when analysisTypes asks, merged by aggregatorMergeStrategy."""

from __future__ import annotations

import json

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval, parse_instant
from services.broker.druid_http.native_resource import segment_metadata


def _descriptor(day: int, metrics: dict | None) -> SegmentDescriptor:
    iv = Interval(parse_instant(f"2015-09-{day}"), parse_instant(f"2015-09-{day + 1}"))
    manifest = {"columns": [{"name": "__time", "type": "LONG"}, {"name": "page", "type": "STRING"},
                            {"name": "cnt", "type": "LONG"}, {"name": "added", "type": "DOUBLE"}]}
    if metrics is not None:
        manifest["metrics"] = [{"name": n, "type": t} for n, t in metrics.items()]
    return SegmentDescriptor(SegmentId("wiki", iv, "v1", 0), 10, 3, "k", 1, json.dumps(manifest))


ROLLUP = {"cnt": "count", "added": "doubleSum"}
COUNT = {"type": "count", "name": "cnt"}
SUM = {"type": "doubleSum", "name": "added", "fieldName": "added"}


def test_aggregators_only_when_asked():
    segments = [_descriptor(12, ROLLUP)]
    assert [e["aggregators"] for e in segment_metadata(segments)] == [None]  # Druid's default analysisTypes
    assert [e["aggregators"] for e in segment_metadata(segments, analysis_types=["cardinality"])] == [None]
    [entry] = segment_metadata(segments, analysis_types=["aggregators"])
    assert entry["aggregators"] == {"cnt": COUNT, "added": SUM}
    [plain] = segment_metadata([_descriptor(13, None)], analysis_types=["aggregators"])
    assert plain["aggregators"] == {}  # no rollup: no metrics
    [unknown] = segment_metadata([_descriptor(14, {"cnt": None})], analysis_types=["aggregators"])
    assert unknown["aggregators"] is None  # an aggregator Druid has no name for: unknown


def test_merge_strategies():
    same = [_descriptor(12, ROLLUP), _descriptor(13, ROLLUP)]
    [merged] = segment_metadata(same, merge=True, analysis_types=["aggregators"])
    assert merged["aggregators"] == {"cnt": COUNT, "added": SUM}
    conflict = [_descriptor(12, ROLLUP), _descriptor(13, {"cnt": "count", "added": "longSum"}),
                _descriptor(14, {"cnt": None})]
    strict = segment_metadata(conflict, merge=True, analysis_types=["aggregators"])[0]["aggregators"]
    lenient = segment_metadata(conflict, True, ["aggregators"], "lenient")[0]["aggregators"]
    latest = segment_metadata(conflict[:2], True, ["aggregators"], "latest")[0]["aggregators"]
    assert strict is None
    assert lenient == {"cnt": COUNT, "added": None}  # the unknown segment is skipped; the conflict nulls one
    assert latest == {"cnt": COUNT, "added": {"type": "longSum", "name": "added", "fieldName": "added"}}
    assert segment_metadata(conflict, merge=True)[0]["aggregators"] is None
