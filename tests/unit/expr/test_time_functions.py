import datetime as dt

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.expr import evaluate, evaluate_column, infer_type, parse
from common.types.column_type import DOUBLE, LONG, STRING, TIMESTAMP

LA = "America/Los_Angeles"


def ms(iso: str) -> int:
    value = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return int(value.timestamp() * 1000)


def times(*isos):
    return pa.array([None if s is None else ms(s) for s in isos], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))


def ev_ms(text, columns, n):
    out = evaluate(parse(text), columns, n)
    assert out.type == pa.timestamp("ms", tz="UTC")
    return out.cast(pa.int64()).to_pylist()


def ev(text, columns, n):
    return evaluate(parse(text), columns, n).to_pylist()


T = {"__time": times("2015-09-12T08:15:30.123Z", None, "1969-12-31T23:59:59.999Z")}

# Spring forward in Los Angeles: 2023-03-12 02:00 PST becomes 03:00 PDT (10:00Z).
DST = {
    "__time": times(
        "2023-03-12T09:30:00Z",  # 01:30 PST
        "2023-03-12T10:30:00Z",  # 03:30 PDT
        "2023-03-13T07:30:00Z",  # 00:30 PDT the next day
        "2023-03-12T08:00:00Z",  # local midnight exactly
    )
}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("timestamp_floor(__time, 'PT15M')", ["2015-09-12T08:15:00Z", None, "1969-12-31T23:45:00Z"]),
        ("timestamp_floor(__time, 'P1D')", ["2015-09-12T00:00:00Z", None, "1969-12-31T00:00:00Z"]),
        ("timestamp_floor(__time, 'P1W')", ["2015-09-07T00:00:00Z", None, "1969-12-29T00:00:00Z"]),
        ("timestamp_floor(__time, 'P1M')", ["2015-09-01T00:00:00Z", None, "1969-12-01T00:00:00Z"]),
        ("timestamp_floor(__time, 'P3M')", ["2015-07-01T00:00:00Z", None, "1969-10-01T00:00:00Z"]),
        ("timestamp_floor(__time, 'P1Y')", ["2015-01-01T00:00:00Z", None, "1969-01-01T00:00:00Z"]),
        ("timestamp_floor(__time, 'PT1H', '2015-09-12T00:30:00Z')", ["2015-09-12T07:30:00Z", None, "1969-12-31T23:30:00Z"]),
        ("timestamp_ceil(__time, 'PT1H')", ["2015-09-12T09:00:00Z", None, "1970-01-01T00:00:00Z"]),
        ("timestamp_ceil(__time, 'P1M')", ["2015-10-01T00:00:00Z", None, "1970-01-01T00:00:00Z"]),
        ("timestamp_ceil(timestamp_floor(__time, 'P1D'), 'P1D')", ["2015-09-12T00:00:00Z", None, "1969-12-31T00:00:00Z"]),
        ("timestamp_shift(__time, 'P1M', -1)", ["2015-08-12T08:15:30.123Z", None, "1969-11-30T23:59:59.999Z"]),
        ("timestamp_shift(__time, 'PT1H', 2)", ["2015-09-12T10:15:30.123Z", None, "1970-01-01T01:59:59.999Z"]),
        ("timestamp_floor(__time, null)", [None, None, None]),
    ],
)
def test_floor_ceil_shift_utc(text, expected):
    assert ev_ms(text, T, 3) == [None if e is None else ms(e) for e in expected]


def test_time_functions_accept_long_millis_and_clamp_month_ends():
    cols = {"t": pa.array([90_061_000, None])}
    assert ev_ms("timestamp_floor(t, 'P1D')", cols, 2) == [86_400_000, None]
    assert ev_ms("timestamp_floor(t + 0, 'PT1M')", cols, 2) == [90_060_000, None]
    assert ev_ms("timestamp_shift(timestamp_parse('2023-01-31'), 'P1M', 1)", cols, 2) == [ms("2023-02-28T00:00:00Z")] * 2
    assert ev_ms("timestamp_shift(timestamp_parse('2024-01-31'), 'P1M', 1)", cols, 2) == [ms("2024-02-29T00:00:00Z")] * 2


def test_floor_and_ceil_across_dst_in_los_angeles():
    day = ev_ms(f"timestamp_floor(__time, 'P1D', null, '{LA}')", DST, 4)
    assert day == [ms("2023-03-12T08:00:00Z")] * 2 + [ms("2023-03-13T07:00:00Z"), ms("2023-03-12T08:00:00Z")]
    # March 12 has 23 hours in Los Angeles: its ceiling is 07:00Z on the 13th, not 08:00Z.
    ceil = ev_ms(f"timestamp_ceil(__time, 'P1D', null, '{LA}')", DST, 4)
    assert ceil == [ms("2023-03-13T07:00:00Z")] * 2 + [ms("2023-03-14T07:00:00Z"), ms("2023-03-12T08:00:00Z")]
    hour = ev_ms(f"timestamp_floor(__time, 'PT1H', null, '{LA}')", DST, 4)
    assert hour == [ms("2023-03-12T09:00:00Z"), ms("2023-03-12T10:00:00Z"), ms("2023-03-13T07:00:00Z"),
                    ms("2023-03-12T08:00:00Z")]
    month = ev_ms(f"timestamp_floor(__time, 'P1M', null, '{LA}')", DST, 4)
    assert month == [ms("2023-03-01T08:00:00Z")] * 4  # March 1 is still PST


def test_shift_across_dst_keeps_wall_clock_time():
    shifted = ev_ms(f"timestamp_shift(__time, 'P1D', 1, '{LA}')", DST, 4)
    assert shifted[0] == ms("2023-03-13T08:30:00Z")  # 01:30 PST + 1 day = 01:30 PDT, 23 hours later
    assert ev_ms("timestamp_shift(__time, 'P1D', 1)", DST, 4)[0] == ms("2023-03-13T09:30:00Z")
    assert ev_ms(f"timestamp_shift(__time, 'PT1H', 1, '{LA}')", DST, 4)[0] == ms("2023-03-12T10:30:00Z")


def test_extract_and_format_across_dst():
    assert ev(f"timestamp_extract(__time, 'HOUR', '{LA}')", DST, 4) == [1, 3, 0, 0]
    assert ev(f"timestamp_extract(__time, 'DAY', '{LA}')", DST, 4) == [12, 12, 13, 12]
    assert ev("timestamp_extract(__time, 'HOUR')", DST, 4) == [9, 10, 7, 8]
    assert ev(f"timestamp_format(__time, 'yyyy-MM-dd HH:mm z', '{LA}')", DST, 4) == [
        "2023-03-12 01:30 PST", "2023-03-12 03:30 PDT", "2023-03-13 00:30 PDT", "2023-03-12 00:00 PST"]
    assert ev(f"timestamp_format(__time, null, '{LA}')", DST, 4) == [
        "2023-03-12T01:30:00.000-08:00", "2023-03-12T03:30:00.000-07:00",
        "2023-03-13T00:30:00.000-07:00", "2023-03-12T00:00:00.000-08:00"]


def test_parse_in_a_zone_across_dst():
    cols = {"s": pa.array(["2023-03-12 01:30:00", "2023-03-12 03:30:00", "2023-11-05 01:30:00", "2023-03-12T03:30:00Z"])}
    assert ev_ms(f"timestamp_parse(s, null, '{LA}')", cols, 4) == [
        ms("2023-03-12T09:30:00Z"), ms("2023-03-12T10:30:00Z"),
        ms("2023-11-05T08:30:00Z"),  # ambiguous fall-back hour: the earlier (PDT) instant
        ms("2023-03-12T03:30:00Z"),  # an explicit offset wins over the zone argument
    ]
    assert ev_ms(f"timestamp_parse('2022-06-14 10:32', 'yyyy-MM-dd HH:mm', '{LA}')", cols, 4)[0] == ms(
        "2022-06-14T17:32:00Z")


@pytest.mark.parametrize(
    "unit,expected",
    [
        ("EPOCH", [1_442_045_730, None, 0]),
        ("MILLISECOND", [123, None, 999]),
        ("SECOND", [30, None, 59]),
        ("MINUTE", [15, None, 59]),
        ("HOUR", [8, None, 23]),
        ("DAY", [12, None, 31]),
        ("DOW", [6, None, 3]),
        ("ISODOW", [6, None, 3]),
        ("DOY", [255, None, 365]),
        ("WEEK", [37, None, 1]),
        ("MONTH", [9, None, 12]),
        ("QUARTER", [3, None, 4]),
        ("YEAR", [2015, None, 1969]),
        ("ISOYEAR", [2015, None, 1970]),
        ("DECADE", [201, None, 196]),
        ("CENTURY", [21.0, None, 20.0]),
        ("MILLENNIUM", [3.0, None, 2.0]),
        ("year", [2015, None, 1969]),
    ],
)
def test_extract_units(unit, expected):
    assert ev(f"timestamp_extract(__time, '{unit}')", T, 3) == expected


@pytest.mark.parametrize(
    "pattern,expected",
    [
        (None, "2015-09-12T08:15:30.123Z"),
        ("yyyy-MM-dd", "2015-09-12"),
        ("yy/M/d H:m:s", "15/9/12 8:15:30"),
        ("EEE, dd MMM yyyy HH:mm:ss 'GMT'", "Sat, 12 Sep 2015 08:15:30 GMT"),
        ("EEEE MMMM", "Saturday September"),
        ("hh:mm a", "08:15 AM"),
        ("h 'o''clock'", "8 o'clock"),
        ("SSS|S|SSSSSS", "123|1|123000"),
        ("D DDD w e", "255 255 37 6"),
        ("Z ZZ ZZZ", "+0000 +00:00 UTC"),
        ("'%'yyyy%", "%2015%"),
        ("''HH''", "'08'"),
    ],
)
def test_format_patterns(pattern, expected):
    arg = "null" if pattern is None else "'" + pattern.replace("'", "\\'") + "'"
    assert ev(f"timestamp_format(__time, {arg})", T, 3)[:2] == [expected, None]


def test_format_before_1970_and_zones():
    assert ev("timestamp_format(__time)", T, 3)[2] == "1969-12-31T23:59:59.999Z"
    assert ev("timestamp_format(__time, 'yyyy-MM-dd HH:mm:ss.SSS ZZ', 'Asia/Kolkata')", T, 3)[0] == \
        "2015-09-12 13:45:30.123 +05:30"
    assert ev("timestamp_format(__time, 'HH:mm', '+02:00')", T, 3)[0] == "10:15"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("'2022-6-14T10:32:08Z'", "2022-06-14T10:32:08Z"),
        ("'2022-06-14'", "2022-06-14T00:00:00Z"),
        ("'2022-06'", "2022-06-01T00:00:00Z"),
        ("'2022-06-14 10:32:08'", "2022-06-14T10:32:08Z"),
        ("'2022-06-14T10:32'", "2022-06-14T10:32:00Z"),
        ("'2022-06-14T10:32:08.5+02:00'", "2022-06-14T08:32:08.500Z"),
        ("'2022-06-14T10:32:08.123456-0130'", "2022-06-14T12:02:08.123Z"),
        ("' 2022-06-14T10:32:08z '", "2022-06-14T10:32:08Z"),
        ("'2024-02-29'", "2024-02-29T00:00:00Z"),
        ("'2022-02-29'", None),
        ("'2022-13-01'", None),
        ("'2022-06-14T24:00:00'", None),
        ("'not a time'", None),
        ("''", None),
        ("null", None),
    ],
)
def test_parse_lenient_iso(text, expected):
    assert ev_ms(f"timestamp_parse({text})", {}, 1) == [None if expected is None else ms(expected)]


@pytest.mark.parametrize(
    "value,pattern,expected",
    [
        ("14/06/2022 10:32", "dd/MM/yyyy HH:mm", "2022-06-14T10:32:00Z"),
        ("14/Jun/2022:10:32:08 +0200", "dd/MMM/yyyy:HH:mm:ss Z", "2022-06-14T08:32:08Z"),
        ("14 june 2022", "d MMMM yyyy", "2022-06-14T00:00:00Z"),
        ("20220614", "yyyyMMdd", "2022-06-14T00:00:00Z"),
        ("06/14/22 10:32 PM", "MM/dd/yy hh:mm a", "2022-06-14T22:32:00Z"),
        ("06/14/22 12:05 AM", "MM/dd/yy hh:mm a", "2022-06-14T00:05:00Z"),
        ("2022-06-14 10:32:08.123", "yyyy-MM-dd HH:mm:ss.SSS", "2022-06-14T10:32:08.123Z"),
        ("Tue 2022-06-14", "EEE yyyy-MM-dd", "2022-06-14T00:00:00Z"),
        ("at 2022.06.14", "'at' yyyy.MM.dd", "2022-06-14T00:00:00Z"),
        ("2022-06-14", "dd/MM/yyyy", None),
        ("31/02/2022", "dd/MM/yyyy", None),
    ],
)
def test_parse_with_joda_pattern(value, pattern, expected):
    quoted = pattern.replace("'", "\\'")
    got = ev_ms(f"timestamp_parse('{value}', '{quoted}')", {}, 1)
    assert got == [None if expected is None else ms(expected)]


def test_parse_columns_aliases_and_unix_timestamp():
    cols = {"s": pa.array(["2015-09-12T08:15:30Z", None, "junk", "2015-09-12T08:15:30Z"]).dictionary_encode()}
    want = ms("2015-09-12T08:15:30Z")
    assert ev_ms("timestamp_parse(s)", cols, 4) == [want, None, None, want]
    assert ev_ms("timestamp(s)", cols, 4) == [want, None, None, want]
    assert ev("unix_timestamp(s)", cols, 4) == [want // 1000, None, None, want // 1000]
    assert ev("timestamp_to_millis(timestamp_parse(s))", cols, 4) == [want, None, None, want]
    assert ev_ms("millis_to_timestamp(0)", cols, 4) == [0] * 4
    assert ev("timestamp_parse(s) < timestamp_parse('2016-01-01')", cols, 4) == [True, None, None, True]


def test_time_types():
    types = {"__time": TIMESTAMP, "s": STRING, "l": LONG}
    assert infer_type(parse("timestamp_floor(__time, 'P1D')"), types) == TIMESTAMP
    assert infer_type(parse("timestamp_ceil(l, 'P1D')"), types) == TIMESTAMP
    assert infer_type(parse("timestamp_shift(__time, 'P1D', 1)"), types) == TIMESTAMP
    assert infer_type(parse("timestamp_parse(s)"), types) == TIMESTAMP
    assert infer_type(parse("timestamp_extract(__time, 'DAY')"), types) == LONG
    assert infer_type(parse("timestamp_extract(__time, 'CENTURY')"), types) == DOUBLE
    assert infer_type(parse("timestamp_format(__time)"), types) == STRING
    assert infer_type(parse("timestamp_floor(__time, 'P1D') - __time"), types) == LONG
    out = evaluate_column(parse("timestamp_extract(__time, 'YEAR')"), T, 3, types)
    assert out.type == pa.int64() and out.to_pylist() == [2015, None, 1969]


@pytest.mark.parametrize(
    "text,message",
    [
        ("timestamp_floor(__time, 'P1X')", "invalid ISO-8601 period 'P1X'"),
        ("timestamp_floor(__time, 'P1D', null, 'Mars/Olympus')", "unknown time zone 'Mars/Olympus'"),
        ("timestamp_floor(__time, 'P1MT1H')", "mixes years or months with other units"),
        ("timestamp_format(__time, 'yyyy qq')", "unsupported letter 'q' in time pattern 'yyyy qq'"),
        ("timestamp_format(__time, 'yyyy \\'oops')", "unterminated quote"),
        ("timestamp_parse('x', 'yyyy DDD')", "unsupported letter 'D'"),
        ("timestamp_parse('x', 'yyyy yyyy')", "names a field twice"),
        ("timestamp_shift(__time, 'P1D', 'x')", "step must be an integer"),
        ("timestamp_floor(__time, 'P1D', 'yesterday')", "cannot parse 'yesterday'"),
    ],
)
def test_time_errors(text, message):
    with pytest.raises(ValidationError) as info:
        evaluate(parse(text), T, 3)
    assert message in str(info.value)
