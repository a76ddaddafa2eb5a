"""Granularity and Period: how time is bucketed, vectorized over arrays of epoch milliseconds.

Druid's simple granularities (``hour``, ``day`` ...), ISO-8601 periods (``PT5M``, ``P1M``) with an
optional time zone and origin, ``none`` (millisecond) and ``all`` (one bucket). Fixed-length
periods in UTC are integer arithmetic; calendar periods and zoned buckets go through Arrow's
temporal kernels on local wall-clock time, so daylight-saving days come out as users expect.
"""

from __future__ import annotations

import functools

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.types.time_zone import time_zone as zone_of

SIMPLE_GRANULARITIES = {
    "second": "PT1S",
    "minute": "PT1M",
    "five_minute": "PT5M",
    "ten_minute": "PT10M",
    "fifteen_minute": "PT15M",
    "thirty_minute": "PT30M",
    "hour": "PT1H",
    "six_hour": "PT6H",
    "eight_hour": "PT8H",
    "day": "P1D",
    "week": "P1W",
    "month": "P1M",
    "quarter": "P3M",
    "year": "P1Y",
}
VALID_NAMES = ["none", "all", *SIMPLE_GRANULARITIES]

_PERIOD = re.compile(
    r"^P(?:(?P<Y>\d+)Y)?(?:(?P<M>\d+)M)?(?:(?P<W>\d+)W)?(?:(?P<D>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
_MS = {"D": 86_400_000, "W": 7 * 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000}


@dataclass(frozen=True)
class Period:
    """An ISO-8601 period. Calendar parts (years, months) are kept apart from fixed parts."""

    years: int = 0
    months: int = 0
    weeks: int = 0
    days: int = 0
    millis: int = 0  # hours, minutes, seconds

    @staticmethod
    def parse(text: str) -> Period:
        m = _PERIOD.match(text.strip().upper()) if text else None
        if m is None or text.strip().upper() in ("P", "PT"):
            raise ValidationError(
                f"invalid ISO-8601 period '{text}'; examples: PT1M, PT15M, PT1H, P1D, P1W, P1M, P3M, P1Y"
            )
        g = {k: v for k, v in m.groupdict().items() if v}
        millis = int(g.get("h", 0)) * _MS["h"] + int(g.get("m", 0)) * _MS["m"]
        millis += int(round(float(g.get("s", 0)) * 1000))
        p = Period(int(g.get("Y", 0)), int(g.get("M", 0)), int(g.get("W", 0)), int(g.get("D", 0)), millis)
        if p.is_zero:
            raise ValidationError(f"period '{text}' has zero length")
        return p

    @property
    def is_zero(self) -> bool:
        return not (self.years or self.months or self.weeks or self.days or self.millis)

    @property
    def has_calendar_part(self) -> bool:
        return bool(self.years or self.months)

    @property
    def nominal_millis(self) -> int:
        return int(
            self.years * 365.2425 * _MS["D"] + self.months * 30.436875 * _MS["D"]
            + self.weeks * _MS["W"] + self.days * _MS["D"] + self.millis
        )

    @property
    def fixed_millis(self) -> int:
        return self.weeks * _MS["W"] + self.days * _MS["D"] + self.millis

    def add_to(self, ms: int, times: int = 1) -> int:
        """Shift an instant (UTC) by this period ``times`` times, calendar-aware."""
        return int(shift_millis(np.array([ms], dtype=np.int64), self, times, None)[0])

    def __str__(self) -> str:
        out = "P"
        for value, unit in ((self.years, "Y"), (self.months, "M"), (self.weeks, "W"), (self.days, "D")):
            if value:
                out += f"{value}{unit}"
        if self.millis:
            out += "T"
            rest = self.millis
            for unit, size in (("H", 3_600_000), ("M", 60_000)):
                if rest >= size:
                    out += f"{rest // size}{unit}"
                    rest %= size
            if rest:
                out += f"{rest / 1000:g}S"
        return out


def _to_local(ms: np.ndarray, tz: str | None) -> pa.Array:
    """Wall-clock times in ``tz`` as a zone-less timestamp array (see ``time_zone``: Arrow's own
    zone code ignores daylight saving from 2038 on)."""
    zone = zone_of(tz)
    local = np.asarray(ms, dtype=np.int64) if zone is None else zone.to_local(ms)
    return pa.array(local, type=pa.int64()).cast(pa.timestamp("ms"))


def _from_local(local: pa.Array, tz: str | None, not_after: np.ndarray | None = None) -> np.ndarray:
    """Wall-clock times in ``tz`` back to UTC millis.

    A wall-clock time can name two instants (the repeated hour when clocks fall back) or none
    (skipped by a jump forward). With ``not_after`` (the instants being bucketed), the later
    reading is used when it is not after the instant, else the earlier one: a bucket start is
    the latest reading at or before its rows. A skipped time resolves to the end of the gap, as
    Joda does (a day whose midnight is skipped starts at 01:00).
    """
    wall = local.cast(pa.int64()).to_numpy(zero_copy_only=False)
    zone = zone_of(tz)
    if zone is None:
        return wall
    late = zone.from_local(wall, ambiguous="latest", nonexistent="latest")
    if not_after is None:
        return late
    early = zone.from_local(wall, ambiguous="earliest", nonexistent="latest")
    return np.where(late <= not_after, late, early)


def shift_millis(ms: np.ndarray, period: Period, times: int, tz: str | None) -> np.ndarray:
    """``ms`` shifted by ``period * times``; calendar parts move the wall-clock date in ``tz``."""
    out = ms.astype(np.int64, copy=True)
    if period.has_calendar_part:
        months = (period.years * 12 + period.months) * times
        local = _to_local(out, tz).to_numpy(zero_copy_only=False).astype("datetime64[ms]")
        day = local.astype("datetime64[D]")
        time_of_day = local - day.astype("datetime64[ms]")
        month = local.astype("datetime64[M]")
        day_of_month = day - month.astype("datetime64[D]")
        target = month + np.timedelta64(months, "M")
        month_len = (target + np.timedelta64(1, "M")).astype("datetime64[D]") - target.astype("datetime64[D]")
        # Clamp the day of month (Jan 31 + 1 month = Feb 28/29), as Joda does.
        clamped = np.minimum(day_of_month, month_len - np.timedelta64(1, "D"))
        new = (target.astype("datetime64[D]") + clamped).astype("datetime64[ms]") + time_of_day
        out = _from_local(pa.array(new, type=pa.timestamp("ms")), tz)
    fixed = period.fixed_millis
    if fixed:
        if tz and (period.weeks or period.days):
            local = _to_local(out, tz)
            local = pa.array(local.cast(pa.int64()).to_numpy(zero_copy_only=False)
                             + (period.weeks * _MS["W"] + period.days * _MS["D"]) * times,
                             type=pa.int64()).cast(pa.timestamp("ms"))
            out = _from_local(local, tz) + period.millis * times
        else:
            out = out + fixed * times
    return out


@dataclass(frozen=True)
class Granularity:
    """``kind`` is 'none', 'all' or 'period'. Periods carry an optional time zone and origin."""

    kind: str
    period: Period | None = None
    time_zone: str | None = None
    origin: int | None = None

    @staticmethod
    def parse(spec) -> Granularity:
        """A name (``hour``), a period string (``PT5M``) or Druid's JSON form."""
        if isinstance(spec, Granularity):
            return spec
        if spec is None:
            return NONE
        if isinstance(spec, dict):
            kind = str(spec.get("type", "")).lower()
            if kind == "period":
                tz = spec.get("timeZone")
                origin = spec.get("origin")
                if origin is not None:
                    from common.types.interval import parse_instant

                    origin = parse_instant(origin) if isinstance(origin, str) else int(origin)
                return Granularity.of_period(Period.parse(str(spec.get("period", ""))), tz, origin)
            if kind == "duration":
                origin = spec.get("origin")
                if isinstance(origin, str):
                    from common.types.interval import parse_instant

                    origin = parse_instant(origin)
                return Granularity.of_period(Period(millis=int(spec["duration"])), None, origin)
            if kind in ("all", "none"):
                return ALL if kind == "all" else NONE
            return Granularity.parse(kind)
        name = str(spec).strip()
        low = name.lower()
        if low == "none":
            return NONE
        if low in ("all", "all_time", "all time"):
            return ALL
        if low in SIMPLE_GRANULARITIES:
            return Granularity.of_period(Period.parse(SIMPLE_GRANULARITIES[low]))
        if name.upper().startswith("P"):
            return Granularity.of_period(Period.parse(name))
        raise ValidationError(
            f"unknown granularity '{spec}'; valid: {', '.join(VALID_NAMES)}, or an ISO-8601 period such as PT5M"
        )

    @staticmethod
    def of_period(period: Period, time_zone: str | None = None, origin: int | None = None) -> Granularity:
        if time_zone in ("UTC", "Etc/UTC", "Z"):
            time_zone = None
        if time_zone:
            zone_of(time_zone)  # an unknown name is a ValidationError naming it
        if period.has_calendar_part and (
            (period.years and period.months) or period.weeks or period.days or period.millis
        ):
            raise ValidationError(
                f"period '{period}' mixes years or months with other units; use a single unit such as P3M"
            )
        return Granularity("period", period, time_zone, origin)

    @property
    def is_all(self) -> bool:
        return self.kind == "all"

    @property
    def is_none(self) -> bool:
        return self.kind == "none"

    def to_json(self):
        if self.kind != "period":
            return self.kind
        if self.time_zone is None and self.origin is None:
            for name, period in _simple_periods():
                if period == self.period:
                    return name
        out = {"type": "period", "period": str(self.period)}
        if self.time_zone:
            out["timeZone"] = self.time_zone
        if self.origin is not None:
            from common.types.interval import format_instant

            out["origin"] = format_instant(self.origin)
        return out

    def bucket_start(self, ms: np.ndarray) -> np.ndarray:
        """Vectorized start of each value's bucket (int64 epoch millis). Not defined for 'all'."""
        ms = np.asarray(ms, dtype=np.int64)
        if self.kind == "none":
            return ms
        if self.kind == "all":
            raise ValidationError("granularity 'all' has no per-row buckets")
        p = self.period
        fixed_ok = not p.has_calendar_part and not p.weeks and (
            self.time_zone is None or not (p.days or p.weeks)
        )
        if fixed_ok and self.time_zone is None:
            size = p.fixed_millis
            origin = self.origin or 0
            return (ms - origin) // size * size + origin
        if fixed_ok and p.millis and p.millis <= 3_600_000 and 3_600_000 % p.millis == 0 and self.origin is None:
            # Sub-hour buckets dividing an hour align the same in every zone with whole-hour offsets;
            # zones with odd offsets still go through local time below.
            local = _to_local(ms, self.time_zone).cast(pa.int64()).to_numpy(zero_copy_only=False)
            floored = local // p.millis * p.millis
            return _from_local(pa.array(floored, pa.int64()).cast(pa.timestamp("ms")), self.time_zone, ms)
        local = _to_local(ms, self.time_zone)
        if self.origin is not None:
            return self._bucket_with_origin(ms)
        if p.years:
            floored = pc.floor_temporal(local, multiple=p.years, unit="year")
        elif p.months:
            floored = pc.floor_temporal(local, multiple=p.months, unit="month")
        elif p.weeks and not p.days and not p.millis:
            floored = pc.floor_temporal(local, multiple=p.weeks, unit="week", week_starts_monday=True)
        elif p.days and not p.millis:
            floored = pc.floor_temporal(local, multiple=p.days, unit="day")
        else:
            size = p.fixed_millis
            raw = local.cast(pa.int64()).to_numpy(zero_copy_only=False)
            floored = pa.array(raw // size * size, pa.int64()).cast(pa.timestamp("ms"))
        return _from_local(floored, self.time_zone, ms)

    def _bucket_with_origin(self, ms: np.ndarray) -> np.ndarray:
        p = self.period
        if p.has_calendar_part:
            months = p.years * 12 + p.months
            origin_local = _to_local(np.array([self.origin], np.int64), self.time_zone)
            o = origin_local.to_numpy(zero_copy_only=False).astype("datetime64[ms]")[0]
            local = _to_local(ms, self.time_zone).to_numpy(zero_copy_only=False).astype("datetime64[ms]")
            o_month = o.astype("datetime64[M]")
            diff = (local.astype("datetime64[M]") - o_month).astype(np.int64)
            steps = diff // months
            cand = o_month + (steps * months).astype("timedelta64[M]")
            start = cand.astype("datetime64[ms]") + (o - o_month.astype("datetime64[ms]"))
            start = np.where(start > local, (o_month + ((steps - 1) * months).astype("timedelta64[M]")).astype(
                "datetime64[ms]") + (o - o_month.astype("datetime64[ms]")), start)
            return _from_local(pa.array(start, pa.timestamp("ms")), self.time_zone, ms)
        size = p.fixed_millis
        if self.time_zone is None:
            return (ms - self.origin) // size * size + self.origin
        local = _to_local(ms, self.time_zone).cast(pa.int64()).to_numpy(zero_copy_only=False)
        o = _to_local(np.array([self.origin], np.int64), self.time_zone).cast(pa.int64()).to_numpy()[0]
        floored = (local - o) // size * size + o
        return _from_local(pa.array(floored, pa.int64()).cast(pa.timestamp("ms")), self.time_zone, ms)

    def next_bucket(self, start: int) -> int:
        """The start of the bucket after the one starting at ``start``."""
        if self.kind != "period":
            raise ValidationError(f"granularity '{self.kind}' has no next bucket")
        nominal = self.period.nominal_millis
        probe = np.array([start + nominal + nominal // 2], dtype=np.int64)
        nxt = int(self.bucket_start(probe)[0])
        if nxt <= start:  # 1.5x nominal overshoots only for fixed sizes; never undershoots
            nxt = int(self.bucket_start(np.array([start + nominal], np.int64))[0])
        return nxt

    def buckets(self, start: int, end: int, limit: int = 1_000_000) -> list[int]:
        """Bucket starts covering [start, end); refuses more than ``limit`` buckets."""
        first = int(self.bucket_start(np.array([start], np.int64))[0])
        p = self.period
        if (self.kind == "period" and self.time_zone is None and not p.has_calendar_part and not p.weeks
                and p.fixed_millis > 0):
            # Fixed-size buckets in UTC are evenly spaced: no need to step through them one by one.
            count = max(0, -(-(end - first) // p.fixed_millis))
            if count > limit:
                raise ValidationError(f"granularity {self.to_json()} makes more than {limit} buckets")
            return (first + p.fixed_millis * np.arange(count, dtype=np.int64)).tolist()
        out = []
        b = first
        while b < end:
            out.append(b)
            if len(out) > limit:
                raise ValidationError(f"granularity {self.to_json()} makes more than {limit} buckets")
            b = self.next_bucket(b)
        return out

    def __str__(self) -> str:
        j = self.to_json()
        return j if isinstance(j, str) else str(j)


NONE = Granularity("none")
ALL = Granularity("all")


@functools.lru_cache(maxsize=1)
def _simple_periods() -> tuple:
    """(name, Period) of the simple granularities, parsed once: every query's JSON form asks."""
    return tuple((name, Period.parse(text)) for name, text in SIMPLE_GRANULARITIES.items())
