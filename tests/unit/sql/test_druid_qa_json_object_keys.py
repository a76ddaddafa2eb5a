"""Druid's published results for JSON_OBJECT and JSON_KEYS (part two) over its qaJsonCols table,
each query with the cells Druid prints (see quidem_cells.py).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaJsonCols/``)
``funcs_and_sql_func_json_object.01.all.iq`` and ``.02.all.iq`` (JSON_OBJECT in both its
``KEY k VALUE v`` and ``k: v`` forms: keys of every kind, where only text may be a key; values of
every kind, a later duplicate key replacing an earlier one) and
``funcs_and_sql_func_json_keys.02.all.iq`` and ``.03.std.iq`` A100..A133 (JSON_KEYS at every
depth of c1, counted, grouped by, compared, joined on). Rows are compared as
a multiset, JSON cells as JSON (member order and duplicates kept). A query Druid rejects must fail
here too, with strata's own message.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.sql.qa_json_cols_data import HAVE_DATA, count_case, qa_json_cols_runner
from tests.unit.sql.quidem_cells import Error, assert_cells, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_json_cols_runner(tmp_path_factory.mktemp("qa-json-object"))


def _select(test_id: str, expr: str, want) -> tuple:
    return test_id, f"SELECT {expr} c FROM test_json_cols", want


def _forms(first: int, key: str, value: str, want) -> list:
    """Druid's case pair: JSON_OBJECT(KEY k VALUE v) then JSON_OBJECT(k: v)."""
    return [_select(f"A{first:03d}", f"json_object(KEY {key} value {value})", want),
            _select(f"A{first + 1:03d}", f"json_object({key}:{value})", want)]


def _two(cell_text: str, other: str = "") -> list:
    """The 2022-01 rows' cell twice, then the cell of the two rows of nulls."""
    return rows(cell_text, cell_text, other, other)


NOT_TEXT = Error("field name must be a STRING")
NULL_KEY = Error("AvaticaSqlException")  # a key that is NULL on some row
CASES = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_json_cols", rows("4")),
         _select("A001", "json_object(value 'A' KEY 'a')", Error("QueryInterruptedException")),
         _select("A002", "json_object(KEY 'a' vAlUe 'A')", same('{"a":"A"}')),
         _select("A003", "json_object(KEY 'a' value 'A1', KEY 'b' value 'A2', KEY 'c' value 'A3')",
                 same('{"a":"A1","b":"A2","c":"A3"}')),
         _select("A004", "json_object('a':'A1', 'b':'A2', 'c':'A3')", same('{"a":"A1","b":"A2","c":"A3"}')),
         _select("A005", "json_object(KEY 'aAa' value 'A1', KEY 'AaA' value 'A2', KEY 'AAa' value 'A3')",
                 same('{"aAa":"A1","AaA":"A2","AAa":"A3"}')),
         _select("A006", "json_object('aAa':'A1', 'AaA':'A2', 'AAa':'A3')", same('{"aAa":"A1","AaA":"A2","AAa":"A3"}')),
         _select("A007", "json_object(KEY 'aaa' value 'A1', KEY 'aaa' value 'A2', KEY 'aaa' value 'A3')",
                 same('{"aaa":"A3"}')),
         _select("A008", "json_object('aaa':'A1', 'aaa':'A2', 'aaa':'A3')", same('{"aaa":"A3"}'))]
# ---- funcs_and_sql_func_json_object.01.all.iq: keys -------------------------------------------
for _n, _key, _want in [(9, "'a'", same('{"a":"A"}')), (11, "'123'", same('{"123":"A"}')),
                        (13, "'日本'", same('{"日本":"A"}')), (15, "'a'||'b'||'c'", same('{"abc":"A"}')),
                        (17, "'\"This is My Key\"'", same('{"\\"This is My Key\\"":"A"}')),
                        (19, "json_value(s_str, '$')", NULL_KEY), (21, "123", NOT_TEXT), (23, "1+1", NOT_TEXT),
                        (25, "json_value(s_num_int, '$' RETURNING bigint)", NOT_TEXT), (27, "0.123", NOT_TEXT),
                        (29, "0.1+0.1", NOT_TEXT), (31, "json_value(s_num_float, '$' RETURNING DOUBLE)", NOT_TEXT),
                        (33, "TRUE", NOT_TEXT), (35, "(1=2)", NOT_TEXT),
                        (37, "json_value(s_bool, '$' RETURNING boolean)", NULL_KEY), (39, "NULL", NULL_KEY),
                        (41, "json_value(s_null, '$')", NULL_KEY), (43, "json_value(c1, '$.doesnotexist')", NULL_KEY),
                        (45, "__time", NOT_TEXT), (47, "CURRENT_TIMESTAMP", NOT_TEXT), (49, "c1", NOT_TEXT),
                        (51, "json_query(c1, '$.a_array[0].a_obj')", NOT_TEXT),
                        (53, "json_object(KEY c2 value 'B')", NOT_TEXT)]:
    CASES += _forms(_n, _key, "'A'", _want)
# ---- funcs_and_sql_func_json_object.02.all.iq: values -----------------------------------------
for _n, _value, _want in [(55, "'A'", same('{"a":"A"}')), (57, "'123'", same('{"a":"123"}')),
                          (59, "'日本'", same('{"a":"日本"}')), (61, "'a'||'b'||'c'", same('{"a":"abc"}')),
                          (63, "'\"This is My Key\"'", same('{"a":"\\"This is My Key\\""}')),
                          (65, "json_value(s_str, '$')", _two('{"a":"A"}', '{"a":null}')),
                          (67, "123", same('{"a":123}')), (69, "1+1", same('{"a":2}')),
                          (71, "json_value(s_num_int, '$' RETURNING bigint)", _two('{"a":1}', '{"a":null}')),
                          (73, "0.123", same('{"a":0.123}')), (75, "0.1+0.1", same('{"a":0.2}')),
                          (77, "json_value(s_num_float, '$' RETURNING DOUBLE)", _two('{"a":0.1}', '{"a":null}')),
                          (79, "TRUE", same('{"a":1}')), (81, "(1=2)", same('{"a":0}')),
                          (83, "json_value(s_bool, '$' RETURNING boolean)", _two('{"a":1}', '{"a":null}')),
                          (85, "NULL", same('{"a":null}')), (87, "json_value(s_null, '$')", same('{"a":null}')),
                          (89, "json_value(c1, '$.doesnotexist')", same('{"a":null}')),
                          (91, "__time", _two('{"a":1640995200000}', '{"a":1643673600000}')),
                          (95, "c_empty_obj", _two('{"a":{}}', '{"a":null}')),
                          (97, "c_empty_array", _two('{"a":[]}', '{"a":null}'))]:
    CASES += _forms(_n, "'a'", _value, _want)
CASES += [("A093", "SELECT count(*) FROM (SELECT json_object(KEY 'a' value CURRENT_TIMESTAMP) c FROM test_json_cols)",
           rows("4")),
          ("A094", "SELECT count(*) FROM (SELECT json_object('a':current_timestamp) c FROM test_json_cols)", rows("4")),
          _select("A099", "json_object(KEY 'a' value c_empty_obj_nested)",
                  _two('{"a":{"o1":{},"o2":[],"o3":null}}', '{"a":null}'))]
OBJECT_CASES = CASES

# ---- funcs_and_sql_func_json_keys.02.all.iq: the keys at every depth of c1 ---------------------
_KEYS9 = "[a_str, a_num_int, a_num_float, a_bool, a_null, a_empty_obj, a_empty_array, a_empty_obj_nested, " \
         "a_empty_array_nested]"
_LEAVES = [("a_str", ""), ("a_num_int", ""), ("a_num_float", ""), ("a_null", ""), ("a_empty_obj", "[]"),
           ("a_empty_array", "[]"), ("a_empty_obj_nested", "[o1, o2, o3]"), ("a_empty_array_nested", "[0, 1, 2]")]


def _keys(first: int, path: str, want) -> tuple:
    return _select(f"A{first:03d}", f"json_keys(c1, '{path}')", want)


def _leaves(first: int, prefix: str, skip: int = 0) -> list:
    """JSON_KEYS of each leaf of one of c1's objects: NULL for scalars, the keys of containers."""
    return [_keys(first + i, f"{prefix}.{k}", same("") if not c else _two(c)) for i, (k, c) in enumerate(_LEAVES[skip:])]


KEYS_CASES = _leaves(50, "$.a_obj", skip=2)
KEYS_CASES += [_keys(56, "$.a_obj.a_obj", _two(_KEYS9)), _keys(57, "$.a_obj.a_array", _two("[0, 1]")),
               _keys(58, "$.a_obj.a_array[0]", _two(_KEYS9))]
KEYS_CASES += _leaves(59, "$.a_obj.a_array[0]")
KEYS_CASES += [_keys(67, "$.a_array", _two("[0, 1]")), _keys(68, "$.a_array[0]", _two(_KEYS9.replace(
    "a_empty_array_nested]", "a_empty_array_nested, a_obj, a_array]")))]
KEYS_CASES += _leaves(69, "$.a_array[0]")
KEYS_CASES += [_keys(77, "$.a_array[0].a_obj", _two(_KEYS9))]
KEYS_CASES += _leaves(78, "$.a_array[0].a_obj")
KEYS_CASES += [_keys(86, "$.a_array[1].a_array", _two("[0, 1]")), _keys(87, "$.a_array[1].a_array[1]", _two(_KEYS9))]
KEYS_CASES += _leaves(88, "$.a_array[1].a_array[1]")
KEYS_CASES += [count_case("A096", "json_keys(c1, '$.a_obj') IS NULL", 2),
               count_case("A097", "json_keys(c1, '$.a_obj.a_str') IS NULL", 4),
               ("A098", "SELECT count(*) c FROM (SELECT json_keys(c1, '$.a_obj') FROM test_json_cols)", rows("4")),
               ("A099", "SELECT count(*) c FROM (SELECT ALL json_keys(c1, '$.a_array') FROM test_json_cols)", rows("4"))]


# ---- funcs_and_sql_func_json_keys.03.std.iq, A100..A133 (the rest not transcribed) -------------
_KEYS11 = _KEYS9.replace("a_empty_array_nested]", "a_empty_array_nested, a_obj, a_array]")


def _sub(select: str) -> str:
    return f"FROM (SELECT {select} FROM test_json_cols)"


KEYS_CASES += [("A100", f"SELECT count(*) c {_sub(chr(32).join(['json_keys(c1,', repr('$.a_obj.a_str') + ')']))}",
                rows("4")),
               ("A101", f"SELECT count(*) c {_sub('ALL json_keys(c1, ' + repr('$.a_obj.a_num_int') + ')')}", rows("4"))]
KEYS_CASES += [(f"A{102 + i:03d}", f"SELECT count(mycol) c {_sub(f'json_keys(c1, {p!r}) mycol')}", rows(n))
               for i, (p, n) in enumerate([("$", "4"), ("$.a_obj", "2"), ("$.a_array", "2"), ("$.a_array[0]", "2"),
                                           ("$.a_obj.a_str", "0"), ("$.a_obj.a_num_int", "0"),
                                           ("$.a_obj.a_num_float", "0"), ("$.a_obj.a_str", "0"),
                                           ("$.a_obj.a_null", "0")])]
KEYS_CASES += [(f"A{111 + i:03d}", f"SELECT count(*) c {_sub(f'DISTINCT json_keys(c1, {p!r})')}", rows(n))
               for i, (p, n) in enumerate([("$.a_obj", "2"), ("$.a_obj.a_str", "1"), ("$.a_obj.a_num_int", "1")])]
KEYS_CASES += [(f"A{114 + i:03d}", f"SELECT mycol, count(*) c {_sub(f'json_keys(c1, {p!r}) mycol')} GROUP BY mycol", w)
               for i, (p, w) in enumerate([("$.a_obj", [[_KEYS11, "2"], ["", "2"]]), ("$.a_obj.a_str", [["", "4"]]),
                                           ("$.a_obj.a_num_int", [["", "4"]])])]
KEYS_CASES += [("A117", f"SELECT mycol, count(*) c {_sub('c1, json_keys(c1, ' + repr('$.') + ') mycol')} GROUP BY mycol "
                        "HAVING array_contains(mycol, 'a_str')", [[_KEYS11, "2"]]),
               ("A118", f"SELECT mycol, count(*) c {_sub('c1, json_keys(c1, ' + repr('$.') + ') mycol')} GROUP BY mycol "
                        "HAVING NOT array_contains(mycol, 'a_str')", [[_KEYS11.replace("a_", "b_"), "2"]])]
KEYS_CASES += [count_case(f"A{119 + i:03d}", f"json_keys(c1, '{p}') = json_keys(c2, '{p}')", n)
               for i, (p, n) in enumerate([("$.a_obj", 2), ("$.a_obj.a_str", 0), ("$.a_obj.a_num_int", 0)])]
_n = 122
for _join in ("INNER JOIN test_json_cols t2 ON {}", "LEFT JOIN test_json_cols t2 ON {}", ", test_json_cols t2 WHERE {}"):
    for _p in ("$.a_obj", "$.a_obj.a_str", "$.a_obj.a_num_int"):
        _on = f"json_keys(t1.c1, '{_p}')=json_keys(t2.c1, '{_p}')"
        KEYS_CASES.append((f"A{_n:03d}", "SELECT count(*) c FROM test_json_cols t1 " + _join.format(_on),
                           Error("QueryUnsupportedException")))
        _n += 1
KEYS_CASES += [(f"A{131 + i:03d}", f"SELECT json_keys(c1, '{p}') c FROM test_json_cols ORDER BY __time", w)
               for i, (p, w) in enumerate([("$.a_obj.a_array[0]", _two(_KEYS9)), ("$.a_obj.a_array[0].a_str", same("")),
                                           ("$.a_obj.a_array[0].a_num_int", same(""))])]
# Joins on JSON_KEYS arrays: Druid cannot join on arrays ("QueryUnsupportedException"); strata joins
# on the whole arrays (two rows hold each object's keys; rows without the object hold NULL, which
# never matches): strata's counts
JOIN_COUNTS = {"A122": 4, "A123": 0, "A124": 0, "A125": 6, "A126": 4, "A127": 4, "A128": 4, "A129": 0, "A130": 0}


def _json(text: str):
    """A cell as JSON with members in order and duplicates kept; text that is no JSON as itself."""
    try:
        return json.dumps(json.loads(text, object_pairs_hook=lambda pairs: pairs))
    except ValueError:
        return text


def _check(druid, sql: str, want) -> None:
    assert_cells(druid, sql, want, _json)


@pytest.mark.parametrize("test_id, sql, want", OBJECT_CASES, ids=[c[0] for c in OBJECT_CASES])
def test_druid_qa_json_object_result(druid, test_id, sql, want):
    _check(druid, sql, want)


@pytest.mark.parametrize("test_id, sql, want", KEYS_CASES, ids=[c[0] for c in KEYS_CASES])
def test_druid_qa_json_keys_result(druid, test_id, sql, want):
    if test_id in JOIN_COUNTS:
        assert isinstance(want, Error)
        want = rows(str(JOIN_COUNTS[test_id]))
    _check(druid, sql, want)


def test_the_cases_are_druids_numbering():
    assert sorted(c[0] for c in OBJECT_CASES) == [f"A{i:03d}" for i in range(1, 100)] + ["SEL_DATASOURCE"]
    assert [c[0] for c in KEYS_CASES] == [f"A{i:03d}" for i in range(50, 134)]
