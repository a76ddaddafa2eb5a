"""Druid's published results for its qaArray array functions, part two: ARRAY_CONTAINS of a mixed
array, ARRAY_OVERLAP, ARRAY_OFFSET_OF, ARRAY_ORDINAL_OF, ARRAY_PREPEND, ARRAY_APPEND,
ARRAY_CONCAT, ARRAY_SLICE, ARRAY_TO_STRING, STRING_TO_ARRAY and ARRAY_TO_MV over every array
kind, each query with the cells Druid prints (see quidem_cells.py, qa_array_data.py).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaArray/``)
``ops_funcs_array_funcs.03.all.iq`` .. ``.06.all.iq`` and ``ops_funcs_array_funcs.07.std.iq``.
Druid numbers each case A1_B<function>_C<argument>: C1..C21 are the seven array kinds, each as
its column and as the same array read from a_nested at two depths (qa_array_data.variants); C22 is
the COMPLEX<json> column itself (an error), C23/C24 paths holding arrays of arrays (NULL).

Deliberate differences, checked rather than skipped:
- Druid rejects a query; strata must fail too, with its own message (only the failure compared).
- ARRAY_TO_MV: Druid's answer is a multi-value VARCHAR, which its quidem output prints as a JSON
  array of strings; strata's multi-value strings are arrays, so its cell is printed the same way
  (qa_array_data.mv_cell) before the comparison.
- ARRAY_OFFSET_OF / ARRAY_ORDINAL_OF of the mixed (VARCHAR) array with the number 1: Druid answers
  NULL, although its own ARRAY_CONTAINS and ARRAY_OVERLAP of the same array with 1 answer true (it
  compares the element '1' with 1 there). strata answers all three consistently: the offset (ordinal)
  of the element '1' (MIXED_POSITIONS below).
"""

from __future__ import annotations

import pytest

from tests.unit.sql.qa_array_data import HAVE_DATA, KINDS, NOT_ARRAYS, check, qa_array_runner, variants
from tests.unit.sql.quidem_cells import Error, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_array_runner(tmp_path_factory.mktemp("qa-array-funcs"))


def _two(first: str, second: str) -> list[list[str]]:
    """The 2022-01 rows' cell twice, then the 2022-02 rows' (which hold the reversed arrays)."""
    return rows(first, first, second, second)


NULLS = same("")
CASES: list = []


def _function(b: int, sql: str, per_kind: dict, skip: tuple = (), nested=None) -> None:
    """Druid's cases A1_B<b>_C1..C24 of one function: ``sql`` with {} for the array argument,
    ``per_kind`` the cells of each kind (every variant of a kind answers the same), ``skip`` the
    C numbers the file leaves out, ``nested`` the answer on a_nested itself (C22)."""
    for kind, want in per_kind.items():
        for c, arg in variants(kind):
            if c not in skip:
                CASES.append((f"A1_B{b}_C{c}_D1", sql.format(arg), want))
    CASES.append((f"A1_B{b}_C22_D1", sql.format("a_nested"), nested or Error("Cannot apply")))
    CASES.extend((f"A1_B{b}_C{c}_D1", sql.format(arg), NULLS) for c, arg in NOT_ARRAYS)


# ---- ops_funcs_array_funcs.03.all.iq -------------------------------------------------------
CASES += [(f"A1_B5_C{c}_D1", f"SELECT array_contains({arg}, 1) AS col FROM test_array", same("true"))
          for c, arg in variants("mixed")]
CASES.append(("A1_B5_C22_D1", "SELECT array_contains(a_nested, 1) AS col FROM test_array", Error("Cannot apply")))
CASES += [(f"A1_B5_C{c}_D1", f"SELECT array_contains({arg}, 1) AS col FROM test_array", NULLS) for c, arg in NOT_ARRAYS]
_function(6, "SELECT array_overlap({}, ARRAY[1]) AS col FROM test_array",
          {k: same("true" if k in ("bool", "int", "mixed") else "false") for k in KINDS})
# ARRAY_OFFSET_OF / ARRAY_ORDINAL_OF (.03, .04): 1 is first in the 2022-01 rows and last in the 2022-02 rows
MIXED_POSITIONS = {7: _two("1", "3"), 8: _two("2", "4")}
for _b, _fn, _first, _last in ((7, "array_offset_of", "0", "2"), (8, "array_ordinal_of", "1", "3")):
    _function(_b, f"SELECT {_fn}({{}}, 1) AS col FROM test_array",
              {k: _two(_first, _last) if k in ("bool", "int") else MIXED_POSITIONS[_b] if k == "mixed" else NULLS
               for k in KINDS})

# ---- ops_funcs_array_funcs.04/.05.all.iq: prepend, append, concat (the file leaves out C2, C3) --
_NO_BOOL_JSON = (2, 3)
_function(9, "SELECT array_prepend(9, {}) AS col FROM test_array", {
    "bool": _two("[9, 1, 0, null]", "[9, null, 0, 1]"), "int": _two("[9, 1, 2, null]", "[9, null, 2, 1]"),
    "float": _two("[9.0, 0.1, 0.2, null]", "[9.0, null, 0.2, 0.1]"),
    "str": _two("[9, S1, S2, null]", "[9, null, S2, S1]"), "null": same("[9, null, null, null]"),
    "empty": same("[9]"), "mixed": _two("[9, true, 1, 0.1, S1, null]", "[9, null, S1, 0.1, 1, true]")},
    skip=_NO_BOOL_JSON)
_function(10, "SELECT array_append({}, 9) AS col FROM test_array", {
    "bool": _two("[1, 0, null, 9]", "[null, 0, 1, 9]"), "int": _two("[1, 2, null, 9]", "[null, 2, 1, 9]"),
    "float": _two("[0.1, 0.2, null, 9.0]", "[null, 0.2, 0.1, 9.0]"),
    "str": _two("[S1, S2, null, 9]", "[null, S2, S1, 9]"), "null": same("[null, null, null, 9]"),
    "empty": same("[9]"), "mixed": _two("[true, 1, 0.1, S1, null, 9]", "[null, S1, 0.1, 1, true, 9]")},
    skip=_NO_BOOL_JSON, nested=Error("QueryInterruptedException"))
_function(11, "SELECT array_concat({0}, {0}) AS col FROM test_array", {
    "bool": _two("[1, 0, null, 1, 0, null]", "[null, 0, 1, null, 0, 1]"),
    "int": _two("[1, 2, null, 1, 2, null]", "[null, 2, 1, null, 2, 1]"),
    "float": _two("[0.1, 0.2, null, 0.1, 0.2, null]", "[null, 0.2, 0.1, null, 0.2, 0.1]"),
    "str": _two("[S1, S2, null, S1, S2, null]", "[null, S2, S1, null, S2, S1]"),
    "null": same("[null, null, null, null, null, null]"), "empty": same("[]"),
    "mixed": _two("[true, 1, 0.1, S1, null, true, 1, 0.1, S1, null]",
                  "[null, S1, 0.1, 1, true, null, S1, 0.1, 1, true]")}, skip=_NO_BOOL_JSON)

# ---- ops_funcs_array_funcs.05/.06.all.iq: slice, to_string ---------------------------------
_function(12, "SELECT array_slice({}, 0, 2) AS col FROM test_array", {
    "bool": _two("[1, 0]", "[null, 0]"), "int": _two("[1, 2]", "[null, 2]"), "float": _two("[0.1, 0.2]", "[null, 0.2]"),
    "str": _two("[S1, S2]", "[null, S2]"), "null": same("[null, null]"),
    "empty": same("[null, null]"),  # Druid pads a slice past the end with nulls
    "mixed": _two("[true, 1]", "[null, S1]")}, skip=_NO_BOOL_JSON)
_function(13, "SELECT array_to_string({}, '|') AS col FROM test_array", {
    "bool": _two("1|0|null", "null|0|1"), "int": _two("1|2|null", "null|2|1"),
    "float": _two("0.1|0.2|null", "null|0.2|0.1"), "str": _two("S1|S2|null", "null|S2|S1"),
    "null": same("null|null|null"), "empty": NULLS, "mixed": _two("true|1|0.1|S1|null", "null|S1|0.1|1|true")})

# ---- ops_funcs_array_funcs.06.all.iq / .07.std.iq: string_to_array, array_to_mv -------------
CASES.append(("A1_B14_C0_D1", r"SELECT string_to_array('true|1|0.1|S1|null', '\|') AS col FROM test_array",
              same("[true, 1, 0.1, S1, null]")))
CASES += [(f"A1_B14_C{c}_D1", rf"SELECT string_to_array({arg}, '\|') AS col FROM test_array",
           Error("Cannot apply 'STRING_TO_ARRAY'")) for k in KINDS for c, arg in variants(k) + NOT_ARRAYS]
CASES.append(("A1_B14_C22_D1", r"SELECT string_to_array(a_nested, '\|') AS col FROM test_array",
              Error("Cannot apply 'STRING_TO_ARRAY'")))
MV_CASES: list = []
for _kind, _want in {
        "bool": _two('["1","0",null]', '[null,"0","1"]'), "int": _two('["1","2",null]', '[null,"2","1"]'),
        "float": _two('["0.1","0.2",null]', '[null,"0.2","0.1"]'), "str": _two('["S1","S2",null]', '[null,"S2","S1"]'),
        "null": same("[null,null,null]"), "empty": same("[]"),
        "mixed": _two('["true","1","0.1","S1",null]', '[null,"S1","0.1","1","true"]')}.items():
    MV_CASES += [(f"A1_B15_C{c}_D1", f"SELECT array_to_mv({arg}) AS col FROM test_array", _want)
                 for c, arg in variants(_kind)]
MV_CASES.append(("A1_B15_C22_D1", "SELECT array_to_mv(a_nested) AS col FROM test_array", Error("Cannot apply")))
MV_CASES += [(f"A1_B15_C{c}_D1", f"SELECT array_to_mv({arg}) AS col FROM test_array", NULLS) for c, arg in NOT_ARRAYS]


@pytest.mark.parametrize("test_id, sql, want", CASES, ids=[c[0] for c in CASES])
def test_druid_qa_array_function_result(druid, test_id, sql, want):
    check(druid, sql, want)


@pytest.mark.parametrize("test_id, sql, want", MV_CASES, ids=[c[0] for c in MV_CASES])
def test_druid_qa_array_to_mv_result(druid, test_id, sql, want):
    check(druid, sql, want, mv=True)
