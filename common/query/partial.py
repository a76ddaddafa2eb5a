"""Partial: one segment's (or a merge's) intermediate result, plus what it cost to compute."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import pyarrow as pa


@dataclass
class RunStats:
    segments: int = 0
    rows_in_segments: int = 0
    rows_after_prefilter: int = 0
    rows_scanned: int = 0
    rows_matched: int = 0
    bytes_read: int = 0

    def __add__(self, other: RunStats) -> RunStats:
        # Spelled out: the loop over dataclasses.fields() took 1.1 us an addition, this 0.2 us.
        return RunStats(self.segments + other.segments, self.rows_in_segments + other.rows_in_segments,
                        self.rows_after_prefilter + other.rows_after_prefilter, self.rows_scanned + other.rows_scanned,
                        self.rows_matched + other.rows_matched, self.bytes_read + other.bytes_read)

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Partial:
    """``table`` holds key columns and aggregator intermediates (or scanned rows).

    ``coverage`` is the time span the inputs covered (segment intervals clipped to the query),
    which bounds zero-filled time buckets; None when nothing was read.
    """

    table: pa.Table
    stats: RunStats = field(default_factory=RunStats)
    coverage: tuple[int, int] | None = None
    # One segment's: the projection that served it (None: base rows), and why others did not.
    projection: str | None = None
    rejected: tuple[tuple[str, str], ...] = ()


def union_coverage(parts: list[Partial]) -> tuple[int, int] | None:
    spans = [p.coverage for p in parts if p.coverage is not None]
    if not spans:
        return None
    return min(s[0] for s in spans), max(s[1] for s in spans)


def decode_dictionaries(table: pa.Table) -> pa.Table:
    """The table with dictionary columns decoded: partials of different segments carry different
    dictionaries (so they concatenate only decoded), and Arrow's join refuses some as payload."""
    if not any(pa.types.is_dictionary(t) for t in table.schema.types):
        return table
    cols = []
    for col in table.columns:
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols.append(col)
    return pa.Table.from_arrays(cols, names=table.column_names)
