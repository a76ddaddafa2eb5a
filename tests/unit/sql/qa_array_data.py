"""Druid's qaArray test table (``test_array``) as strata segments, and the comparison of strata's
answers with the cells Druid's quidem files print, shared by the qaArray golden test modules.

The data is /work/shared/data/qaArray/funcs.json.gz (4 rows of arrays of every element type, the
2022-02 rows holding the reversed arrays), ingested as Druid's qaArray ingestion specs ingest it:
schema discovery (``auto`` columns), no rollup, a ``cnt`` count metric, and 14 transform columns
``t_<kind>_scalar1/2`` = ``json_value(a_<kind>, '$[0]')`` and ``json_value(a_nested, '$[i][0]')``
(computed here by strata's own JSON_VALUE, as its SQL ingestion would)."""

from __future__ import annotations

import json
import os
from collections import Counter

import pyarrow as pa
import pytest

from common.errors import StrataError
from common.query import execute
from common.query.engine import union_schema
from common.sql import execute_sql
from tests.unit.sql.druid_test_files import DATA, discovered_table, segment_of
from tests.unit.sql.fake_catalog import FakeCatalog
from tests.unit.sql.quidem_cells import Error, cell

NAME = "qaArray/funcs.json.gz"
HAVE_DATA = os.path.isfile(os.path.join(DATA, NAME))

# The transforms of Druid's qaArray ingestion specs, in their order.
TRANSFORMS = {
    "t_bool_scalar1": "json_value(a_bool, '$[0]')", "t_bool_scalar2": "json_value(a_nested, '$[0][0]')",
    "t_int_scalar1": "json_value(a_int, '$[0]')", "t_int_scalar2": "json_value(a_nested, '$[1][0]')",
    "t_float_scalar1": "json_value(a_float, '$[0]')", "t_float_scalar2": "json_value(a_nested, '$[2][0]')",
    "t_str_scalar1": "json_value(a_str, '$[0]')", "t_str_scalar2": "json_value(a_nested, '$[3][0]')",
    "t_null_scalar1": "json_value(a_null, '$[0]')", "t_null_scalar2": "json_value(a_nested, '$[4][0]')",
    "t_empty_scalar1": "json_value(a_empty, '$[0]')", "t_empty_scalar2": "json_value(a_nested, '$[5][0]')",
    "t_mixed_scalar1": "json_value(a_mixed, '$[0]')", "t_mixed_scalar2": "json_value(a_nested, '$[6][0]')",
}
IV = "2022-01-01/2022-03-01"

# Druid's array-kind variants, in the order its test ids number them (C1..C21): the column, then the
# same array read from a_nested at the top level, then from the copy nested one level down.
KINDS = {
    "bool": ("a_bool", "$[0]", "$[7][0]", "boolean"), "int": ("a_int", "$[1]", "$[7][1]", "bigint"),
    "float": ("a_float", "$[2]", "$[7][2]", "decimal"), "str": ("a_str", "$[3]", "$[7][3]", "varchar"),
    "null": ("a_null", "$[4]", "$[7][4]", "varchar"), "empty": ("a_empty", "$[5]", "$[7][5]", "varchar"),
    "mixed": ("a_mixed", "$[6]", "$[7][6]", "varchar"),
}


def variants(kind: str) -> list[tuple[int, str]]:
    """(Druid's C number, the array argument) of one kind's three variants."""
    col, p1, p2, t = KINDS[kind]
    first = 1 + 3 * list(KINDS).index(kind)
    return [(first, col), (first + 1, f"json_value(a_nested, '{p1}' RETURNING {t} array)"),
            (first + 2, f"json_value(a_nested, '{p2}' RETURNING {t} array)")]


# Each kind's 2022-01 value as Druid's files write it in ``WHERE a_<kind> <> ...`` (a_empty's is a
# placeholder, as theirs is).
LITERALS = {"bool": "ARRAY[1, 0, NULL]", "int": "ARRAY[1, 2, NULL]", "float": "ARRAY[0.1, 0.2, NULL]",
            "str": "ARRAY['S1', 'S2', NULL]", "null": "ARRAY[NULL, NULL, NULL]", "empty": "ARRAY['FILLER']",
            "mixed": "ARRAY['true', '1', '0.1', 'S1', NULL]"}

# a_nested of the 2022-01 rows, and of the 2022-02 rows (each array reversed), as JSON text
NESTED_DOC = ('[[true,false,null],[1,2,null],[0.1,0.2,null],["S1","S2",null],[null,null,null],[],'
              '[true,1,0.1,"S1",null],[[true,false,null],[1,2,null],[0.1,0.2,null],["S1","S2",null],'
              '[null,null,null],[],[true,1,0.1,"S1",null],[[true,false,null],[1,2,null],[0.1,0.2,null],'
              '["S1","S2",null],[null,null,null],[],[true,1,0.1,"S1",null]]]]')
REVERSED_DOC = ('[[null,false,true],[null,2,1],[null,0.2,0.1],[null,"S2","S1"],[null,null,null],[],'
                '[null,"S1",0.1,1,true],[[null,false,true],[null,2,1],[null,0.2,0.1],[null,"S2","S1"],'
                '[null,null,null],[],[null,"S1",0.1,1,true],[[null,false,true],[null,2,1],[null,0.2,0.1],'
                '[null,"S2","S1"],[null,null,null],[],[null,"S1",0.1,1,true]]]]')

# C23/C24: a path holding arrays of arrays, which no RETURNING array type can read (NULL on every row)
NOT_ARRAYS = [(23, "json_value(a_nested, '$[7]' RETURNING varchar array)"),
              (24, "json_value(a_nested, '$[7][7]' RETURNING varchar array)")]


def qa_array_runner(base):
    """A function running SQL over test_array (segments written under ``base``)."""
    raw, json_types = discovered_table(NAME)
    staged = [segment_of(raw, json_types, "test_array", IV, str(base / "raw.sseg"))]
    catalog = FakeCatalog({"test_array": union_schema(staged)})
    sql = "SELECT *, " + ", ".join(f"{e} AS {n}" for n, e in TRANSFORMS.items()) + " FROM test_array"
    table = execute_sql(sql, catalog, lambda q: execute(q, staged).table)
    table = table.set_column(0, "__time", pa.array([int(t.timestamp() * 1000) for t in
                                                    table.column("__time").to_pylist()], pa.int64()))
    segments = [segment_of(table, json_types, "test_array", IV, str(base / "test_array.sseg"))]
    catalog = FakeCatalog({"test_array": union_schema(segments)})
    return lambda text: execute_sql(text, catalog, lambda q: execute(q, segments).table)


def mv_cell(v) -> str:
    """A multi-value string as Druid's quidem prints one (a JSON array of strings), for strata's
    array of the same values (its multi-value strings are arrays)."""
    if v is None:
        return ""
    return json.dumps([None if e is None else str(e) for e in v], separators=(",", ":"))


def check(run, sql: str, want, ordered: bool | None = None, mv: bool = False) -> None:
    """strata's answer to ``sql`` is Druid's ``want`` (cells, or an Error it must fail with too).
    Rows compare in order under ORDER BY, else as a multiset (both return time order, but Druid's
    quidem files list rows of one time in no fixed order)."""
    if isinstance(want, Error):
        with pytest.raises(StrataError):
            run(sql)
        return
    fmt = mv_cell if mv else cell
    got = [[fmt(v) for v in r.values()] for r in run(sql).to_pylist()]
    if ordered is None:
        ordered = "ORDER BY" in sql.upper()
    if ordered:
        assert got == want
    else:
        assert Counter(map(tuple, got)) == Counter(map(tuple, want))


__all__ = ["HAVE_DATA", "KINDS", "LITERALS", "NESTED_DOC", "NOT_ARRAYS", "REVERSED_DOC", "check", "qa_array_runner",
           "variants"]
