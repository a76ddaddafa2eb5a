"""Segment building on an executor: the rows of one Spark partition (Arrow batches carrying their
segment's partition index) in, segment files pushed to deep storage, descriptor rows out.

Pure (no Spark): Spark's mapInArrow calls ``build_partition`` and tests call it directly. Rows of
one segment arrive together (the driver sorts each Spark partition by partition index), so only
one segment's rows are held at a time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from common.errors import ValidationError
from common.segment.builder import build_segment
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.segment.time_partitioner import segment_filename
from services.historical.storage import DeepStorage
from services.ingestion.partitioning import CHUNK_COLUMN, PART_COLUMN

DESCRIPTOR_SCHEMA = pa.schema([
    pa.field("part", pa.int64()),
    pa.field("location", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("rows", pa.int64()),
    pa.field("manifest", pa.string()),
])
DESCRIPTOR_DDL = "part BIGINT, location STRING, size BIGINT, rows BIGINT, manifest STRING"


@dataclass(frozen=True)
class PlannedSegment:
    segment_id: SegmentId
    num_partitions: int  # the chunk's core partition count (what the timeline checks)


@dataclass(frozen=True)
class BuildSpec:
    segments: Mapping[int, PlannedSegment]  # global partition index -> segment
    key_prefix: str  # deep storage folder of this job's uploads, ending in '/'
    sort_columns: tuple[str, ...] = ()

    def key(self, segment_id: SegmentId) -> str:
        return self.key_prefix + segment_filename(segment_id)


def _runs(parts: np.ndarray) -> list[tuple[int, int, int]]:
    """(partition index, first row, end row) of each run of equal indexes."""
    if len(parts) == 0:
        return []
    bounds = np.flatnonzero(np.concatenate(([True], parts[1:] != parts[:-1], [True])))
    return [(int(parts[lo]), int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def build_one(batches: list[pa.RecordBatch], part: int, planned: PlannedSegment, spec: BuildSpec,
              storage: DeepStorage, work_dir: str) -> pa.RecordBatch:
    """Build, push and describe one segment; the local file is removed whatever happens."""
    table = pa.Table.from_batches(batches)
    drop = [c for c in (PART_COLUMN, CHUNK_COLUMN) if c in table.column_names]
    table = table.drop_columns(drop)
    sid = planned.segment_id
    path = os.path.join(work_dir, segment_filename(sid))
    key = spec.key(sid)
    try:
        manifest = build_segment(table, path, sid, spec.sort_columns)
        size = storage.push(path, key)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return pa.RecordBatch.from_arrays([
        pa.array([part], pa.int64()),
        pa.array([key]), pa.array([size], pa.int64()), pa.array([manifest.num_rows], pa.int64()),
        pa.array([manifest.to_bytes().decode()]),
    ], schema=DESCRIPTOR_SCHEMA)


def descriptor_of(row: dict, spec: BuildSpec) -> SegmentDescriptor:
    """The descriptor of a built segment from its output row; identity comes from the plan."""
    planned = spec.segments[row["part"]]
    return SegmentDescriptor(planned.segment_id, int(row["size"]), int(row["rows"]), row["location"],
                             planned.num_partitions, row["manifest"])


def build_partition(batches: Iterable[pa.RecordBatch], spec: BuildSpec, storage: DeepStorage,
                    work_dir: str | None = None) -> Iterator[pa.RecordBatch]:
    """One descriptor row per segment built from ``batches`` (which carry PART_COLUMN)."""
    own_dir = work_dir is None
    work_dir = work_dir or tempfile.mkdtemp(prefix="strata-build-")
    current: int | None = None
    pending: list[pa.RecordBatch] = []
    done: set[int] = set()

    def finish() -> pa.RecordBatch:
        planned = spec.segments.get(current)
        if planned is None:
            raise ValidationError(f"rows for partition index {current} which the plan does not have")
        out = build_one(pending, current, planned, spec, storage, work_dir)
        done.add(current)
        return out

    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            parts = batch.column(PART_COLUMN).to_numpy(zero_copy_only=False)
            for part, lo, hi in _runs(parts):
                if part != current:
                    if current is not None:
                        yield finish()
                    if part in done:
                        raise ValidationError(f"rows of partition index {part} arrived out of order; the input "
                                              "must be sorted by partition index")
                    current, pending = part, []
                pending.append(batch.slice(lo, hi - lo))
        if current is not None and pending:
            yield finish()
    finally:
        if own_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


__all__ = ["DESCRIPTOR_DDL", "DESCRIPTOR_SCHEMA", "BuildSpec", "PlannedSegment", "build_one", "build_partition",
           "descriptor_of"]
