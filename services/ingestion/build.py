"""Segment building on an executor: the rows of one Spark partition in, segment files pushed to
deep storage, descriptor rows out.

Rows travel to their builder as *blobs*: ``split_into_blobs`` (upstream of the shuffle) cuts each
Arrow batch by segment and serializes the pieces as Arrow IPC streams, so Spark shuffles a few
large binary values per segment instead of millions of rows, and the builder gets Arrow back
without a per-row conversion. ``build_blobs`` builds every segment its Spark partition received
(one, when the driver routes partition index i to Spark partition i). ``build_partition`` builds
from row batches that carry their partition index, sorted by it.

Pure (no Spark): Spark's mapInArrow calls these and tests call them directly.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.ingest.rollup_metrics import aggregator_type
from common.query.projection import projection_rows, spec_of
from common.segment.builder import build_segment
from common.types.column_properties import MULTI_VALUE_PROPERTY
from common.types.column_type import JSON, MULTI_VALUE_STRING, TIME_COLUMN
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.segment.time_partitioner import segment_filename
from services.deep_storage import DeepStorage
from services.ingestion.partitioning import CHUNK_COLUMN, PART_COLUMN

DESCRIPTOR_SCHEMA = pa.schema([
    pa.field("part", pa.int64()),
    pa.field("location", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("rows", pa.int64()),
    pa.field("manifest", pa.string()),
])
DESCRIPTOR_DDL = "part BIGINT, location STRING, size BIGINT, rows BIGINT, manifest STRING"
BLOB_SCHEMA = pa.schema([pa.field("part", pa.int32()), pa.field("blob", pa.binary())])
BLOB_DDL = "part INT, blob BINARY"
# A blob is cut once this many rows (or bytes) of one segment are pending: big enough that the
# per-blob IPC schema and shuffle-record overheads vanish, small enough to bound executor memory.
BLOB_ROWS = 1 << 17
BLOB_BYTES = 32 << 20
# zstd roughly halves what crosses the Python/JVM boundary twice and the shuffle, for less CPU
# than moving the bytes saved (measured: about 15% less CPU for the ingestion benchmark's build).
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd" if pa.Codec.is_available("zstd") else None)


@dataclass(frozen=True)
class PlannedSegment:
    segment_id: SegmentId
    num_partitions: int  # the chunk's core partition count (what the timeline checks)


@dataclass(frozen=True)
class BuildSpec:
    segments: Mapping[int, PlannedSegment]  # global partition index -> segment
    key_prefix: str  # deep storage folder of this job's uploads, ending in '/'
    sort_columns: tuple[str, ...] = ()
    projections: tuple[dict, ...] = ()  # the target table's projection definitions (catalog)
    json_columns: tuple[str, ...] = ()  # columns holding JSON documents, stored as nested columns
    column_options: Mapping[str, dict] = field(default_factory=dict)  # per column encoding settings
    metrics: Mapping[str, str | None] = field(default_factory=dict)  # a rollup's metric -> aggregator kind
    # Metrics the rows already are, with their aggregator types (a compaction keeps the old segments')
    kept_metrics: Mapping[str, str | None] = field(default_factory=dict)

    def key(self, segment_id: SegmentId) -> str:
        return self.key_prefix + segment_filename(segment_id)


def part_runs(parts: np.ndarray) -> list[tuple[int, int, int]]:
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
        # Projections aggregate the rows as Spark hands them over: plain strings, not the
        # dictionary arrays a Parquet scan sends (the base table's encoding takes those as is).
        plain = table if not spec.projections else pa.Table.from_arrays(
            [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns],
            names=table.column_names)
        projections = [projection_rows(spec_of(p), plain) for p in spec.projections]
        del plain
        types = {c: JSON for c in spec.json_columns if c in table.column_names}
        types.update({c: MULTI_VALUE_STRING for c, o in spec.column_options.items()
                      if MULTI_VALUE_PROPERTY in o and c in table.column_names})
        metrics = {name: kind for name, kind in spec.kept_metrics.items() if name in table.column_names}
        metrics.update({name: aggregator_type(kind, table.schema.field(name).type)
                        for name, kind in spec.metrics.items() if name in table.column_names})
        # Not synced here: the push copies it to deep storage, syncs that copy, and this one goes.
        manifest = build_segment(table, path, sid, spec.sort_columns, types, projections=projections,
                                 column_options=dict(spec.column_options), metrics=metrics, durable=False)
        size = storage.push(path, key)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return pa.RecordBatch.from_arrays([
        pa.array([part], pa.int64()),
        pa.array([key]), pa.array([size], pa.int64()), pa.array([manifest.num_rows], pa.int64()),
        pa.array([manifest.to_bytes().decode()]),
    ], schema=DESCRIPTOR_SCHEMA)


def encode_blob(batches: list[pa.RecordBatch]) -> pa.Array:
    """The batches (one schema) as a one-value binary array holding an Arrow IPC stream; the
    stream's buffer becomes the value without a copy."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema, options=_IPC_OPTIONS) as writer:
        for b in batches:
            writer.write_batch(b)
    buf = sink.getvalue()
    if buf.size >= 1 << 31:
        rows = sum(b.num_rows for b in batches)
        raise ValidationError(f"{rows} row(s) take {buf.size} bytes, more than a Spark value can hold (2 GiB); "
                              "rows this wide cannot be ingested: split the big column(s) in the SELECT")
    offsets = pa.py_buffer(np.array([0, buf.size], dtype=np.int32))
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, buf])


def decode_blob(blob: pa.Buffer) -> pa.Table:
    with pa.ipc.open_stream(blob) as reader:
        return reader.read_all()


def compact_dictionaries(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with each dictionary column's dictionary cut to the entries its rows use. A
    piece of a scanned batch keeps the whole batch's dictionary otherwise, and a batch spread
    over many segments would send a near-unique column's dictionary once per segment."""
    if not any(pa.types.is_dictionary(t) for t in batch.schema.types):
        return batch
    columns = []
    for column in batch.columns:
        if pa.types.is_dictionary(column.type) and len(column.dictionary) > 0:
            column = _compact(column)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _compact(column: pa.DictionaryArray) -> pa.DictionaryArray:
    dictionary = column.dictionary
    indices = column.indices
    nulls = indices.is_null().to_numpy(zero_copy_only=False) if indices.null_count else None
    raw = indices.fill_null(0).to_numpy(zero_copy_only=False)
    used = np.zeros(len(dictionary), dtype=bool)
    used[raw if nulls is None else raw[~nulls]] = True
    present = np.flatnonzero(used)
    if len(present) == len(dictionary):
        return column
    remap = np.zeros(len(dictionary), dtype=raw.dtype)
    remap[present] = np.arange(len(present), dtype=raw.dtype)
    compacted = pa.array(remap[raw], indices.type, mask=nulls)
    return pa.DictionaryArray.from_arrays(compacted, dictionary.take(pa.array(present, pa.int64())))


def split_into_blobs(batches: Iterable[pa.RecordBatch], assign, drop: tuple[str, ...] = (),
                     max_rows: int = BLOB_ROWS, max_bytes: int = BLOB_BYTES) -> Iterator[pa.RecordBatch]:
    """Rows of ``batches`` as BLOB_SCHEMA rows, one segment per blob; ``assign(batch)`` gives each
    row's partition index (an int64 array) and ``drop`` names columns that only routing needed."""
    pending: dict[int, list[pa.RecordBatch]] = {}
    rows: dict[int, int] = {}
    size = 0

    def cut(part: int) -> pa.RecordBatch:
        nonlocal size
        pieces = pending.pop(part)
        rows.pop(part)
        size -= sum(p.nbytes for p in pieces)
        return pa.RecordBatch.from_arrays([pa.array([part], pa.int32()), encode_blob(pieces)], schema=BLOB_SCHEMA)

    for batch in batches:
        if batch.num_rows == 0:
            continue
        parts = np.asarray(assign(batch).to_numpy(zero_copy_only=False), dtype=np.int64)
        data = batch.drop_columns([c for c in drop if c in batch.schema.names])
        if parts[0] == parts[-1] and bool((parts == parts[0]).all()):
            pieces = [(int(parts[0]), data)]
        else:
            order = np.argsort(parts, kind="stable")
            data = data.take(pa.array(order))
            pieces = [(part, data.slice(lo, hi - lo)) for part, lo, hi in part_runs(parts[order])]
        for part, piece in pieces:
            if len(pieces) > 1:
                piece = compact_dictionaries(piece)
            # Very wide rows: slice so that no blob nears Spark's 2 GiB limit for one value.
            slices = -(-piece.nbytes // max_bytes) if piece.nbytes > max_bytes else 1
            step = -(-piece.num_rows // slices)
            for lo in range(0, piece.num_rows, step):
                sub = compact_dictionaries(piece.slice(lo, step)) if slices > 1 else piece
                pending.setdefault(part, []).append(sub)
                rows[part] = rows.get(part, 0) + sub.num_rows
                size += sub.nbytes
                if rows[part] >= max_rows or size > max_bytes:
                    yield cut(part)
        while size > max_bytes and pending:
            yield cut(max(rows, key=rows.get))
    for part in sorted(pending):
        yield cut(part)


def build_blobs(batches: Iterable[pa.RecordBatch], spec: BuildSpec, storage: DeepStorage,
                work_dir: str | None = None) -> Iterator[pa.RecordBatch]:
    """One descriptor row per segment whose blobs (BLOB_SCHEMA rows) are in ``batches``."""
    blobs: dict[int, list[pa.Buffer]] = {}
    for batch in batches:
        parts = batch.column("part").to_pylist()
        column = batch.column("blob")
        for i, part in enumerate(parts):
            if part not in spec.segments:
                raise ValidationError(f"rows for partition index {part} which the plan does not have")
            blobs.setdefault(part, []).append(column[i].as_buffer())
    own_dir = work_dir is None
    work_dir = work_dir or tempfile.mkdtemp(prefix="strata-build-")
    try:
        for part in sorted(blobs):
            tables = _in_time_order([decode_blob(b) for b in blobs.pop(part)])
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            del tables
            yield build_one(table.to_batches(), part, spec.segments[part], spec, storage, work_dir)
    finally:
        if own_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


def _in_time_order(tables: list[pa.Table]) -> list[pa.Table]:
    """``tables`` ordered by their first and last __time (stable). The shuffle hands a segment's blobs
    over in whatever order their map outputs were fetched; each blob holds a reading task's rows in
    input order, so for time-ordered input the blobs put in time order concatenate to time-ordered
    rows and build_segment skips its sort, a gather of every column (for the nested bench's
    documents, most of the building task's CPU in a Spark worker). Rows of equal time keep their
    blob's order either way; which blob of equal times comes first was the shuffle's choice before."""
    if len(tables) < 2 or any(TIME_COLUMN not in t.column_names for t in tables):
        return tables
    keys = []
    for t in tables:
        bounds = pc.min_max(t.column(TIME_COLUMN).cast(pa.int64()) if pa.types.is_timestamp(t.schema.field(
            TIME_COLUMN).type) else t.column(TIME_COLUMN)).as_py()
        if bounds["min"] is None or not isinstance(bounds["min"], (int, float)):
            return tables
        keys.append((bounds["min"], bounds["max"]))
    return [tables[i] for i in sorted(range(len(tables)), key=keys.__getitem__)]


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
            for part, lo, hi in part_runs(parts):
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


__all__ = ["BLOB_DDL", "BLOB_SCHEMA", "DESCRIPTOR_DDL", "DESCRIPTOR_SCHEMA", "BuildSpec", "PlannedSegment", "build_blobs",
           "build_one", "compact_dictionaries", "build_partition", "decode_blob", "descriptor_of", "encode_blob",
           "part_runs", "split_into_blobs"]
