"""StreamRowRules: what a supervisor's task does with each message (parse, timestamp, transforms,
filter, late/early rejection, queryGranularity), with exact outcomes."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

import pytest

from common.ingest.stream_rows import StreamRowRules, TIME
from common.ingest.supervisor_spec import parse_supervisor_spec

START = 1_714_557_600_000  # 2024-05-01T10:00:00Z, when the supervisor created the task
HOUR = 3_600_000


@dataclass(frozen=True)
class Msg:
    partition: int
    offset: int
    value: bytes | None


def spec(io: dict | None = None, **schema) -> object:
    data = {"dataSource": "d", "timestampSpec": {"column": "ts", "format": "auto"},
            "dimensionsSpec": {"useSchemaDiscovery": True}, **schema}
    return parse_supervisor_spec({"type": "kafka", "spec": {
        "dataSchema": data,
        "ioConfig": {"topic": "t", "consumerProperties": {"bootstrap.servers": "h:1"}, "taskDuration": "PT1H",
                     **(io or {})}}})


def messages(*values, partition: int = 0) -> list[Msg]:
    out = []
    for offset, v in enumerate(values):
        if isinstance(v, (dict, list)):
            v = json.dumps(v)
        out.append(Msg(partition, offset, v.encode() if isinstance(v, str) else v))
    return out


def decide(s, *values, start: int = START):
    return StreamRowRules(s, start).decide(messages(*values))


def test_json_timestamps_and_parse_exceptions():
    s = spec()
    out = decide(s, {"ts": "2024-05-01T10:00:00.123Z", "a": None, "b": -0.0}, {"ts": START, "a": 1},
                 {"ts": str(START + 1)}, {"ts": "9999-12-31T23:59:59.999Z"}, b"{no", b"[1]", b"", None,
                 {"ts": None, "a": 1}, {"a": 2}, {"ts": 253402300800000}, {"ts": "yesterday"},
                 {"ts": True}, {"ts": {"t": 1}}, {"ts": 1e300})
    assert [r[TIME] for r in out.rows] == [START + 123, START, START + 1, 253402300799999]
    assert out.rows[0] == {"ts": "2024-05-01T10:00:00.123Z", "a": None, "b": -0.0, TIME: START + 123}
    assert math.copysign(1, out.rows[0]["b"]) == -1  # -0.0 is kept as written
    got = [(e.offset, e.reason.split(":")[0]) for e in out.parse_exceptions]
    assert got == [(4, "not JSON"), (5, "a JSON list, not an object"), (6, "empty message (no value)"),
                   (7, "empty message (no value)"), (8, "no timestamp"), (9, "no timestamp"),
                   (10, "timestamp field 'ts'"), (11, "timestamp field 'ts'"), (12, "timestamp field 'ts' holds true, "
                                                                                  "not a time"),
                   (13, 'timestamp field \'ts\' holds {"t"'), (14, "timestamp field 'ts'")]
    assert "out of range" in out.parse_exceptions[6].reason and "cannot parse 'yesterday'" in \
        out.parse_exceptions[7].reason
    assert out.thrown_away == 0


@pytest.mark.parametrize("fmt, value, want", [
    ("iso", "2024-05-01T12:00:00+02:00", START),
    ("iso", "2024-05-01", START - 10 * HOUR),
    ("millis", START, START),
    ("millis", str(START), START),
    ("millis", START + 0.9, START),  # fractions of a millisecond truncate
    ("posix", START // 1000, START),
    ("posix", "1714557600.5", START + 500),
    ("auto", START, START),
    ("auto", "2024-05-01T10:00:00Z", START),
    ("auto", -1, -1),  # before the epoch
])
def test_timestamp_formats(fmt, value, want):
    s = spec(timestampSpec={"column": "ts", "format": fmt})
    out = decide(s, {"ts": value})
    assert [r[TIME] for r in out.rows] == [want], out.parse_exceptions


@pytest.mark.parametrize("fmt, value", [("iso", START), ("millis", "soon"), ("posix", "NaN"), ("millis", "inf")])
def test_timestamp_format_mismatch_is_a_parse_exception(fmt, value):
    out = decide(spec(timestampSpec={"column": "ts", "format": fmt}), {"ts": value})
    assert out.rows == [] and len(out.parse_exceptions) == 1
    assert out.parse_exceptions[0].reason.startswith("timestamp field 'ts'")


def test_transforms_see_the_parsed_row_and_may_set_time():
    s = spec(transformSpec={"transforms": [
        {"type": "expression", "name": "page", "expression": "concat(page, '-', x)"},
        {"type": "expression", "name": "y", "expression": "x * 2"},
        {"type": "expression", "name": "z", "expression": "page"},  # the parsed page, not the transformed one
        {"type": "expression", "name": "__time", "expression": "__time + 1000"}]})
    out = decide(s, {"ts": START, "page": "a", "x": 1}, {"ts": START, "page": "b", "x": 2.5},
                 {"ts": START, "page": None, "x": None}, {"ts": START, "page": "d"})
    assert out.parse_exceptions == []
    assert [(r["page"], r["y"], r["z"], r[TIME]) for r in out.rows] == [
        ("a-1", 2, "a", START + 1000), ("b-2.5", 5.0, "b", START + 1000), (None, None, None, START + 1000),
        (None, None, "d", START + 1000)]


def test_a_failing_transform_is_a_parse_exception_of_that_message():
    s = spec(transformSpec={"transforms": [{"type": "expression", "name": "y", "expression": "x * 2"},
                                           {"type": "expression", "name": "__time", "expression": "page"}]})
    out = decide(s, {"ts": START, "x": 1, "page": "p"}, {"ts": START, "x": "a lot"}, {"ts": START, "x": {"k": 1}})
    assert out.rows == []
    reasons = [(e.offset, e.reason) for e in out.parse_exceptions]
    assert reasons[0] == (0, "transform '__time' gave 'p'; it must give epoch milliseconds")
    assert reasons[1][0] == 1 and reasons[1][1].startswith("transform 'y' failed: cannot apply '*' to STRING")
    assert reasons[2] == (2, 'field \'x\' holds {"k":1}; transforms and filters read numbers, strings and lists of '
                             'strings')


ROWS = [{"ts": START, "page": "a", "x": 1}, {"ts": START, "page": "b", "x": 10}, {"ts": START, "page": None, "x": 5.5},
        {"ts": START, "page": "c"}, {"ts": START, "page": "a", "x": "7"}, {"ts": START, "page": ["a", "e"], "x": -0.0}]


@pytest.mark.parametrize("flt, kept", [
    ({"type": "selector", "dimension": "page", "value": "a"}, [0, 4, 5]),
    ({"type": "selector", "dimension": "page", "value": None}, [2]),
    ({"type": "equals", "column": "page", "matchValueType": "STRING", "matchValue": "b"}, [1]),
    ({"type": "in", "dimension": "page", "values": ["b", "c"]}, [1, 3]),
    ({"type": "bound", "dimension": "x", "lower": "5", "upper": "10", "upperStrict": True, "ordering": "numeric"},
     [2, 4]),
    ({"type": "range", "column": "x", "matchValueType": "DOUBLE", "lower": 0, "lowerOpen": False}, [0, 1, 2, 4, 5]),
    ({"type": "null", "column": "x"}, [3]),
    ({"type": "not", "field": {"type": "null", "column": "x"}}, [0, 1, 2, 4, 5]),
    ({"type": "and", "fields": [{"type": "selector", "dimension": "page", "value": "a"},
                                {"type": "bound", "dimension": "x", "upper": "5", "ordering": "numeric"}]}, [0, 5]),
    ({"type": "or", "fields": [{"type": "selector", "dimension": "page", "value": "c"},
                               {"type": "selector", "dimension": "x", "value": "10"}]}, [1, 3]),
    # SQL-compatible nulls, as Druid since 28: NOT of an unknown comparison stays unknown.
    ({"type": "not", "field": {"type": "selector", "dimension": "page", "value": "a"}}, [1, 3]),
    ({"type": "expression", "expression": "x > 2"}, [1, 2, 4]),
])
def test_filters_keep_matching_rows_and_count_the_rest(flt, kept):
    out = decide(spec(transformSpec={"filter": flt}), *ROWS)
    assert out.parse_exceptions == []
    assert [r for r in out.rows] == [{**ROWS[i], TIME: START} for i in kept]
    assert out.thrown_away == len(ROWS) - len(kept)


def test_the_filter_sees_transformed_values():
    s = spec(transformSpec={"transforms": [{"type": "expression", "name": "page", "expression": "upper(page)"}],
                            "filter": {"type": "in", "dimension": "page", "values": ["A", "C"]}})
    out = decide(s, *ROWS[:4])
    assert [r["page"] for r in out.rows] == ["A", "C"] and out.thrown_away == 2


def test_late_and_early_rejection_bounds_are_druids():
    # Late: before the task's start minus the period. Early: after start + taskDuration + the period.
    s = spec({"lateMessageRejectionPeriod": "PT1H", "earlyMessageRejectionPeriod": "PT30M"})
    low, high = START - HOUR, START + HOUR + HOUR // 2
    times = [low - 1, low, START, high, high + 1, 253402300799999, -62135596800000]
    out = decide(s, *[{"ts": t, "i": i} for i, t in enumerate(times)])
    assert [r["i"] for r in out.rows] == [1, 2, 3]
    assert out.thrown_away == 4 and out.parse_exceptions == []
    # A fixed start instead of a period; no early bound.
    s = spec({"lateMessageRejectionStartDateTime": "2024-05-01T09:00:00Z"})
    out = decide(s, *[{"ts": t, "i": i} for i, t in enumerate(times)])
    assert [r["i"] for r in out.rows] == [1, 2, 3, 4, 5] and out.thrown_away == 2


def test_rejection_uses_the_transformed_time_and_truncation_comes_after():
    s = spec({"lateMessageRejectionPeriod": "PT1H"}, granularitySpec={"queryGranularity": "HOUR"},
             transformSpec={"transforms": [{"name": "__time", "expression": "__time - 3600000"}]})
    # 09:59:59.999 - 1h is late by a millisecond (the bound is 09:00); 10:00 - 1h is not, and
    # 10:59:00.001 - 1h is kept and truncated to the same hour.
    out = decide(s, {"ts": START - 1}, {"ts": START}, {"ts": START + 59 * 60_000 + 1})
    assert [r[TIME] for r in out.rows] == [START - HOUR, START - HOUR] and out.thrown_away == 1


def test_query_granularity_truncates_time():
    s = spec(granularitySpec={"queryGranularity": "FIFTEEN_MINUTE"})
    out = decide(s, {"ts": "2024-05-01T10:14:59.999Z"}, {"ts": "2024-05-01T10:15:00Z"}, {"ts": "1969-12-31T23:59:59Z"})
    assert [r[TIME] for r in out.rows] == [START, START + 15 * 60_000, -15 * 60_000]


def test_csv_lines_with_line_numbers_in_parse_exceptions():
    s = spec({"inputFormat": {"type": "csv", "columns": ["ts", "page", "tags", "x"], "listDelimiter": "|",
                              "skipHeaderRows": 1}})
    message = ("ts,page,tags,x\n"
               f"{START},\"a, quoted\",t1|t2,1\n"
               "\n"
               f"{START},b,,\n"
               f"{START},c,t3,2,extra\n"
               f"2024-05-01T10:00:00Z,\"multi\nline\",,3\n"
               f"{START}\n"
               "not a time,d,,4\n")
    out = StreamRowRules(s, START).decide([Msg(2, 40, message.encode()), Msg(2, 41, b"\xff\xfe")])
    assert out.rows == [
        {"ts": str(START), "page": "a, quoted", "tags": ["t1", "t2"], "x": "1", TIME: START},
        {"ts": str(START), "page": "b", TIME: START},
        {"ts": "2024-05-01T10:00:00Z", "page": "multi\nline", "x": "3", TIME: START},
        {"ts": str(START), TIME: START}]
    got = [(e.partition, e.offset, e.reason) for e in out.parse_exceptions]
    assert got[0][:2] == (2, 40) and got[0][2].startswith("line 5: 5 values but 4 columns (ts, page, tags, x)")
    assert got[1][:2] == (2, 40) and "cannot parse 'not a time'" in got[1][2]
    assert got[2][:2] == (2, 41) and got[2][2].startswith("not UTF-8 text")


def test_tsv_with_its_delimiter():
    s = spec({"inputFormat": {"type": "tsv", "columns": ["ts", "page", "x"], "delimiter": "|"}},
             timestampSpec={"column": "ts", "format": "millis"})
    out = decide(s, f"{START}|a \"q\"|1\r\n{START + 1}|b\t|\n")
    assert out.rows == [{"ts": str(START), "page": "a \"q\"", "x": "1", TIME: START},
                        {"ts": str(START + 1), "page": "b\t", TIME: START + 1}]


def test_mean_generated_messages_match_a_plain_python_oracle():
    """Random rows of mixed types: NULLs, -0.0, fractions next to integers, strings of numbers, far
    past and future times, with a transform, a filter and both rejection bounds."""
    rng = random.Random(26)
    s = spec({"lateMessageRejectionPeriod": "PT2H", "earlyMessageRejectionPeriod": "PT1H"},
             transformSpec={"transforms": [{"name": "y", "expression": "nvl(x, 0) + 1"}],
                            "filter": {"type": "or", "fields": [
                                {"type": "in", "dimension": "page", "values": ["p1", "p2"]},
                                {"type": "null", "column": "page"}]}})
    low, high = START - 2 * HOUR, START + 2 * HOUR
    produced, want_rows, want_thrown = [], [], 0
    for i in range(2000):
        t = rng.choice([low - 1, low, START, high, high + 1, rng.randint(low - HOUR, high + HOUR),
                        -62135596800000, 253402300799999])
        x = rng.choice([None, 0, -0.0, 1, 2.5, -(2**62), rng.randint(-1000, 1000), rng.random() * 100])
        page = rng.choice([None, "p1", "p2", "p3", "ü"])
        row = {"ts": t if rng.random() < 0.5 else str(t), "i": i}
        if x is not None or rng.random() < 0.5:
            row["x"] = x
        if page is not None or rng.random() < 0.5:
            row["page"] = page
        produced.append(row)
        keep = (page in ("p1", "p2") or page is None) and low <= t <= high
        if keep:
            y = (x if x is not None else 0) + 1
            want_rows.append((i, t, y))
        else:
            want_thrown += 1
    out = decide(s, *produced)
    assert out.parse_exceptions == []
    got = [(r["i"], r[TIME], r["y"]) for r in out.rows]
    assert got == want_rows
    assert out.thrown_away == want_thrown
    assert all(type(g[2]) is type(w[2]) for g, w in zip(got, want_rows))  # long stays long, double stays double


@pytest.mark.parametrize("flt, kept", [
    ({"type": "selector", "dimension": "tags", "value": "a"}, [0, 4]),
    ({"type": "not", "field": {"type": "selector", "dimension": "tags", "value": "a"}}, [1, 5]),
    ({"type": "in", "dimension": "tags", "values": ["e", "b"]}, [0, 1]),
    ({"type": "and", "fields": [{"type": "selector", "dimension": "tags", "value": "a"},
                                {"type": "selector", "dimension": "page", "value": "x"}]}, [4]),
])
def test_filters_on_multi_value_fields_match_any_value(flt, kept):
    rows = [{"ts": START, "tags": ["a", "e"]}, {"ts": START, "tags": ["b"]}, {"ts": START, "tags": []},
            {"ts": START, "tags": None}, {"ts": START, "tags": "a", "page": "x"}, {"ts": START, "tags": "c"}]
    out = decide(spec(transformSpec={"filter": flt}), *rows)
    assert out.parse_exceptions == []
    assert [r for r in out.rows] == [{**rows[i], TIME: START} for i in kept]
    assert out.thrown_away == len(rows) - len(kept)


def test_nan_and_infinity_from_text():
    """CSV values are text; "NaN" and "-Infinity" become numbers only when a transform casts them.
    A NaN result is stored as null (the rows travel as JSON lines, which have no NaN)."""
    s = spec({"inputFormat": {"type": "csv", "columns": ["ts", "x"]}},
             transformSpec={"transforms": [{"name": "y", "expression": "cast(x, 'DOUBLE') * 2"}],
                            "filter": {"type": "range", "column": "y", "matchValueType": "DOUBLE", "lower": 0}})
    out = decide(s, f"{START},NaN\n{START},-Infinity\n{START},-0.0\n{START},1.5\n{START},\n")
    assert out.parse_exceptions == []
    assert [(r.get("x"), r["y"]) for r in out.rows] == [("-0.0", -0.0), ("1.5", 3.0)]
    assert math.copysign(1, out.rows[0]["y"]) == -1
    assert out.thrown_away == 3  # NaN (stored as null), -inf and null are not >= 0
