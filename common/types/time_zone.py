"""Time zones on epoch millis: UTC -> wall clock and back, vectorized, from the IANA rules as
Python's ``zoneinfo`` reads them.

Why not Arrow's own zone code: it applies the transitions listed in the zone file and stops at
the last one (2037 in the files Debian ships), ignoring the rule in the file's footer that keeps
daylight saving going, so New York in July 2040 came out on standard time. ``zoneinfo`` applies
the footer rule. Offsets keep their seconds (local mean time before standard time, e.g.
-04:56:02 in New York).

A zone's offsets are kept as a table of (instant, offset from then on), built one calendar year
at a time on first use: the offset is sampled once a day and each change is narrowed down to the
second by bisection. Instants past the table's years reuse the 400-year Gregorian cycle, which
repeats every weekday rule exactly; instants before 1700 take the zone's first offset.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError

_DAY = 86_400_000
_CYCLE = 146_097 * _DAY  # 400 Gregorian years
_FIRST_YEAR, _LAST_YEAR = 1700, 2437
_FIRST_MS = int(dt.datetime(_FIRST_YEAR, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1000
_END_MS = int(dt.datetime(_LAST_YEAR + 1, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1000
_ARROW_EXACT_UNTIL = int(dt.datetime(2037, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1000
_FIXED = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?$")
_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Z", "+00:00", "GMT", "Etc/GMT", "UCT", "Zulu"})


class TimeZone:
    """One zone's offsets. ``fixed`` is set for a constant offset (``+05:30``)."""

    def __init__(self, name: str, info: zoneinfo.ZoneInfo | None, fixed: int | None = None) -> None:
        self.name = name
        self._info = info
        self.fixed = fixed
        self._years: dict[int, tuple[list[int], list[int]]] = {}

    # ---- the table --------------------------------------------------------------------------
    def _offset_at(self, ms: int) -> int:
        """The offset (millis) at one instant, straight from zoneinfo."""
        when = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)
        return int(when.astimezone(self._info).utcoffset() // dt.timedelta(milliseconds=1))

    def _year(self, year: int) -> tuple[list[int], list[int]]:
        """Transitions inside ``year`` (UTC): their instants and the offsets they start."""
        found = self._years.get(year)
        if found is None:
            start = int(dt.datetime(year, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1000
            end = int(dt.datetime(year + 1, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1000
            points = [start - 1, *self._changes(start, end), end - 1]
            instants, offsets = [], []
            before = self._offset_at(points[0])
            for lo, hi in zip(points, points[1:]):
                after = self._offset_at(hi)
                if after != before:
                    instants.append(self._edge(lo, hi, before))
                    offsets.append(after)
                    before = after
            found = self._years[year] = (instants, offsets)
        return found

    def _changes(self, start: int, end: int) -> list[int]:
        """Sample instants in [start, end) between which every offset change of the year lies.
        Before 2037 Arrow's zone code (exact there, and vectorized) finds the days that change;
        from 2037 on the zone file's footer rule gives at most a few changes a year, months apart,
        so a weekly zoneinfo sample brackets them."""
        if start < _ARROW_EXACT_UNTIL:
            days = np.arange(start, end, _DAY, dtype=np.int64)
            try:
                ts = pa.array(days, pa.int64()).cast(pa.timestamp("ms", tz=self.name))
                offs = pc.local_timestamp(ts).cast(pa.int64()).to_numpy(zero_copy_only=False) - days
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a zone only zoneinfo knows
                return [int(d) for d in days[1:]]
            changed = np.flatnonzero(offs[1:] != offs[:-1])
            return sorted({int(days[i]) for i in changed} | {int(days[i + 1]) for i in changed})
        return list(range(start + 7 * _DAY, end, 7 * _DAY))

    def _edge(self, lo: int, hi: int, before: int) -> int:
        """The first millisecond after ``lo`` whose offset is not ``before`` (offset(hi) is not)."""
        lo_s, hi_s = lo // 1000, -(-hi // 1000)  # transitions fall on whole seconds
        if self._offset_at(lo_s * 1000) != before:
            return lo
        while hi_s - lo_s > 1:
            mid = (lo_s + hi_s) // 2
            if self._offset_at(mid * 1000) == before:
                lo_s = mid
            else:
                hi_s = mid
        return hi_s * 1000

    # ---- vectorized ---------------------------------------------------------------------------
    def offsets(self, ms: np.ndarray) -> np.ndarray:
        """The UTC offset in millis at each instant."""
        ms = np.asarray(ms, dtype=np.int64)
        if self.fixed is not None or len(ms) == 0:
            return np.full(len(ms), self.fixed or 0, dtype=np.int64)
        folded = _fold(ms)
        lo, hi = int(folded.min()), int(folded.max())
        starts, offs = _table(self, _year_of(lo), _year_of(hi))
        idx = np.searchsorted(starts, folded, side="right") - 1
        return offs[np.maximum(idx, 0)]

    def to_local(self, ms: np.ndarray) -> np.ndarray:
        """Wall-clock millis (as if UTC) of each instant."""
        ms = np.asarray(ms, dtype=np.int64)
        return ms + self.offsets(ms)

    def from_local(self, local: np.ndarray, ambiguous: str = "earliest", nonexistent: str = "latest") -> np.ndarray:
        """Instants of wall-clock millis. A time read twice (clocks fall back) gives the earliest
        or latest instant; a skipped time (clocks jump) gives the first instant after the gap
        (``nonexistent="latest"``) or the last one before it (``"earliest"``)."""
        local = np.asarray(local, dtype=np.int64)
        if self.fixed is not None or len(local) == 0:
            return local - (self.fixed or 0)
        # Offsets a day and a half away bracket any transition near the wall-clock time.
        o1 = self.offsets(local - 3 * _DAY // 2)
        o2 = self.offsets(local + 3 * _DAY // 2)
        c1, c2 = local - o1, local - o2
        v1 = self.offsets(c1) == o1
        v2 = self.offsets(c2) == o2
        both = np.minimum(c1, c2) if ambiguous == "earliest" else np.maximum(c1, c2)
        out = np.where(v1 & v2, both, np.where(v1, c1, c2))
        gap = ~(v1 | v2)
        if gap.any():
            # In a gap: the transition lies between the two readings.
            lo = np.minimum(c1, c2)[gap]
            folded = _fold(lo)
            starts, _ = _table(self, _year_of(int(folded.min())), _year_of(int(folded.max())) + 1)
            edge = starts[np.minimum(np.searchsorted(starts, folded, side="right"), len(starts) - 1)] + (lo - folded)
            out[gap] = edge if nonexistent == "latest" else edge - 1
        return out


def _year_of(ms: int) -> int:
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).year


def _fold(ms: np.ndarray) -> np.ndarray:
    """Instants past the table moved back by whole 400-year cycles (same rules, same weekdays);
    instants before it clamp to its start."""
    out = np.maximum(ms, _FIRST_MS)
    late = out >= _END_MS
    if late.any():
        cycles = (out[late] - _END_MS) // _CYCLE + 1
        out = out.copy()
        out[late] -= cycles * _CYCLE
    return out


@functools.lru_cache(maxsize=1024)
def _table_cached(zone: TimeZone, first_year: int, last_year: int) -> tuple[np.ndarray, np.ndarray]:
    start = int(dt.datetime(first_year, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1000
    instants, offsets = [start], [zone._offset_at(start)]
    for year in range(first_year, last_year + 1):
        ins, offs = zone._year(year)
        instants.extend(ins)
        offsets.extend(offs)
    return np.array(instants, dtype=np.int64), np.array(offsets, dtype=np.int64)


def _table(zone: TimeZone, first_year: int, last_year: int) -> tuple[np.ndarray, np.ndarray]:
    return _table_cached(zone, max(first_year, _FIRST_YEAR), min(last_year, _LAST_YEAR))


@functools.lru_cache(maxsize=256)
def time_zone(name: str | None) -> TimeZone | None:
    """The zone named ``name`` (an IANA name or a fixed offset such as ``+05:30``); None for UTC.
    An unknown name is a ValidationError that says what is valid."""
    if name is None or name in _UTC_NAMES:
        return None
    fixed = _FIXED.match(name)
    if fixed:
        sign, hours, minutes = fixed.group(1), int(fixed.group(2)), int(fixed.group(3) or 0)
        if hours > 18 or minutes > 59:
            raise ValidationError(f"time zone offset '{name}' is out of range; use -18:00 to +18:00")
        millis = (hours * 60 + minutes) * 60_000 * (-1 if sign == "-" else 1)
        return TimeZone(name, None, millis) if millis else None
    try:
        info = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(f"unknown time zone '{name}'; use an IANA name such as America/Los_Angeles "
                              "or an offset such as +05:30") from None
    return TimeZone(name, info)


__all__ = ["TimeZone", "time_zone"]
