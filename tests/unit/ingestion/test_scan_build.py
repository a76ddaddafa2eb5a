"""Segments built by tasks that read their own rows (scan_build.py) against the shuffle path's
(split_into_blobs, then build_blobs): same segments, same rows, same manifests; and the plans
the driver refuses (read amplification, rows held at once, keys other than __time)."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.query import execute
from common.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.granularity import Granularity
from services.deep_storage import LocalDeepStorage
from services.ingestion import scan_build
from services.ingestion.arrow_scan import (
    SLICE_ROWS,
    TASK_COLUMN,
    ArrowScan,
    _tasks,
    count_on_driver,
    with_chunks,
)
from services.ingestion.build import BuildSpec, PlannedSegment, build_blobs, split_into_blobs
from services.ingestion.parquet_source import NativeGroup
from services.ingestion.partitioning import CHUNK_COLUMN, plan_partitions, row_keys, sample_fraction

DAY = 86_400_000
T0 = 1_442_016_000_000  # 2015-09-12
COLUMNS = (("__time", "ts", pa.timestamp("us", tz="UTC")), ("page", "page", pa.string()),
           ("user", "user", pa.string()), ("added", "added", pa.int64()), ("ratio", "ratio", pa.float64()))


def _parquet(tmp_path, rows: int, ordered: bool, row_group_size: int, days: int = 5) -> str:
    rng = random.Random(7)
    times = sorted(T0 + rng.randrange(days * DAY) for _ in range(rows))
    if not ordered:
        rng.shuffle(times)
    table = pa.table({
        "ts": pa.array(times, pa.timestamp("ms", tz="UTC")),
        "page": [None if i % 17 == 0 else f"page-{rng.randrange(3000)}" for i in range(rows)],
        "user": [f"u{rng.randrange(40)}" for _ in range(rows)],
        "added": [None if i % 11 == 0 else rng.randrange(-5, 10_000) for i in range(rows)],
        "ratio": [rng.choice([0.5, -0.0, 0.25, float("nan")]) for _ in range(rows)],
    })
    path = str(tmp_path / f"rows-{ordered}-{row_group_size}.parquet")
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def _scan(path: str) -> ArrowScan:
    meta = pq.ParquetFile(path).metadata
    groups = [NativeGroup((path,), (), (tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups)),))]
    return ArrowScan(_tasks(groups, 2), COLUMNS)


def _plan(path: str, gran: Granularity, rows_per_segment: int, key_columns=("__time",)):
    scan = _scan(path)
    slices: list = []
    counts = count_on_driver(scan, gran, slices)
    samples: dict = {}
    if sample_fraction(counts, rows_per_segment) > 0:
        table = pq.read_table(path, columns=["ts", *(c for c in key_columns if c != "__time")])
        keys = row_keys([table.column("ts" if c == "__time" else c) for c in key_columns])
        starts = gran.bucket_start(table.column("ts").cast(pa.int64()).to_numpy())
        for start, key in zip(starts.tolist(), keys):
            samples.setdefault(start, []).append(key)
    plan = plan_partitions(counts, gran, rows_per_segment, samples, key_columns)
    segments = {}
    for chunk in plan.chunks.values():
        for j in range(chunk.parts):
            segments[chunk.first_index + j] = PlannedSegment(SegmentId("wiki", chunk.interval, "v1", j), chunk.parts)
    return scan, slices, plan, BuildSpec(segments, "wiki/_ingest/job/")


def _contents(storage, rows: list[dict]) -> dict:
    out = {}
    for r in rows:
        manifest = json.loads(r["manifest"])
        manifest.pop("created")
        segment = Segment.open(os.path.join(storage.root, *r["location"].split("/")))
        got = execute({"queryType": "scan", "dataSource": "wiki", "intervals": ["2000/2030"],
                       "columns": ["__time", "page", "user", "added", "ratio"]}, [segment]).table
        values = sorted(tuple(repr(v) for v in row.values()) for row in got.to_pylist())
        out[r["part"]] = (r["rows"], json.dumps(manifest, sort_keys=True), values)
    return out


def _shuffled(tmp_path, scan, gran, plan, spec) -> dict:
    storage = LocalDeepStorage(str(tmp_path / "deep-shuffle"))
    blobs = []
    for i in range(len(scan.tasks)):
        task = pa.record_batch([pa.array([i], pa.int64())], names=[TASK_COLUMN])
        blobs.extend(split_into_blobs(with_chunks([task], scan, gran), plan.assign, drop=(CHUNK_COLUMN,)))
    rows = [r for b in build_blobs(blobs, spec, storage, str(tmp_path / "w1")) for r in b.to_pylist()]
    return _contents(storage, rows)


def _direct(tmp_path, tasks, scan, gran, plan, spec) -> dict:
    storage = LocalDeepStorage(str(tmp_path / "deep-direct"))
    rows = []
    for i in reversed(range(len(tasks))):  # any task order builds the same segments
        numbers = pa.record_batch([pa.array([i], pa.int64())], names=[TASK_COLUMN])
        rows.extend(r for b in scan_build.build_tasks([numbers], tasks, scan, gran, plan, spec, storage,
                                                      str(tmp_path / "w2")) for r in b.to_pylist())
    assert os.listdir(tmp_path / "w2") == []
    return _contents(storage, rows)


@pytest.mark.parametrize("ordered, row_group_size, rows_per_segment, granularity", [
    (True, 5_000, 3_000_000, "day"),  # several row groups, each in one or two days
    (True, 200_000, 3_000_000, "day"),  # one row group over every day: two tasks, each decodes part of it
    (True, 7_000, 1_500, "day"),  # days split into __time ranges
    (False, 6_000, 3_000_000, "hour"),  # no order: each task reads every row group
])
def test_tasks_build_what_the_shuffle_builds(tmp_path, ordered, row_group_size, rows_per_segment, granularity):
    gran = Granularity.parse(granularity)
    path = _parquet(tmp_path, 20_000, ordered, row_group_size)
    scan, slices, plan, spec = _plan(path, gran, rows_per_segment)
    assert sum(s.rows for s in slices) == 20_000
    tasks = scan_build.plan_tasks(slices, plan, 2, scan_build.held_rows_bound(rows_per_segment))
    assert tasks is not None and len(tasks) == 2
    assert sorted(p for t in tasks for p in t.parts) == sorted(spec.segments)
    if rows_per_segment < 20_000:
        assert any(c.parts > 1 for c in plan.chunks.values())
    direct = _direct(tmp_path, tasks, scan, gran, plan, spec)
    assert direct == _shuffled(tmp_path, scan, gran, plan, spec)
    assert sum(v[0] for v in direct.values()) == 20_000


def test_time_ordered_tasks_decode_little_more_than_the_file(tmp_path):
    path = _parquet(tmp_path, 40_000, True, 4_000, days=8)
    _, slices, plan, _ = _plan(path, Granularity.parse("day"), 3_000_000)
    tasks = scan_build.plan_tasks(slices, plan, 2, 6_000_000)
    decoded = sum(rows for t in tasks for _, _, _, rows in t.pieces)
    assert decoded <= 40_000 + 2 * 4_000  # at most a row group more per task boundary
    # Each task reads only the row groups its days are in.
    first, second = ({g for _, g, _, _ in t.pieces} for t in tasks)
    assert len(first & second) <= 1


def test_slices_bound_the_times_of_their_rows(tmp_path):
    path = _parquet(tmp_path, 3 * SLICE_ROWS // 2, False, SLICE_ROWS + 100)
    slices: list = []
    count_on_driver(_scan(path), Granularity.parse("day"), slices)
    ms = pq.read_table(path).column("ts").cast(pa.int64()).to_numpy()
    group_starts = [0, SLICE_ROWS + 100]
    assert [(s.group, s.offset, s.rows) for s in slices] == [(0, 0, SLICE_ROWS), (0, SLICE_ROWS, 100),
                                                             (1, 0, len(ms) - SLICE_ROWS - 100)]
    for s in slices:
        rows = ms[group_starts[s.group] + s.offset:group_starts[s.group] + s.offset + s.rows]
        assert (s.min_ms, s.max_ms) == (int(rows.min()), int(rows.max()))


def test_plans_the_shuffle_does_better_are_refused(tmp_path):
    gran = Granularity.parse("hour")
    path = _parquet(tmp_path, 20_000, False, 2_000)
    _, slices, plan, _ = _plan(path, gran, 3_000_000)
    # Unordered rows: every task decodes the whole file, so 4 tasks decode 4 times the rows.
    assert scan_build.plan_tasks(slices, plan, 4, 6_000_000) is None
    # ... and each task holds half the rows until its last row group: over a small bound.
    assert scan_build.plan_tasks(slices, plan, 2, 5_000) is None
    assert scan_build.plan_tasks(slices, plan, 2, 12_000) is not None
    # Chunks split by a key other than __time: slices say nothing about its ranges.
    ordered = _parquet(tmp_path, 20_000, True, 2_000)
    _, slices, plan, _ = _plan(ordered, Granularity.parse("day"), 1_000, key_columns=("user",))
    assert any(c.boundaries for c in plan.chunks.values())
    assert scan_build.plan_tasks(slices, plan, 2, 6_000_000) is None


def test_one_segment_makes_one_task(tmp_path):
    path = _parquet(tmp_path, 5_000, True, 1_000, days=1)
    _, slices, plan, spec = _plan(path, Granularity.parse("month"), 3_000_000)
    tasks = scan_build.plan_tasks(slices, plan, 2, 6_000_000)
    assert len(spec.segments) == 1 and len(tasks) == 1 and tasks[0].parts == (0,)
    assert np.sum([rows for _, _, _, rows in tasks[0].pieces]) == 5_000
