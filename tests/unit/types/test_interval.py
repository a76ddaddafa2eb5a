"""Interval and instant parsing, as Druid spells intervals in queries and segment ids."""

import datetime as dt

import pytest

from common.errors import ValidationError
from common.types import ETERNITY, Interval, format_instant, parse_instant
from common.types.interval import condense


def ms(text: str) -> int:
    """Reference conversion through the standard library only."""
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return int(value.timestamp() * 1000)


@pytest.mark.parametrize("text,expected", [
    ("2015-09-12", ms("2015-09-12T00:00:00Z")),
    ("2015-09-12T08:30:00Z", ms("2015-09-12T08:30:00Z")),
    ("2015-09-12T08:30:00.123Z", ms("2015-09-12T08:30:00.123Z")),
    ("2015-09-12T08:30:00", ms("2015-09-12T08:30:00Z")),  # no zone means UTC
    ("2015-09-12T08:30:00+02:00", ms("2015-09-12T06:30:00Z")),
    ("2015-09-12 08:30:00", ms("2015-09-12T08:30:00Z")),
    ("2022-6-14T10:32:08Z", ms("2022-06-14T10:32:08Z")),  # Druid accepts unpadded months and days
    ("2022-6-4", ms("2022-06-04T00:00:00Z")),
    ("1442016000000", 1442016000000),  # epoch millis
    ("1969-12-31T23:59:59.999Z", -1),
])
def test_parse_instant(text, expected):
    assert parse_instant(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "2015-13-01", "2015-02-30", "12345"])
def test_parse_instant_rejects(text):
    with pytest.raises(ValidationError, match="cannot parse .* as an ISO-8601 time"):
        parse_instant(text)


def test_format_instant():
    assert format_instant(0) == "1970-01-01T00:00:00.000Z"
    assert format_instant(ms("2015-09-12T08:30:00.007Z")) == "2015-09-12T08:30:00.007Z"
    assert format_instant(-1) == "1969-12-31T23:59:59.999Z"


@pytest.mark.parametrize("text,start,end", [
    ("2015-09-12/2015-09-13", "2015-09-12T00:00:00Z", "2015-09-13T00:00:00Z"),
    ("2015-09-12T00:00:00.000Z/2015-09-12T06:00:00.000Z", "2015-09-12T00:00:00Z", "2015-09-12T06:00:00Z"),
    ("2015-09-12/P1D", "2015-09-12T00:00:00Z", "2015-09-13T00:00:00Z"),
    ("2015-09-12T10:00:00Z/PT90M", "2015-09-12T10:00:00Z", "2015-09-12T11:30:00Z"),
    ("P1D/2015-09-13", "2015-09-12T00:00:00Z", "2015-09-13T00:00:00Z"),
    ("P1W/2015-09-13", "2015-09-06T00:00:00Z", "2015-09-13T00:00:00Z"),
    ("2022-6-14T10:32:08Z/2022-6-15T10:32:08Z", "2022-06-14T10:32:08Z", "2022-06-15T10:32:08Z"),
    # Calendar periods clamp to the month's last day, as Joda does.
    ("2023-01-31/P1M", "2023-01-31T00:00:00Z", "2023-02-28T00:00:00Z"),
    ("P1M/2023-03-31", "2023-02-28T00:00:00Z", "2023-03-31T00:00:00Z"),
    ("2024-01-31/P1M", "2024-01-31T00:00:00Z", "2024-02-29T00:00:00Z"),
    ("2020-02-29/P1Y", "2020-02-29T00:00:00Z", "2021-02-28T00:00:00Z"),
    ("2015-09-12/2015-09-12", "2015-09-12T00:00:00Z", "2015-09-12T00:00:00Z"),  # empty is allowed
])
def test_parse_interval(text, start, end):
    iv = Interval.parse(text)
    assert (iv.start, iv.end) == (ms(start), ms(end))


def test_interval_string_form_and_of():
    iv = Interval.parse("2015-09-12/P1D")
    assert str(iv) == "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
    assert Interval.parse(str(iv)) == iv
    assert Interval.of(iv) is iv
    assert Interval.of("2015-09-12/2015-09-13") == iv


@pytest.mark.parametrize("text,match", [
    ("2015-09-12", "must be 'start/end'"),
    ("2015-09-13/2015-09-12", "end 2015-09-12T00:00:00.000Z is before its start 2015-09-13T00:00:00.000Z"),
    ("2015-09-12/P0D", "zero length"),
    ("2015-09-12/PXD", "invalid ISO-8601 period"),
    ("nope/2015-09-12", "cannot parse 'nope'"),
])
def test_parse_interval_errors(text, match):
    with pytest.raises(ValidationError, match=match):
        Interval.parse(text)


def test_relations():
    a = Interval.parse("2020-01-01/2020-01-03")
    b = Interval.parse("2020-01-02/2020-01-04")
    c = Interval.parse("2020-01-03/2020-01-05")
    assert a.overlaps(b) and b.overlaps(a)
    assert not a.overlaps(c)  # half-open: touching is not overlapping
    assert a.intersect(b) == Interval.parse("2020-01-02/2020-01-03")
    assert a.intersect(c) is None
    assert a.contains(Interval.parse("2020-01-01/2020-01-02")) and not a.contains(b)
    assert a.contains_instant(a.start) and not a.contains_instant(a.end)
    assert ETERNITY.is_eternity and not a.is_eternity
    assert ETERNITY.contains(a)


def test_condense_merges_overlapping_and_abutting():
    ivs = [Interval.parse(t) for t in ("2020-01-05/2020-01-06", "2020-01-01/2020-01-02", "2020-01-02/2020-01-03",
                                        "2020-01-02T12:00:00Z/2020-01-02T13:00:00Z", "2020-01-07/2020-01-08")]
    assert condense(ivs) == [Interval.parse("2020-01-01/2020-01-03"), Interval.parse("2020-01-05/2020-01-06"),
                             Interval.parse("2020-01-07/2020-01-08")]


@pytest.mark.parametrize("text,start,end", [
    ("2015/2016", "2015-01-01T00:00:00Z", "2016-01-01T00:00:00Z"),
    ("2015-09/2015-10", "2015-09-01T00:00:00Z", "2015-10-01T00:00:00Z"),
])
def test_parse_interval_reduced_precision(text, start, end):
    iv = Interval.parse(text)
    assert (iv.start, iv.end) == (ms(start), ms(end))
