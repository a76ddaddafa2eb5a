"""Druid's published results for JSON_QUERY over its qaJsonCols table: of plain columns and
literals (a column reads as the JSON literal it holds), of every kind of stored value at the top
level, inside an object and inside an array element, of empty and null containers, of paths that
do not exist or reach out of an array, and JSON_VALUE over its results, each query with the cells
Druid prints (see quidem_cells.py; JSON text as Druid writes it).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaJsonCols/``)
``funcs_and_sql_func_json_query.01.all.iq`` .. ``.03.all.iq``. Rows are compared as a multiset;
JSON cells as JSON values (the text of both is the document's, keys in its order). A query
Druid rejects (JSONPath array slices and unions) must fail here too, with strata's own message.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.sql.qa_json_cols_data import HAVE_DATA, count_case, qa_json_cols_runner
from tests.unit.sql.quidem_cells import Error, assert_cells, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_json_cols_runner(tmp_path_factory.mktemp("qa-json-query"))


def _select(test_id: str, expr: str, want) -> tuple:
    return test_id, f"SELECT {expr} c FROM test_json_cols", want


def _two(cell_text: str) -> list:
    """Druid's cell in the two rows holding values; NULL in the two rows of nulls."""
    return rows(cell_text, cell_text, "", "")


_OBJ = ('{"a_str":"A","a_num_int":1,"a_num_float":0.1,"a_bool":true,"a_null":null,"a_empty_obj":{},'
        '"a_empty_array":[],"a_empty_obj_nested":{"o1":{},"o2":[],"o3":null},"a_empty_array_nested":[{},[],null]}')
JQ = "json_query({}, '$')"
CASES = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_json_cols", rows("4"))]

# ---- funcs_and_sql_func_json_query.01.all.iq ----------------------------------------------------
CASES += [
    _select("A001", JQ.format("__time"), rows("1640995200000", "1640995200000", "1643673600000", "1643673600000")),
    count_case("A002", "json_value(json_query(__time, '$'), '$' RETURNING bigint) = 1640995200000", 2),
    count_case("A003", "json_value(json_query(__time, '$'), '$' RETURNING bigint) <> 1640995200000", 2),
    count_case("A004", "json_query(__time, '$') IS NOT NULL", 4),
    count_case("A005", "json_query(__time, '$') IS NULL", 0),
    _select("A006", JQ.format("'ABCD'"), same('"ABCD"')),
]
# (first id, argument, RETURNING type, SELECT's cells or None to select the JSON_QUERY itself,
#  the value compared, how many rows hold it)
for _n, _arg, _type, _value, _cells, _rows in [
        (7, "'ABCD'", "CHAR", "'ABCD'", None, 4), (11, "s_str", "CHAR", "'A'", _two('"A"'), 2),
        (16, "1234", "int", "1234", same("1234"), 4), (21, "s_num_int", "int", "1", _two("1"), 2),
        (26, "1234.5678", "DOUBLE", "1234.5678", same("1234.5678"), 4), (31, "s_num_float", "DOUBLE", "0.1", _two("0.1"), 2)]:
    jv = f"json_value(json_query({_arg}, '$'), '$' RETURNING {_type})"
    if _cells is not None:
        CASES.append(_select(f"A{_n:03d}", JQ.format(_arg) if _type == "CHAR" else jv, _cells))
        _n += 1
    CASES += [count_case(f"A{_n:03d}", f"{jv} = {_value}", _rows), count_case(f"A{_n + 1:03d}", f"{jv} <> {_value}", 0),
              count_case(f"A{_n + 2:03d}", f"json_query({_arg}, '$') IS NOT NULL", _rows),
              count_case(f"A{_n + 3:03d}", f"json_query({_arg}, '$') IS NULL", 4 - _rows)]
for _n, _expr in ((36, "json_query(NULL, '$')"), (39, "json_query(s_null, '$')")):
    CASES += [_select(f"A{_n:03d}", _expr, same("")), count_case(f"A{_n + 1:03d}", f"{_expr} IS NULL", 4),
              count_case(f"A{_n + 2:03d}", f"{_expr} IS NOT NULL", 0)]
CASES += [_select("A042", "json_query(c1, '$.does.not.exist')", same("")),
          count_case("A043", "json_query(c1, '$.does.not.exist') IS NULL", 4)]

# ---- .01/.02: each scalar kind as a column, then at $.a_x, $.a_obj.a_x, $.a_array[0].a_x of c1 ---
for _n, _col, _key, _cell, _in_c1 in [(44, "s_str", "a_str", '"A"', '"A"'), (50, "s_num_int", "a_num_int", "1", "1"),
                                      (56, "s_num_float", "a_num_float", "0.1", "0.1"),
                                      (62, "s_bool", "a_bool", "1", "true"), (68, "s_null", "a_null", "", "")]:
    CASES.append(_select(f"A{_n:03d}", JQ.format(_col), _two(_cell)))  # a discovered boolean column is LONG 1
    CASES += [_select(f"A{_n + 1 + i:03d}", f"json_query(c1, '{p}')", _two(_in_c1))
              for i, p in enumerate((f"$.{_key}", f"$.a_obj.{_key}", f"$.a_array[0].{_key}"))]
    _nulls = 4 if _key == "a_null" else 2
    CASES += [count_case(f"A{_n + 4:03d}", f"json_query(c1, '$.{_key}') IS NULL", _nulls),
              count_case(f"A{_n + 5:03d}", f"json_query(c1, '$.{_key}') IS NOT NULL", 4 - _nulls)]

# ---- .02/.03: empty containers, alone and nested ------------------------------------------------
for _n, _col, _path, _cell in [(74, "c_empty_obj", "$", "{}"), (77, "c_empty_array", "$", "[]"),
                               (80, "c_empty_obj_nested", "$.o1", "{}"), (83, "c_empty_obj_nested", "$.o2", "[]"),
                               (86, "c_empty_obj_nested", "$.o3", None), (89, "c_empty_array_nested", "$[0]", "{}"),
                               (92, "c_empty_array_nested", "$[1]", "[]"), (95, "c_empty_array_nested", "$[2]", None)]:
    _expr = f"json_query({_col}, '{_path}')"
    CASES += [_select(f"A{_n:03d}", _expr, same("") if _cell is None else _two(_cell)),
              count_case(f"A{_n + 1:03d}", f"{_expr} IS NULL", 4 if _cell is None else 2),
              count_case(f"A{_n + 2:03d}", f"{_expr} IS NOT NULL", 0 if _cell is None else 2)]
for _n, _col, _path, _cell in [(98, "c_empty_obj_nested", "$.", '{"o1":{},"o2":[],"o3":null}'),
                               (100, "c_empty_array_nested", "$.", "[{},[],null]"),
                               (102, "c1", "$.a_obj.a_obj", _OBJ), (104, "c1", "$.a_obj.a_array[0]", _OBJ)]:
    CASES += [_select(f"A{_n:03d}", f"json_query({_col}, '{_path}')", _two(_cell)),
              count_case(f"A{_n + 1:03d}", f"json_query({_col}, '{_path}') IS NULL", 2)]

# ---- .03: JSONPath forms Druid rejects, indexes past either end, and JSON_VALUE of the results ----
CASES += [("A%03d" % (106 + i), f"SELECT count(*) c FROM test_json_cols WHERE json_query(c1, '$.a_array{p}') IS NULL",
           Error("QueryInterruptedException")) for i, p in enumerate(("[0,1]", "[0:2]", "[:2]", "[0:]"))]
# a negative index counts from the end, as in Druid (c1's a_array has two elements)
CASES += [count_case(f"A{110 + i:03d}", f"json_query(c1, '{p}') IS NULL", n) for i, (p, n) in enumerate([
    ("$.a_array[-1].a_str", 2), ("$.a_array[-2].a_str", 2), ("$.a_array[-1234567890].a_str", 4),
    ("$.a_array[0].a_str.length()", 4), ("$.a_array[0].a_str", 2), ("$.a_array[1].a_str", 2),
    ("$.a_array[2].a_str", 4), ("$.a_array[1234567890].a_str", 4), ("$.a_obj.a_str", 2)])]
_n = 119
for _index, _n_rows in (("0", 2), ("1", 2), ("2", 0), ("1234567890", 0)):
    for _key, _value in (("a_str", "'A'"), ("a_num_int", "1"), ("a_num_float", "0.1")):
        CASES.append(count_case(f"A{_n:03d}", f"json_value(json_query(c1, '$.a_array[{_index}].{_key}'), '$') = {_value}",
                                _n_rows))
        CASES.append(count_case(f"A{_n + 3:03d}", f"json_value(json_query(c1, '$.a_obj'), '$.a_array[{_index}].{_key}') "
                                                  f"= {_value}", _n_rows))
        _n += 1
    _n += 3
CASES += [count_case("A143", "json_query(c1, '$.a_obj') IS NULL", 2),
          count_case("A144", "json_query(c1, '$.a_obj.a_str') IS NULL", 2),
          count_case("A145", "json_query(c1, '$.a_obj.a_num_int') IS NULL", 2),
          count_case("A146", "json_query(c1, '$.a_obj') IS NOT NULL", 2),
          count_case("A147", "json_query(c1, '$.a_obj.a_str') IS NOT NULL", 2),
          count_case("A148", "json_query(c1, '$.a_obj.a_num_int') IS NOT NULL", 2),
          ("A149", "SELECT count(*) c FROM (SELECT json_query(c1, '$.a_obj') FROM test_json_cols)", rows("4"))]


def _value(text: str):
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except ValueError:
        return text


@pytest.mark.parametrize("test_id, sql, want", CASES, ids=[c[0] for c in CASES])
def test_druid_qa_json_query_result(druid, test_id, sql, want):
    assert_cells(druid, sql, want, _value)


def test_the_cases_are_druids_numbering():
    """The generated ids are Druid's, each once (A001..A149 and SEL_DATASOURCE)."""
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)) == 150 and ids[-1] == "A149"
