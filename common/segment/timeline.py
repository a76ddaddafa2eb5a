"""Timeline: which segments of one datasource are visible where, as Druid's VersionedIntervalTimeline.

Segments are grouped into *partition sets* keyed by (interval, version). A set is *complete*
when every core partition 0..num_partitions-1 is present; only complete sets take part in
visibility, so a half-published newer version never hides an older complete one. Partitions
numbered num_partitions and up are *appended* ones (an INSERT into an existing time chunk, as
Druid's non-core partitions): they never make a set incomplete and are visible with it.

At every instant the visible set is the complete set covering it with the highest version.
Version strings compare lexicographically, as Druid's (ISO timestamps) do. Two complete sets
of the same version with different, overlapping intervals do not arise from one task; if
metadata ever holds them, the later interval (by start, then end) wins, so the
answer never depends on insertion order, and neither counts as overshadowing the other.

A segment is *overshadowed* when every instant of its interval is visible in a strictly newer
version: nothing can ever query it again, so the coordinator may drop it.

The module is pure and single-threaded: build one per datasource per coordinator run, or keep
one and add/remove as metadata changes.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import ETERNITY, Interval, condense


@dataclass(frozen=True)
class TimelineSegment:
    """A segment as the timeline needs it: identity and the size of its partition set."""

    id: SegmentId
    num_partitions: int = 1


@dataclass(frozen=True)
class TimelineChunk:
    """One visible complete set over ``interval`` (clipped to what is queried and visible)."""

    interval: Interval
    version: str
    segments: tuple[SegmentId, ...]  # ordered by partition
    true_interval: Interval  # the set's own, unclipped interval


SetKey = tuple[Interval, str]


class _PartitionSet:
    __slots__ = ("interval", "version", "num_partitions", "parts")

    def __init__(self, interval: Interval, version: str, num_partitions: int) -> None:
        self.interval = interval
        self.version = version
        self.num_partitions = num_partitions
        self.parts: dict[int, SegmentId] = {}

    @property
    def complete(self) -> bool:
        return all(p in self.parts for p in range(self.num_partitions))

    def ordered(self) -> tuple[SegmentId, ...]:
        return tuple(self.parts[p] for p in sorted(self.parts))


@dataclass(frozen=True)
class _Piece:
    start: int
    end: int
    key: SetKey


class Timeline:
    """Versioned, partition-aware visibility for one datasource."""

    def __init__(self, datasource: str | None = None, segments: Iterable[TimelineSegment] = ()) -> None:
        self.datasource = datasource
        self._sets: dict[SetKey, _PartitionSet] = {}
        self._pieces: list[_Piece] | None = []
        self._starts: list[int] = []
        for segment in segments:
            self.add(segment)

    # --- membership -------------------------------------------------------------------------

    def add(self, segment: TimelineSegment) -> None:
        """Add a segment; adding one that is already present with the same set size is a no-op."""
        sid, n = segment.id, segment.num_partitions
        if self.datasource is None:
            self.datasource = sid.datasource
        elif sid.datasource != self.datasource:
            raise ValidationError(
                f"segment {sid} belongs to datasource '{sid.datasource}' but this timeline holds "
                f"'{self.datasource}'; build one timeline per datasource"
            )
        if sid.interval.start >= sid.interval.end:
            raise ValidationError(f"segment {sid} has an empty interval {sid.interval}; it can hold no rows")
        if n < 1:
            raise ValidationError(f"segment {sid}: num_partitions must be >= 1, got {n}")
        key = (sid.interval, sid.version)
        pset = self._sets.get(key)
        if pset is None:
            pset = self._sets[key] = _PartitionSet(sid.interval, sid.version, n)
        elif pset.num_partitions != n:
            raise ValidationError(
                f"segment {sid} says its set has {n} partitions but segments already in the set "
                f"({sid.datasource}, {sid.interval}, {sid.version}) say {pset.num_partitions}; "
                "every partition of one version must be published with the same num_partitions"
            )
        if pset.parts.get(sid.partition) == sid:
            return
        pset.parts[sid.partition] = sid
        self._pieces = None

    def remove(self, segment_id: SegmentId) -> bool:
        """Remove a segment; returns whether it was present."""
        key = (segment_id.interval, segment_id.version)
        pset = self._sets.get(key)
        if pset is None or pset.parts.get(segment_id.partition) != segment_id:
            return False
        del pset.parts[segment_id.partition]
        if not pset.parts:
            del self._sets[key]
        self._pieces = None
        return True

    def __contains__(self, segment_id: object) -> bool:
        if not isinstance(segment_id, SegmentId):
            return False
        pset = self._sets.get((segment_id.interval, segment_id.version))
        return pset is not None and pset.parts.get(segment_id.partition) == segment_id

    def __len__(self) -> int:
        return sum(len(s.parts) for s in self._sets.values())

    def __iter__(self) -> Iterator[TimelineSegment]:
        for key in sorted(self._sets):
            pset = self._sets[key]
            for sid in pset.ordered():
                yield TimelineSegment(sid, pset.num_partitions)

    def is_complete(self, interval: Interval, version: str) -> bool:
        pset = self._sets.get((interval, version))
        return pset is not None and pset.complete

    # --- visibility -------------------------------------------------------------------------

    def lookup(self, intervals: Interval | Iterable[Interval] = ETERNITY) -> list[TimelineChunk]:
        """The visible complete sets over ``intervals``, in time order, each clipped to what is
        both queried and visible. Overlapping or abutting query intervals are merged first."""
        wanted = [intervals] if isinstance(intervals, Interval) else list(intervals)
        pieces = self._visible()
        out: list[TimelineChunk] = []
        for query in condense(wanted):
            for piece in self._overlapping(pieces, query):
                start, end = max(piece.start, query.start), min(piece.end, query.end)
                pset = self._sets[piece.key]
                out.append(TimelineChunk(Interval(start, end), pset.version, pset.ordered(), pset.interval))
        return out

    def overshadows(self, interval: Interval, version: str) -> bool:
        """Whether every instant of ``interval`` is visible in a version newer than ``version``.

        Works for an (interval, version) that is not in this timeline, so a caller can ask
        whether the sets in one timeline (say, only the served segments) hide any segment."""
        if interval.start >= interval.end:
            return False
        covered_to = interval.start
        for piece in self._overlapping(self._visible(), interval):
            if piece.start > covered_to or self._sets[piece.key].version <= version:
                return False
            covered_to = piece.end
            if covered_to >= interval.end:
                return True
        return False

    def is_overshadowed(self, segment_id: SegmentId) -> bool:
        return self.overshadows(segment_id.interval, segment_id.version)

    def overshadowed(self) -> set[SegmentId]:
        """Segments (of complete and incomplete sets alike) that can never be visible again."""
        out: set[SegmentId] = set()
        for pset in self._sets.values():
            if self.overshadows(pset.interval, pset.version):
                out.update(pset.parts.values())
        return out

    # --- internals --------------------------------------------------------------------------

    def _overlapping(self, pieces: list[_Piece], query: Interval) -> Iterator[_Piece]:
        # Pieces are disjoint and sorted, so the first candidate is the last one starting at or
        # before the query start (it may reach into the query) or the next one after it.
        i = max(bisect_right(self._starts, query.start) - 1, 0)
        while i < len(pieces) and pieces[i].start < query.end:
            if pieces[i].end > query.start:
                yield pieces[i]
            i += 1

    def _visible(self) -> list[_Piece]:
        """Disjoint, sorted pieces of time with the winning complete set of each, computed by a
        sweep over set boundaries (O(n log n)) and cached until the timeline changes."""
        if self._pieces is not None:
            return self._pieces
        complete = [s for s in self._sets.values() if s.complete]
        # Rank by precedence once so the heap compares ints, not (str, Interval) tuples.
        ranked = sorted(complete, key=lambda s: (s.version, s.interval.start, s.interval.end))
        rank = {(s.interval, s.version): i for i, s in enumerate(ranked)}
        by_start = sorted(complete, key=lambda s: s.interval.start)
        bounds = sorted({s.interval.start for s in complete} | {s.interval.end for s in complete})
        heap: list[tuple[int, int, SetKey]] = []
        pieces: list[_Piece] = []
        nxt = 0
        for lo, hi in zip(bounds, bounds[1:]):
            while nxt < len(by_start) and by_start[nxt].interval.start <= lo:
                s = by_start[nxt]
                key = (s.interval, s.version)
                heapq.heappush(heap, (-rank[key], s.interval.end, key))
                nxt += 1
            # Lazy deletion: an expired set only matters once it reaches the top.
            while heap and heap[0][1] <= lo:
                heapq.heappop(heap)
            if not heap:
                continue
            key = heap[0][2]
            if pieces and pieces[-1].key == key and pieces[-1].end == lo:
                pieces[-1] = _Piece(pieces[-1].start, hi, key)
            else:
                pieces.append(_Piece(lo, hi, key))
        self._pieces = pieces
        self._starts = [p.start for p in pieces]
        return pieces
