"""Druid's published results for JSON functions over its qaArray arrays, part two: JSON_PATHS,
JSON_QUERY and JSON_VALUE of an element, PARSE_JSON / TRY_PARSE_JSON (which take text only) and
TO_JSON_STRING over every array kind, each query with the cells Druid prints (see
qa_array_data.py; part one, ``.01``, is in test_druid_qa_array_results.py).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaArray/``)
``ops_funcs_json_funcs.02.all.iq`` .. ``.04.all.iq``. Rows compare as a multiset; the paths of one
JSON_PATHS cell as a set (Druid lists them in its hash set's order); JSON text as JSON values. A
query Druid rejects must fail here too, with strata's own message.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.sql.qa_array_data import (HAVE_DATA, KINDS, LITERALS, NESTED_DOC, NOT_ARRAYS, REVERSED_DOC,
                                          qa_array_runner, variants)
from tests.unit.sql.quidem_cells import Error, assert_cells, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_array_runner(tmp_path_factory.mktemp("qa-array-json"))


def _first(cell_text: str) -> list:
    """The cell of the 2022-01 rows (whose arrays hold the value first); NULL in the 2022-02 rows."""
    return rows(cell_text, cell_text, "", "")


NULLS = same("")
CASES: list = []


def _function(b: int, sql: str, per_kind: dict, first_c: int = 1, nested=None, not_arrays=NULLS) -> None:
    """Druid's cases A1_B<b>_C<first_c>..C24 of ``sql`` ({} the array argument), as in .01."""
    for kind, want in per_kind.items():
        CASES.extend((f"A1_B{b}_C{c}_D1", sql.format(arg), want) for c, arg in variants(kind) if c >= first_c)
    if nested is not None:
        CASES.append((f"A1_B{b}_C22_D1", sql.format("a_nested"), nested))
    CASES.extend((f"A1_B{b}_C{c}_D1", sql.format(arg), not_arrays) for c, arg in NOT_ARRAYS)


# ---- ops_funcs_json_funcs.02.all.iq: JSON_PATHS (C1 is in .01), JSON_QUERY of the first element ----
_NESTED_PATHS = ("[$[2], $[7][6], $[7][7][3], $[3], $[7][7][2], $[4], $[7][7][5], $[5], $[7][7][4], $[6], $[7][7][6], "
                 "$[7][0], $[7][1], $[7][2], $[7][3], $[0], $[7][4], $[7][7][1], $[1], $[7][5], $[7][7][0]]")
_function(3, "SELECT json_paths({}) AS col FROM test_array", {k: same("[$]") for k in KINDS}, first_c=2,
          nested=same(_NESTED_PATHS), not_arrays=same("[$]"))
_FIRSTS = {"bool": _first("1"), "int": _first("1"), "float": _first("0.1"), "str": _first('"S1"'), "null": NULLS,
           "empty": NULLS, "mixed": _first('"true"')}
_function(4, "SELECT json_query({}, '$[0]') AS col FROM test_array", _FIRSTS,
          nested=rows("[true,false,null]", "[true,false,null]", "[null,false,true]", "[null,false,true]"))
# ---- .02/.03: JSON_VALUE of the first element (the file leaves out C22) ------------------------
_function(5, "SELECT json_value({}, '$[0]') AS col FROM test_array",
          {k: [[c.strip('"') for c in r] for r in w] for k, w in _FIRSTS.items()})

# ---- .03/.04: PARSE_JSON and TRY_PARSE_JSON take text, never an array -----------------------------
for _b, _fn in ((6, "parse_json"), (7, "try_parse_json")):
    _rejected = Error(f"Cannot apply '{_fn.upper()}'")
    for _kind in KINDS:
        (_c1, _col), (_c2, _jv2), (_c3, _jv3) = variants(_kind)
        CASES += [(f"A1_B{_b}_C{_c1}_D1", f"SELECT {_fn}({_col}) AS col FROM test_array WHERE {_col}<>{LITERALS[_kind]}",
                   _rejected),
                  (f"A1_B{_b}_C{_c2}_D1", f"SELECT {_fn}({_jv2}) AS col FROM test_array GROUP BY {_jv2}", _rejected),
                  (f"A1_B{_b}_C{_c3}_D1", f"SELECT {_fn}({_jv3}) AS col FROM test_array GROUP BY {_jv3} "
                                          f"HAVING {_fn}({_jv3}) IS NOT NULL", _rejected)]
    CASES.append((f"A1_B{_b}_C22_D1", f"SELECT {_fn}(a_nested) AS col FROM test_array WHERE a_nested<>ARRAY['FILLER']",
                  Error("Cannot apply '<>'")))
    (_, _p23), (_, _p24) = NOT_ARRAYS
    CASES += [(f"A1_B{_b}_C23_D1", f"SELECT {_fn}({_p23}) AS col FROM test_array GROUP BY {_p23}", _rejected),
              (f"A1_B{_b}_C24_D1", f"SELECT {_fn}({_p24}) AS col FROM test_array GROUP BY {_p24} "
                                   f"HAVING {_fn}({_p24}) IS NOT NULL", _rejected)]

# ---- .04: TO_JSON_STRING ---------------------------------------------------------------------
_function(8, "SELECT to_json_string({}) AS col FROM test_array", {
    "bool": rows("[1,0,null]", "[1,0,null]", "[null,0,1]", "[null,0,1]"),
    "int": rows("[1,2,null]", "[1,2,null]", "[null,2,1]", "[null,2,1]"),
    "float": rows("[0.1,0.2,null]", "[0.1,0.2,null]", "[null,0.2,0.1]", "[null,0.2,0.1]"),
    "str": rows('["S1","S2",null]', '["S1","S2",null]', '[null,"S2","S1"]', '[null,"S2","S1"]'),
    "null": same("[null,null,null]"), "empty": same("[]"),
    "mixed": rows('["true","1","0.1","S1",null]', '["true","1","0.1","S1",null]', '[null,"S1","0.1","1","true"]',
                  '[null,"S1","0.1","1","true"]')},
    nested=rows(NESTED_DOC, NESTED_DOC, REVERSED_DOC, REVERSED_DOC))


def _value(text: str, paths: bool):
    if paths:  # a JSON_PATHS cell: its paths as a set
        return tuple(sorted(text[1:-1].split(", "))) if text else text
    try:
        return json.dumps(json.loads(text))
    except ValueError:
        return text


@pytest.mark.parametrize("test_id, sql, want", CASES, ids=[c[0] for c in CASES])
def test_druid_qa_array_json_function_result(druid, test_id, sql, want):
    paths = "json_paths" in sql
    assert_cells(druid, sql, want, lambda c: _value(c, paths))
