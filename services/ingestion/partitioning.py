"""Partitioning: which segment each ingested row lands in.

Rows go first to their time chunk (the PARTITIONED BY bucket of ``__time``), then, when a chunk
holds more rows than one segment should, to a range of the CLUSTERED BY key (or of ``__time``
without CLUSTERED BY), as Druid's range partitioning does. Range boundaries come from a sample
of the chunk's keys and are always sampled keys themselves, so no range is empty: every planned
partition number gets a segment and each chunk's partition set is complete.

Pure (numpy/Arrow): the driver plans here and executors assign here, with the same code.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.segment.builder import normalize_time
from common.types.column_type import TIME_COLUMN
from common.types.granularity import Granularity
from common.types.interval import ETERNITY, MIN_MS, Interval

CHUNK_COLUMN = "__strata_chunk"
PART_COLUMN = "__strata_part"
SAMPLES_PER_PARTITION = 64


def chunk_starts(times: pa.Array | pa.ChunkedArray, granularity: Granularity) -> pa.Array:
    """Each row's chunk start (epoch millis), null where ``__time`` is null."""
    ms = normalize_time(times)
    valid = ms.is_valid().to_numpy(zero_copy_only=False)
    values = ms.fill_null(0).to_numpy(zero_copy_only=False)
    if granularity.is_all:
        starts = np.full(len(values), MIN_MS, dtype=np.int64)
    else:
        starts = granularity.bucket_start(values)
    return pa.array(starts, pa.int64(), mask=~valid)


def chunk_interval(start: int, granularity: Granularity) -> Interval:
    if granularity.is_all:
        return ETERNITY
    return Interval(start, granularity.next_bucket(start))


def partitions_for(rows: int, rows_per_segment: int) -> int:
    if rows_per_segment <= 0:
        raise ValidationError(f"rowsPerSegment must be positive, got {rows_per_segment}")
    return max(1, -(-rows // rows_per_segment))


def row_keys(columns: Sequence[pa.Array]) -> list[tuple]:
    """Comparable keys, nulls first; timestamps compare as epoch millis."""
    lists = []
    for col in columns:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
            col = normalize_time(col)
        lists.append(col.to_pylist())
    return [tuple((0,) if v is None else (1, v) for v in values) for values in zip(*lists)]


def choose_boundaries(sample: list[tuple], parts: int) -> list[tuple]:
    """Up to ``parts - 1`` increasing boundaries drawn from ``sample``, each above its smallest key,
    so that every range [b_i, b_i+1) (and the one below b_1) holds at least one sampled row."""
    keys = sorted(set(sample))
    if parts <= 1 or len(keys) <= 1:
        return []
    out: list[tuple] = []
    for i in range(1, parts):
        b = keys[max(1, min(len(keys) - 1, round(i * len(keys) / parts)))]
        if not out or b > out[-1]:
            out.append(b)
    return out


@dataclass(frozen=True)
class ChunkPlan:
    interval: Interval
    rows: int
    first_index: int  # global partition index of the chunk's first segment
    boundaries: tuple[tuple, ...]

    @property
    def parts(self) -> int:
        return len(self.boundaries) + 1


@dataclass(frozen=True)
class PartitionPlan:
    """Chunks by start, and the columns whose values pick a range inside a chunk."""

    chunks: dict[int, ChunkPlan]
    key_columns: tuple[str, ...]

    @property
    def total(self) -> int:
        return sum(c.parts for c in self.chunks.values())

    def assign(self, batch: pa.RecordBatch) -> pa.Array:
        """The global partition index of every row of ``batch`` (which carries CHUNK_COLUMN)."""
        chunks = batch.column(CHUNK_COLUMN)
        if chunks.null_count:
            raise ValidationError(f"a row with a null {TIME_COLUMN} reached partitioning; the input changed between "
                                  "passes (is the SELECT deterministic?)")
        starts = chunks.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        if len(starts) == 0:
            return pa.array([], pa.int64())
        # Each row's chunk by a binary search over the planned starts (O(n log chunks), where a
        # np.unique of the rows' starts sorted every batch).
        known = np.fromiter(sorted(self.chunks), dtype=np.int64, count=len(self.chunks))
        at = np.minimum(np.searchsorted(known, starts), max(0, len(known) - 1))
        unplanned = known[at] != starts if len(known) else np.ones(len(starts), dtype=bool)
        if unplanned.any():
            start = int(starts[int(np.argmax(unplanned))])
            raise ValidationError(f"row in chunk starting {start} was not planned; the input changed "
                                  "between passes (is the SELECT deterministic?)")
        planned = [self.chunks[int(k)] for k in known]
        out = np.array([c.first_index for c in planned], dtype=np.int64)[at]
        split = [j for j, c in enumerate(planned) if c.boundaries]
        if split:
            present = np.bincount(at, minlength=len(known)) > 0
            split = [j for j in split if present[j]]
        for j in split:
            chunk = planned[j]
            rows = np.flatnonzero(at == j) if len(split) > 1 or not bool(np.all(at == j)) else None
            keys = [batch.column(c) if rows is None else batch.column(c).take(pa.array(rows)) for c in self.key_columns]
            offsets = range_offsets(keys, chunk.boundaries)
            if rows is None:
                out += offsets
            else:
                out[rows] += offsets
        return pa.array(out, pa.int64())


# Key types whose Arrow comparisons order exactly as row_keys' Python tuples do (UTF-8 byte order is
# code point order; floats are left out because NaN compares differently in tuples and in Arrow).
def _comparable(col: pa.Array) -> bool:
    t = col.type
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_boolean(t) or pa.types.is_timestamp(t) or pa.types.is_date(t))


def range_offsets(columns: Sequence[pa.Array], boundaries: Sequence[tuple]) -> np.ndarray:
    """``bisect_right(boundaries, key)`` for every row's row_keys key, vectorized when the key types
    allow it (one pass per boundary: a boundary counts when it is <= the row's key)."""
    cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
    # Scanned STRING columns arrive as dictionary arrays (arrow_scan.travel_type); compare values.
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in cols]
    n = len(cols[0]) if cols else 0
    if not all(_comparable(c) for c in cols):
        return np.array([bisect.bisect_right(boundaries, k) for k in row_keys(cols)], dtype=np.int64)
    cols = [normalize_time(c) if pa.types.is_timestamp(c.type) or pa.types.is_date(c.type) else c for c in cols]
    valid = [c.is_valid().to_numpy(zero_copy_only=False) for c in cols]
    out = np.zeros(n, dtype=np.int64)
    for boundary in boundaries:
        below = np.zeros(n, dtype=bool)  # boundary < key on the components compared so far
        equal = np.ones(n, dtype=bool)
        for col, ok, part in zip(cols, valid, boundary):
            if part == (0,):  # a null boundary component sorts first
                lt, eq = ok, ~ok
            else:
                value = pa.scalar(part[1], col.type)
                lt = ok & pc.fill_null(pc.greater(col, value), False).to_numpy(zero_copy_only=False)
                eq = ok & pc.fill_null(pc.equal(col, value), False).to_numpy(zero_copy_only=False)
            below |= equal & lt
            equal &= eq
        out += below | equal
    return out


def key_columns_for(clustered_by: Sequence[str]) -> tuple[str, ...]:
    cols = tuple(c for c in clustered_by if c != TIME_COLUMN)
    return cols or (TIME_COLUMN,)


def plan_partitions(counts: dict[int, int], granularity: Granularity, rows_per_segment: int,
                    samples: dict[int, list[tuple]], key_columns: tuple[str, ...]) -> PartitionPlan:
    """``counts``: rows per chunk start; ``samples``: sampled keys of the chunks that need splitting."""
    chunks: dict[int, ChunkPlan] = {}
    index = 0
    for start in sorted(counts):
        rows = counts[start]
        parts = partitions_for(rows, rows_per_segment)
        boundaries = tuple(choose_boundaries(samples.get(start, []), parts)) if parts > 1 else ()
        chunks[start] = ChunkPlan(chunk_interval(start, granularity), rows, index, boundaries)
        index += len(boundaries) + 1
    return PartitionPlan(chunks, key_columns)


def sample_fraction(counts: dict[int, int], rows_per_segment: int) -> float:
    """A Bernoulli sampling fraction giving each chunk that needs splitting enough keys."""
    fractions = [min(1.0, partitions_for(n, rows_per_segment) * SAMPLES_PER_PARTITION / n)
                 for n in counts.values() if partitions_for(n, rows_per_segment) > 1]
    return max(fractions, default=0.0)


__all__ = ["CHUNK_COLUMN", "PART_COLUMN", "ChunkPlan", "PartitionPlan", "choose_boundaries", "chunk_interval",
           "chunk_starts", "key_columns_for", "partitions_for", "plan_partitions", "range_offsets", "row_keys",
           "sample_fraction"]
