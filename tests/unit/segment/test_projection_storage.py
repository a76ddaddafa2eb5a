"""A projection's parts use the compact encodings of the base columns (issue 11's storage goal
after issue 16's format), and segments written before that still read and answer the same.

``data/projection_before_compact.sseg`` was written by the builder before this change (a
projection's grouping column then always had per-value bitmaps and int8 codes, and its sketch
part was compressed at zstd level 1): 3000 rows, the formulas in ``_table`` below, one hourly
projection by channel with a count, a long sum and an HLL sketch of ``user``.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from common.query import execute
from common.query.projection import ProjectionSpec, projection_rows
from common.segment.builder import build_segment
from common.segment.part_codec import PartCompression, for_sketches
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.interval import Interval

OLD_FILE = os.path.join(os.path.dirname(__file__), "data", "projection_before_compact.sseg")
T0 = 1_577_836_800_000  # 2020-01-01
N = 3000
DAY = "2020-01-01/2020-01-02"
SPEC = {"type": "aggregate", "name": "hourly_channel",
        "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
        "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
        "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"},
                        {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"}]}
PREFIX = "projections/hourly_channel/"


def _table() -> pa.Table:
    return pa.table({
        "__time": pa.array([T0 + i * 28_000 for i in range(N)], pa.int64()),
        "channel": [None if i % 17 == 0 else f"#c{(i * 7) % 5}" for i in range(N)],
        "user": [f"u{(i * 13) % 997}" for i in range(N)],
        "added": pa.array([i % 50 for i in range(N)], pa.int64()),
    })


def _build(path: str, **kwargs) -> Segment:
    table = _table()
    build_segment(table, path, SegmentId("old", Interval(T0, T0 + 86_400_000), "v1", 0),
                  projections=[projection_rows(ProjectionSpec.from_json(SPEC), table)], **kwargs)
    return Segment.open(path, verify=True)


QUERIES = [
    {"queryType": "timeseries", "dataSource": "old", "intervals": [DAY], "granularity": "hour",
     "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "added"}]},
    {"queryType": "timeseries", "dataSource": "old", "intervals": [DAY], "granularity": "hour",
     "filter": {"type": "equals", "column": "channel", "matchValue": "#c3"},
     "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "groupBy", "dataSource": "old", "intervals": [DAY], "granularity": "all",
     "dimensions": ["channel"], "filter": {"type": "in", "dimension": "channel", "values": ["#c1", "#c4", None]},
     "aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"}]},
    {"queryType": "groupBy", "dataSource": "old", "intervals": [DAY], "granularity": "all",
     "dimensions": ["channel"], "filter": {"type": "null", "column": "channel"},
     "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "timeseries", "dataSource": "old", "intervals": [DAY], "granularity": "day",
     "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "round": True}]},
    {"queryType": "topN", "dataSource": "old", "intervals": [DAY], "granularity": "day", "dimension": "channel",
     "metric": "s", "threshold": 3, "aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"}]},
]


def _answers(seg: Segment, query: dict) -> tuple[list, list, int]:
    on = execute(query, [seg])
    off = execute({**query, "context": {"noProjections": True}}, [seg])
    return on.table.to_pylist(), off.table.to_pylist(), on.stats.rows_scanned


def _projection_bytes(seg: Segment) -> int:
    return sum(e.length for name, e in seg.manifest.files.items() if name.startswith(PREFIX))


@pytest.fixture(scope="module")
def new_segment(tmp_path_factory):
    seg = _build(str(tmp_path_factory.mktemp("projsize") / "new.sseg"))
    yield seg
    seg.close()


def test_the_file_written_before_reads_and_answers_as_base_rows_do():
    seg = Segment.open(OLD_FILE, verify=True)
    try:
        proj = seg.manifest.projections[0]
        channel = next(c for c in proj.columns if c.name == "channel")
        assert "bitmaps" in channel.parts and channel.spec.to_json() == {"sharedDictionary": "channel"}
        assert seg.column("channel").values().cast(pa.string()).to_pylist() == _table().column("channel").to_pylist()
        for query in QUERIES:
            on, off, scanned = _answers(seg, query)
            assert on == off, query
            assert scanned <= proj.num_rows, query  # the projection answered, through its bitmaps
    finally:
        seg.close()


def test_a_new_projection_has_no_bitmaps_packed_codes_and_a_smaller_sketch_part(new_segment):
    proj = new_segment.manifest.projections[0]
    channel = next(c for c in proj.columns if c.name == "channel")
    # The base channel column has no bitmaps (the default), so neither does the projection's.
    base = next(c for c in new_segment.manifest.columns if c.name == "channel")
    assert "bitmaps" not in base.parts
    assert set(channel.parts) == {"codes"}
    assert channel.spec.to_json() == {"sharedDictionary": "channel", "bitmaps": False, "codeBits": 4}
    assert {"stringIndexFromCodes", "bitPackedCodes"} <= set(new_segment.manifest.required_features)
    old = Segment.open(OLD_FILE, verify=True)
    try:
        assert _projection_bytes(new_segment) < _projection_bytes(old)
        sketch = PREFIX + "users/values"
        assert new_segment.manifest.files[sketch].codec == "zstd"
        assert new_segment.manifest.files[sketch].length < old.manifest.files[sketch].length
        for query in QUERIES:
            on, off, scanned = _answers(new_segment, query)
            assert on == off, query
            assert scanned <= proj.num_rows, query
            # The same answers as the file written before.
            assert on == _answers(old, query)[0], query
    finally:
        old.close()


def test_a_projection_column_keeps_bitmaps_when_its_base_column_has_them(tmp_path):
    seg = _build(str(tmp_path / "bitmaps.sseg"), string_bitmaps=True)
    try:
        channel = next(c for c in seg.manifest.projections[0].columns if c.name == "channel")
        assert "bitmaps" in channel.parts and channel.spec.to_json().get("bitmaps") is None
        for query in QUERIES:
            on, off, _ = _answers(seg, query)
            assert on == off, query
    finally:
        seg.close()


def test_uncompressed_builds_keep_every_part_as_is(tmp_path):
    seg = _build(str(tmp_path / "plain.sseg"), compression=None)
    try:
        assert all(e.codec is None for e in seg.manifest.files.values())
        for query in QUERIES[:2]:
            on, off, _ = _answers(seg, query)
            assert on == off, query
    finally:
        seg.close()


def test_sketch_policy_raises_the_zstd_level_and_skips_the_shuffle():
    policy = for_sketches(PartCompression())
    assert policy.codec == "zstd" and policy.level >= 17 and policy.try_shuffle is False
    assert for_sketches(PartCompression(level=19)).level == 19
    lz4 = for_sketches(PartCompression(codec="lz4_frame", level=None))
    assert lz4.codec == "lz4_frame" and lz4.level is None
