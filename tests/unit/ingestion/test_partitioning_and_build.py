"""Partition planning and segment building without Spark: what executors run, run directly."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.segment import Segment
from common.segment.segment_id import SegmentId
from common.types import Granularity, Interval, parse_instant
from common.types.interval import MIN_MS
from services.historical.storage import LocalDeepStorage
from services.ingestion.build import BuildSpec, PlannedSegment, build_partition, descriptor_of
from services.ingestion.partitioning import (
    CHUNK_COLUMN,
    PART_COLUMN,
    choose_boundaries,
    chunk_starts,
    key_columns_for,
    partitions_for,
    plan_partitions,
    row_keys,
    sample_fraction,
)

T0 = parse_instant("2020-01-01")
HOUR = 3_600_000


def test_chunk_starts():
    times = pa.array([T0 + 5, T0 + HOUR + 1, None], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    assert chunk_starts(times, Granularity.parse("hour")).to_pylist() == [T0, T0 + HOUR, None]
    assert chunk_starts(times, Granularity.parse("all")).to_pylist() == [MIN_MS, MIN_MS, None]


def test_boundaries_never_make_an_empty_range():
    assert partitions_for(10, 3) == 4 and partitions_for(0, 3) == 1
    sample = [((1, k),) for k in "aaaaabbbbbcd"]
    bounds = choose_boundaries(sample, 6)
    assert bounds == sorted(set(bounds)) and all(b > ((1, "a"),) for b in bounds)
    assert choose_boundaries([((1, "a"),)] * 10, 4) == []  # one key cannot be split
    assert row_keys([pa.array(["b", None])]) == [((1, "b"),), ((0,),)]


def test_plan_and_assign():
    counts = {T0: 100, T0 + HOUR: 10}
    assert sample_fraction(counts, 40) == pytest.approx(1.0)
    keys = [f"k{i:03d}" for i in range(100)]
    plan = plan_partitions(counts, Granularity.parse("hour"), 40, {T0: [((1, k),) for k in keys]}, ("page",))
    assert plan.total == plan.chunks[T0].parts + 1 and plan.chunks[T0].parts == 3
    assert plan.chunks[T0 + HOUR].first_index == 3
    batch = pa.RecordBatch.from_pydict({"page": keys + ["z"], CHUNK_COLUMN: [T0] * 100 + [T0 + HOUR]})
    parts = plan.assign(batch).to_pylist()
    assert parts[-1] == 3 and sorted(set(parts[:100])) == [0, 1, 2] and parts[:100] == sorted(parts[:100])
    assert key_columns_for(()) == ("__time",) and key_columns_for(("__time", "a")) == ("a",)
    with pytest.raises(ValidationError, match="was not planned"):
        plan.assign(pa.RecordBatch.from_pydict({"page": ["a"], CHUNK_COLUMN: [T0 + 5 * HOUR]}))


def _batch(times, pages, parts):
    return pa.RecordBatch.from_pydict({
        "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        "page": pages, "added": pa.array(range(len(times)), pa.int64()),
        CHUNK_COLUMN: pa.array([T0] * len(times), pa.int64()), PART_COLUMN: pa.array(parts, pa.int64())})


def test_build_partition_pushes_one_segment_per_index(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    iv = Interval(T0, T0 + HOUR)
    spec = BuildSpec({0: PlannedSegment(SegmentId("ds", iv, "v1", 4), 2),
                      1: PlannedSegment(SegmentId("ds", iv, "v1", 5), 2)}, "ds/_ingest/job/", ("page",))
    batches = [_batch([T0 + 3, T0 + 1], ["b", "a"], [0, 0]), _batch([T0 + 2, T0 + 9, T0], ["c", "x", "y"], [0, 1, 1])]
    out = pa.Table.from_batches(list(build_partition(iter(batches), spec, storage, str(tmp_path / "work"))))
    rows = out.to_pylist()
    assert [r["part"] for r in rows] == [0, 1] and [r["rows"] for r in rows] == [3, 2]
    assert storage.list("ds/_ingest/job") == sorted(r["location"] for r in rows)
    assert os.listdir(tmp_path / "work") == []  # local files are gone once pushed
    descriptors = [descriptor_of(r, spec) for r in rows]
    assert [d.id.partition for d in descriptors] == [4, 5] and {d.num_partitions for d in descriptors} == {2}
    seg = Segment.open(os.path.join(storage.root, *rows[0]["location"].split("/")))
    assert seg.id == SegmentId("ds", iv, "v1", 4)
    table = execute({"queryType": "scan", "dataSource": "ds", "intervals": ["2019/2021"],
                     "columns": ["__time", "page", "added"]}, [seg]).table
    assert table.column("page").to_pylist() == ["a", "c", "b"]  # sorted by time
    assert table.column("added").to_pylist() == [1, 0, 0]
    assert {c.name for c in seg.manifest.columns} == {"__time", "page", "added"}


def test_build_partition_refuses_interleaved_indexes(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    iv = Interval(T0, T0 + HOUR)
    spec = BuildSpec({i: PlannedSegment(SegmentId("ds", iv, "v1", i), 2) for i in range(2)}, "ds/j/")
    batches = [_batch([T0, T0, T0], ["a", "b", "c"], [0, 1, 0])]
    with pytest.raises(ValidationError, match="out of order"):
        list(build_partition(iter(batches), spec, storage, str(tmp_path / "w")))
    with pytest.raises(ValidationError, match="the plan does not have"):
        list(build_partition(iter([_batch([T0], ["a"], [7])]), spec, storage, str(tmp_path / "w")))


def test_row_outside_its_chunk_is_refused(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    spec = BuildSpec({0: PlannedSegment(SegmentId("ds", Interval(T0, T0 + HOUR), "v1", 0), 1)}, "ds/j/")
    with pytest.raises(ValidationError, match="outside the segment interval"):
        list(build_partition(iter([_batch([T0 + 2 * HOUR], ["a"], [0])]), spec, storage, str(tmp_path / "w")))
    assert storage.list("ds/j") == []
