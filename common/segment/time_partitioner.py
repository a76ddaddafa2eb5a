"""Time partitioning: split rows into time chunks by segment granularity, then into partitions of at
most ``rows_per_segment`` rows, and build one segment per partition.

Spark executors and local builds both end here, so a segment's identity (interval from the
granularity, partition numbers 0..n-1 within a chunk, one version per build) is decided in one place.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from common.errors import ValidationError
from common.segment.builder import build_segment, normalize_time
from common.segment.manifest import SegmentManifest
from common.segment.part_codec import DEFAULT_COMPRESSION, PartCompression
from common.segment.segment_id import SegmentId
from common.types.column_type import TIME_COLUMN, ColumnType
from common.types.granularity import Granularity
from common.types.interval import ETERNITY, Interval

DEFAULT_ROWS_PER_SEGMENT = 3_000_000


def new_version() -> str:
    """Versions sort as strings; an ISO timestamp makes later builds overshadow earlier ones."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def segment_filename(segment_id: SegmentId) -> str:
    return str(segment_id).replace(":", "").replace("/", "_") + ".sseg"


def time_chunks(sorted_ms: np.ndarray, granularity: Granularity) -> list[tuple[Interval, int, int]]:
    """(chunk interval, first row, end row) per non-empty chunk of time-sorted rows."""
    if granularity.is_all:
        return [(ETERNITY, 0, len(sorted_ms))] if len(sorted_ms) else []
    if granularity.is_none:
        raise ValidationError("segment granularity 'none' would make one segment per millisecond; use e.g. DAY or HOUR")
    starts = granularity.bucket_start(sorted_ms)
    bounds = np.flatnonzero(np.concatenate(([True], starts[1:] != starts[:-1], [True])))
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        start = int(starts[lo])
        out.append((Interval(start, granularity.next_bucket(start)), int(lo), int(hi)))
    return out


def build_segments(table: pa.Table, datasource: str, out_dir: str, *, segment_granularity: Granularity | str = "day",
                   version: str | None = None, sort_columns: Iterable[str] = (),
                   rows_per_segment: int = DEFAULT_ROWS_PER_SEGMENT,
                   column_types: dict[str, ColumnType] | None = None,
                   compression: PartCompression | None = DEFAULT_COMPRESSION,
                   string_bitmaps: bool = False,
                   column_options: dict[str, dict] | None = None) -> list[tuple[str, SegmentManifest]]:
    """Build all segments for ``table``; returns (path, manifest) per segment."""
    if rows_per_segment <= 0:
        raise ValidationError(f"rows per segment must be positive, got {rows_per_segment}")
    if TIME_COLUMN not in table.column_names:
        raise ValidationError(f"input has no '{TIME_COLUMN}' column (columns: {', '.join(table.column_names)})")
    granularity = Granularity.parse(segment_granularity)
    version = version or new_version()
    times = normalize_time(table.column(TIME_COLUMN))
    if times.null_count:
        raise ValidationError(f"{times.null_count} rows have a null {TIME_COLUMN}; every row needs a time")
    ms = times.to_numpy(zero_copy_only=False)
    if len(ms) > 1 and not bool(np.all(ms[1:] >= ms[:-1])):
        order = np.argsort(ms, kind="stable")
        table, ms = table.take(pa.array(order)), ms[order]
    os.makedirs(out_dir, exist_ok=True)
    built = []
    # Time-sorted rows make every chunk and partition a zero-copy slice.
    for interval, lo, hi in time_chunks(ms, granularity):
        rows = hi - lo
        parts = max(1, -(-rows // rows_per_segment))
        for p in range(parts):
            a = lo + p * rows // parts
            b = lo + (p + 1) * rows // parts
            sid = SegmentId(datasource, interval, version, p)
            path = os.path.join(out_dir, segment_filename(sid))
            manifest = build_segment(table.slice(a, b - a), path, sid, sort_columns, column_types,
                                     compression=compression, string_bitmaps=string_bitmaps,
                                     column_options=column_options)
            built.append((path, manifest))
    return built
