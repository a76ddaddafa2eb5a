"""Druid's own published results for its array SQL over nested-array-test-data.json, reproduced
exactly: the ``druid.arrays`` cases of apache/druid
``sql/src/test/java/org/apache/druid/sql/calcite/CalciteArraysQueryTest.java``, ingested as that
test ingests the file (schema discovery, no rollup, a ``cnt`` count metric; see
druid_test_files.py), expected rows in SQL-compatible null handling.

Deliberate differences, each kept to what cannot be otherwise:
- Rows of a query without ORDER BY come in Druid's segment order (time, then its dimension
  values); strata keeps ingestion order within a time. SQL promises no order there, so such rows
  are compared as a multiset; grouped results (sorted by key in both) are compared in order.
- ``LIMIT n`` without ORDER BY may return any n matching rows: Druid's published rows must be
  among strata's matches for the query without the LIMIT, and strata's LIMIT answer must be n of
  those matches.
- Druid prints arrays as JSON text where its test stringifies them; they are compared as arrays.
- ``ORDER BY <aggregate>`` leaves ties in an order SQL does not fix (Druid's is its group key
  order): the sorted column is compared in order, the rows as a multiset.
- ARRAY_CONCAT_AGG without DISTINCT concatenates in row order, which is segment order (above):
  its elements are compared as a multiset.
- ARRAY_AGG of an array column (Druid's ARRAY<ARRAY<..>>): strata has no nested array type and
  answers with a clear error naming ARRAY_CONCAT_AGG (test_array_agg_of_arrays_is_a_clear_error).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import union_schema
from common.sql import execute_sql
from tests.unit.sql.druid_test_files import DATA, discovered_table, segment_of
from tests.unit.sql.fake_catalog import FakeCatalog

NAME = "nested-array-test-data.json"
pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(DATA, NAME)), reason="shared test data not found")
N = None


@pytest.fixture(scope="module")
def druid(tmp_path_factory):
    table, json_types = discovered_table(NAME)
    path = str(tmp_path_factory.mktemp("druid-arrays") / "arrays.sseg")
    segments = [segment_of(table, json_types, "arrays", "2023-01-01/2023-01-03", path)]
    catalog = FakeCatalog({"arrays": union_schema(segments)})
    return lambda sql: execute_sql(sql, catalog, lambda q: execute(q, segments).table)


def _rows(table: pa.Table) -> list[list]:
    return [list(r.values()) for r in table.to_pylist()]


def _value(v):
    """Druid's stringified array text as the array it spells."""
    return json.loads(v) if isinstance(v, str) and v.startswith("[") else v


def _key(row) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def j(*texts) -> list:
    """A row of Druid's printed cells: array text is read as the array."""
    return [_value(t) for t in texts]


# (test name, SQL, expected rows, how: "ordered" | "any order" | "limit" | ("sorted by", column)
#  | "concat agg")
CASES = [
    ("testGroupByArrayColumnFromCase",
     "SELECT CASE WHEN arrayStringNulls = ARRAY['a', 'b'] THEN arrayLongNulls END as arr, count(1) from arrays "
     "GROUP BY 1",
     [[N, 11], [[1, N, 3], 1], [[2, 3], 2]], "ordered"),
    ("testSomeArrayFunctionsWithScanQueryArrayColumns",
     "SELECT arrayStringNulls, arrayLongNulls, arrayDoubleNulls, ARRAY_APPEND(arrayStringNulls, 'foo'), "
     "ARRAY_PREPEND('foo', arrayStringNulls), ARRAY_APPEND(arrayLongNulls, 1), ARRAY_PREPEND(2, arrayLongNulls), "
     "ARRAY_APPEND(arrayDoubleNulls, 1.1), ARRAY_PREPEND(2.2, arrayDoubleNulls), "
     "ARRAY_CONCAT(arrayString,arrayStringNulls), ARRAY_CONCAT(arrayLong,arrayLongNulls), "
     "ARRAY_CONCAT(arrayDouble,arrayDoubleNulls), ARRAY_OFFSET(arrayStringNulls,0), ARRAY_OFFSET(arrayLongNulls,0), "
     "ARRAY_OFFSET(arrayDoubleNulls,0), ARRAY_ORDINAL(arrayStringNulls,1), ARRAY_ORDINAL(arrayLongNulls,1), "
     "ARRAY_ORDINAL(arrayDoubleNulls,1) FROM druid.arrays",
     [j(N, "[]", N, N, N, "[1]", "[2]", N, N, N, "[1,2,3]", N, N, N, N, N, N, N),
      j('["a","b"]', "[2,3]", "[null]", '["a","b","foo"]', '["foo","a","b"]', "[2,3,1]", "[2,2,3]", "[null,1.1]",
        "[2.2,null]", N, N, N, "a", 2, N, "a", 2, N),
      j('["b","b"]', "[1]", N, '["b","b","foo"]', '["foo","b","b"]', "[1,1]", "[2,1]", N, N, '["d","e","b","b"]',
        "[1,4,1]", N, "b", 1, N, "b", 1, N),
      j(N, "[null,2,9]", "[999.0,5.5,null]", N, N, "[null,2,9,1]", "[2,null,2,9]", "[999.0,5.5,null,1.1]",
        "[2.2,999.0,5.5,null]", N, N, N, N, N, 999.0, N, N, 999.0),
      j('["a","b"]', "[1,null,3]", "[1.1,2.2,null]", '["a","b","foo"]', '["foo","a","b"]', "[1,null,3,1]",
        "[2,1,null,3]", "[1.1,2.2,null,1.1]", "[2.2,1.1,2.2,null]", '["a","b","a","b"]', "[1,2,3,1,null,3]",
        "[1.1,2.2,3.3,1.1,2.2,null]", "a", 1, 1.1, "a", 1, 1.1),
      j('["d",null,"b"]', "[1,2,3]", "[null,2.2,null]", '["d",null,"b","foo"]', '["foo","d",null,"b"]', "[1,2,3,1]",
        "[2,1,2,3]", "[null,2.2,null,1.1]", "[2.2,null,2.2,null]", '["b","c","d",null,"b"]', "[1,2,3,4,1,2,3]",
        "[1.1,3.3,null,2.2,null]", "d", 1, N, "d", 1, N),
      j('[null,"b"]', N, "[999.0,null,5.5]", '[null,"b","foo"]', '["foo",null,"b"]', N, N, "[999.0,null,5.5,1.1]",
        "[2.2,999.0,null,5.5]", '["a","b","c",null,"b"]', N, "[3.3,4.4,5.5,999.0,null,5.5]", N, N, 999.0, N, N,
        999.0),
      j(N, N, "[]", N, N, N, N, "[1.1]", "[2.2]", N, N, "[1.1,2.2,3.3]", N, N, N, N, N, N),
      j('["a","b"]', "[2,3]", "[null,1.1]", '["a","b","foo"]', '["foo","a","b"]', "[2,3,1]", "[2,2,3]",
        "[null,1.1,1.1]", "[2.2,null,1.1]", N, N, N, "a", 2, N, "a", 2, N),
      j('["b","b"]', "[null]", N, '["b","b","foo"]', '["foo","b","b"]', "[null,1]", "[2,null]", N, N,
        '["d","e","b","b"]', "[1,4,null]", N, "b", N, N, "b", N, N),
      j("[null]", "[null,2,9]", "[999.0,5.5,null]", '[null,"foo"]', '["foo",null]', "[null,2,9,1]", "[2,null,2,9]",
        "[999.0,5.5,null,1.1]", "[2.2,999.0,5.5,null]", '["a","b",null]', N, N, N, N, 999.0, N, N, 999.0),
      j("[]", "[1,null,3]", "[1.1,2.2,null]", '["foo"]', '["foo"]', "[1,null,3,1]", "[2,1,null,3]",
        "[1.1,2.2,null,1.1]", "[2.2,1.1,2.2,null]", '["a","b"]', "[1,2,3,1,null,3]", "[1.1,2.2,3.3,1.1,2.2,null]", N,
        1, 1.1, N, 1, 1.1),
      j('["d",null,"b"]', "[1,2,3]", "[null,2.2,null]", '["d",null,"b","foo"]', '["foo","d",null,"b"]', "[1,2,3,1]",
        "[2,1,2,3]", "[null,2.2,null,1.1]", "[2.2,null,2.2,null]", '["b","c","d",null,"b"]', "[1,2,3,4,1,2,3]",
        "[1.1,3.3,null,2.2,null]", "d", 1, N, "d", 1, N),
      j('[null,"b"]', N, "[999.0,null,5.5]", '[null,"b","foo"]', '["foo",null,"b"]', N, N, "[999.0,null,5.5,1.1]",
        "[2.2,999.0,null,5.5]", '["a","b","c",null,"b"]', N, "[3.3,4.4,5.5,999.0,null,5.5]", N, N, 999.0, N, N,
        999.0)], "any order"),
    ("testArrayOverlapFilterStringArrayColumn",
     "SELECT arrayStringNulls FROM druid.arrays WHERE ARRAY_OVERLAP(arrayStringNulls, ARRAY['a','b']) LIMIT 5",
     [j('["a","b"]'), j('["b","b"]'), j('["a","b"]'), j('["d",null,"b"]'), j('[null,"b"]')], "limit"),
    ("testArrayOverlapFilterLongArrayColumn",
     "SELECT arrayLongNulls FROM druid.arrays WHERE ARRAY_OVERLAP(arrayLongNulls, ARRAY[1, 2]) LIMIT 5",
     [j("[2,3]"), j("[1]"), j("[null,2,9]"), j("[1,null,3]"), j("[1,2,3]")], "limit"),
    ("testArrayOverlapFilterDoubleArrayColumn",
     "SELECT arrayDoubleNulls FROM druid.arrays WHERE ARRAY_OVERLAP(arrayDoubleNulls, ARRAY[1.1, 2.2]) LIMIT 5",
     [j("[1.1,2.2,null]"), j("[null,2.2,null]"), j("[null,1.1]"), j("[1.1,2.2,null]"), j("[null,2.2,null]")],
     "limit"),
    ("testArrayOverlapFilterArrayStringColumns",
     "SELECT arrayStringNulls, arrayString FROM druid.arrays WHERE ARRAY_OVERLAP(arrayStringNulls, arrayString) "
     "LIMIT 5",
     [j('["a","b"]', '["a","b"]'), j('["d",null,"b"]', '["b","c"]'), j('[null,"b"]', '["a","b","c"]'),
      j('["d",null,"b"]', '["b","c"]'), j('[null,"b"]', '["a","b","c"]')], "limit"),
    ("testArrayOverlapFilterArrayLongColumns",
     "SELECT arrayLongNulls, arrayLong FROM druid.arrays WHERE ARRAY_OVERLAP(arrayLongNulls, arrayLong) LIMIT 5",
     [j("[1]", "[1,4]"), j("[1,null,3]", "[1,2,3]"), j("[1,2,3]", "[1,2,3,4]"), j("[1,null,3]", "[1,2,3]"),
      j("[1,2,3]", "[1,2,3,4]")], "limit"),
    ("testArrayOverlapFilterArrayDoubleColumns",
     "SELECT arrayDoubleNulls, arrayDouble FROM druid.arrays WHERE ARRAY_OVERLAP(arrayDoubleNulls, arrayDouble) "
     "LIMIT 5",
     [j("[1.1,2.2,null]", "[1.1,2.2,3.3]"), j("[999.0,null,5.5]", "[3.3,4.4,5.5]"),
      j("[1.1,2.2,null]", "[1.1,2.2,3.3]"),
      j("[999.0,null,5.5]", "[3.3,4.4,5.5]")], "limit"),
    ("testArrayContainsFilterArrayStringColumn",
     "SELECT arrayStringNulls FROM druid.arrays WHERE ARRAY_CONTAINS(arrayStringNulls, ARRAY['a','b']) LIMIT 5",
     [j('["a","b"]')] * 3, "limit"),
    ("testArrayContainsFilterArrayLongColumn",
     "SELECT arrayLongNulls FROM druid.arrays WHERE ARRAY_CONTAINS(arrayLongNulls, ARRAY[1, null]) LIMIT 5",
     [j("[1,null,3]")] * 2, "limit"),
    ("testArrayContainsFilterArrayDoubleColumn",
     "SELECT arrayDoubleNulls FROM druid.arrays WHERE ARRAY_CONTAINS(arrayDoubleNulls, ARRAY[1.1, null]) LIMIT 5",
     [j("[1.1,2.2,null]"), j("[null,1.1]"), j("[1.1,2.2,null]")], "limit"),
    ("testArrayContainsFilterArrayStringColumns",
     "SELECT arrayStringNulls, arrayString FROM druid.arrays WHERE ARRAY_CONTAINS(arrayStringNulls, arrayString) "
     "LIMIT 5",
     [j('["a","b"]', '["a","b"]')], "limit"),
    ("testArrayContainsFilterArrayLongColumns",
     "SELECT arrayLong, arrayLongNulls FROM druid.arrays WHERE ARRAY_CONTAINS(arrayLong, arrayLongNulls) LIMIT 5",
     [j("[1,2,3]", "[]"), j("[1,4]", "[1]"), j("[1,2,3,4]", "[1,2,3]"), j("[1,2,3,4]", "[1,2,3]")], "limit"),
    ("testArrayContainsFilterArrayDoubleColumns",
     "SELECT arrayDoubleNulls, arrayDouble FROM druid.arrays WHERE ARRAY_CONTAINS(arrayDoubleNulls, arrayDouble) "
     "LIMIT 5",
     [], "limit"),
    ("testArraySliceArrayColumns",
     "SELECT ARRAY_SLICE(arrayString, 1), ARRAY_SLICE(arrayLong, 2), ARRAY_SLICE(arrayDoubleNulls, 1) "
     "FROM druid.arrays",
     [[N, [3], N], [N, N, []], [["e"], [], N], [["b"], N, [5.5, N]], [["b"], [3], [2.2, N]],
      [["c"], [3, 4], [2.2, N]], [["b", "c"], [], [N, 5.5]], [N, [3], N], [N, N, [1.1]], [["e"], [], N],
      [["b"], N, [5.5, N]], [["b"], [3], [2.2, N]], [["c"], [3, 4], [2.2, N]], [["b", "c"], [], [N, 5.5]]],
     "any order"),
    ("testArrayLengthArrayColumn",
     "SELECT arrayStringNulls, ARRAY_LENGTH(arrayStringNulls), SUM(cnt) FROM druid.arrays GROUP BY 1, 2 "
     "ORDER BY 2 DESC",
     [j('["d",null,"b"]', 3, 2), j('[null,"b"]', 2, 2), j('["a","b"]', 2, 3), j('["b","b"]', 2, 2), j("[null]", 1, 1),
      j("[]", 0, 1), j(N, N, 3)], ("sorted by", 1)),
    ("testArrayGroupAsLongArrayColumn",
     "SELECT arrayLongNulls, SUM(cnt) FROM druid.arrays GROUP BY 1 ORDER BY 2 DESC",
     [[N, 3], [[N, 2, 9], 2], [[1, N, 3], 2], [[1, 2, 3], 2], [[2, 3], 2], [[], 1], [[N], 1], [[1], 1]],
     ("sorted by", 1)),
    ("testArrayGroupAsDoubleArrayColumn",
     "SELECT arrayDoubleNulls, SUM(cnt) FROM druid.arrays GROUP BY 1 ORDER BY 2 DESC",
     [[N, 3], [[N, 2.2, N], 2], [[1.1, 2.2, N], 2], [[999.0, N, 5.5], 2], [[999.0, 5.5, N], 2], [[], 1], [[N], 1],
      [[N, 1.1], 1]], ("sorted by", 1)),
    ("testArrayConcatAggArrayColumns",
     "SELECT ARRAY_CONCAT_AGG(arrayLongNulls), ARRAY_CONCAT_AGG(DISTINCT arrayDouble), ARRAY_CONCAT_AGG(DISTINCT "
     "arrayStringNulls) FILTER(WHERE arrayLong = ARRAY[2,3]) FROM arrays WHERE arrayDoubleNulls is not null",
     [j("[2,3,null,2,9,1,null,3,1,2,3,2,3,null,2,9,1,null,3,1,2,3]", "[1.1,2.2,3.3,4.4,5.5]", '[null,"b"]')],
     "concat agg"),
    ("testUnnestArrayColumnsString",
     "SELECT a FROM druid.arrays, UNNEST(arrayString) as unnested (a)",
     [[v] for v in "d e a b a b b c a b c d e a b a b b c a b c".split()], "any order"),
    ("testUnnestArrayColumnsLong",
     "SELECT a FROM druid.arrays, UNNEST(arrayLong) as unnested (a)",
     [[v] for v in [1, 2, 3, 1, 4, 1, 2, 3, 1, 2, 3, 4, 2, 3] * 2], "any order"),
    ("testUnnestArrayColumnsLongNulls",
     "SELECT a FROM druid.arrays, UNNEST(arrayLongNulls) as unnested (a)",
     [[v] for v in [2, 3, 1, N, 2, 9, 1, N, 3, 1, 2, 3, 2, 3, N, N, 2, 9, 1, N, 3, 1, 2, 3]], "any order"),
    ("testUnnestArrayColumnsDouble",
     "SELECT a FROM druid.arrays, UNNEST(arrayDouble) as unnested (a)",
     [[v] for v in [1.1, 2.2, 3.3, 2.2, 3.3, 4.0, 1.1, 2.2, 3.3, 1.1, 3.3, 3.3, 4.4, 5.5] * 2], "any order"),
    ("testUnnestArrayColumnsDoubleNulls",
     "SELECT a FROM druid.arrays, UNNEST(arrayDoubleNulls) as unnested (a)",
     [[v] for v in [N, 999.0, 5.5, N, 1.1, 2.2, N, N, 2.2, N, 999.0, N, 5.5, N, 1.1, 999.0, 5.5, N, 1.1, 2.2, N, N,
                    2.2, N, 999.0, N, 5.5]], "any order"),
    ("testUnnestTwiceArrayColumns",
     "SELECT arrayStringNulls, arrayLongNulls, usn, uln  FROM druid.arrays, UNNEST(arrayStringNulls) as t2 (usn), "
     "UNNEST(arrayLongNulls) as t3 (uln)",
     [[["a", "b"], [2, 3], u, l] for u in "ab" for l in (2, 3)]
     + [[["b", "b"], [1], "b", 1]] * 2
     + [[["a", "b"], [1, N, 3], u, l] for u in "ab" for l in (1, N, 3)]
     + [[["d", N, "b"], [1, 2, 3], u, l] for u in ("d", N, "b") for l in (1, 2, 3)]
     + [[["a", "b"], [2, 3], u, l] for u in "ab" for l in (2, 3)]
     + [[["b", "b"], [N], "b", N]] * 2
     + [[[N], [N, 2, 9], N, l] for l in (N, 2, 9)]
     + [[["d", N, "b"], [1, 2, 3], u, l] for u in ("d", N, "b") for l in (1, 2, 3)], "any order"),
    ("testUnnestThriceWithFiltersOnDimAndAllUnnestColumnsArrayColumns",
     "SELECT arrayString, uln, udn, usn FROM ( SELECT * FROM ( SELECT * FROM arrays, UNNEST(arrayLongNulls) as "
     "ut(uln)), UNNEST(arrayDoubleNulls) as ut(udn) ), UNNEST(arrayStringNulls) as ut(usn)  WHERE arrayString = "
     "ARRAY['a','b'] AND uln = 1 AND udn = 2.2 AND usn = 'a'",
     [[["a", "b"], 1, 2.2, "a"]], "any order"),
    ("testUnnestThriceWithFiltersOnDimAndAllUnnestColumnsArrayColumnsOrFilters",
     "SELECT arrayString, uln, udn, usn FROM ( SELECT * FROM ( SELECT * FROM arrays, UNNEST(arrayLongNulls) as "
     "ut(uln)), UNNEST(arrayDoubleNulls) as ut(udn) ), UNNEST(arrayStringNulls) as ut(usn)  WHERE arrayString = "
     "ARRAY['a','b'] AND (uln = 1 OR udn = 2.2) AND usn = 'a'",
     [[["a", "b"], 1, 1.1, "a"], [["a", "b"], 1, 2.2, "a"], [["a", "b"], 1, N, "a"], [["a", "b"], N, 2.2, "a"],
      [["a", "b"], 3, 2.2, "a"]], "any order"),
    ("testUnnestWithGroupByArrayColumn",
     "SELECT usn FROM druid.arrays, UNNEST(arrayStringNulls) as u (usn) GROUP BY usn ",
     [[N], ["a"], ["b"], ["d"]], "ordered"),
    ("testUnnestWithTimeFilterOnlyArrayColumn",
     "select c from arrays, unnest(arrayStringNulls) as u(c) where __time >= TIMESTAMP '2023-01-02 00:00:00' and "
     "__time <= TIMESTAMP '2023-01-03 00:10:00'",
     [[v] for v in ["a", "b", "b", "b", N, "d", N, "b", N, "b"]], "any order"),
]


@pytest.mark.parametrize("name, sql, want, how", CASES, ids=[c[0] for c in CASES])
def test_druid_published_array_result(druid, name, sql, want, how):
    got = _rows(druid(sql))
    if how == "ordered":
        assert got == want
    elif how == "concat agg":
        assert len(got) == len(want) == 1
        assert sorted(got[0][0], key=_key) == sorted(want[0][0], key=_key)
        assert got[0][1:] == want[0][1:]
    elif isinstance(how, tuple):
        column = how[1]
        assert [r[column] for r in got] == [r[column] for r in want]
        assert Counter(map(_key, got)) == Counter(map(_key, want))
    elif how == "any order":
        assert Counter(map(_key, got)) == Counter(map(_key, want))
    else:
        limit = int(re.search(r"LIMIT (\d+)\s*$", sql).group(1))
        matches = Counter(map(_key, _rows(druid(re.sub(r"\s*LIMIT \d+\s*$", "", sql)))))
        assert len(got) == min(limit, sum(matches.values()))
        assert not Counter(map(_key, got)) - matches, "strata's rows are matches"
        assert not Counter(map(_key, want)) - matches, "Druid's published rows are among strata's matches"


def test_array_agg_of_arrays_is_a_clear_error(druid):
    """testArrayAggArrayColumns publishes ARRAY_AGG(arrayLongNulls) as an array of arrays
    ([[2,3],[null,2,9],...]); strata has no nested array type, so it says what to use instead."""
    from common.errors import ValidationError

    with pytest.raises(ValidationError, match="ARRAY_AGG needs a single value.*use ARRAY_CONCAT_AGG"):
        druid("SELECT ARRAY_AGG(arrayLongNulls), ARRAY_AGG(DISTINCT arrayDouble), ARRAY_AGG(DISTINCT arrayStringNulls) "
              "FILTER(WHERE arrayLong = ARRAY[2,3]) FROM arrays WHERE arrayDoubleNulls is not null")
