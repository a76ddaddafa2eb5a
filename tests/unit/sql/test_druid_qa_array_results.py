"""Druid's published results for its qaArray test set, reproduced exactly.

The table is test_array (qa_array_data.py: Druid's qaArray data as its ingestion specs ingest it).

The cases are Druid's quidem files (apache/druid
``quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/qaArray/``):
``ingest_schema_discovery_range_rollup_false.01.std.iq`` and ``ops_funcs_array_funcs.01.all.iq``
and ``.02.all.iq`` (ARRAY constructor, ARRAY_LENGTH, ARRAY_OFFSET, ARRAY_ORDINAL, ARRAY_CONTAINS),
``ops_funcs_json_funcs.01.all.iq`` (JSON_KEYS, JSON_OBJECT and JSON_PATHS over arrays),
each query with the cells Druid prints for it (its ``mysql`` output format: NULL is an empty
cell, an array is ``[a, b, null]``, a double as Java prints it, a BOOLEAN as true/false).

Deliberate differences, checked rather than skipped:
- A query Druid rejects must fail here too; the message is strata's own (it names what is wrong
  and how to fix it), not Calcite's wording, so only the failure is compared.
- Rows of a query without ORDER BY are compared as a multiset (both return these in time order).
- An element of a BOOLEAN ARRAY: Druid's SQL prints it as true/false (its native type is
  ARRAY<LONG> all the same); strata has no boolean element type, so a BOOLEAN ARRAY is a BIGINT
  ARRAY and its element reads 1/0, as the stored booleans are. Those cells compare Druid's
  true/false as 1/0 (BOOLEAN_ELEMENTS).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from common.errors import StrataError
from tests.unit.sql.qa_array_data import HAVE_DATA, KINDS, NESTED_DOC, REVERSED_DOC, qa_array_runner
from tests.unit.sql.quidem_cells import Error, cell, rows, same

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="shared test data not found")


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    return qa_array_runner(tmp_path_factory.mktemp("qa-array"))


# ---- ingest_schema_discovery_range_rollup_false.01.std.iq ------------------------------------
INGEST = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_array", rows("4"))]
for _i, (_col, _type, _count) in enumerate([
        ("a_bool", "ARRAY", 4), ("a_int", "ARRAY", 4), ("a_float", "ARRAY", 4), ("a_str", "ARRAY", 4),
        ("a_null", "ARRAY", 4), ("a_empty", "ARRAY", 4), ("a_mixed", "ARRAY", 4), ("a_nested", "COMPLEX<json>", 4),
        ("cnt", "BIGINT", 4), ("t_str_scalar1", "VARCHAR", 2), ("t_null_scalar1", "VARCHAR", 0),
        ("t_null_scalar2", "VARCHAR", 0), ("t_empty_scalar1", "VARCHAR", 0), ("t_empty_scalar2", "VARCHAR", 0)]):
    INGEST.append((f"A{_i:02d}", "SELECT DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME='test_array' "
                                 f"AND COLUMN_NAME='{_col}'", rows(_type)))
    INGEST.append((f"B{_i:02d}", f"SELECT count({_col}) c FROM test_array", rows(str(_count))))
INGEST += [
    ("D01", "SELECT count(*) c FROM test_array", rows("4")),
    ("D02", "SELECT sum(cnt) s FROM test_array", rows("4")),
    ("E00", "SELECT count(*) c FROM (SELECT __time FROM test_array GROUP BY __time)", rows("2")),
]
_BOOL0, _BOOL7 = ("json_value(a_nested, '$[0]' RETURNING boolean array)",
                  "json_value(a_nested, '$[7][0]' RETURNING boolean array)")
_INT1, _INT7 = ("json_value(a_nested, '$[1]' RETURNING bigint array)",
                "json_value(a_nested, '$[7][1]' RETURNING bigint array)")
for _n, (_left, _right, _count) in enumerate([
        ("a_bool", _BOOL0, 4), ("a_bool", _BOOL7, 4), (_BOOL0, _BOOL7, 4),
        ("a_bool", "ARRAY[1, 0, NULL]", 2), (_BOOL0, "ARRAY[1, 0, NULL]", 2), (_BOOL7, "ARRAY[1, 0, NULL]", 2),
        ("a_bool", "ARRAY[NULL, 0, 1]", 2), (_BOOL0, "ARRAY[NULL, 0, 1]", 2), (_BOOL7, "ARRAY[NULL, 0, 1]", 2),
        ("a_int", _INT1, 4), ("a_int", _INT7, 4), (_INT1, _INT7, 4),
        ("a_int", "ARRAY[1, 2, NULL]", 2), (_INT1, "ARRAY[1, 2, NULL]", 2), (_INT7, "ARRAY[1, 2, NULL]", 2),
        ("a_int", "ARRAY[NULL, 2, 1]", 2), (_INT1, "ARRAY[NULL, 2, 1]", 2)]):
    INGEST.append((f"E00.{_n}", f"SELECT count(*) c FROM test_array WHERE {_left} = {_right}", rows(str(_count))))

# ---- ops_funcs_array_funcs.01.all.iq -----------------------------------------------------------
_NESTED = KINDS  # Druid's A1_B2 / A1_B3 variants: the column, then the same array read from a_nested
ARRAY_FUNCS = [
    ("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_array", rows("4")),
    ("A1_B1_C2_D1", "SELECT ARRAY[1, 2, NULL] AS col FROM test_array", same("[1, 2, null]")),
    ("A1_B1_C3_D1", "SELECT ARRAY[0.1, 0.2, NULL] AS col FROM test_array", same("[0.1, 0.2, null]")),
    ("A1_B1_C4_D1", "SELECT ARRAY['S1', 'S2', NULL] AS col FROM test_array", same("[S1, S2, null]")),
    ("A1_B1_C6_D1", "SELECT ARRAY[] AS col FROM test_array", Error("Require at least 1 argument")),
    ("A1_B1_C7_D1", "SELECT ARRAY[TRUE, 1, 0.1, 'S1', NULL,[]] AS col FROM test_array", Error("unexpected token")),
    ("A1_B1_C8_D1", "SELECT ARRAY[TRUE, 1, 0.1, 'S1', NULL] AS col FROM test_array",
     Error("Parameters must be of the same type")),
    ("A1_B1_C9_D1", "SELECT ARRAY['true', '1', '0.1', 'S1', 'null'] AS col FROM test_array",
     same("[true, 1, 0.1, S1, null]")),
    ("A1_B1_C10_D1", "SELECT ARRAY[[1,2,3], [1,2,3]] AS col FROM test_array", Error("unexpected token")),
    ("A1_B1_C11_D1", "SELECT ARRAY[ARRAY[1, 2, 3],ARRAY[1, 2, 3]] AS col FROM test_array",
     Error("QueryInterruptedException")),
]
_lengths = {"bool": "3", "int": "3", "float": "3", "str": "3", "null": "3", "empty": "0", "mixed": "5"}
# The first element (ARRAY_OFFSET 0, ARRAY_ORDINAL 1) of the rows holding one: the column, then
# the same array read from a_nested (Druid's BOOLEAN ARRAY prints it true).
_firsts = {"bool": ["1", "true", "true"], "int": ["1"] * 3, "float": ["0.1"] * 3, "str": ["S1"] * 3,
           "null": [""] * 3, "empty": [""] * 3, "mixed": ["true"] * 3}
_contains_one = {"bool": "true", "int": "true", "float": "false", "str": "false", "null": "false",
                 "empty": "false"}
_c = 1
for _kind, (_col, _p1, _p2, _t) in _NESTED.items():
    for _j, _arg in enumerate([_col, f"json_value(a_nested, '{_p1}' RETURNING {_t} array)",
                               f"json_value(a_nested, '{_p2}' RETURNING {_t} array)"]):
        first = _firsts[_kind][_j]
        ARRAY_FUNCS += [
            (f"A1_B2_C{_c + _j}_D1", f"SELECT array_length({_arg}) AS col FROM test_array", same(_lengths[_kind])),
            (f"A1_B3_C{_c + _j}_D1", f"SELECT array_offset({_arg}, 0) AS col FROM test_array",
             rows(first, first, "", "")),
            (f"A1_B4_C{_c + _j}_D1", f"SELECT array_ordinal({_arg}, 1) AS col FROM test_array",
             rows(first, first, "", "")),
        ]
        if _kind in _contains_one:
            ARRAY_FUNCS.append((f"A1_B5_C{_c + _j}_D1", f"SELECT array_contains({_arg}, 1) AS col FROM test_array",
                                same(_contains_one[_kind])))
    _c += 3
for _b, _fn in (("B2", "array_length"), ("B3", "array_offset"), ("B4", "array_ordinal")):
    _second = {"B2": "", "B3": ", 0", "B4": ", 1"}[_b]
    _name = _fn.upper()
    ARRAY_FUNCS += [
        (f"A1_{_b}_C22_D1", f"SELECT {_fn}(a_nested{_second}) AS col FROM test_array",
         Error(f"Cannot apply '{_name}' to arguments of type '{_name}(")),
        (f"A1_{_b}_C23_D1", f"SELECT {_fn}(json_value(a_nested, '$[7]' RETURNING varchar array){_second}) AS col "
                            "FROM test_array", same("")),
        (f"A1_{_b}_C24_D1", f"SELECT {_fn}(json_value(a_nested, '$[7][7]' RETURNING varchar array){_second}) AS col "
                            "FROM test_array", same("")),
    ]

# ---- ops_funcs_json_funcs.01.all.iq -----------------------------------------------------------
_KEYS = {"bool": "[0, 1, 2]", "int": "[0, 1, 2]", "float": "[0, 1, 2]", "str": "[0, 1, 2]", "null": "[0, 1, 2]",
         "empty": "[]", "mixed": "[0, 1, 2, 3, 4]"}
_OBJECTS = {"bool": ('{"k":[1,0,null]}', '{"k":[null,0,1]}'), "int": ('{"k":[1,2,null]}', '{"k":[null,2,1]}'),
            "float": ('{"k":[0.1,0.2,null]}', '{"k":[null,0.2,0.1]}'),
            "str": ('{"k":["S1","S2",null]}', '{"k":[null,"S2","S1"]}'),
            "null": ('{"k":[null,null,null]}',) * 2, "empty": ('{"k":[]}',) * 2,
            "mixed": ('{"k":["true","1","0.1","S1",null]}', '{"k":[null,"S1","0.1","1","true"]}')}
JSON_FUNCS = [("SEL_DATASOURCE", "SELECT count(*) cnt FROM test_array", rows("4"))]
_c = 1
for _kind, (_col, _p1, _p2, _t) in _NESTED.items():
    for _j, _arg in enumerate([_col, f"json_value(a_nested, '{_p1}' RETURNING {_t} array)",
                               f"json_value(a_nested, '{_p2}' RETURNING {_t} array)"]):
        first, second = _OBJECTS[_kind]
        JSON_FUNCS += [
            (f"A1_B1_C{_c + _j}_D1", f"SELECT json_keys({_arg}, '$.') AS col FROM test_array", same(_KEYS[_kind])),
            (f"A1_B2_C{_c + _j}_D1", f"SELECT json_object(KEY 'k' value {_arg}) AS col FROM test_array",
             rows(first, first, second, second)),
        ]
    _c += 3
for _p, _cid in (("$[7]", 23), ("$[7][7]", 24)):
    JSON_FUNCS += [
        (f"A1_B1_C{_cid}_D1", f"SELECT json_keys(json_value(a_nested, '{_p}' RETURNING varchar array), '$.') AS col "
                              "FROM test_array", same("")),
        (f"A1_B2_C{_cid}_D1", f"SELECT json_object(KEY 'k' value json_value(a_nested, '{_p}' RETURNING varchar array))"
                              " AS col FROM test_array", same('{"k":null}')),
    ]
JSON_FUNCS += [
    ("A1_B1_C22_D1", "SELECT json_keys(a_nested, '$.') AS col FROM test_array", same("[0, 1, 2, 3, 4, 5, 6, 7]")),
    ("A1_B2_C22_D1", "SELECT json_object(KEY 'k' value a_nested) AS col FROM test_array",
     rows(*[f'{{"k":{d}}}' for d in (REVERSED_DOC, REVERSED_DOC, NESTED_DOC, NESTED_DOC)])),
    ("A1_B3_C1_D1", "SELECT json_paths(a_bool) AS col FROM test_array", same("[$]")),
]

# Cases whose cells are elements of a BOOLEAN ARRAY (see the module's docstring).
BOOLEAN_ELEMENTS = {"A1_B3_C2_D1", "A1_B3_C3_D1", "A1_B4_C2_D1", "A1_B4_C3_D1"}

CASES = [("ingest_schema_discovery_range_rollup_false.01", *c) for c in INGEST] + \
        [("ops_funcs_array_funcs.01-02", *c) for c in ARRAY_FUNCS] + \
        [("ops_funcs_json_funcs.01", *c) for c in JSON_FUNCS]


@pytest.mark.parametrize("iq, test_id, sql, want", CASES, ids=[f"{c[0]}:{c[1]}:{i}" for i, c in enumerate(CASES)])
def test_druid_qa_array_result(druid, iq, test_id, sql, want):
    if isinstance(want, Error):
        with pytest.raises(StrataError):
            druid(sql)
        return
    table = druid(sql)
    got = [[cell(v) for v in r.values()] for r in table.to_pylist()]
    if test_id in BOOLEAN_ELEMENTS and iq.startswith("ops_funcs_array_funcs"):
        want = [[{"true": "1", "false": "0"}.get(c, c) for c in r] for r in want]
    if iq.startswith("ops_funcs_json_funcs") and "json_object" in sql:  # JSON compared as values
        got, want = ([[json.loads(c) for c in r] for r in t] for t in (got, want))
        got, want = ([json.dumps(r, sort_keys=True) for r in t] for t in (got, want))
    if "ORDER BY" in sql.upper():
        assert got == want
    else:
        assert Counter(map(tuple, got)) == Counter(map(tuple, want))


def test_mv_filters_over_arrays_answer_where_druid_rejects_them(druid):
    """ops_funcs_mv_funcs.01.all.iq: Druid rejects MV_FILTER_ONLY / MV_FILTER_NONE on every ARRAY
    column ("Cannot apply 'MV_FILTER_ONLY' to arguments of type ..."), its multi-value functions
    taking only multi-value VARCHAR. strata has no multi-value column type, so arrays are where such
    values live, and it answers these on arrays (a deliberate difference): the values in (or not
    in) the set, in array order, a null array staying null."""
    got = druid("SELECT MV_FILTER_ONLY(a_int, ARRAY[1, 2]) AS o, MV_FILTER_NONE(a_int, ARRAY[1, 2]) AS n, "
                "MV_FILTER_ONLY(a_str, ARRAY['S1']) AS s FROM test_array").to_pylist()
    # a_int is [1, 2, null] in the 2022-01 rows and [null, 2, 1] in the 2022-02 rows
    assert Counter(json.dumps([r["o"], r["n"], r["s"]]) for r in got) == Counter(
        [json.dumps([[1, 2], [None], ["S1"]])] * 2 + [json.dumps([[2, 1], [None], ["S1"]])] * 2)
