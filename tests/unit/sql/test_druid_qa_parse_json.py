"""Druid's published results for PARSE_JSON and TO_JSON_STRING over its qaJsonCols table, each
query with the cells Druid prints (see quidem_cells.py).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaJsonCols/``)
``funcs_and_sql_func_parse_json.01.all.iq`` (all of it) and
``funcs_and_sql_func_to_json_string.01.all.iq`` (A001..A030: literals and scalars; its later
cases print whole c1/c2 documents and are not transcribed). Rows are compared as a multiset;
PARSE_JSON cells as JSON values, TO_JSON_STRING cells as text. A query Druid rejects must fail
here too, with strata's own message.

Deliberate differences, checked rather than skipped:
- PARSE_JSON('"a": 123') (A034): Druid's parser stops after the first value and answers "a";
  strata rejects text with anything after the value, as it rejects any other malformed JSON
  (A035..A037, where Druid fails too), so a typo is an error rather than a truncated value.
- PARSE_JSON(NULL) (A020, A021): Druid's planner fails on the untyped NULL literal; strata answers
  NULL, as both answer for a NULL of a typed expression (A022).
- Joins on PARSE_JSON(..) = PARSE_JSON(..) (A047..A049): Druid cannot join on COMPLEX<json>
  ("Cannot join"); strata compares the JSON text and joins (DIFFERENCES hold strata's answers).
"""

from __future__ import annotations

import json

import pytest

from tests.unit.sql.qa_json_cols_data import HAVE_DATA, count_case, qa_json_cols_runner
from tests.unit.sql.quidem_cells import Error, assert_cells, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_json_cols_runner(tmp_path_factory.mktemp("qa-parse-json"))


def _select(test_id: str, expr: str, want) -> tuple:
    return test_id, f"SELECT {expr} c FROM test_json_cols", want


def _two(cell_text: str, other: str = "") -> list:
    return rows(cell_text, cell_text, other, other)


_NOT_TEXT = Error("Cannot apply 'PARSE_JSON'")
_DOCS = ['{"a": "A", "b": {}}', '{"a": "A", "b": []}', '{"a": "A", "b": 1, "c": 0.1, "d": true, "e": null}',
         '{"a": "A", "b": [{"c": 123}, {"d": null, "e": [1, 2, 3]}]}']
_PJ = "parse_json(to_json_string(c1))"

# ---- funcs_and_sql_func_parse_json.01.all.iq --------------------------------------------------
PARSE = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_json_cols", rows("4")),
         _select("A001", "parse_json('1234')", same("1234")), _select("A002", "parse_json('\"日本\"')", same('"日本"')),
         _select("A003", "parse_json('\"abc\"')", same('"abc"')),
         _select("A004", "parse_json('\"'||'a'||'b'||'c'||'\"')", same('"abc"')),
         _select("A005", "parse_json('\"This is My Key\"')", same('"This is My Key"')),
         _select("A006", "json_query(parse_json('\"AbCd\"'), '$')", same('"AbCd"')),
         _select("A007", "parse_json(json_value(s_str, '$'))", Error("AvaticaSqlException"))]  # 'A' is no JSON
PARSE += [_select(f"A{8 + i:03d}", e, _NOT_TEXT) for i, e in enumerate([
    "parse_json(1234)", "parse_json(1+1)", "json_query(parse_json(1234), '$')",
    "parse_json(json_value(s_num_int, '$' RETURNING bigint))", "parse_json(0.1234)", "parse_json(0.1+0.1)",
    "json_query(parse_json(0.1234), '$')", "parse_json(json_value(s_num_float, '$' RETURNING DOUBLE))",
    "parse_json(TRUE)", "parse_json((1=2))", "json_query(parse_json(TRUE), '$')",
    "parse_json(json_value(s_bool, '$' RETURNING boolean))"])]
PARSE += [_select("A020", "parse_json(NULL)", Error("QueryInterruptedException")),
          _select("A021", "json_query(parse_json(NULL), '$')", Error("QueryInterruptedException")),
          _select("A022", "parse_json(json_value(s_null, '$'))", same("")),
          _select("A023", "parse_json(__time)", _NOT_TEXT), _select("A024", "parse_json(CURRENT_TIMESTAMP)", _NOT_TEXT),
          _select("A025", "parse_json('{}')", same("{}")), _select("A026", f"parse_json('{_DOCS[0]}')", same('{"a":"A","b":{}}')),
          _select("A027", "parse_json('[]')", same("[]")), _select("A028", f"parse_json('{_DOCS[1]}')", same('{"a":"A","b":[]}')),
          _select("A029", f"parse_json('{_DOCS[2]}')", same('{"a":"A","b":1,"c":0.1,"d":true,"e":null}')),
          _select("A030", f"parse_json('{_DOCS[3]}')", same('{"a":"A","b":[{"c":123},{"d":null,"e":[1,2,3]}]}')),
          _select("A031", "parse_json(c1)", _NOT_TEXT),
          _select("A032", "parse_json(json_query(c1, '$.a_array[0].a_obj'))", _NOT_TEXT),
          _select("A033", "parse_json('{'a': 123}')", Error("QueryInterruptedException")),  # not even SQL
          _select("A034", "parse_json('\"a\": 123')", same('"a"')),
          _select("A035", "parse_json('{\"a\": 123; \"b\": 456}')", Error("ExpressionProcessingException")),
          _select("A036", "parse_json('{\"a\": 123 456}')", Error("ExpressionProcessingException")),
          _select("A037", "parse_json('{\"a\": \"A\", \"b\": [\"c\": {}, \"d\": {}]}')", Error("ExpressionProcessingException")),
          count_case("A038", f"{_PJ} IS NULL", 0), count_case("A039", f"{_PJ} IS NOT NULL", 4),
          ("A040", f"SELECT count(*) c FROM (SELECT {_PJ} FROM test_json_cols)", rows("4")),
          ("A041", f"SELECT count(*) c FROM (SELECT ALL {_PJ} FROM test_json_cols)", rows("4")),
          ("A042", f"SELECT count(mycol) c FROM (SELECT {_PJ} mycol FROM test_json_cols)", rows("4")),
          ("A043", f"SELECT count(*) c FROM (SELECT DISTINCT {_PJ} c FROM test_json_cols)", rows("2")),
          ("A044", f"SELECT count(*) c FROM (SELECT {_PJ} mycol FROM test_json_cols) GROUP BY mycol", rows("2", "2")),
          ("A045", f"SELECT count(*) c FROM (SELECT c1, {_PJ} mycol FROM test_json_cols) GROUP BY mycol "
                   "HAVING mycol IS NOT NULL", rows("2", "2")),
          count_case("A046", f"{_PJ} = {_PJ}", 4)]
_ON = "parse_json(to_json_string(t1.c1))=parse_json(to_json_string(t2.c1))"
PARSE += [("A047", f"SELECT count(*) c FROM test_json_cols t1 INNER JOIN test_json_cols t2 ON {_ON}", Error("Cannot join")),
          ("A048", f"SELECT count(*) c FROM test_json_cols t1 LEFT JOIN test_json_cols t2 ON {_ON}", Error("Cannot join")),
          ("A049", f"SELECT count(*) c FROM test_json_cols t1, test_json_cols t2 WHERE {_ON}", Error("Cannot join"))]
# Druid's answer, then strata's, for the deliberate differences (see the module's docstring): two
# documents, each on two rows, so every row joins the 2 rows holding its document
DIFFERENCES = {"A034": (same('"a"'), Error("trailing")), "A020": (Error("QueryInterruptedException"), same("")),
               "A021": (Error("QueryInterruptedException"), same("")),
               "A047": (Error("Cannot join"), rows("8")), "A048": (Error("Cannot join"), rows("8")),
               "A049": (Error("Cannot join"), rows("8"))}

# ---- funcs_and_sql_func_to_json_string.01.all.iq, A001..A030 --------------------------------------
TO_JSON = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_json_cols", rows("4"))]
TO_JSON += [_select(f"A{1 + i:03d}", e, w) for i, (e, w) in enumerate([
    ("to_json_string('1234')", same('"1234"')), ("to_json_string('日本')", same('"日本"')),
    ("to_json_string('abc')", same('"abc"')), ("to_json_string('a'||'b'||'c')", same('"abc"')),
    ("to_json_string('\"This is My Key\"')", same('"\\"This is My Key\\""')),
    ("parse_json(to_json_string('AbCd'))", same('"AbCd"')), ("to_json_string(json_value(s_str, '$'))", _two('"A"')),
    ("to_json_string(1234)", same("1234")), ("to_json_string(1+1)", same("2")),
    ("parse_json(to_json_string(1234))", same("1234")),
    ("to_json_string(json_value(s_num_int, '$' RETURNING bigint))", _two("1")),
    ("to_json_string(0.1234)", same("0.1234")), ("to_json_string(0.1+0.1)", same("0.2")),
    ("parse_json(to_json_string(0.1234))", same("0.1234")),
    ("to_json_string(json_value(s_num_float, '$' RETURNING DOUBLE))", _two("0.1")),
    ("to_json_string(TRUE)", same("1")), ("to_json_string((1=2))", same("0")),
    ("parse_json(to_json_string(TRUE))", same("1")),
    ("to_json_string(json_value(s_bool, '$' RETURNING boolean))", _two("1")),
    ("to_json_string(NULL)", same("")), ("parse_json(to_json_string(NULL))", same("")),
    ("to_json_string(json_value(s_null, '$'))", same("")),
    ("to_json_string(__time)", _two("1640995200000", "1643673600000"))])]
TO_JSON += [("A024", "SELECT count(*) FROM (SELECT to_json_string(CURRENT_TIMESTAMP) c FROM test_json_cols)", rows("4"))]
TO_JSON += [_select(f"A{25 + i:03d}", f"to_json_string('{d}')", same(json.dumps(d, ensure_ascii=False)))
            for i, d in enumerate(["{}", _DOCS[0], "[]"] + _DOCS[1:])]


def _json(text: str):
    try:
        return json.dumps(json.loads(text, object_pairs_hook=lambda pairs: pairs))
    except ValueError:
        return text


def _check(druid, sql: str, want, as_json: bool) -> None:
    assert_cells(druid, sql, want, _json if as_json else str)


@pytest.mark.parametrize("test_id, sql, want", PARSE, ids=[c[0] for c in PARSE])
def test_druid_qa_parse_json_result(druid, test_id, sql, want):
    if test_id in DIFFERENCES:
        druid_want, want = DIFFERENCES[test_id]
        assert type(druid_want) is type(PARSE[[c[0] for c in PARSE].index(test_id)][2])
    _check(druid, sql, want, as_json=True)


@pytest.mark.parametrize("test_id, sql, want", TO_JSON, ids=[c[0] for c in TO_JSON])
def test_druid_qa_to_json_string_result(druid, test_id, sql, want):
    _check(druid, sql, want, as_json=False)


def test_the_cases_are_druids_numbering():
    assert [c[0] for c in PARSE] == ["SEL_DATASOURCE"] + [f"A{i:03d}" for i in range(1, 50)]
    assert [c[0] for c in TO_JSON] == ["SEL_DATASOURCE"] + [f"A{i:03d}" for i in range(1, 31)]
