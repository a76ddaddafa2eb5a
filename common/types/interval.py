"""Interval: a half-open span of UTC milliseconds, spelled in ISO 8601 as Druid spells it.

Segments cover an interval, queries name intervals, and the timeline reasons about overlaps;
all of them use this one type.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass

from common.errors import ValidationError

# Druid's ETERNITY: half of Long.MIN/MAX so arithmetic on the bounds cannot overflow.
MIN_MS = -(2**62)
MAX_MS = 2**62 - 1
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

_LOOSE_DATE = re.compile(r"^(-?\d{4,})-(\d{1,2})-(\d{1,2})(.*)$")
_REDUCED = re.compile(r"^(\d{4})(?:-(\d{1,2}))?$")
_SUB_MILLIS = re.compile(r"(\.\d{3})\d+")


_ETERNITY_START = "-146136543-09-08T08:23:32.096Z"
_ETERNITY_END = "146140482-04-24T15:36:27.903Z"


def parse_instant(text: str) -> int:
    """ISO-8601 date or date-time (zone optional, UTC assumed) to epoch milliseconds."""
    s = text.strip()
    if s == _ETERNITY_START:  # the bounds of ETERNITY, as format_instant writes them
        return MIN_MS
    if s == _ETERNITY_END:
        return MAX_MS
    if s.lstrip("-").isdigit() and len(s.lstrip("-")) > 8:
        return int(s)  # epoch millis, as Druid accepts
    reduced = _REDUCED.match(s)
    if reduced:
        # Reduced precision, as Joda reads it: "2015" is 2015-01-01, "2015-09" is 2015-09-01.
        s = f"{int(reduced.group(1)):04d}-{int(reduced.group(2) or 1):02d}-01"
    m = _LOOSE_DATE.match(s)
    if m:
        # Accept non-zero-padded months and days ("2022-6-14T10:32:08Z"), as Druid's parser does.
        s = f"{int(m.group(1)):04d}-{int(m.group(2)):02d}-{int(m.group(3)):02d}{m.group(4)}"
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    s = _SUB_MILLIS.sub(r"\1", s)  # strata keeps milliseconds; finer digits truncate
    if " " in s and "T" not in s:
        s = s.replace(" ", "T", 1)
    try:
        value = dt.datetime.fromisoformat(s)
    except ValueError:
        raise ValidationError(
            f"cannot parse '{text}' as an ISO-8601 time; use e.g. 2015-09-12 or 2015-09-12T08:00:00Z"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)


def format_instant(ms: int) -> str:
    # Cached: a cached SQL plan's intervals are formatted on every run (query JSON, query log).
    return _format_instant(int(ms))


@functools.lru_cache(maxsize=4096)
def _format_instant(ms: int) -> str:
    if ms <= MIN_MS:
        return _ETERNITY_START
    if ms >= MAX_MS:
        return _ETERNITY_END
    value = _EPOCH + dt.timedelta(milliseconds=ms)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


@dataclass(frozen=True, order=True)
class Interval:
    """[start, end) in epoch milliseconds."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValidationError(
                f"interval end {format_instant(self.end)} is before its start {format_instant(self.start)}"
            )

    @staticmethod
    def parse(text: str) -> Interval:
        """``start/end`` or ``start/period`` or ``period/end`` in ISO 8601."""
        from common.types.granularity import Period  # periods need the granularity module

        if "/" not in text:
            raise ValidationError(f"interval '{text}' must be 'start/end', e.g. 2015-09-12/2015-09-13")
        left, right = text.split("/", 1)
        if left.upper().startswith("P"):
            end = parse_instant(right)
            return Interval(Period.parse(left).add_to(end, -1), end)
        start = parse_instant(left)
        if right.upper().startswith("P"):
            return Interval(start, Period.parse(right).add_to(start, 1))
        return Interval(start, parse_instant(right))

    @staticmethod
    def of(value: Interval | str) -> Interval:
        return value if isinstance(value, Interval) else Interval.parse(value)

    @property
    def is_eternity(self) -> bool:
        return self.start <= MIN_MS and self.end >= MAX_MS

    def overlaps(self, other: Interval) -> bool:
        return self.start < other.end and other.start < self.end

    def contains(self, other: Interval) -> bool:
        return self.start <= other.start and other.end <= self.end

    def contains_instant(self, ms: int) -> bool:
        return self.start <= ms < self.end

    def intersect(self, other: Interval) -> Interval | None:
        start, end = max(self.start, other.start), min(self.end, other.end)
        return Interval(start, end) if start < end else None

    def __str__(self) -> str:
        return f"{format_instant(self.start)}/{format_instant(self.end)}"


ETERNITY = Interval(MIN_MS, MAX_MS)


def condense(intervals: list[Interval]) -> list[Interval]:
    """Sort and merge overlapping or abutting intervals."""
    out: list[Interval] = []
    for iv in sorted(intervals):
        if out and iv.start <= out[-1].end:
            if iv.end > out[-1].end:
                out[-1] = Interval(out[-1].start, iv.end)
        else:
            out.append(iv)
    return out
