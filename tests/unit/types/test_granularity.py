"""Granularity and Period: parsing Druid's spellings and bucketing instants, checked against a
pure-Python reference built on zoneinfo (wall-clock flooring, Joda's keep-the-offset rule for
repeated hours, first valid instant after a gap)."""

import datetime as dt
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from common.errors import ValidationError
from common.types import ALL, NONE, Granularity, Period, format_instant, parse_instant

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
SIMPLE = ["second", "minute", "five_minute", "ten_minute", "fifteen_minute", "thirty_minute", "hour", "six_hour",
          "eight_hour", "day", "week", "month", "quarter", "year"]
MINUTES = {"minute": 1, "five_minute": 5, "ten_minute": 10, "fifteen_minute": 15, "thirty_minute": 30}
HOURS = {"hour": 1, "six_hour": 6, "eight_hour": 8}


def to_local(ms: int, tz: str | None) -> dt.datetime:
    return (EPOCH + dt.timedelta(milliseconds=int(ms))).astimezone(ZoneInfo(tz) if tz else UTC)


def to_ms(value: dt.datetime) -> int:
    return (value - EPOCH) // dt.timedelta(milliseconds=1)


def ref_bucket_start(ms: int, name: str, tz: str | None) -> int:
    """Floor the local wall-clock fields. `replace` keeps `fold`, so an instant in the second
    occurrence of a repeated hour floors within that occurrence (Joda keeps the offset)."""
    local = to_local(ms, tz)
    zero_time = dict(hour=0, minute=0, second=0, microsecond=0)
    if name == "second":
        out = local.replace(microsecond=0)
    elif name in MINUTES:
        out = local.replace(minute=local.minute - local.minute % MINUTES[name], second=0, microsecond=0)
    elif name in HOURS:
        out = local.replace(hour=local.hour - local.hour % HOURS[name], minute=0, second=0, microsecond=0)
    elif name == "day":
        out = local.replace(**zero_time)
    elif name == "week":
        monday = local.date() - dt.timedelta(days=local.weekday())
        out = dt.datetime(monday.year, monday.month, monday.day, tzinfo=local.tzinfo)
    elif name == "month":
        out = local.replace(day=1, **zero_time)
    elif name == "quarter":
        out = local.replace(month=(local.month - 1) // 3 * 3 + 1, day=1, **zero_time)
    elif name == "year":
        out = local.replace(month=1, day=1, **zero_time)
    else:
        raise AssertionError(name)
    return to_ms(out)


def _instants() -> np.ndarray:
    rng = np.random.default_rng(11)
    lo, hi = parse_instant("2019-01-01"), parse_instant("2025-12-31")
    out = [rng.integers(lo, hi, 400)]
    # Both 2023 DST transitions in Los Angeles, every 7 minutes and 1 ms for +/- 30 hours.
    for edge in ("2023-03-12T10:00:00Z", "2023-11-05T09:00:00Z"):
        e = parse_instant(edge)
        grid = np.arange(e - 30 * 3_600_000, e + 30 * 3_600_000, 7 * 60_000 + 1)
        out.append(grid)
    # Calendar edges in UTC and in the zones under test, +/- 1 ms.
    for text in ("2023-01-01T00:00:00Z", "2023-04-01T00:00:00Z", "2024-02-29T00:00:00Z", "2023-01-01T08:00:00Z",
                 "2022-12-31T18:30:00Z", "2023-01-02T00:00:00Z"):
        e = parse_instant(text)
        out.append(np.array([e - 1, e, e + 1]))
    out.append(np.array([0, -1, -86_400_001]))  # around and before the epoch
    return np.concatenate(out).astype(np.int64)


INSTANTS = _instants()


def in_repeated_hour(ms: int, tz: str | None) -> bool:
    return tz is not None and to_local(ms, tz).fold == 1


@pytest.mark.parametrize("tz", [None, "America/Los_Angeles", "Asia/Kolkata"])
@pytest.mark.parametrize("name", SIMPLE)
def test_bucket_start_matches_reference(name, tz):
    g = Granularity.parse(name)
    if tz:
        g = Granularity.parse({"type": "period", "period": str(g.period), "timeZone": tz})
    # The second occurrence of 01:xx on the fall-back day is covered by the xfail test below;
    # granularities of six hours and more never floor into it.
    instants = INSTANTS
    if name in ("second", "hour") or name in MINUTES:
        instants = np.array([m for m in INSTANTS if not in_repeated_hour(m, tz)], dtype=np.int64)
    got = g.bucket_start(instants)
    want = np.array([ref_bucket_start(m, name, tz) for m in instants], dtype=np.int64)
    bad = np.flatnonzero(got != want)
    assert len(bad) == 0, [(format_instant(instants[i]), format_instant(got[i]), format_instant(want[i]))
                           for i in bad[:5]]


@pytest.mark.parametrize("name,instant,expected", [
    ("hour", "2023-11-05T09:30:00Z", "2023-11-05T09:00:00Z"),
    ("minute", "2023-11-05T09:30:30Z", "2023-11-05T09:30:00Z"),
    ("fifteen_minute", "2023-11-05T09:50:00Z", "2023-11-05T09:45:00Z"),
])
def test_bucket_start_in_repeated_hour(name, instant, expected):
    g = Granularity.parse({"type": "period", "period": str(Granularity.parse(name).period),
                           "timeZone": "America/Los_Angeles"})
    assert format_instant(g.bucket_start(np.array([parse_instant(instant)]))[0]) == format_instant(
        parse_instant(expected))


def test_hour_buckets_across_fall_back():
    g = Granularity.parse({"type": "period", "period": "PT1H", "timeZone": "America/Los_Angeles"})
    got = g.buckets(parse_instant("2023-11-05T06:00:00Z"), parse_instant("2023-11-05T12:00:00Z"), limit=100)
    assert [format_instant(b) for b in got] == [f"2023-11-05T{h:02d}:00:00.000Z" for h in range(6, 12)]


def test_day_bucket_when_midnight_is_skipped():
    g = Granularity.parse({"type": "period", "period": "P1D", "timeZone": "America/Sao_Paulo"})
    got = g.bucket_start(np.array([parse_instant("2018-11-04T12:00:00Z")]))[0]
    assert format_instant(got) == "2018-11-04T03:00:00.000Z"  # 01:00 local, -02:00


def test_dst_day_buckets_are_23_and_25_hours():
    g = Granularity.parse({"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"})
    spring = g.buckets(parse_instant("2023-03-11T12:00:00Z"), parse_instant("2023-03-14T00:00:00Z"))
    assert [format_instant(b) for b in spring] == [
        "2023-03-11T08:00:00.000Z", "2023-03-12T08:00:00.000Z", "2023-03-13T07:00:00.000Z"]
    fall = g.buckets(parse_instant("2023-11-04T12:00:00Z"), parse_instant("2023-11-07T00:00:00Z"))
    assert [format_instant(b) for b in fall] == [
        "2023-11-04T07:00:00.000Z", "2023-11-05T07:00:00.000Z", "2023-11-06T08:00:00.000Z"]
    assert np.diff(fall).tolist() == [24 * 3_600_000, 25 * 3_600_000]


@pytest.mark.parametrize("spec,start,end,expected", [
    ("month", "2023-01-15", "2023-06-01", ["2023-01-01", "2023-02-01", "2023-03-01", "2023-04-01", "2023-05-01"]),
    ("quarter", "2022-11-20", "2023-12-31", ["2022-10-01", "2023-01-01", "2023-04-01", "2023-07-01", "2023-10-01"]),
    ("year", "2019-06-01", "2021-01-01", ["2019-01-01", "2020-01-01"]),
    ("week", "2023-01-01", "2023-01-17", ["2022-12-26", "2023-01-02", "2023-01-09", "2023-01-16"]),
    ("day", "2024-02-28T05:00:00Z", "2024-03-01T00:00:01Z", ["2024-02-28", "2024-02-29", "2024-03-01"]),
    ("six_hour", "2023-01-01T05:00:00Z", "2023-01-01T18:00:00Z",
     ["2023-01-01T00:00:00Z", "2023-01-01T06:00:00Z", "2023-01-01T12:00:00Z"]),
    ("PT90M", "1970-01-01T00:00:00Z", "1970-01-01T04:00:00Z",
     ["1970-01-01T00:00:00Z", "1970-01-01T01:30:00Z", "1970-01-01T03:00:00Z"]),
    ({"type": "period", "period": "P1M", "timeZone": "America/Los_Angeles"}, "2023-02-15T00:00:00Z",
     "2023-04-15T00:00:00Z", ["2023-02-01T08:00:00Z", "2023-03-01T08:00:00Z", "2023-04-01T07:00:00Z"]),
    ({"type": "period", "period": "PT1H", "origin": "2020-01-01T00:30:00Z"}, "2020-01-02T05:10:00Z",
     "2020-01-02T07:00:00Z", ["2020-01-02T04:30:00Z", "2020-01-02T05:30:00Z", "2020-01-02T06:30:00Z"]),
    ({"type": "period", "period": "P1D", "timeZone": "Asia/Kolkata", "origin": "2020-01-01T06:00:00+05:30"},
     "2020-01-02T00:00:00Z", "2020-01-03T00:00:00Z", ["2020-01-01T00:30:00Z", "2020-01-02T00:30:00Z"]),
    ({"type": "period", "period": "P1M", "origin": "2020-01-15T00:00:00Z"}, "2020-02-01T00:00:00Z",
     "2020-04-01T00:00:00Z", ["2020-01-15T00:00:00Z", "2020-02-15T00:00:00Z", "2020-03-15T00:00:00Z"]),
])
def test_buckets(spec, start, end, expected):
    g = Granularity.parse(spec)
    got = g.buckets(parse_instant(start), parse_instant(end))
    assert got == [parse_instant(e) for e in expected]
    for a, b in zip(got, got[1:]):
        assert g.next_bucket(a) == b


def test_buckets_refuse_too_many():
    with pytest.raises(ValidationError, match="makes more than 10 buckets"):
        Granularity.parse("hour").buckets(0, 86_400_000, limit=10)


@pytest.mark.parametrize("g", [ALL, NONE])
def test_no_next_bucket_for_all_and_none(g):
    with pytest.raises(ValidationError, match="has no next bucket"):
        g.next_bucket(0)


def test_none_is_identity_and_all_has_no_buckets():
    values = np.array([5, 1, 999], dtype=np.int64)
    assert NONE.bucket_start(values).tolist() == [5, 1, 999]
    with pytest.raises(ValidationError, match="'all' has no per-row buckets"):
        ALL.bucket_start(values)


def test_duration_granularity_with_iso_origin():
    g = Granularity.parse({"type": "duration", "duration": 3_600_000, "origin": "2012-01-01T00:30:00Z"})
    got = g.bucket_start(np.array([parse_instant("2020-01-02T05:10:00Z")]))
    assert got.tolist() == [parse_instant("2020-01-02T04:30:00Z")]


def test_duration_granularity_with_millis_origin():
    g = Granularity.parse({"type": "duration", "duration": 3_600_000, "origin": 1_800_000})
    assert g.bucket_start(np.array([parse_instant("2020-01-02T05:10:00Z")])).tolist() == [
        parse_instant("2020-01-02T04:30:00Z")]


# ---- parsing --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,iso", [
    ("second", "PT1S"), ("minute", "PT1M"), ("five_minute", "PT5M"), ("ten_minute", "PT10M"),
    ("fifteen_minute", "PT15M"), ("thirty_minute", "PT30M"), ("hour", "PT1H"), ("six_hour", "PT6H"),
    ("eight_hour", "PT8H"), ("day", "P1D"), ("week", "P1W"), ("month", "P1M"), ("quarter", "P3M"), ("year", "P1Y"),
])
def test_simple_names_are_periods(name, iso):
    g = Granularity.parse(name)
    assert g == Granularity.parse(iso) == Granularity.parse(name.upper()) == Granularity.parse({"type": name})
    assert g.kind == "period" and g.time_zone is None and g.origin is None
    assert g.to_json() == name
    assert Granularity.parse({"type": "period", "period": iso}) == g


@pytest.mark.parametrize("spec,expected", [
    ("all", ALL), ("ALL", ALL), ("all_time", ALL), ({"type": "all"}, ALL),
    ("none", NONE), ("None", NONE), ({"type": "none"}, NONE), (None, NONE),
])
def test_all_and_none(spec, expected):
    assert Granularity.parse(spec) == expected
    assert expected.to_json() in ("all", "none")


def test_period_json_with_time_zone_and_origin():
    g = Granularity.parse({"type": "period", "period": "PT6H", "timeZone": "America/Los_Angeles",
                           "origin": "2020-01-01T03:00:00Z"})
    assert (g.period, g.time_zone, g.origin) == (Period(millis=6 * 3_600_000), "America/Los_Angeles",
                                                 parse_instant("2020-01-01T03:00:00Z"))
    assert g.to_json() == {"type": "period", "period": "PT6H", "timeZone": "America/Los_Angeles",
                           "origin": "2020-01-01T03:00:00.000Z"}
    assert Granularity.parse(g.to_json()) == g
    # UTC spelled out is the same as no zone, so equal granularities compare equal.
    assert Granularity.parse({"type": "period", "period": "P1D", "timeZone": "UTC"}) == Granularity.parse("day")


@pytest.mark.parametrize("text,expected,back", [
    ("PT1.5S", Period(millis=1500), "PT1.5S"),
    ("P1Y", Period(years=1), "P1Y"),
    ("P2W", Period(weeks=2), "P2W"),
    ("P1DT12H", Period(days=1, millis=12 * 3_600_000), "P1DT12H"),
    ("PT90M", Period(millis=90 * 60_000), "PT1H30M"),
    ("p1d", Period(days=1), "P1D"),
])
def test_period_parse_and_str(text, expected, back):
    assert Period.parse(text) == expected
    assert str(expected) == back


@pytest.mark.parametrize("spec,match", [
    ("fortnight", "unknown granularity 'fortnight'; valid: none, all, second, minute"),
    ("1D", "unknown granularity '1D'"),
    ({"type": "fortnight"}, "unknown granularity 'fortnight'"),
    ("P", "invalid ISO-8601 period 'P'"),
    ("PT", "invalid ISO-8601 period 'PT'"),
    ("P1X", "invalid ISO-8601 period"),
    ("PT0S", "zero length"),
    ("P1M1D", "mixes years or months with other units"),
    ("P1Y2M", "mixes years or months"),
    ({"type": "period", "period": "P1D", "timeZone": "Not/AZone"}, "unknown time zone 'Not/AZone'"),
])
def test_bad_granularities(spec, match):
    with pytest.raises(ValidationError, match=match):
        Granularity.parse(spec)


def test_unknown_granularity_lists_every_valid_name():
    with pytest.raises(ValidationError) as err:
        Granularity.parse("fortnight")
    for name in ["none", "all", *SIMPLE]:
        assert name in str(err.value)


def test_period_add_to_is_calendar_aware():
    jan31 = parse_instant("2023-01-31T10:00:00Z")
    assert format_instant(Period.parse("P1M").add_to(jan31)) == "2023-02-28T10:00:00.000Z"
    assert format_instant(Period.parse("P1M").add_to(jan31, 2)) == "2023-03-31T10:00:00.000Z"
    assert format_instant(Period.parse("P1Y").add_to(parse_instant("2024-02-29"))) == "2025-02-28T00:00:00.000Z"
    assert Period.parse("PT1H").add_to(0, -3) == -3 * 3_600_000
