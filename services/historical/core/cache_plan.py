"""CachePlan: the bookkeeping of the historical's bounded on-disk segment cache (pure, no I/O).

Each cached segment has a size, a last-used tick and a served flag. Served segments are the ones
the coordinator assigned to this node; they are never evicted, because dropping one would make
queries miss data the broker believes is here. Unserved segments (dropped by the coordinator, but
kept on disk in case they come back, as Druid's historicals do) are evicted least recently used
first when a new segment needs room. Pins protect a segment while a download or re-verification is
under way, whatever its served flag says.

The volume the cache lives on can hold less than ``max_bytes`` (a small disk, or one shared with
other files): ``plan_volume`` decides, from the free bytes the edge measured, which unserved
segments to evict so a download fits on the volume, or refuses it before a byte is written.

Ticks come from a counter, not a clock, so plans are deterministic and testable.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from common.errors import StrataError, ValidationError


class CacheFullError(StrataError):
    """The cache cannot make room for a segment: served or pinned segments already fill it."""


@dataclass
class CacheEntry:
    size: int
    last_used: int
    served: bool = False
    pins: int = 0

    @property
    def evictable(self) -> bool:
        return not self.served and self.pins == 0


class CachePlan:
    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValidationError(f"[historical] max_cache_bytes must be positive, got {max_bytes}")
        self.max_bytes = max_bytes
        # Insertion order is recency order: every use moves the entry to the end, so eviction
        # walks from the front without sorting.
        self._entries: OrderedDict[Hashable, CacheEntry] = OrderedDict()
        self._tick = 0
        self._used = 0

    def _next_tick(self) -> int:
        self._tick += 1
        return self._tick

    def _entry(self, segment: Hashable) -> CacheEntry:
        entry = self._entries.get(segment)
        if entry is None:
            raise KeyError(f"segment {segment} is not in the cache plan")
        return entry

    def used_bytes(self) -> int:
        return self._used

    def free_bytes(self) -> int:
        return self.max_bytes - self._used

    def __contains__(self, segment: Hashable) -> bool:
        return segment in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, segment: Hashable) -> CacheEntry | None:
        """A copy of the segment's entry, or None."""
        entry = self._entries.get(segment)
        return None if entry is None else CacheEntry(entry.size, entry.last_used, entry.served, entry.pins)

    def segments(self) -> list:
        """All cached segments, least recently used first."""
        return list(self._entries)

    def served(self) -> list:
        return [s for s, e in self._entries.items() if e.served]

    def plan_admit(self, segment: Hashable, size: int) -> list:
        """Segments to evict, least recently used first, so that ``segment`` of ``size`` bytes fits.

        If ``segment`` is already cached its current size is replaced, not added. Raises
        CacheFullError when even evicting every evictable segment would not make room.
        """
        if size < 0:
            raise ValidationError(f"segment {segment}: size must be >= 0, got {size}")
        current = self._entries.get(segment)
        need = self._used - (current.size if current else 0) + size - self.max_bytes
        if need <= 0:
            return []
        victims = self._victims(segment, need)
        if victims is not None:
            return victims
        held = [(s, e) for s, e in self._entries.items() if s != segment and not e.evictable]
        held_bytes = sum(e.size for _, e in held)
        raise CacheFullError(
            f"cannot cache segment {segment} ({size} bytes): max_cache_bytes is {self.max_bytes} and {len(held)} "
            f"served or loading segments hold {held_bytes} bytes that cannot be evicted; raise [historical] "
            "max_cache_bytes or let the coordinator assign this segment to another historical"
        )

    def _victims(self, segment: Hashable, need: int) -> list | None:
        """Evictable segments other than ``segment``, least recently used first, whose sizes add
        up to at least ``need`` bytes; None when all of them together are not enough."""
        victims = []
        for other, entry in self._entries.items():
            if other == segment or not entry.evictable:
                continue
            victims.append(other)
            need -= entry.size
            if need <= 0:
                return victims
        return None

    def plan_volume(self, segment: Hashable, size: int, volume_free: int, in_flight: int = 0,
                    volume: str = "the cache volume", overhead: int = 0) -> list:
        """Segments to evict, least recently used first, so that ``segment`` (``size`` bytes, not
        on disk yet, plus ``overhead`` bytes written beside it) fits in the ``volume_free`` bytes
        the volume has, after the ``in_flight`` bytes other downloads under way may still write. Raises CacheFullError, naming the
        volume and its free bytes, when evicting every evictable segment would not make room:
        the load is refused before anything is written, rather than failing half-way with
        ENOSPC."""
        if min(size, volume_free, in_flight, overhead) < 0:
            raise ValidationError(f"segment {segment}: size ({size}), volume_free ({volume_free}), in_flight "
                                  f"({in_flight}) and overhead ({overhead}) must be >= 0")
        need = size + overhead + in_flight - volume_free
        if need <= 0:
            return []
        victims = self._victims(segment, need)
        if victims is not None:
            return victims
        raise CacheFullError(
            f"cannot cache segment {segment} ({size} bytes): {volume} has {volume_free} bytes free"
            + (f", {in_flight} of them promised to downloads under way," if in_flight else "")
            + " and no unserved segment is left to evict; [historical] max_cache_bytes "
            f"({self.max_bytes}) is more than the volume holds: lower it or give the cache more room. "
            "The coordinator assigns the segment to another historical"
        )

    def admit(self, segment: Hashable, size: int, *, served: bool = False) -> None:
        """Record ``segment`` (new or resized) as most recently used. Evict ``plan_admit``'s list first."""
        if size < 0:
            raise ValidationError(f"segment {segment}: size must be >= 0, got {size}")
        current = self._entries.get(segment)
        used = self._used - (current.size if current else 0) + size
        if used > self.max_bytes:
            raise CacheFullError(f"cannot admit segment {segment} ({size} bytes): the cache would hold {used} of "
                                 f"{self.max_bytes} bytes; evict the segments plan_admit returns first")
        if current is None:
            self._entries[segment] = CacheEntry(size, self._next_tick(), served)
        else:
            current.size, current.last_used, current.served = size, self._next_tick(), served
            self._entries.move_to_end(segment)
        self._used = used

    def touch(self, segment: Hashable) -> None:
        self._entry(segment).last_used = self._next_tick()
        self._entries.move_to_end(segment)

    def mark_served(self, segment: Hashable) -> None:
        self._entry(segment).served = True

    def mark_unserved(self, segment: Hashable) -> None:
        self._entry(segment).served = False

    def pin(self, segment: Hashable) -> None:
        self._entry(segment).pins += 1

    def unpin(self, segment: Hashable) -> None:
        entry = self._entry(segment)
        if entry.pins <= 0:
            raise ValidationError(f"segment {segment} is not pinned")
        entry.pins -= 1

    def remove(self, segment: Hashable) -> int:
        """Forget ``segment``; returns the bytes it held (0 if it was not cached)."""
        entry = self._entries.pop(segment, None)
        if entry is None:
            return 0
        self._used -= entry.size
        return entry.size
