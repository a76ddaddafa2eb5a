"""Druid's published results for comparison and logical operators on COMPLEX<json> columns of its
qaJsonCols table, each query with the cells Druid prints (see quidem_cells.py).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaJsonCols/``)
``funcs_and_sql_datatype_comp_ops.all.iq``: equality and IS [NOT] NULL of a JSON column answer;
ordering, BETWEEN, LIKE, IS TRUE/FALSE, AND/OR/NOT of JSON are errors (strata's own messages; only
the failure is compared); and ``funcs_and_sql_datatype_sql.all.iq`` A001..A014 (COUNT, DISTINCT,
GROUP BY and joins on a JSON column; its later cases print whole rows of Druid's table, whose
ingestion adds transform columns this table has not, and are not transcribed).

Deliberate differences, checked rather than skipped (DIFFERENCES holds Druid's answer and strata's):
- ``c1 [NOT] IN (JSON_OBJECT(..))`` in a SELECT: Druid answers NULL on every row, yet its own
  filters count 0 rows IN and 4 rows NOT IN; strata compares the JSON values in both places, so
  the SELECT says false (IN) and true (NOT IN), agreeing with the filters.
- ``WHERE c1 IN (SELECT c1 ..)`` and joins ON t1.c1 = t2.c1: Druid cannot join on COMPLEX<json>
  ("Cannot join"); strata joins on the JSON values: every row's document is among them, each
  document on two rows (so a join gives 8 rows).
- ``WHERE c1 = c2`` (datatype_sql A011): c1 and c2 hold the same document in every row; Druid
  keeps no row (though its ``c1 = c1`` keeps all), strata compares the values and keeps all 4. (Elsewhere, and with NOT, strata does not
  plan such subqueries and fails as Druid does.)
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.unit.sql.qa_json_cols_data import HAVE_DATA, count_case, qa_json_cols_runner
from tests.unit.sql.quidem_cells import Error, assert_cells, cell, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_json_cols_runner(tmp_path_factory.mktemp("qa-json-comparisons"))


def _pair(first: int, condition: str, cells, count) -> list:
    """Druid's case pair: the condition selected per row, then the rows it keeps."""
    select = (f"A{first:03d}", f"SELECT ({condition}) c FROM test_json_cols", cells)
    if isinstance(count, Error):
        return [select, (f"A{first + 1:03d}", f"SELECT count(*) c FROM test_json_cols WHERE {condition}", count)]
    return [select, count_case(f"A{first + 1:03d}", condition, count)]


_OBJ = "json_object(KEY 'a1' VALUE 'A', KEY 'a2' VALUE 1)"
CASES = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_json_cols", rows("4"))]
CASES += _pair(1, "c1 = c1", same("true"), 4) + _pair(3, "c1 <> c1", same("false"), 0)
for _n, _condition in [(5, "c1 > c2"), (7, "c1 >= c2"), (9, "c1 < c2"), (11, "c1 <= c2"), (13, "c1 BETWEEN c1 AND c2"),
                       (15, "c1 NOT BETWEEN c1 AND c2"), (17, "c1 like c2"), (19, "c1 not like c2")]:
    CASES += _pair(_n, _condition, Error("Cannot apply"), Error("Cannot apply"))
CASES += _pair(21, "c1 IS NULL", same("false"), 0) + _pair(23, "c1 IS NOT NULL", same("true"), 4)
for _n, _condition in [(25, "c1 IS TRUE"), (27, "c1 IS NOT TRUE"), (29, "c1 IS FALSE"), (31, "c1 IS NOT FALSE")]:
    CASES += _pair(_n, _condition, Error("Cannot apply"), Error("Cannot apply"))
CASES += _pair(33, f"c1 IN ({_OBJ})", same(""), 0) + _pair(35, f"c1 NOT IN ({_OBJ})", same(""), 4)
CASES += _pair(37, "c1 IN (SELECT c1 FROM test_json_cols)", Error("Cannot join"), Error("Cannot join"))
CASES += _pair(39, "c1 NOT IN (SELECT c1 FROM test_json_cols)", Error("Cannot join"), Error("Cannot join"))
for _n, _condition in [(41, "c1 AND c2"), (43, "c1 OR c2"), (45, "NOT c1")]:
    CASES += _pair(_n, _condition, Error("Cannot apply"), Error("Cannot apply"))

# ---- funcs_and_sql_datatype_sql.all.iq, A001..A014 ----------------------------------------------
SQL_CASES = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_json_cols", rows("4")),
             count_case("A001", "c1 IS NULL", 0), count_case("A002", "c1 IS NOT NULL", 4)]
SQL_CASES += [(f"A{3 + i:03d}", f"SELECT count(*) c FROM (SELECT {s} FROM test_json_cols)", rows("4"))
              for i, s in enumerate(("c1", "ALL c1", "*", "ALL *"))]
SQL_CASES += [("A007", "SELECT count(c1) c FROM test_json_cols", rows("4")),
              ("A008", "SELECT count(*) c FROM (SELECT DISTINCT c1 FROM test_json_cols)", rows("2")),
              ("A009", "SELECT count(c1) c FROM test_json_cols GROUP BY c1", rows("2", "2")),
              ("A010", "SELECT count(c1) c FROM test_json_cols GROUP BY c1 HAVING count(c1) >= 2", rows("2", "2")),
              ("A011", "SELECT * FROM test_json_cols WHERE c1 = c2", []),
              ("A012", "SELECT * FROM test_json_cols t1 INNER JOIN test_json_cols t2 ON t1.c1=t2.c1", Error("Cannot join")),
              ("A013", "SELECT * FROM test_json_cols t1 LEFT JOIN test_json_cols t2 ON t1.c1=t2.c1", Error("Cannot join")),
              ("A014", "SELECT * FROM test_json_cols t1, test_json_cols t2 WHERE t1.c1=t2.c1", Error("Cannot join"))]
JOINS = ("A012", "A013", "A014")  # strata joins (see the module's docstring): 8 rows

DIFFERENCES = {"A033": (same(""), same("false")), "A035": (same(""), same("true")),
               "A038": (Error("Cannot join"), rows("4"))}


@pytest.mark.parametrize("test_id, sql, want", CASES, ids=[c[0] for c in CASES])
def test_druid_qa_json_comparison_result(druid, test_id, sql, want):
    if test_id in DIFFERENCES:
        druid_want, strata_want = DIFFERENCES[test_id]
        assert type(druid_want) is type(want) and (isinstance(want, Error) or druid_want == want)
        want = strata_want
    assert_cells(druid, sql, want)


@pytest.mark.parametrize("test_id, sql, want", SQL_CASES, ids=[c[0] for c in SQL_CASES])
def test_druid_qa_json_datatype_sql_result(druid, test_id, sql, want):
    if test_id in JOINS:
        assert isinstance(want, Error)
        table = druid(sql)
        c1 = [i for i, n in enumerate(table.column_names) if n.startswith("c1")]
        assert table.num_rows == 8 and table.column(c1[0]).to_pylist() == table.column(c1[-1]).to_pylist()
        return
    if test_id == "A011":  # (see the module's docstring) c1 and c2 hold the same documents in every row
        assert want == []
        table = druid(sql)
        assert table.num_rows == 4 and table.column("c1").to_pylist() == table.column("c2").to_pylist()
        return
    got = [tuple(cell(v) for v in r.values()) for r in druid(sql).to_pylist()]
    assert Counter(got) == Counter(map(tuple, want))


def test_the_cases_are_druids_numbering():
    assert [c[0] for c in CASES] == ["SEL_DATASOURCE"] + [f"A{i:03d}" for i in range(1, 47)]
