"""ScanBuild: Spark tasks that read their segments' rows from Parquet and build them, no shuffle.

The general Parquet path (arrow_scan.py) reads row groups in one Spark job, cuts every batch into
per-segment Arrow IPC blobs, has Spark shuffle the blobs to one task per segment and builds there
(build.py). Each row then crosses the Python/JVM boundary four times, is written and read through
Spark's shuffle files and is zstd-compressed and decompressed once on the way; on the ingestion
benchmark that was more than half of the CPU of an INSERT (docs/benchmarks.md, ingestion).

When the driver counted the rows itself (arrow_scan.count_on_driver), it also knows the
[min, max] ``__time`` of every SLICE_ROWS rows of every row group, so it knows which slices may
hold the rows of each planned segment (a time chunk, or a ``__time`` range of one when a chunk
is split). It then hands each Spark task a run of consecutive segments and the row groups (up to
their last needed slice) that hold them: the task reads them with pyarrow, keeps the rows of its
own segments and builds each segment as soon as the last slice that may hold its rows was read.
One Spark job, no blobs, no shuffle; the price is that a row group is decoded by every task whose
segments it holds rows of (and from its start: Parquet pages have no row index). The plan is
taken only when that read amplification and the rows a task holds at once stay bounded (time
ordered input: about one extra decode per task boundary); otherwise, and for CLUSTERED BY keys
other than ``__time`` (no per-slice bounds), the shuffle path runs as before.

Pure (no Spark): spark_job.py plans and submits, executors call ``build_tasks``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from common.types.column_type import TIME_COLUMN
from services.deep_storage import DeepStorage
from services.ingestion.arrow_scan import TASK_COLUMN, ArrowScan, ScanSlice, read_pieces
from services.ingestion.build import BuildSpec, build_one, part_runs
from services.ingestion.partitioning import CHUNK_COLUMN, PartitionPlan, chunk_starts
from common.types.granularity import Granularity

# A plan that decodes more than this many rows per input row loses to the shuffle. On the
# ingestion benchmark's 1M rows (one process, CPU s) a decode costs ~0.25, and the shuffle path's
# Python side took 1.9 against 1.0 for this path at 1.6 decodes per row.
MAX_DECODES_PER_ROW = 3.0

# A task may hold up to two segments' rows at once (the shuffle path's builder holds one, and its
# blobs), and never less than this many: a row group holds rows of every segment it overlaps
# until it has been read, however small the segments.
HELD_ROWS_FLOOR = 1 << 20


def held_rows_bound(rows_per_segment: int) -> int:
    """The most rows of unbuilt segments a task may hold at once (plan_tasks' ``max_task_rows``)."""
    return max(2 * rows_per_segment, HELD_ROWS_FLOOR)


@dataclass(frozen=True)
class BuildTask:
    """One Spark task: its pieces (path, row group, 0, rows to read), the partition indexes it
    builds, and for each of them the index of the last piece that may hold its rows."""

    pieces: tuple[tuple[str, int, int, int], ...]
    parts: tuple[int, ...]
    last_piece: tuple[int, ...]


def _ranges(plan: PartitionPlan) -> list[tuple[int, int, int, int]] | None:
    """(partition index, first ms, end ms, estimated rows) of every planned partition, or None
    when a split chunk's ranges are not ranges of __time."""
    out = []
    for chunk in sorted(plan.chunks.values(), key=lambda c: c.first_index):
        if chunk.boundaries and plan.key_columns != (TIME_COLUMN,):
            return None
        edges = [chunk.interval.start]
        for boundary in chunk.boundaries:
            if len(boundary) != 1 or boundary[0][0] != 1:  # a null __time bound: not a time range
                return None
            edges.append(int(boundary[0][1]))
        edges.append(chunk.interval.end)
        rows = -(-chunk.rows // chunk.parts)
        out.extend((chunk.first_index + j, edges[j], edges[j + 1], rows) for j in range(chunk.parts))
    return out


def plan_tasks(slices: Iterable[ScanSlice], plan: PartitionPlan, parallelism: int,
               max_task_rows: int) -> tuple[BuildTask, ...] | None:
    """About ``parallelism`` tasks, each a run of consecutive partitions with about equal rows, or
    None when the shuffle path is the better one: a partition range is not a __time range, the
    tasks would decode more than MAX_DECODES_PER_ROW rows per row, or a task would hold more than
    ``max_task_rows`` rows of unbuilt segments at once."""
    slices = list(slices)
    ranges = _ranges(plan)
    if not slices or not ranges:
        return None
    lows = np.array([s.min_ms for s in slices], dtype=np.int64)
    highs = np.array([s.max_ms for s in slices], dtype=np.int64)
    holding = []  # per partition: indexes of the slices that may hold its rows
    for _, lo, hi, _ in ranges:
        found = np.flatnonzero((lows < hi) & (highs >= lo))
        if len(found) == 0:
            return None  # planned from counts, so it has rows: the input is not what was counted
        holding.append(found)
    total = sum(r[3] for r in ranges)
    count = max(1, min(len(ranges), parallelism))
    groups, current, done = [], [], 0
    for i, entry in enumerate(ranges):
        current.append(i)
        done += entry[3]
        cut = done >= total * (len(groups) + 1) / count
        if cut and len(groups) < count - 1:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    tasks, decoded = [], 0
    input_rows = sum(s.rows for s in slices)
    for members in groups:
        task = _task(members, ranges, holding, slices, max_task_rows)
        if task is None:
            return None
        decoded += sum(rows for _, _, _, rows in task.pieces)
        tasks.append(task)
    if decoded > MAX_DECODES_PER_ROW * input_rows:
        return None
    return tuple(tasks)


def _task(members: list[int], ranges, holding, slices: list[ScanSlice], max_task_rows: int) -> BuildTask | None:
    needed = sorted(set(np.concatenate([holding[m] for m in members]).tolist()))
    # One piece per row group, up to its last needed slice: a read decodes from the group's start.
    pieces: list[tuple[str, int, int, int]] = []
    piece_of: dict[int, int] = {}
    for s in needed:
        sl = slices[s]
        end = sl.offset + sl.rows
        if pieces and pieces[-1][:2] == (sl.path, sl.group):
            pieces[-1] = (sl.path, sl.group, 0, max(pieces[-1][3], end))
        else:
            pieces.append((sl.path, sl.group, 0, end))
        piece_of[s] = len(pieces) - 1
    first = [min(piece_of[s] for s in holding[m].tolist()) for m in members]
    last = [max(piece_of[s] for s in holding[m].tolist()) for m in members]
    for i in range(len(pieces)):
        if sum(ranges[m][3] for m, a, b in zip(members, first, last) if a <= i <= b) > max_task_rows:
            return None
    return BuildTask(tuple(pieces), tuple(ranges[m][0] for m in members), tuple(last))


def build_tasks(batches: Iterable[pa.RecordBatch], tasks: tuple[BuildTask, ...], scan: ArrowScan,
                granularity: Granularity, plan: PartitionPlan, spec: BuildSpec, storage: DeepStorage,
                work_dir: str | None = None) -> Iterator[pa.RecordBatch]:
    """Descriptor rows (build.DESCRIPTOR_SCHEMA) of the segments of the tasks numbered in ``batches``."""
    own_dir = work_dir is None
    work_dir = work_dir or tempfile.mkdtemp(prefix="strata-build-")
    try:
        for batch in batches:
            for number in batch.column(TASK_COLUMN).to_pylist():
                yield from _build_task(tasks[number], scan, granularity, plan, spec, storage, work_dir)
    finally:
        if own_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


def _build_task(task: BuildTask, scan: ArrowScan, granularity: Granularity, plan: PartitionPlan, spec: BuildSpec,
                storage: DeepStorage, work_dir: str) -> Iterator[pa.RecordBatch]:
    wanted = np.array(sorted(task.parts), dtype=np.int64)
    closing: dict[int, list[int]] = {}
    for part, last in zip(task.parts, task.last_piece):
        closing.setdefault(last, []).append(part)
    pending: dict[int, list[pa.RecordBatch]] = {}
    for i, piece in enumerate(task.pieces):
        for batch in read_pieces([piece], scan.columns):
            starts = chunk_starts(batch.column(TIME_COLUMN), granularity)
            keyed = pa.RecordBatch.from_arrays(batch.columns + [starts], names=batch.schema.names + [CHUNK_COLUMN])
            parts = plan.assign(keyed).to_numpy(zero_copy_only=False)
            if parts[0] == parts[-1] and bool((parts == parts[0]).all()):
                if parts[0] in task.parts:
                    pending.setdefault(int(parts[0]), []).append(batch)
                continue
            mine = np.isin(parts, wanted)
            if not mine.any():
                continue
            rows = np.flatnonzero(mine)
            order = rows[np.argsort(parts[rows], kind="stable")]
            # Time-ordered input: the rows of a partition are one run already, so the take is a slice.
            taken = batch.take(pa.array(order)) if not _is_run(order) else batch.slice(int(order[0]), len(order))
            for part, lo, hi in part_runs(parts[order]):
                pending.setdefault(part, []).append(taken.slice(lo, hi - lo))
        for part in closing.get(i, ()):
            rows_of = pending.pop(part, None)
            if rows_of:  # none: the driver reports the planned segment that got no rows
                yield build_one(rows_of, part, spec.segments[part], spec, storage, work_dir)


def _is_run(order: np.ndarray) -> bool:
    return len(order) > 0 and int(order[-1]) - int(order[0]) == len(order) - 1 and bool(np.all(np.diff(order) == 1))


def tasks_frame(spark, count: int):
    """Task numbers 0..count-1, one per Spark partition."""
    return spark.range(count, numPartitions=max(1, count)).withColumnRenamed("id", TASK_COLUMN)


__all__ = ["BuildTask", "HELD_ROWS_FLOOR", "MAX_DECODES_PER_ROW", "build_tasks", "held_rows_bound", "plan_tasks",
           "tasks_frame"]
