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
        starts = batch.column(CHUNK_COLUMN).to_numpy(zero_copy_only=False)
        out = np.empty(len(starts), dtype=np.int64)
        keys = None
        for i, start in enumerate(starts):
            chunk = self.chunks.get(int(start))
            if chunk is None:
                raise ValidationError(f"row in chunk starting {int(start)} was not planned; the input changed "
                                      "between passes (is the SELECT deterministic?)")
            if not chunk.boundaries:
                out[i] = chunk.first_index
                continue
            if keys is None:
                keys = row_keys([batch.column(c) for c in self.key_columns])
            out[i] = chunk.first_index + bisect.bisect_right(chunk.boundaries, keys[i])
        return pa.array(out, pa.int64())


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
           "chunk_starts", "key_columns_for", "partitions_for", "plan_partitions", "row_keys", "sample_fraction"]
