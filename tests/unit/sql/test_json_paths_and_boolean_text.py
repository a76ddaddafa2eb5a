"""JSON_PATHS of literals, nulls and empty containers, and LONG booleans compared with 'true'/'false',
as Druid answers them.

Druid's facts used here: its nested-data SQL test groups JSON_PATHS(nester) over rows whose
``nester`` is an object, a string, a number or null, and every non-container row (nulls included)
gives ``["$"]``; JSON_PATHS of a non-JSON argument (a VARCHAR column, 1234, '1234', 1.1, NULL) is
``["$"]`` on every row. Its path walk treats a null field and an array of literals (an empty one
too) as one literal path, and an empty object as none. Booleans are stored as LONG 1/0, and Druid
reads the text 'true'/'false' (any case) as 1/0 where a number is wanted.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.query.engine import union_schema
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql
from common.types.column_type import JSON
from common.types.interval import Interval
from tests.conftest import duck_connect
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.fake_catalog import FakeCatalog

T0 = 1577836800000
# the nester column of Druid's druid.nested test table, in its row order
NESTER = [{"array": ["a", "b"], "n": {"x": "hello"}}, "hello", None, None, None,
          {"array": ["a", "b"], "n": {"x": 1}}, 2]
STRINGS = ["aaa", "bbb", "ccc", "ddd", "eee", "aaa", "ddd"]


def _sql(tmp_path, table: pa.Table, text: str, json_columns=("j",)) -> list[dict]:
    path = str(tmp_path / "n.sseg")
    build_segment(table, path, SegmentId("nested", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={c: JSON for c in json_columns})
    segments = [Segment.open(path)]
    catalog = FakeCatalog({"nested": union_schema(segments)})
    return execute_sql(text, catalog, lambda q: execute(q, segments).table, (), {}).to_pylist()


def _table(docs: list, **more) -> pa.Table:
    return pa.table({"__time": pa.array([T0 + i for i in range(len(docs))], pa.int64()),
                     "j": pa.array([None if d is None else json.dumps(d) for d in docs]), **more})


def test_json_paths_group_by_as_druids_nested_test(tmp_path):
    rows = _sql(tmp_path, _table(NESTER, cnt=pa.array([1] * len(NESTER), pa.int64())),
                "SELECT JSON_PATHS(j) AS p, SUM(cnt) AS c FROM nested GROUP BY 1")
    got = {tuple(r["p"]): r["c"] for r in rows}
    assert got == {("$",): 5, ("$.array", "$.n.x"): 2}


def test_json_paths_of_non_json_arguments_is_root(tmp_path):
    rows = _sql(tmp_path, _table(NESTER, string=pa.array(STRINGS)),
                "SELECT JSON_PATHS(string) AS a, JSON_PATHS(1234) AS b, JSON_PATHS('1234') AS c, "
                "JSON_PATHS(1.1) AS d, JSON_PATHS(NULL) AS e FROM nested")
    assert rows == [{k: ["$"] for k in "abcde"}] * len(NESTER)


@pytest.mark.parametrize("doc,paths", [
    ({}, []),                                   # an empty object: no literal anywhere
    ([], ["$"]),                                # an empty array is an array of literals
    ({"a": []}, ["$.a"]),
    ({"a": {}}, []),
    ({"a": None, "b": 1}, ["$.a", "$.b"]),      # a null field is a literal at its path
    ([{"b": 1}, None, [1, 2]], ["$[0].b", "$[1]", "$[2]"]),
    ({"x": [1, 2, 3], "y": {"b": True, "a": "s"}}, ["$.x", "$.y.b", "$.y.a"]),
    ("text", ["$"]),
    (0, ["$"]),
    (False, ["$"]),
    (None, ["$"]),
])
def test_json_paths_of_literals_and_empty_containers(tmp_path, doc, paths):
    rows = _sql(tmp_path, pa.table({"__time": pa.array([T0], pa.int64()),
                                    "j": pa.array([json.dumps(doc)])}),
                "SELECT JSON_PATHS(j) AS p FROM nested")
    assert rows == [{"p": paths}]


def _flags():
    flags = [1, 0, None, 1, 0, 1, None, 0]
    docs = [{"b": None if f is None else bool(f)} for f in flags]
    return _table(docs, flag=pa.array(flags, pa.int64()), d=pa.array([None if f is None else float(f) for f in flags]))


@pytest.mark.parametrize("sql,duck_sql", [
    ("SELECT flag, flag = 'true', flag = 'false', 'TRUE' = flag, flag <> 'False' FROM nested",
     "SELECT flag, flag = 1, flag = 0, flag = 1, flag <> 0 FROM nested"),
    ("SELECT COUNT(*) FROM nested WHERE flag = 'true'", "SELECT COUNT(*) FROM nested WHERE flag = 1"),
    ("SELECT COUNT(*) FROM nested WHERE NOT flag = 'false'", "SELECT COUNT(*) FROM nested WHERE NOT flag = 0"),
    ("SELECT COUNT(*) FROM nested WHERE flag IN ('true', 5)", "SELECT COUNT(*) FROM nested WHERE flag IN (1, 5)"),
    ("SELECT COUNT(*) FROM nested WHERE d = 'TRUE' OR d = 'false'", "SELECT COUNT(*) FROM nested WHERE d IN (1, 0)"),
    ("SELECT COUNT(*) FROM nested WHERE JSON_VALUE(j, '$.b' RETURNING BIGINT) = 'true'",
     "SELECT COUNT(*) FROM nested WHERE flag = 1"),
    ("SELECT COUNT(*) FILTER (WHERE flag = 'true'), COUNT(*) FILTER (WHERE flag = 'false') FROM nested",
     "SELECT COUNT(*) FILTER (WHERE flag = 1), COUNT(*) FILTER (WHERE flag = 0) FROM nested"),
])
def test_long_booleans_compare_with_true_false_text(tmp_path, sql, duck_sql):
    table = _flags()
    path = str(tmp_path / "f.sseg")
    build_segment(table, path, SegmentId("nested", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"j": JSON})
    segments = [Segment.open(path)]
    catalog = FakeCatalog({"nested": union_schema(segments)})
    got = engine_rows(execute_sql(sql, catalog, lambda q: execute(q, segments).table, (), {}))
    con = duck_connect()
    con.register("nested", table.drop_columns(["j"]))
    assert_rows_equal(got, duck_rows(con, duck_sql), ordered=False)
    con.close()


def test_other_text_against_a_number_is_still_an_error(tmp_path):
    with pytest.raises(ValidationError, match=r"cannot compare BIGINT with 'yes'.*use a number, or 'true'/'false'"):
        _sql(tmp_path, _flags(), "SELECT COUNT(*) FROM nested WHERE flag = 'yes'")


def test_native_filter_reads_true_false_on_a_long_column(tmp_path):
    from common.query import query_from_json

    table = _flags()
    path = str(tmp_path / "f.sseg")
    build_segment(table, path, SegmentId("nested", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"j": JSON})
    segments = [Segment.open(path)]

    def count(flt: dict) -> int:
        q = query_from_json({"queryType": "timeseries", "dataSource": "nested", "intervals": ["2020-01-01/2020-01-02"],
                         "granularity": "all", "filter": flt, "aggregations": [{"type": "count", "name": "n"}]})
        return execute(q, segments).table.column("n").to_pylist()[0]

    assert count({"type": "equals", "column": "flag", "matchValueType": "STRING", "matchValue": "true"}) == 3
    assert count({"type": "equals", "column": "d", "matchValueType": "STRING", "matchValue": "False"}) == 3
    assert count({"type": "in", "dimension": "flag", "values": ["false", "true"]}) == 6


# Druid's CAST of text to a number (ExprEval.computeNumber): 'true'/'false' in any case are 1 and
# 0 (a double, so CAST to BIGINT truncates it to 1/0); anything else is parsed as a number or null.
# Only the exact word counts: ' true' and 'yes' are no number.
TEXTS = ["true", "FALSE", "True", "false", "1", "2.9", "yes", " true", "", None]
WANT_LONG = [1, 0, 1, 0, 1, 2, None, None, None, None]


def test_cast_of_true_false_text_is_one_and_zero(tmp_path):
    table = pa.table({"__time": pa.array([T0 + i for i in range(len(TEXTS))], pa.int64()),
                      "t": pa.array(TEXTS), "j": pa.array(["{}"] * len(TEXTS))})
    rows = _sql(tmp_path, table, "SELECT t, CAST(t AS BIGINT) AS l, CAST(t AS DOUBLE) AS d, CAST(t AS FLOAT) AS f "
                                 "FROM nested")
    assert [r["l"] for r in rows] == WANT_LONG
    want_double = [1.0, 0.0, 1.0, 0.0, 1.0, 2.9, None, None, None, None]
    assert [r["d"] for r in rows] == want_double
    assert [r["f"] for r in rows] == [None if v is None else pytest.approx(v, rel=1e-6) for v in want_double]
    literals = _sql(tmp_path, table, "SELECT CAST('true' AS BIGINT) AS a, CAST('FALSE' AS BIGINT) AS b, "
                                     "CAST('True' AS DOUBLE) AS c, CAST('false' AS DOUBLE) AS d, "
                                     "CAST('yes' AS BIGINT) AS e FROM nested LIMIT 1")
    assert literals == [{"a": 1, "b": 0, "c": 1.0, "d": 0.0, "e": None}]
    # the same rule where the cast filters, groups and sums
    got = _sql(tmp_path, table, "SELECT COUNT(*) AS n FROM nested WHERE CAST(t AS BIGINT) = 1")
    assert got == [{"n": WANT_LONG.count(1)}]
    got = _sql(tmp_path, table, "SELECT CAST(t AS BIGINT) AS l, COUNT(*) AS n FROM nested GROUP BY 1 ORDER BY 1")
    assert [(r["l"], r["n"]) for r in got] == [(None, 4), (0, 2), (1, 3), (2, 1)]
    got = _sql(tmp_path, table, "SELECT SUM(CAST(t AS DOUBLE)) AS s FROM nested")
    assert got == [{"s": pytest.approx(5.9)}]
