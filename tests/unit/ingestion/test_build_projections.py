"""Executors build the target table's projections into every segment they write."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa

from common.query import execute
from common.segment import Segment
from common.segment.segment_id import SegmentId
from common.types import Interval, parse_instant
from services.ingestion.build import BuildSpec, PlannedSegment, build_one

T0 = parse_instant("2020-01-01")
HOUR = 3_600_000
HOURLY = {"type": "aggregate", "name": "hourly",
          "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
          "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
          "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"},
                          {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"}]}


class FolderStorage:
    """Deep storage as a plain folder (what build_one needs of it: push)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def push(self, path: str, key: str) -> int:
        target = os.path.join(self.root, *key.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(path, target)
        return os.path.getsize(target)


def test_build_one_embeds_the_projections(tmp_path):
    n = 500
    table = pa.table({
        "__time": pa.array([T0 + (i * 7) % 24 * HOUR + i for i in range(n)], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "channel": [["#en", "#fr", None, "#de", "#ja"][i % 5] for i in range(n)],
        "user": [f"u{i % 37}" for i in range(n)],
        "added": pa.array([i % 11 for i in range(n)], pa.int64()),
    })
    sid = SegmentId("wiki", Interval(T0, T0 + 24 * HOUR), "v1", 0)
    spec = BuildSpec({0: PlannedSegment(sid, 1)}, "wiki/_ingest/job/", (), (HOURLY,))
    storage = FolderStorage(str(tmp_path / "deep"))
    row = build_one(table.to_batches(), 0, PlannedSegment(sid, 1), spec, storage, str(tmp_path / "work")).to_pylist()[0]
    seg = Segment.open(os.path.join(storage.root, *row["location"].split("/")), verify=True)
    proj = seg.manifest.projection("hourly")
    assert proj is not None and proj.num_rows == 24 * 5 and proj.grouping_columns == ("__time", "channel")
    query = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2020-01-01/2020-01-02"],
             "granularity": "day", "aggregations": [{"type": "count", "name": "c"},
                                                    {"type": "longSum", "name": "a", "fieldName": "added"},
                                                    {"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}]}
    used = execute(query, [seg])
    base = execute({**query, "context": {"noProjections": True}}, [seg])
    assert used.table.to_pylist() == base.table.to_pylist()
    assert used.stats.rows_scanned == 120 and base.stats.rows_scanned == n


def test_dictionary_string_columns_build_the_same_segment_and_projection(tmp_path):
    """A Parquet scan hands STRING columns over as dictionary arrays: the segment (projection
    included) is the one plain strings build."""
    n = 500
    table = pa.table({
        "__time": pa.array([T0 + (i * 7) % 24 * HOUR + i for i in range(n)], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "channel": [["#en", "#fr", None, "#de", "#ja"][i % 5] for i in range(n)],
        "user": [f"u{i % 37}" for i in range(n)],
        "added": pa.array([i % 11 for i in range(n)], pa.int64()),
    })
    coded = pa.Table.from_arrays([c.dictionary_encode() if pa.types.is_string(c.type) else c for c in table.columns],
                                 names=table.column_names)
    sid = SegmentId("wiki", Interval(T0, T0 + 24 * HOUR), "v1", 0)
    spec = BuildSpec({0: PlannedSegment(sid, 1)}, "wiki/_ingest/job/", (), (HOURLY,))
    manifests = []
    for name, source in (("plain", table), ("coded", coded)):
        storage = FolderStorage(str(tmp_path / name))
        row = build_one(source.to_batches(max_chunksize=120), 0, PlannedSegment(sid, 1), spec, storage,
                        str(tmp_path / "work")).to_pylist()[0]
        manifest = Segment.open(os.path.join(storage.root, *row["location"].split("/")), verify=True).manifest
        manifests.append(manifest)
    plain, coded_manifest = manifests
    assert plain.files == coded_manifest.files and plain.columns == coded_manifest.columns
    assert plain.projections == coded_manifest.projections
