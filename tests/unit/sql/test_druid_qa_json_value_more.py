"""Druid's published results for JSON_VALUE over its qaJsonCols table, part two: of empty and
nested containers, of paths that do not exist, reach out of an array or end at an object, and
of nested scalars with and without RETURNING, each query with the cells Druid prints.

The cases are Druid's quidem file apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaJsonCols/funcs_and_sql_func_json_value.02.all.iq``
(part one, ``.01``, is in test_druid_qa_json_cols_results.py). Rows are compared as a multiset; a
query Druid rejects (JSONPath array slices and unions) must fail here too, with strata's own message.

Deliberate difference, checked rather than skipped (as for ``.01``'s A046/A047): where a path holds
an empty array (c_empty_obj_nested's o2, c_empty_array_nested's [1], c1's a_empty_array and
a_empty_obj_nested.o2), Druid's own SELECT DISTINCT shows JSON_VALUE is NULL on every row (A051,
A061), yet its filters count the 2 rows holding the empty array as not null. strata answers both
the same way, NULL on all four rows (an array is no single value): EMPTY_ARRAY_COUNTS holds
Druid's count and strata's for those cases.
"""

from __future__ import annotations


import pytest

from tests.unit.sql.qa_json_cols_data import HAVE_DATA, count_case, qa_json_cols_runner
from tests.unit.sql.quidem_cells import Error, assert_cells, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_json_cols_runner(tmp_path_factory.mktemp("qa-json-value"))


def _distinct(test_id: str, expr: str) -> tuple:
    return test_id, f"SELECT DISTINCT {expr} c FROM test_json_cols", rows("")


CASES = [count_case("A050", "json_value(c_empty_obj_nested, '$.o1') IS NOT NULL", 0)]
# (first id, JSON_VALUE, whether the DISTINCT case is repeated, rows IS NULL per Druid)
for _n, _expr, _twice, _nulls in [(51, "json_value(c_empty_obj_nested, '$.o2')", True, 2),
                                  (55, "json_value(c_empty_obj_nested, '$.o3')", False, 4),
                                  (58, "json_value(c_empty_array_nested, '$[0]')", False, 4),
                                  (61, "json_value(c_empty_array_nested, '$[1]')", True, 2),
                                  (65, "json_value(c_empty_array_nested, '$[2]')", False, 4)]:
    CASES.append(_distinct(f"A{_n:03d}", _expr))
    if _twice:
        _n += 1
        CASES.append(_distinct(f"A{_n:03d}", _expr))
    CASES += [count_case(f"A{_n + 1:03d}", f"{_expr} IS NULL", _nulls),
              count_case(f"A{_n + 2:03d}", f"{_expr} IS NOT NULL", 4 - _nulls)]
CASES += [count_case(f"A{68 + i:03d}", f"json_value({c}, '{p}') IS NULL", 4) for i, (c, p) in enumerate([
    ("c1", "$.does.not.exist"), ("c_empty_obj_nested", "$."), ("c_empty_array_nested", "$."), ("c1", "$.a_obj"),
    ("c1", "$.a_array[0]")])]
CASES += [(f"A{73 + i:03d}", f"SELECT count(*) c FROM test_json_cols WHERE json_value(c1, '$.a_array{p}') IS NULL",
           Error("QueryInterruptedException")) for i, p in enumerate(("[0,1]", "[0:2]", "[:2]", "[0:]"))]
CASES += [count_case(f"A{77 + i:03d}", w, n) for i, (w, n) in enumerate([
    ("json_value(c1, '$.a_array[-1].a_str') IS NULL", 4), ("json_value(c1, '$.a_array[-2].a_str') IS NULL", 4),
    ("json_value(c1, '$.a_array[-1234567890].a_str') IS NULL", 4),
    ("json_value(c1, '$.a_array[0].a_str.length()') IS NULL", 4), ("json_value(c1, '$.a_array[0].a_str') = 'A'", 2),
    ("json_value(c1, '$.a_array[1].a_str') = 'A'", 2), ("json_value(c1, '$.a_array[2].a_str') IS NULL", 4),
    ("json_value(c1, '$.a_array[1234567890].a_str') IS NULL", 4), ("json_value(c1, '$.a_empty_obj') IS NULL", 4),
    ("json_value(c1, '$.a_empty_array') IS NULL", 2), ("json_value(c1, '$.a_empty_obj_nested.o1') IS NULL", 4),
    ("json_value(c1, '$.a_empty_obj_nested.o2') IS NULL", 2), ("json_value(c1, '$.a_empty_obj_nested.o3') IS NULL", 4),
    ("json_value(c1, '$.a_empty_array_nested[0]') IS NULL", 4),
    ("json_value(c1, '$.a_empty_array_nested[1]') IS NULL", 2),
    ("json_value(c1, '$.a_empty_array_nested[2]') IS NULL", 4), ("json_value(c1, '$.a_obj.a_str') = 'A'", 2)])]
CASES += [(f"A{94 + i:03d}", f"SELECT {e} c FROM test_json_cols", w) for i, (e, w) in enumerate([
    ("json_value(s_str, '$')", rows("A", "A", "", "")), ("json_value(c1, '$.a_str')", rows("A", "A", "", "")),
    ("json_value(c1, '$.a_obj.a_str')", rows("A", "A", "", "")),
    ("json_value(c1, '$.a_array[0].a_str')", rows("A", "A", "", "")),
    ("json_value(s_str, '$' RETURNING bigint)", same("")), ("json_value(c1, '$.a_str' RETURNING bigint)", same(""))])]

# Druid's count where the path holds an empty array, and strata's (see the module's docstring)
EMPTY_ARRAY_COUNTS = {"A053": ("2", "4"), "A054": ("2", "0"), "A063": ("2", "4"), "A064": ("2", "0"),
                      "A086": ("2", "4"), "A088": ("2", "4"), "A091": ("2", "4")}


@pytest.mark.parametrize("test_id, sql, want", CASES, ids=[c[0] for c in CASES])
def test_druid_qa_json_value_result(druid, test_id, sql, want):
    if test_id in EMPTY_ARRAY_COUNTS:
        druid_count, strata_count = EMPTY_ARRAY_COUNTS[test_id]
        assert want == rows(druid_count)
        want = rows(strata_count)
    assert_cells(druid, sql, want)


def test_the_cases_are_druids_numbering():
    ids = [c[0] for c in CASES]
    assert ids == [f"A{i:03d}" for i in range(50, 100)]
