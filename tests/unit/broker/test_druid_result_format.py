"""Druid SQL API result formats byte for byte: the header combinations of Druid's "Query output
format" table (one ``user`` column, BlueMoon2662), timestamps in sqlTimeZone, values Jackson
writes specially (NaN, infinities, floats, booleans, nulls, JSON), and the request parsing."""

from __future__ import annotations

import datetime as dt
import math

import orjson
import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.sql.sql_plan import JSON_FIELD_METADATA
from services.broker.druid_http.result_format import ResultWriter, check_format
from services.broker.druid_http.sql_resource import UnsupportedMediaType, parse_sql_request

USER = pa.table({"user": ["BlueMoon2662"]})


def written(fmt, table, header=False, types=False, sql_types=False, tz="UTC", batches=None) -> bytes:
    writer = ResultWriter(fmt, table.schema, header, types, sql_types, tz)
    return b"".join(writer.write_all(batches if batches is not None else table.to_batches()))


@pytest.mark.parametrize("types, sql_types, expected", [
    (True, False, [{"user": {"type": "STRING"}}, {"user": "BlueMoon2662"}]),
    (True, True, [{"user": {"type": "STRING", "sqlType": "VARCHAR"}}, {"user": "BlueMoon2662"}]),
    (False, True, [{"user": {"sqlType": "VARCHAR"}}, {"user": "BlueMoon2662"}]),
    (False, False, [{"user": None}, {"user": "BlueMoon2662"}]),
])
def test_object_headers_as_druid_documents_them(types, sql_types, expected):
    body = written("object", USER, True, types, sql_types)
    assert body == orjson.dumps(expected) + b"\n"
    lines = written("objectLines", USER, True, types, sql_types)
    assert lines == b"".join(orjson.dumps(x) + b"\n" for x in expected) + b"\n"


@pytest.mark.parametrize("types, sql_types, expected", [
    (True, False, [["user"], ["STRING"], ["BlueMoon2662"]]),
    (True, True, [["user"], ["STRING"], ["VARCHAR"], ["BlueMoon2662"]]),
    (False, True, [["user"], ["VARCHAR"], ["BlueMoon2662"]]),
    (False, False, [["user"], ["BlueMoon2662"]]),
])
def test_array_and_csv_headers_as_druid_documents_them(types, sql_types, expected):
    assert written("array", USER, True, types, sql_types) == orjson.dumps(expected) + b"\n"
    assert written("arrayLines", USER, True, types, sql_types) == \
        b"".join(orjson.dumps(x) + b"\n" for x in expected) + b"\n"
    assert written("csv", USER, True, types, sql_types) == \
        "".join(x[0] + "\n" for x in expected).encode() + b"\n"


def test_without_a_header_and_with_no_rows():
    assert written("object", USER) == b'[{"user":"BlueMoon2662"}]\n'
    assert written("array", USER) == b'[["BlueMoon2662"]]\n'
    assert written("objectLines", USER) == b'{"user":"BlueMoon2662"}\n\n'
    assert written("csv", USER) == b"BlueMoon2662\n\n"
    empty = USER.slice(0, 0)
    assert written("object", empty) == b"[]\n"
    assert written("array", empty, header=True) == b'[["user"]]\n'
    assert written("arrayLines", empty) == b"\n"
    assert written("csv", empty) == b"\n"


def test_rows_across_batches_are_one_document():
    table = pa.table({"n": list(range(5))})
    batches = [table.slice(0, 2).to_batches()[0], table.slice(2, 3).to_batches()[0]]
    assert orjson.loads(written("array", table, batches=batches)) == [[i] for i in range(5)]
    assert orjson.loads(written("object", table, header=True, batches=batches))[1:] == [{"n": i} for i in range(5)]


def test_timestamps_in_the_sql_time_zone():
    ms = [0, 1442018873259, None, -2208988800000]  # 1970, 2015, null, 1900
    table = pa.table({"__time": pa.array(ms, pa.timestamp("ms", tz="UTC"))})
    assert orjson.loads(written("array", table)) == [["1970-01-01T00:00:00.000Z"], ["2015-09-12T00:47:53.259Z"],
                                                     [None], ["1900-01-01T00:00:00.000Z"]]
    la = orjson.loads(written("array", table, tz="America/Los_Angeles"))
    assert la[:2] == [["1969-12-31T16:00:00.000-08:00"], ["2015-09-11T17:47:53.259-07:00"]]
    india = orjson.loads(written("array", table.slice(1, 1), tz="Asia/Kolkata"))
    assert india == [["2015-09-12T06:17:53.259+05:30"]]
    london_winter = orjson.loads(written("array", table.slice(0, 1), tz="Europe/London"))
    assert london_winter == [["1970-01-01T01:00:00.000+01:00"]]  # 1970: British Standard Time, +1
    assert written("csv", table.slice(1, 1)) == b"2015-09-12T00:47:53.259Z\n\n"
    # the instant survives the round trip
    back = dt.datetime.fromisoformat(la[1][0])
    assert int(back.timestamp() * 1000) == ms[1]


def test_utc_timestamps_match_pythons_iso_text_across_the_calendar():
    """The UTC path builds the text from day and time-of-day tables: every instant, before 1970,
    far ahead, on day boundaries and with nulls, reads as datetime writes it (millis, Z)."""
    import random

    rng = random.Random(7)
    day = 86_400_000
    lo, hi = -62135596800000, 253402300799999  # 0001-01-01 .. 9999-12-31T23:59:59.999
    ms = [lo, hi, -1, 0, day - 1, day, -day, -day - 1, 951782400000, 4107542399999] + \
        [rng.randrange(lo, hi) for _ in range(3000)] + [rng.randrange(-3 * day, 3 * day) for _ in range(500)] + [None]
    table = pa.table({"__time": pa.array(ms, pa.timestamp("ms", tz="UTC"))})
    epoch = dt.datetime(1970, 1, 1)

    def iso(v):
        return None if v is None else (epoch + dt.timedelta(milliseconds=v)).isoformat(timespec="milliseconds") + "Z"
    expected = [iso(v) for v in ms]
    batches = table.to_batches(max_chunksize=700)
    assert [r[0] for r in orjson.loads(written("array", table, batches=batches))] == expected
    assert written("csv", table, batches=batches).split(b"\n")[:-2] == [(e or "").encode() for e in expected]


def test_values_as_jackson_writes_them():
    table = pa.table({
        "d": pa.array([1.0, -0.0, float("nan"), float("inf"), -float("inf"), None, 0.1], pa.float64()),
        "f": pa.array([1.0, -0.0, float("nan"), float("inf"), -float("inf"), None, 0.1], pa.float32()),
        "b": pa.array([True, False, None, True, False, True, False]),
        "s": pa.array(["a,b", 'x"y', None, "", "é", "line\nbreak", "plain"]),
        "j": pa.array(['{"k":[1,2]}', None, "3", '"s"', "null", "{}", "[]"]),
    }).cast(pa.schema([("d", pa.float64()), ("f", pa.float32()), ("b", pa.bool_()), ("s", pa.string()),
                       pa.field("j", pa.string(), metadata=JSON_FIELD_METADATA)]))
    rows = orjson.loads(written("array", table))
    assert [r[0] for r in rows] == [1.0, -0.0, "NaN", "Infinity", "-Infinity", None, 0.1]
    assert math.copysign(1, rows[1][0]) == -1
    assert [r[1] for r in rows] == [1.0, -0.0, "NaN", "Infinity", "-Infinity", None, 0.1]  # 0.1 as a float prints
    assert [r[2] for r in rows] == [True, False, None, True, False, True, False]
    assert [r[4] for r in rows] == [{"k": [1, 2]}, None, 3, "s", None, {}, []]
    header = orjson.loads(written("array", table, True, True, True))[:3]
    assert header == [["d", "f", "b", "s", "j"], ["DOUBLE", "FLOAT", "LONG", "STRING", "COMPLEX<json>"],
                      ["DOUBLE", "FLOAT", "BOOLEAN", "VARCHAR", "OTHER"]]
    csv_lines = written("csv", table.select(["b", "s", "j"])).decode()
    assert csv_lines == ('true,"a,b","{""k"":[1,2]}"\nfalse,"x""y",\n,,3\ntrue,,"""s"""\nfalse,é,null\n'
                         'true,"line\nbreak",{}\nfalse,plain,[]\n\n')


def test_arrays_and_integers():
    table = pa.table({"a": pa.array([["x", None], None, []], pa.list_(pa.string())),
                      "n": pa.array([2 ** 62, None, -1], pa.int64())})
    body = written("arrayLines", table)
    assert body.endswith(b"]\n\n")
    assert [orjson.loads(line) for line in body.splitlines() if line] == \
        [[["x", None], 2 ** 62], [None, None], [[], -1]]
    assert orjson.loads(written("array", table, True, True, True))[1:3] == [["ARRAY<STRING>", "LONG"],
                                                                           ["ARRAY", "BIGINT"]]


def test_unknown_result_format():
    with pytest.raises(ValidationError, match="resultFormat 'xml' is not one of object, array"):
        check_format("xml")


def test_request_bodies():
    q = parse_sql_request(b'{"query": "SELECT 1", "resultFormat": "csv", "header": true, "context": {"a": 1},'
                          b' "parameters": [{"type": "BIGINT", "value": 3}, {"type": "TIMESTAMP",'
                          b' "value": "2000-01-01T00:00:00Z"}, {"type": "VARCHAR", "value": null}]}',
                          "application/json; charset=UTF-8")
    assert (q.query, q.result_format, q.header, q.context) == ("SELECT 1", "csv", True, {"a": 1})
    assert q.parameters == (3, dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), None)
    assert parse_sql_request(b"SELECT 'a b'", "text/plain").query == "SELECT 'a b'"
    assert parse_sql_request(b"SELECT%20%31", "application/x-www-form-urlencoded").query == "SELECT 1"
    assert parse_sql_request(b"SELECT+1", "application/x-www-form-urlencoded").result_format == "object"


@pytest.mark.parametrize("body, ctype, message", [
    (b"{not json", "application/json", "not valid JSON"),
    (b"[1]", "application/json", "must be a JSON object"),
    (b'{"query": "  "}', "application/json", "the query is empty"),
    (b'{"query": 1}', "application/json", "'query' must be a string"),
    (b'{"query": "SELECT 1", "header": "yes"}', "application/json", "'header' must be true or false"),
    (b'{"query": "SELECT 1", "resultFormat": "xml"}', "application/json", "resultFormat 'xml'"),
    (b'{"query": "SELECT 1", "sql": "x"}', "application/json", "unknown field"),
    (b'{"query": "SELECT 1", "parameters": [{"type": "BIGINT", "value": "x"}]}', "application/json",
     "parameter 1: 'x' is not a BIGINT"),
    (b'{"query": "SELECT 1", "parameters": [{"value": 1}]}', "application/json", "parameter 1 must be an object"),
    (b'{"query": "SELECT 1", "parameters": [{"type": "BLOB", "value": 1}]}', "application/json",
     "type 'BLOB' is not supported"),
    (b"\xff\xfe", "text/plain", "not UTF-8"),
    (b"", "text/plain", "the query is empty"),
])
def test_bad_request_bodies_name_the_problem(body, ctype, message):
    with pytest.raises(ValidationError, match=message):
        parse_sql_request(body, ctype)


def test_other_content_types_are_refused():
    with pytest.raises(UnsupportedMediaType, match="'application/xml' is not accepted"):
        parse_sql_request(b"<q/>", "application/xml")
    with pytest.raises(UnsupportedMediaType, match="'none'"):
        parse_sql_request(b"SELECT 1", None)


@pytest.mark.parametrize("alphabet", ['ab"\\', 'ab"\\\n\t\x01', "aé€😀\u2028/", "plain"])
def test_strings_round_trip_through_every_json_format(alphabet):
    import random

    rng = random.Random(len(alphabet))
    values = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(300)] + [None, ""]
    table = pa.table({"s": values, "n": list(range(len(values)))})
    assert [r[0] for r in orjson.loads(written("array", table))] == values
    assert [r["s"] for r in orjson.loads(written("object", table))] == values
    lines = written("objectLines", table)
    assert lines.endswith(b"}\n\n")
    assert [orjson.loads(line)["s"] for line in lines.split(b"\n") if line] == values
    # the same bytes orjson writes for each row
    assert written("arrayLines", table) == b"".join(orjson.dumps([v, i]) + b"\n" for i, v in enumerate(values)) + b"\n"


@pytest.mark.parametrize("kind, status, shape", [
    ("invalid", 400, ("druidException", "INVALID_INPUT")), ("not_found", 404, ("druidException", "NOT_FOUND")),
    ("already_exists", 409, ("druidException", "CONFLICT")), ("unsupported", 501, ("druidException", "UNSUPPORTED")),
    ("denied", 403, ("druidException", "FORBIDDEN")), ("unauthenticated", 401, ("druidException", "UNAUTHORIZED")),
    ("internal", 500, ("druidException", "RUNTIME_FAILURE")), ("timeout", 504, ("Query timeout", None)),
    ("cancelled", 500, ("Query cancelled", None)), ("capacity", 429, ("Query capacity exceeded", None)),
])
def test_error_json_by_kind(kind, status, shape):
    from services import query_errors as qe
    from services.broker.druid_http.druid_errors import druid_error

    names = {"invalid": "INVALID", "not_found": "NOT_FOUND", "already_exists": "ALREADY_EXISTS",
             "unsupported": "UNSUPPORTED", "denied": "DENIED", "unauthenticated": "UNAUTHENTICATED",
             "internal": "INTERNAL", "timeout": "TIMEOUT", "cancelled": "CANCELLED"}
    error_kind = getattr(qe, names[kind]) if kind in names else getattr(qe, "LIMIT", "capacity")
    got_status, body = druid_error(qe.ClientError(error_kind, "the message", "abc123" if kind == "internal" else None))
    doc = orjson.loads(body)
    assert got_status == status and isinstance(doc["error"], str) and doc["errorMessage"] == "the message"
    assert (doc["error"], doc.get("category")) == shape
    if shape[1] is None:
        assert doc["errorClass"].startswith("org.apache.druid.query.")
    if kind == "internal":
        assert doc["context"] == {"errorId": "abc123"}
