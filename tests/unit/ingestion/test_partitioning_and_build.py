"""Partition planning and segment building without Spark: what executors run, run directly."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.segment import Segment
from common.segment.segment_id import SegmentId
from common.types import Granularity, Interval, parse_instant
from common.types.interval import MIN_MS
from services.deep_storage import LocalDeepStorage
from services.ingestion.build import (
    BLOB_SCHEMA,
    BuildSpec,
    PlannedSegment,
    build_blobs,
    build_partition,
    compact_dictionaries,
    decode_blob,
    descriptor_of,
    encode_blob,
    split_into_blobs,
)
from services.ingestion.partitioning import (
    CHUNK_COLUMN,
    PART_COLUMN,
    choose_boundaries,
    chunk_starts,
    key_columns_for,
    partitions_for,
    plan_partitions,
    range_offsets,
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


# ---- vectorized assignment and blobs -------------------------------------------------------------------


def _random_keys(rng, n: int, kinds: list[str]) -> list[pa.Array]:
    cols = []
    for kind in kinds:
        if kind == "int":
            cols.append(pa.array([rng.choice([None, rng.randint(-5, 5)]) for _ in range(n)], pa.int64()))
        elif kind == "str":
            cols.append(pa.array([rng.choice([None, "", "a", "ab", "b", "é", "z", "\U0001F600", "Z"]) for _ in range(n)]))
        elif kind == "ts":
            cols.append(pa.array([rng.choice([None, rng.randint(-3, 3) * 1000 + rng.choice([0, 1])]) for _ in range(n)],
                                 pa.int64()).cast(pa.timestamp("us", tz="UTC")))
        elif kind == "bool":
            cols.append(pa.array([rng.choice([None, True, False]) for _ in range(n)], pa.bool_()))
        else:
            cols.append(pa.array([rng.choice([None, float("nan"), -0.0, 0.0, 1.5, -2.0]) for _ in range(n)]))
    return cols


def test_range_offsets_equal_bisect_over_row_keys():
    import bisect
    import random

    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 200)
        cols = _random_keys(rng, n, rng.sample(["int", "str", "ts", "bool", "float"], rng.randint(1, 3)))
        keys = row_keys(cols)
        bounds = choose_boundaries(rng.sample(keys, min(n, rng.randint(1, 40))), rng.randint(2, 8))
        assert range_offsets(cols, bounds).tolist() == [bisect.bisect_right(bounds, k) for k in keys]


def test_assign_mixes_split_and_whole_chunks_in_one_batch():
    counts = {T0: 100, T0 + HOUR: 10, T0 + 2 * HOUR: 100}
    samples = {start: [((1, f"k{i:03d}"),) for i in range(100)] for start in (T0, T0 + 2 * HOUR)}
    plan = plan_partitions(counts, Granularity.parse("hour"), 40, samples, ("page",))
    starts = [T0, T0 + HOUR, T0 + 2 * HOUR] * 40
    pages = [f"k{(i * 7) % 100:03d}" for i in range(len(starts))]
    parts = plan.assign(pa.RecordBatch.from_pydict({"page": pages, CHUNK_COLUMN: starts})).to_pylist()
    for start, page, part in zip(starts, pages, parts):
        # the same row alone in a batch of its own goes to the same partition
        alone = plan.assign(pa.RecordBatch.from_pydict({"page": [page], CHUNK_COLUMN: [start]})).to_pylist()
        assert alone == [part]
        chunk = plan.chunks[start]
        assert chunk.first_index <= part < chunk.first_index + chunk.parts


def test_blobs_carry_rows_to_their_segment(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    iv = Interval(T0, T0 + HOUR)
    spec = BuildSpec({0: PlannedSegment(SegmentId("ds", iv, "v1", 0), 2),
                      1: PlannedSegment(SegmentId("ds", iv, "v1", 1), 2)}, "ds/_ingest/job/")
    batches = [_batch([T0 + i for i in range(10)], [f"p{i}" for i in range(10)], [i % 2 for i in range(10)])
               for _ in range(3)]
    blobs = list(split_into_blobs(iter(batches), lambda b: b.column(PART_COLUMN), drop=(PART_COLUMN, CHUNK_COLUMN),
                                  max_rows=4))
    assert len(blobs) > 2 and all(b.schema == BLOB_SCHEMA and b.num_rows == 1 for b in blobs)
    assert all(CHUNK_COLUMN not in decode_blob(b.column("blob")[0].as_buffer()).column_names for b in blobs)
    rows = pa.Table.from_batches(list(build_blobs(iter(blobs[::-1]), spec, storage, str(tmp_path / "w")))).to_pylist()
    assert [(r["part"], r["rows"]) for r in rows] == [(0, 15), (1, 15)]
    assert os.listdir(tmp_path / "w") == []
    bad = pa.RecordBatch.from_arrays([pa.array([9], pa.int32()), blobs[0].column("blob")], schema=BLOB_SCHEMA)
    with pytest.raises(ValidationError, match="the plan does not have"):
        list(build_blobs(iter([bad]), spec, storage, str(tmp_path / "w")))


def test_blobs_of_a_segment_in_any_order_build_the_same_segment(tmp_path, monkeypatch):
    """The shuffle hands a segment's blobs over in no set order; build_blobs puts time-ordered
    blobs back in time order, so the segment is the same bytes and build_segment does not sort
    (its sort gathers every column: most of the building CPU for wide JSON rows)."""
    import random

    import services.ingestion.build as build

    iv = Interval(T0, T0 + HOUR)
    spec = BuildSpec({0: PlannedSegment(SegmentId("ds", iv, "v1", 0), 1)}, "ds/_ingest/job/", json_columns=("doc",))
    batch = pa.RecordBatch.from_pydict({
        "__time": pa.array([T0 + i // 3 for i in range(60)], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "doc": [f'{{"a": {i}, "b": {{"c": "v{i % 7}"}}}}' for i in range(60)]})
    blobs = list(split_into_blobs((batch.slice(lo, 9) for lo in range(0, 60, 9)),
                                  lambda b: pa.array([0] * b.num_rows, pa.int64()), max_rows=9))
    assert len(blobs) == 7
    sorts = []
    real_build = build.build_segment

    def build_segment(table, *args, **kwargs):
        times = table.column("__time").cast(pa.int64()).to_pylist()
        sorts.append(times != sorted(times))
        return real_build(table, *args, **kwargs)

    monkeypatch.setattr(build, "build_segment", build_segment)
    contents = set()
    for seed in range(4):
        order = blobs[:] if seed == 0 else random.Random(seed).sample(blobs, len(blobs))
        storage = LocalDeepStorage(str(tmp_path / f"deep{seed}"))
        [row] = pa.Table.from_batches(list(build.build_blobs(iter(order), spec, storage,
                                                             str(tmp_path / "w")))).to_pylist()
        manifest = json.loads(row["manifest"])
        manifest.pop("created")
        contents.add(json.dumps(manifest, sort_keys=True))
        segment = Segment.open(os.path.join(storage.root, *row["location"].split("/")))
        got = execute({"queryType": "scan", "dataSource": "ds", "intervals": ["2019/2021"],
                       "columns": ["__time", "doc"]}, [segment]).table
        assert [json.loads(d)["a"] for d in got.column("doc").to_pylist()] == list(range(60))
    assert len(contents) == 1 and sorts == [False] * 4


def test_wide_rows_make_several_small_blobs():
    batch = pa.RecordBatch.from_pydict({"__time": pa.array([T0] * 100, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                                        "text": ["x" * 1000] * 100})
    blobs = list(split_into_blobs(iter([batch]), lambda b: pa.array([0] * b.num_rows, pa.int64()), max_bytes=10_000))
    tables = [decode_blob(b.column("blob")[0].as_buffer()) for b in blobs]
    assert len(blobs) >= 10 and sum(t.num_rows for t in tables) == 100
    assert all(t.nbytes <= 12_000 for t in tables)


def test_range_offsets_of_dictionary_keys_equal_their_values():
    import random

    rng = random.Random(11)
    for _ in range(100):
        n = rng.randint(1, 200)
        [col] = _random_keys(rng, n, ["str"])
        bounds = choose_boundaries(rng.sample(row_keys([col]), min(n, rng.randint(1, 40))), rng.randint(2, 8))
        assert range_offsets([col.dictionary_encode()], bounds).tolist() == range_offsets([col], bounds).tolist()


def test_dictionary_batches_build_the_segments_plain_batches_build(tmp_path):
    """A Parquet scan sends STRING columns as dictionary arrays, each batch with its own
    dictionary; the blobs carry them, and the segments hold what plain strings give."""
    iv = Interval(T0, T0 + HOUR)
    spec = BuildSpec({0: PlannedSegment(SegmentId("ds", iv, "v1", 0), 2),
                      1: PlannedSegment(SegmentId("ds", iv, "v1", 1), 2)}, "ds/_ingest/job/")
    plain, coded = [], []
    for k in range(4):
        pages = [None if (i + k) % 5 == 0 else f"p{(i * 7 + k * 3) % 13}" for i in range(40)]
        batch = _batch([T0 + k * 40 + i for i in range(40)], pages, [(i + k) % 2 for i in range(40)])
        plain.append(batch)
        coded.append(pa.RecordBatch.from_arrays(
            [c.dictionary_encode() if pa.types.is_string(c.type) else c for c in batch.columns], names=batch.schema.names))
    built = {}
    for name, batches in (("plain", plain), ("coded", coded)):
        storage = LocalDeepStorage(str(tmp_path / name))
        blobs = list(split_into_blobs(iter(batches), lambda b: b.column(PART_COLUMN), drop=(PART_COLUMN, CHUNK_COLUMN),
                                      max_rows=30))
        rows = pa.Table.from_batches(list(build_blobs(iter(blobs), spec, storage, str(tmp_path / "w")))).to_pylist()
        built[name] = {r["part"]: r for r in rows}
        segments = [Segment.open(os.path.join(storage.root, *r["location"].split("/"))) for r in rows]
        built[name + " rows"] = [execute({"queryType": "scan", "dataSource": "ds", "intervals": ["2019/2021"],
                                          "columns": ["__time", "page", "added"]}, [s]).table for s in segments]
    for part in (0, 1):
        a, b = built["plain"][part], built["coded"][part]
        manifest_a, manifest_b = (json.loads(r["manifest"]) for r in (a, b))
        manifest_a.pop("created"), manifest_b.pop("created")
        assert manifest_a == manifest_b and a["rows"] == b["rows"] == 80
    assert built["plain rows"] == built["coded rows"]


def test_a_batch_spread_over_many_segments_sends_each_only_its_dictionary_entries():
    n = 20_000
    ids = [None if i % 11 == 0 else f"id-{i:08d}-{'x' * 20}" for i in range(n)]
    batch = pa.RecordBatch.from_pydict({"__time": pa.array([T0 + i for i in range(n)], pa.int64()),
                                        "id": pa.array(ids).dictionary_encode()})
    parts = 40
    blobs = list(split_into_blobs(iter([batch]), lambda b: pa.array([i % parts for i in range(b.num_rows)], pa.int64())))
    assert len(blobs) == parts
    sent = sum(b.column("blob")[0].as_buffer().size for b in blobs)
    whole = len(encode_blob([batch]).buffers()[2])
    assert sent < 2 * whole  # not the whole dictionary once per segment (that was about 40x)
    got = {}
    for b in blobs:
        table = decode_blob(b.column("blob")[0].as_buffer())
        part = b.column("part")[0].as_py()
        assert len(table.column("id").combine_chunks().dictionary) <= table.num_rows
        got[part] = table.column("id").to_pylist()
    for part in range(parts):
        assert got[part] == ids[part::parts]


def test_compacting_keeps_rows_nulls_and_unsliced_columns():
    column = pa.DictionaryArray.from_arrays(pa.array([3, None, 1, 3, 0], pa.int8()), pa.array(["a", "b", "c", "d"]))
    batch = pa.RecordBatch.from_arrays([column, pa.array([1, 2, 3, 4, 5])], names=["s", "n"]).slice(1, 3)
    out = compact_dictionaries(batch)
    assert out.schema == batch.schema and out.to_pylist() == batch.to_pylist()
    assert out.column("s").dictionary.to_pylist() == ["b", "d"]
    assert compact_dictionaries(out).column("s").dictionary.to_pylist() == ["b", "d"]
