"""When a Kafka stream task hands its realtime segments off, and what each handoff rewrites (pure).

A stream task publishes every micro-batch as small *realtime* segments (queryable within a
second). Druid's task hands its in-memory data off as full-size segments at ``taskDuration`` or
when a segment reaches ``maxRowsPerSegment``; here the handoff rewrites a time chunk's segments
into a newer version built as a compaction builds it (full-size, compressed, with the catalog's
projections), published in one metadata transaction. The new version overshadows the small
segments, so a query sees either them or the new ones, never both or neither.

- ``HandoffTrigger``: the realtime rows the task has published per chunk since it last handed
  the chunk off; a chunk is due once they reach maxRowsPerSegment.
- ``plan_handoffs``: from the datasource's used segments, per due chunk the segments to rewrite
  (the chunk's visible ones, realtime or not: a version replaces the whole chunk) and the ones the
  publish expects to find used there (those plus the overshadowed ones the coordinator has not
  marked unused yet). A chunk a used segment only partly overlaps is not rewritten (its rows
  outside the chunk would be lost or hidden); it is skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from common.segment.segment_id import SegmentId
from common.segment.timeline import Timeline, TimelineSegment
from common.types.interval import Interval


@dataclass(frozen=True)
class UsedSegment:
    """A used segment as the planner needs it."""

    id: SegmentId
    num_partitions: int
    num_rows: int
    realtime: bool


@dataclass(frozen=True)
class Handoff:
    interval: Interval  # the time chunk rewritten
    inputs: tuple[SegmentId, ...]  # its visible segments: their rows become the new version
    expected: tuple[SegmentId, ...]  # every used segment there now (inputs and overshadowed ones)
    realtime_segments: int
    realtime_rows: int


class HandoffTrigger:
    """Realtime rows a task published per chunk since its last handoff of the chunk."""

    def __init__(self, max_rows_per_segment: int) -> None:
        if max_rows_per_segment < 1:
            raise ValueError(f"maxRowsPerSegment must be >= 1, got {max_rows_per_segment}")
        self.max_rows = max_rows_per_segment
        self._rows: dict[Interval, int] = {}

    def published(self, interval: Interval, rows: int) -> None:
        self._rows[interval] = self._rows.get(interval, 0) + rows

    def due(self) -> list[Interval]:
        """Chunks whose realtime rows reached maxRowsPerSegment, oldest first."""
        return sorted((iv for iv, n in self._rows.items() if n >= self.max_rows), key=lambda iv: iv.start)

    def pending(self) -> list[Interval]:
        """Chunks the task published into since it last handed them off."""
        return sorted(self._rows, key=lambda iv: iv.start)

    def handed_off(self, interval: Interval) -> None:
        self._rows.pop(interval, None)


def plan_handoffs(used: Iterable[UsedSegment], intervals: Iterable[Interval] | None = None
                  ) -> tuple[list[Handoff], list[str]]:
    """(handoffs, why other chunks were skipped). ``intervals``: the chunks to hand off; None for
    every chunk holding a realtime segment (the handoff at taskDuration, which also takes what
    earlier tasks that died or were suspended left realtime)."""
    used = list(used)
    timeline = Timeline(segments=[TimelineSegment(u.id, u.num_partitions) for u in used])
    hidden = timeline.overshadowed()
    visible = [u for u in used if u.id not in hidden]
    if intervals is None:
        wanted = sorted({u.id.interval for u in visible if u.realtime}, key=lambda iv: (iv.start, iv.end))
    else:
        wanted = sorted(set(intervals), key=lambda iv: (iv.start, iv.end))
    handoffs: list[Handoff] = []
    skipped: list[str] = []
    for iv in wanted:
        overlapping = [u for u in used if u.id.interval.start < iv.end and iv.start < u.id.interval.end]
        straddling = [u for u in overlapping if not (iv.start <= u.id.interval.start and u.id.interval.end <= iv.end)
                      and u.id not in hidden]
        if straddling:
            skipped.append(f"{iv}: segment {straddling[0].id} reaches outside it; compact a wider interval")
            continue
        inputs = [u for u in overlapping if u.id not in hidden]
        realtime = [u for u in inputs if u.realtime]
        if not realtime:
            continue  # handed off already (by a replica, or an earlier attempt that did publish)
        handoffs.append(Handoff(iv, tuple(sorted((u.id for u in inputs), key=str)),
                                tuple(sorted((u.id for u in overlapping), key=str)), len(realtime),
                                sum(u.num_rows for u in realtime)))
    return handoffs, skipped


__all__ = ["Handoff", "HandoffTrigger", "UsedSegment", "plan_handoffs"]
