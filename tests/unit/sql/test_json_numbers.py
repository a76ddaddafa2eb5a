"""Numbers in JSON documents: JSON_VALUE .. RETURNING BIGINT converts as CAST(.. AS BIGINT) does
(integers exactly, doubles and integers beyond 64 bits saturating, texts parsed, NaN as 0), both
from a stored nested column (its field columns) and from JSON text parsed at query time; and a
document holding a number beyond a double (1e400) or NaN prints as Jackson prints it, so
SELECT doc, TO_JSON_STRING and JSON_QUERY give JSON text."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import union_schema
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql
from common.types.column_type import JSON
from common.types.interval import Interval
from tests.conftest import duck_connect
from tests.unit.sql.fake_catalog import FakeCatalog

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)

# (the value's JSON text, the CAST literal with the same value, the BIGINT Druid's (long) cast gives)
VALUES = [
    ("1e308", "1e308", INT64_MAX),
    ("-1e308", "-1e308", INT64_MIN),
    ("1e20", "1e20", INT64_MAX),
    ("9223372036854775808", "9223372036854775808.0", INT64_MAX),
    ("-9223372036854775809", "-9223372036854775809.0", INT64_MIN),
    ("123456789012345678901234567890", "1.2345678901234568e29", INT64_MAX),
    ("12345678901234567", "12345678901234567", 12345678901234567),
    ("9223372036854775807", "9223372036854775807", INT64_MAX),
    ("-9223372036854775808", "-9223372036854775808", INT64_MIN),
    ("9007199254740993", "9007199254740993", 9007199254740993),
    ('"12345678901234567"', "'12345678901234567'", 12345678901234567),
    ('"9223372036854775807"', "'9223372036854775807'", INT64_MAX),
    ('"9223372036854775808"', "'9223372036854775808'", INT64_MAX),
    ('"1e20"', "'1e20'", INT64_MAX),
    ('" 1.7"', "' 1.7'", 1),
    ("1.9", "1.9", 1),
    ("-1.9", "-1.9", -1),
    ("-0.0", "-0.0", 0),
    ("true", "1", 1),
    ('"abc"', "'abc'", None),
    ("1e400", "'Infinity'", INT64_MAX),  # stored as Jackson prints the infinity it reads: "Infinity"
    ("-1e400", "'-Infinity'", INT64_MIN),
    ("NaN", "'NaN'", 0),
    ("null", "NULL", None),
]


def _texts():
    return [f'{{"a": {text}, "i": {i}}}' for i, (text, _, _) in enumerate(VALUES)] + [None, '{"b": 1}']


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    texts = _texts()
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(texts))], pa.int64()),
                      "doc": pa.array(texts, pa.string()), "raw": pa.array(texts, pa.string())})
    path = str(tmp_path_factory.mktemp("jn") / "j.sseg")
    build_segment(table, path, SegmentId("t", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"doc": JSON})
    segments = [Segment.open(path)]
    return FakeCatalog({"t": union_schema(segments)}), segments


def run(env, sql):
    catalog, segments = env
    return execute_sql(sql, catalog, lambda q: execute(q, segments).table).to_pylist()


def _by_row(rows, key):
    return [r[key] for r in sorted(rows, key=lambda r: r["t"])]


@pytest.mark.parametrize("source", ["doc", "PARSE_JSON(raw)"], ids=["nested-field", "parsed-text"])
def test_returning_bigint_is_cast_to_bigint(env, source):
    got = _by_row(run(env, f"SELECT __time AS t, JSON_VALUE({source}, '$.a' RETURNING BIGINT) AS v FROM t"), "v")
    assert got == [want for _, _, want in VALUES] + [None, None]
    # The same conversion CAST makes of a literal holding the same value, one rule for both.
    casts = run(env, "SELECT " + ", ".join(f"CAST({lit} AS BIGINT) AS c{i}" for i, (_, lit, _) in enumerate(VALUES)))[0]
    assert [casts[f"c{i}"] for i in range(len(VALUES))] == [want for _, _, want in VALUES]


def test_exact_integers_agree_with_duckdb(env):
    con = duck_connect()
    try:
        texts = [t for t in _texts() if t is not None]
        con.execute("CREATE TABLE d (j JSON)")
        con.executemany("INSERT INTO d VALUES (?)", [[t] for t in texts])
        # DuckDB errors on out-of-range casts and rounds fractions: compare the integers that fit.
        want = {r[0]: r[1] for r in con.execute(
            "SELECT CAST(json_extract(j, '$.i') AS BIGINT), TRY_CAST(json_extract_string(j, '$.a') AS BIGINT) FROM d "
            "WHERE json_type(j, '$.a') IN ('BIGINT', 'UBIGINT') OR "
            "(json_type(j, '$.a') = 'VARCHAR' AND regexp_matches(json_extract_string(j, '$.a'), '^-?[0-9]+$'))"
        ).fetchall()}
    finally:
        con.close()
    got = run(env, "SELECT JSON_VALUE(doc, '$.i' RETURNING BIGINT) AS i, JSON_VALUE(doc, '$.a' RETURNING BIGINT) AS v "
                   "FROM t WHERE JSON_VALUE(doc, '$.i' RETURNING BIGINT) IS NOT NULL")
    got = {r["i"]: r["v"] for r in got}
    assert len(want) >= 8
    for i, v in want.items():
        if v is not None:  # DuckDB: NULL for text beyond 64 bits, where CAST saturates
            assert got[i] == v, VALUES[i]


@pytest.mark.parametrize("source", ["doc", "PARSE_JSON(raw)"], ids=["nested-column", "parsed-text"])
def test_documents_beyond_a_double_print_as_json(env, source):
    rows = run(env, f"SELECT __time AS t, {source} AS d, TO_JSON_STRING({source}) AS s, JSON_QUERY({source}, '$') AS q, "
                    f"JSON_VALUE({source}, '$.a' RETURNING DOUBLE) AS x, JSON_VALUE({source}, '$.a') AS v FROM t")
    rows.sort(key=lambda r: r["t"])
    by_text = {text: r for (text, _, _), r in zip(VALUES, rows)}
    for r in rows:
        for key in ("d", "s", "q"):
            assert r[key] is None or isinstance(json.loads(r[key]), dict)  # JSON text, always
    assert json.loads(by_text["1e400"]["s"])["a"] == "Infinity"  # as Druid (Jackson) prints it
    assert json.loads(by_text["-1e400"]["d"])["a"] == "-Infinity"
    assert by_text["1e400"]["x"] == float("inf") and by_text["-1e400"]["x"] == float("-inf")
    assert by_text["1e400"]["v"] == "Infinity" and by_text["NaN"]["v"] == "NaN"


def test_to_json_string_of_non_finite_doubles_prints_jackson_text(env):
    got = run(env, "SELECT TO_JSON_STRING(JSON_OBJECT(KEY 'a' VALUE PARSE_JSON('[1e400, -1e999, 1.5]'))) AS s")
    assert got == [{"s": '{"a":["Infinity","-Infinity",1.5]}'}]


def test_lone_surrogates_and_deep_text_are_errors_that_name_the_row(env):
    from common.errors import ValidationError

    with pytest.raises(ValidationError, match=r"PARSE_JSON: row 0 is not valid JSON \(it holds a lone UTF-16 "
                                              r"surrogate escape \(\\ud800\)"):
        run(env, "SELECT PARSE_JSON('{\"a\": \"\\ud800\"}') AS d")
    assert run(env, "SELECT TRY_PARSE_JSON('{\"a\": \"\\ud800\"}') AS d") == [{"d": None}]
    deep = "[" * 901 + "]" * 901
    assert run(env, f"SELECT TRY_PARSE_JSON('{deep}') AS d") == [{"d": None}]
    ok = "[" * 900 + "]" * 900
    assert run(env, f"SELECT TRY_PARSE_JSON('{ok}') AS d") == [{"d": ok}]


def _array_column(kind: str, path: str, name: str) -> dict:
    if kind == "nested-field":
        return {"type": "nested-field", "columnName": "doc", "path": path, "expectedType": "ARRAY<LONG>",
                "outputName": name}
    return {"type": "expression", "name": name, "expression": f"json_value(parse_json(raw), '{path}', 'ARRAY<LONG>')",
            "outputType": "ARRAY<LONG>"}


@pytest.mark.parametrize("kind", ["nested-field", "parsed-text"])
def test_an_array_of_bigint_saturates_its_elements(tmp_path, kind):
    # (A field whose rows hold arrays of doubles and of integers reads widened to doubles, as the
    # nested column stores it; each path here holds one element type.)
    texts = ['{"d": [1e308, -1e20, 2.9, null]}', '{"l": [12345678901234567, -3]}', None, '{"d": [7.5], "l": [7]}']
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(texts))], pa.int64()),
                      "doc": pa.array(texts, pa.string()), "raw": pa.array(texts, pa.string())})
    path = str(tmp_path / "a.sseg")
    build_segment(table, path, SegmentId("t", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"doc": JSON})
    query = {"queryType": "scan", "dataSource": "t", "intervals": ["2020-01-01/2020-01-02"],
             "virtualColumns": [_array_column(kind, "$.d", "d"), _array_column(kind, "$.l", "l")],
             "columns": ["__time", "d", "l"], "order": "ascending"}
    got = execute(query, [Segment.open(path)]).table
    assert got.column("d").to_pylist() == [[INT64_MAX, INT64_MIN, 2, None], None, None, [7]]
    assert got.column("l").to_pylist() == [None, [12345678901234567, -3], None, [7]]


# A path holding arrays in some rows and literals in others: the nested column stores one field of
# both types (it reads as text, its arrays null); asked for an ARRAY the arrays come back with
# each element converted as RETURNING BIGINT / DOUBLE converts a literal, and a literal is null.
MIXED = ['{"a": [1, 2, 3]}', '{"a": 5}', '{"a": [1.9, -2.5, "7", "x", null, 1e20]}', '{"a": "t"}', None, '{"b": 1}',
         '{"a": [[1], 2]}', '{"a": {"x": 1}}', '{"a": []}', '{"a": [-9223372036854775808, null]}', '{"a": true}']
MIXED_BIGINT = [[1, 2, 3], None, [1, -2, 7, None, None, INT64_MAX], None, None, None, None, None, [], [INT64_MIN, None],
                None]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(MIXED))], pa.int64()),
                      "doc": pa.array(MIXED, pa.string()), "raw": pa.array(MIXED, pa.string())})
    path = str(tmp_path_factory.mktemp("jm") / "m.sseg")
    build_segment(table, path, SegmentId("t", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"doc": JSON})
    segment = Segment.open(path)
    assert segment.column("doc").field_types("$.a") is not None  # a stored field, not only documents
    return FakeCatalog({"t": union_schema([segment])}), [segment]


@pytest.mark.parametrize("source", ["doc", "PARSE_JSON(raw)"], ids=["nested-field", "parsed-text"])
def test_returning_bigint_array_over_arrays_and_literals_at_one_path(mixed, source):
    got = _by_row(run(mixed, f"SELECT __time AS t, JSON_VALUE({source}, '$.a' RETURNING BIGINT ARRAY) AS v FROM t"), "v")
    assert got == MIXED_BIGINT
    doubles = _by_row(run(mixed, f"SELECT __time AS t, JSON_VALUE({source}, '$.a' RETURNING DOUBLE ARRAY) AS v FROM t"),
                      "v")
    assert doubles[2] == [1.9, -2.5, 7.0, None, None, 1e20] and doubles[1] is None and doubles[0] == [1.0, 2.0, 3.0]
    # The scalar reading of the same path: literals convert, arrays are null.
    scalars = _by_row(run(mixed, f"SELECT __time AS t, JSON_VALUE({source}, '$.a' RETURNING BIGINT) AS v FROM t"), "v")
    assert scalars == [None, 5, None, None, None, None, None, None, None, None, 1]


def test_bigint_arrays_of_integers_agree_with_duckdb(mixed):
    con = duck_connect()
    try:
        con.execute("CREATE TABLE d (i INTEGER, j JSON)")
        con.executemany("INSERT INTO d VALUES (?, ?)", [[i, t] for i, t in enumerate(MIXED)])
        # Comparable rows: arrays whose elements are all integers or nulls (DuckDB rounds fractions
        # and errors on text where BIGINT truncates or nulls).
        want = dict(con.execute(
            "SELECT i, CAST(j->'$.a' AS BIGINT[]) FROM d WHERE json_type(j, '$.a') = 'ARRAY' AND "
            "NOT EXISTS (SELECT 1 FROM unnest(CAST(j->'$.a' AS JSON[])) AS e(x) "
            "            WHERE x IS NOT NULL AND json_type(x) NOT IN ('BIGINT', 'UBIGINT', 'NULL'))").fetchall())
    finally:
        con.close()
    assert sorted(want) == [0, 8, 9]
    got = _by_row(run(mixed, "SELECT __time AS t, JSON_VALUE(doc, '$.a' RETURNING BIGINT ARRAY) AS v FROM t"), "v")
    for i, v in want.items():
        assert got[i] == v, MIXED[i]


def test_literal_array_gives_null_for_a_literal_where_an_array_is_asked():
    from common.json.path_steps import literal_array
    from common.types.column_type import ColumnType

    got = literal_array([5, "t", None, [1, "2", 2.9], True, [None]], ColumnType.parse("ARRAY<LONG>"))
    assert got.to_pylist() == [None, None, None, [1, 2, 2], None, [None]]
