"""Segment allocation for ingestion tasks: which version and partition numbers a task's time
chunks get, as Druid's segment allocation does.

- REPLACE: every chunk gets the task's new version, partitions from 0, so it overshadows what
  was there once served.
- INSERT into a chunk with no data: a new set, new version, partitions from 0.
- INSERT into a chunk whose visible set has exactly that interval: append to it (same version,
  partition numbers after every one handed out so far, the set's core count unchanged).
- INSERT with a granularity that does not match the visible data is refused: appending would
  either be hidden or hide existing rows.

``PartitionLedger`` is what the coordinator keeps between requests: it allocates and then
reserves the partition numbers each appending task said it will build, so a concurrent appender
to the same chunk starts after them (a task that does not say gets a generous block).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from common.errors import ValidationError
from common.segment.allocation import Allocation
from common.segment.timeline import Timeline, TimelineSegment
from common.types.interval import Interval


def allocate(existing: Iterable[TimelineSegment], intervals: Iterable[Interval], mode: str, new_version: str,
             handed_out: dict[tuple[Interval, str], int] | None = None) -> list[Allocation]:
    """``handed_out`` maps (interval, version) to the next free partition number already given to
    running tasks; it is updated, so concurrent appenders never get the same numbers."""
    if mode not in ("insert", "replace"):
        raise ValidationError(f"allocation mode must be insert or replace, got '{mode}'")
    handed_out = {} if handed_out is None else handed_out
    segments = list(existing)
    timeline = Timeline(segments=segments) if segments else None
    highest: dict[tuple[Interval, str], int] = {}
    for seg in segments:
        key = (seg.id.interval, seg.id.version)
        highest[key] = max(highest.get(key, -1), seg.id.partition)
    out = []
    for iv in sorted(set(intervals)):
        if mode == "replace" or timeline is None:
            out.append(Allocation(iv, new_version, 0, 0))
            continue
        chunks = timeline.lookup([iv])
        if not chunks:
            out.append(Allocation(iv, new_version, 0, 0))
            continue
        if len(chunks) == 1 and chunks[0].true_interval == iv:
            version = chunks[0].version
            key = (iv, version)
            first = max(highest.get(key, -1) + 1, handed_out.get(key, 0))
            core = next(s.num_partitions for s in segments if s.id.interval == iv and s.id.version == version)
            out.append(Allocation(iv, version, first, core))
            continue
        existing_ivs = ", ".join(str(c.true_interval) for c in chunks)
        raise ValidationError(
            f"cannot INSERT into {iv}: the data there is partitioned as {existing_ivs}; use a PARTITIONED BY "
            "that matches it, or REPLACE the interval"
        )
    return out


# Partitions reserved for an appending task that did not say how many it builds: more than a task
# builds per chunk, so appenders never collide.
UNKNOWN_PARTITIONS = 10_000


def reserve(allocations: list[Allocation], counts: Mapping[Interval, int] | None, handed_out: dict) -> None:
    """Record that a task will use ``counts[interval]`` partitions of each appended allocation
    (``UNKNOWN_PARTITIONS`` when ``counts`` does not say). New sets need no reservation: their
    version is the task's own."""
    for a in allocations:
        if a.core_partitions:
            key = (a.interval, a.version)
            count = (counts or {}).get(a.interval)
            if count is None or count < 0:
                count = UNKNOWN_PARTITIONS
            handed_out[key] = max(handed_out.get(key, 0), a.first_partition + count)


@dataclass
class PartitionLedger:
    """The partition numbers handed out to running appenders, per (interval, version)."""

    handed_out: dict[tuple[Interval, str], int] = field(default_factory=dict)

    def allocate(self, existing: Iterable[TimelineSegment], intervals: Iterable[Interval], mode: str,
                 new_version: str, counts: Mapping[Interval, int] | None = None) -> list[Allocation]:
        """``allocate`` then ``reserve``: the allocations of one task, whose appends are recorded."""
        allocations = allocate(existing, intervals, mode, new_version, self.handed_out)
        reserve(allocations, counts, self.handed_out)
        return allocations
