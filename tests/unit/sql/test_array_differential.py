"""Array SQL (constructor, casts, comparison, grouping, the ARRAY_* functions) over real segments,
compared with DuckDB's list functions on the same rows.

The rows are mean on purpose: empty arrays, null arrays, arrays holding nulls, long arrays, -0.0
and fractions, non-ASCII text, and several segments so grouping merges partial results. Where
Druid's rules differ from DuckDB's the DuckDB spelling states Druid's rule (a null array stays
null through ARRAY_APPEND/CONCAT; ARRAY_TO_STRING writes a null element as 'null'; ARRAY_SLICE
starting past the end is null, and one ending past it is padded with nulls).
"""

from __future__ import annotations

import json
import os
import random

import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import union_schema
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql
from common.types.interval import Interval
from tests.conftest import duck_connect
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.fake_catalog import FakeCatalog

WORDS = ["a", "b", "", "é", "ключ", "zz", "a b"]


def _array(rng: random.Random, make):
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.2:
        return []
    if r < 0.25:
        return [make() for _ in range(rng.randint(100, 300))]  # long
    return [None if rng.random() < 0.15 else make() for _ in range(rng.randint(1, 5))]


def rows(n: int = 400) -> pa.Table:
    rng = random.Random(30)
    longs = [_array(rng, lambda: rng.choice([0, 1, 2, 3, -5, 2**40])) for _ in range(n)]
    doubles = [_array(rng, lambda: rng.choice([0.0, -0.0, 1.5, 2.0, -3.25, 1e-3])) for _ in range(n)]
    texts = [_array(rng, lambda: rng.choice(WORDS)) for _ in range(n)]
    csv = [None if rng.random() < 0.1 else ",".join(rng.choice(["a", "b", "", "é"]) for _ in range(rng.randint(1, 4)))
           for _ in range(n)]
    return pa.table({
        "__time": pa.array([1577836800000 + i * 60_000 for i in range(n)], pa.int64()),
        "s": pa.array([rng.choice(WORDS + [None]) for _ in range(n)], pa.string()),
        "csv": pa.array([c if c is None or not c.endswith(",") else c + "x" for c in csv], pa.string()),
        "n": pa.array([rng.choice([0, 1, 2, 3, None]) for _ in range(n)], pa.int64()),
        "al": pa.array(longs, pa.list_(pa.int64())),
        "ad": pa.array(doubles, pa.list_(pa.float64())),
        "astr": pa.array(texts, pa.list_(pa.string())),
    })


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    table = rows()
    base = tmp_path_factory.mktemp("arrays")
    segments = []
    for part in range(4):  # several segments: grouping and aggregates merge partials
        chunk = table.slice(part * 100, 100)
        path = str(base / f"a{part}.sseg")
        build_segment(chunk, path, SegmentId("t", Interval.of("2020-01-01/2020-01-02"), "v1", part))
        segments.append(Segment.open(path))
    catalog = FakeCatalog({"t": union_schema(segments)})
    con = duck_connect()
    con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
    con.register("t_arrow", table)
    con.execute("CREATE TABLE t AS SELECT * FROM t_arrow")
    # Druid's set-like array functions find a null element by a null one; DuckDB's skip nulls.
    has_null = "len(list_filter({}, lambda x: x IS NULL)) > 0"
    con.execute(f"CREATE MACRO druid_overlap(a, b) AS CASE WHEN a IS NULL OR b IS NULL THEN NULL "
                f"ELSE list_has_any(a, b) OR ({has_null.format('a')} AND {has_null.format('b')}) END")
    con.execute(f"CREATE MACRO druid_has_all(a, b) AS CASE WHEN a IS NULL OR b IS NULL THEN NULL "
                f"ELSE list_has_all(a, list_filter(b, lambda x: x IS NOT NULL)) "
                f"AND (NOT {has_null.format('b')} OR {has_null.format('a')}) END")
    con.unregister("t_arrow")
    yield catalog, segments, con
    con.close()


def _strata(env, sql: str) -> list[tuple]:
    catalog, segments, _ = env
    table = execute_sql(sql, catalog, lambda q: execute(q, segments).table, (), {})
    return _comparable(engine_rows(table))


def _comparable(rows: list[tuple]) -> list[tuple]:
    # Lists compare as their JSON text: exact, and sortable even with nulls inside.
    return [tuple(json.dumps(v) if isinstance(v, list) else v for v in row) for row in rows]


CASES = [
    # joins carry array columns through (Arrow's join cannot: it joins keys and row numbers only)
    ("SELECT t1.al, t2.astr, t2.ad FROM t t1 INNER JOIN t t2 ON t1.n = t2.n AND t1.s = t2.s", None),
    ("SELECT t1.s, t2.al FROM t t1 LEFT JOIN t t2 ON t1.n = t2.n + 3 AND t1.s = t2.s", None),
    # constructor, literals, casts
    ("SELECT ARRAY[1, 2, 3], ARRAY['a', NULL], ARRAY[1, 2.5], ARRAY[n, 7] FROM t",
     "SELECT [1, 2, 3], ['a', NULL], [1.0::DOUBLE, 2.5], [n, 7] FROM t"),
    ("SELECT CAST(al AS ARRAY<DOUBLE>), CAST(al AS VARCHAR ARRAY), CAST(ad AS BIGINT ARRAY) FROM t",
     "SELECT CAST(al AS DOUBLE[]), CAST(al AS VARCHAR[]), "
     "list_transform(ad, lambda x: CAST(trunc(x) AS BIGINT)) FROM t"),
    ("SELECT COALESCE(al, ARRAY[0]), NULLIF(astr, ARRAY['a']), CASE WHEN n > 1 THEN al ELSE ARRAY[9] END, "
     "al IS NULL, CAST(NULL AS ARRAY<BIGINT>) FROM t",
     "SELECT COALESCE(al, [0]), NULLIF(astr, ['a']), CASE WHEN n > 1 THEN al ELSE [9] END, al IS NULL, "
     "CAST(NULL AS BIGINT[]) FROM t"),
    # comparison and grouping on whole arrays
    ("SELECT al FROM t WHERE al = ARRAY[1, 2]", "SELECT al FROM t WHERE al = [1, 2]"),
    ("SELECT astr FROM t WHERE astr <> ARRAY['a']", "SELECT astr FROM t WHERE astr <> ['a']"),
    ("SELECT al, COUNT(*) FROM t GROUP BY al", None),
    ("SELECT astr, COUNT(*), SUM(n) FROM t GROUP BY astr", None),
    # -0.0 and 0.0 are one group (either may name it, so the sign of zero is not compared)
    ("SELECT REPLACE(ARRAY_TO_STRING(ad, ','), '-0.0', '0.0') AS g, c FROM (SELECT ad, COUNT(*) AS c FROM t "
     "WHERE ARRAY_LENGTH(ad) < 3 GROUP BY ad)",
     "SELECT REPLACE(array_to_string(list_transform(ad, lambda x: coalesce(CAST(x AS VARCHAR), 'null')), ','), "
     "'-0.0', '0.0') AS g, c FROM (SELECT ad, COUNT(*) AS c FROM t WHERE len(ad) < 3 GROUP BY ad)"),
    # element access
    ("SELECT ARRAY_LENGTH(al), ARRAY_LENGTH(astr), ARRAY_LENGTH(ad) FROM t",
     "SELECT len(al), len(astr), len(ad) FROM t"),
    ("SELECT ARRAY_OFFSET(al, 0), ARRAY_OFFSET(astr, 2), ARRAY_ORDINAL(ad, 1), ARRAY_ORDINAL(al, 200) FROM t",
     "SELECT al[1], astr[3], ad[1], al[200] FROM t"),
    ("SELECT ARRAY_OFFSET(al, n), ARRAY_ORDINAL(astr, n) FROM t",
     "SELECT CASE WHEN n >= 0 THEN al[n + 1] END, CASE WHEN n >= 1 THEN astr[n] END FROM t"),
    ("SELECT ARRAY_LENGTH(al) AS k, COUNT(*) FROM t GROUP BY 1", None),
    # membership
    ("SELECT ARRAY_CONTAINS(al, 3), ARRAY_CONTAINS(astr, 'é'), ARRAY_CONTAINS(ad, -0.0) FROM t",
     "SELECT list_contains(al, 3), list_contains(astr, 'é'), list_contains(ad, -0.0) FROM t"),
    ("SELECT COUNT(*) FROM t WHERE ARRAY_CONTAINS(al, 2)", "SELECT COUNT(*) FROM t WHERE list_contains(al, 2)"),
    ("SELECT s FROM t WHERE ARRAY_CONTAINS(astr, s)", "SELECT s FROM t WHERE list_contains(astr, s)"),
    ("SELECT ARRAY_CONTAINS(al, ARRAY[1, 2]), ARRAY_CONTAINS(astr, ARRAY['a', 'b']) FROM t",
     "SELECT list_has_all(al, [1, 2]), list_has_all(astr, ['a', 'b']) FROM t"),
    ("SELECT ARRAY_OVERLAP(al, ARRAY[3, -5]), ARRAY_OVERLAP(astr, ARRAY['', 'zz']) FROM t",
     "SELECT list_has_any(al, [3, -5]), list_has_any(astr, ['', 'zz']) FROM t"),
    ("SELECT COUNT(*) FROM t WHERE ARRAY_OVERLAP(al, ARRAY[0, 1]) AND NOT ARRAY_CONTAINS(astr, 'a')",
     "SELECT COUNT(*) FROM t WHERE list_has_any(al, [0, 1]) AND NOT list_contains(astr, 'a')"),
    # planned as arrayContainsElement filters (AND for contains, OR for overlap), NOT keeps null arrays out
    ("SELECT COUNT(*) FROM t WHERE ARRAY_CONTAINS(ad, -0.0) OR ARRAY_CONTAINS(al, 2.0)",
     "SELECT COUNT(*) FROM t WHERE list_contains(ad, -0.0) OR list_contains(al, 2)"),
    ("SELECT COUNT(*) FROM t WHERE NOT ARRAY_OVERLAP(astr, ARRAY['é', 'ключ']) "
     "AND ARRAY_CONTAINS(al, ARRAY[0, 1])",
     "SELECT COUNT(*) FROM t WHERE NOT list_has_any(astr, ['é', 'ключ']) AND list_has_all(al, [0, 1])"),
    # both sides vary by row (the per-row kernels, not the constant filter)
    ("SELECT ARRAY_OVERLAP(al, ARRAY_APPEND(ARRAY[2], n)), ARRAY_OVERLAP(astr, ARRAY_SLICE(astr, 1)), "
     "ARRAY_OVERLAP(ARRAY[0, 1], al), ARRAY_OVERLAP(ad, ARRAY_PREPEND(-0.0, ARRAY_SLICE(ad, 2))) FROM t",
     "SELECT druid_overlap(al, [2, n]), druid_overlap(astr, CASE WHEN len(astr) >= 1 THEN astr[2:] END), "
     "druid_overlap([0, 1], al), druid_overlap(ad, CASE WHEN len(ad) >= 2 THEN list_prepend(-0.0, ad[3:]) END) "
     "FROM t"),
    ("SELECT ARRAY_CONTAINS(al, ARRAY_SLICE(al, 1, 3)), ARRAY_CONTAINS(astr, ARRAY[s, 'a']), "
     "ARRAY_CONTAINS(ad, ARRAY[1.5, 2.0, -3.25, 1e-3, 0.0, -0.0, 1.0, 3.0, 4.0]), "
     "ARRAY_CONTAINS(al, ARRAY[NULL, 1]) FROM t",
     "SELECT druid_has_all(al, CASE WHEN len(al) >= 1 THEN list_resize(al[2:3], 2) END), druid_has_all(astr, [s, 'a']), "
     "druid_has_all(ad, [1.5, 2.0, -3.25, 1e-3, 0.0, -0.0, 1.0, 3.0, 4.0]), druid_has_all(al, [NULL, 1]) FROM t"),
    ("SELECT ARRAY_OFFSET_OF(astr, s), ARRAY_ORDINAL_OF(al, n), ARRAY_OFFSET_OF(ad, n / 2.0), "
     "ARRAY_ORDINAL_OF(al, NULL) FROM t",
     "SELECT CASE WHEN s IS NOT NULL THEN list_position(astr, s) - 1 END, "
     "CASE WHEN n IS NOT NULL THEN list_position(al, n) END, "
     "CASE WHEN n IS NOT NULL THEN list_position(ad, n / 2.0) - 1 END, CAST(NULL AS BIGINT) FROM t"),
    ("SELECT ARRAY_SLICE(al, n), ARRAY_SLICE(astr, n, n + 2), ARRAY_SLICE(ad, 1, n), ARRAY_SLICE(al, n, 1) FROM t",
     "SELECT CASE WHEN n >= 0 AND n <= len(al) THEN al[n + 1:] END, "
     "CASE WHEN n >= 0 AND n <= len(astr) THEN list_resize(astr[n + 1:n + 2], 2) END, "
     "CASE WHEN len(ad) >= 1 AND n IS NULL THEN ad[2:] WHEN len(ad) >= 1 AND n >= 1 THEN list_resize(ad[2:n], n - 1) END, "
     "CASE WHEN n >= 0 AND n <= len(al) AND n <= 1 THEN list_resize(al[n + 1:1], 1 - n) END FROM t"),
    ("SELECT ARRAY_TO_STRING(al, s), ARRAY_TO_STRING(ARRAY[s, NULL], '-') FROM t",
     # DuckDB wants a constant separator: join on chr(1), then put each row's separator in
     "SELECT replace(array_to_string(list_transform(al, lambda x: coalesce(CAST(x AS VARCHAR), 'null')), chr(1)), "
     "chr(1), s), coalesce(s, 'null') || '-null' FROM t"),
    ("SELECT ARRAY_PREPEND(n, al), ARRAY_APPEND(astr, s), ARRAY_CONCAT(al, ARRAY_SLICE(al, 1)), "
     "ARRAY_CONCAT(ARRAY[n], al) FROM t",
     "SELECT CASE WHEN al IS NOT NULL THEN list_prepend(n, al) END, "
     "CASE WHEN astr IS NOT NULL THEN list_append(astr, s) END, "
     "CASE WHEN len(al) >= 1 THEN list_concat(al, al[2:]) END, CASE WHEN al IS NOT NULL THEN list_concat([n], al) END "
     "FROM t"),
    ("SELECT MV_FILTER_ONLY(ad, ARRAY[0.0, NULL]), MV_FILTER_NONE(astr, ARRAY['a', NULL]) FROM t",
     "SELECT list_filter(ad, lambda x: x IS NULL OR x = 0.0), list_filter(astr, lambda x: x IS NOT NULL AND x <> 'a') "
     "FROM t"),
    ("SELECT s FROM t WHERE NOT ARRAY_CONTAINS(astr, '')", "SELECT s FROM t WHERE NOT list_contains(astr, '')"),
    ("SELECT ARRAY_OFFSET_OF(al, 2), ARRAY_ORDINAL_OF(astr, 'a'), ARRAY_ORDINAL_OF(ad, 1.5) FROM t",
     "SELECT list_position(al, 2) - 1, list_position(astr, 'a'), list_position(ad, 1.5) FROM t"),
    # building arrays
    ("SELECT ARRAY_APPEND(al, 4), ARRAY_PREPEND('q', astr) FROM t",
     "SELECT CASE WHEN al IS NOT NULL THEN list_append(al, 4) END, "
     "CASE WHEN astr IS NOT NULL THEN list_prepend('q', astr) END FROM t"),
    ("SELECT ARRAY_CONCAT(al, ARRAY[9, NULL]), ARRAY_CONCAT(astr, astr) FROM t",
     "SELECT CASE WHEN al IS NOT NULL THEN list_concat(al, [9, NULL]) END, "
     "CASE WHEN astr IS NOT NULL THEN list_concat(astr, astr) END FROM t"),
    ("SELECT ARRAY_SLICE(al, 1, 3), ARRAY_SLICE(astr, 0, 1) FROM t",
     "SELECT CASE WHEN len(al) >= 1 THEN list_resize(al[2:3], 2) END, "
     "CASE WHEN len(astr) >= 0 THEN list_resize(astr[1:1], 1) END FROM t"),
    ("SELECT ARRAY_TO_STRING(astr, '|'), ARRAY_TO_STRING(al, ', ') FROM t",
     "SELECT array_to_string(list_transform(astr, lambda x: coalesce(x, 'null')), '|'), "
     "array_to_string(list_transform(al, lambda x: coalesce(CAST(x AS VARCHAR), 'null')), ', ') FROM t"),
    ("SELECT STRING_TO_ARRAY(csv, ','), ARRAY_LENGTH(STRING_TO_ARRAY(csv, ',')) FROM t",
     "SELECT string_split(csv, ','), len(string_split(csv, ',')) FROM t"),
    # multi-value string functions: a VARCHAR reads as a one-element array, arrays as themselves
    ("SELECT MV_LENGTH(s), MV_TO_ARRAY(s), MV_CONTAINS(s, 'a'), MV_OFFSET(astr, 0), MV_ORDINAL(al, 2), "
     "MV_OVERLAP(astr, ARRAY['b', 'zz']) FROM t",
     "SELECT CASE WHEN s IS NOT NULL THEN 1 END, CASE WHEN s IS NOT NULL THEN [s] END, s = 'a', astr[1], al[2], "
     "list_has_any(astr, ['b', 'zz']) FROM t"),
    ("SELECT MV_FILTER_ONLY(astr, ARRAY['a', 'é']), MV_FILTER_NONE(al, ARRAY[0, 1]) FROM t",
     "SELECT list_filter(astr, lambda x: x IN ('a', 'é')), list_filter(al, lambda x: x IS NULL OR x NOT IN (0, 1)) "
     "FROM t"),
    ("SELECT s FROM t WHERE MV_CONTAINS(astr, 'ключ')", "SELECT s FROM t WHERE list_contains(astr, 'ключ')"),
    # ARRAY_TO_MV: its values as text; grouped, one group per value (a null or empty array in the
    # null group), as Druid groups a multi-value string; MV_TO_ARRAY reads it back as an array
    ("SELECT ARRAY_TO_MV(ad), MV_TO_ARRAY(ARRAY_TO_MV(al)), MV_LENGTH(ARRAY_TO_MV(astr)) FROM t",
     "SELECT CAST(ad AS VARCHAR[]), CAST(al AS VARCHAR[]), len(astr) FROM t"),
    ("SELECT ARRAY_TO_MV(astr) AS k, COUNT(*), SUM(n) FROM t GROUP BY 1",
     "SELECT k, COUNT(*), SUM(n) FROM (SELECT n, unnest(CASE WHEN len(astr) > 0 THEN astr ELSE [NULL] END) AS k "
     "FROM t) GROUP BY k"),
    ("SELECT ARRAY_TO_MV(ad) AS k, s, COUNT(*) AS c FROM t WHERE n > 0 GROUP BY k, s HAVING COUNT(*) > 1",
     "SELECT k, s, COUNT(*) AS c FROM (SELECT s, unnest(CASE WHEN len(ad) > 0 THEN CAST(ad AS VARCHAR[]) "
     "ELSE [NULL] END) AS k FROM t WHERE n > 0) GROUP BY k, s HAVING COUNT(*) > 1"),
    ("SELECT ARRAY_TO_MV(al), ARRAY_TO_MV(astr), COUNT(*) FROM t WHERE ARRAY_LENGTH(al) < 6 "
     "GROUP BY ARRAY_TO_MV(al), ARRAY_TO_MV(astr)",
     "SELECT a, b, COUNT(*) FROM (SELECT unnest(CASE WHEN len(al) > 0 THEN CAST(al AS VARCHAR[]) ELSE [NULL] END) "
     "AS a, astr FROM t WHERE len(al) < 6), unnest(CASE WHEN len(astr) > 0 THEN astr ELSE [NULL] END) AS u(b) "
     "GROUP BY a, b"),
    # JSON_VALUE answers on plain columns: '$' is the value, '$[n]' an array's element, other paths null
    ("SELECT JSON_VALUE(s, '$'), JSON_VALUE(n, '$' RETURNING DOUBLE), JSON_VALUE(s, '$.a') FROM t",
     "SELECT s, CAST(n AS DOUBLE), NULL FROM t"),
    ("SELECT JSON_VALUE(al, '$[1]' RETURNING BIGINT), JSON_VALUE(astr, '$[0]'), "
     "JSON_VALUE(ad, '$' RETURNING DOUBLE ARRAY), JSON_VALUE(al, '$') FROM t",
     "SELECT al[2], astr[1], ad, NULL FROM t"),
    # UNNEST: one row per element (null elements kept), null and empty arrays give no rows
    ("SELECT s, x FROM t CROSS JOIN UNNEST(al) AS u(x)", "SELECT s, unnest(al) AS x FROM t"),
    ("SELECT x, COUNT(*), SUM(n) FROM t, UNNEST(astr) AS u(x) WHERE x <> 'a' GROUP BY x",
     "SELECT x, COUNT(*), SUM(n) FROM (SELECT n, unnest(astr) AS x FROM t) WHERE x <> 'a' GROUP BY x"),
    ("SELECT u.d FROM t CROSS JOIN UNNEST(ad) AS u(d) WHERE t.n = 2 AND u.d > 0",
     "SELECT d FROM (SELECT n, unnest(ad) AS d FROM t) WHERE n = 2 AND d > 0"),
    ("SELECT x FROM UNNEST(ARRAY[3, 1, NULL, 2]) AS u(x)", "SELECT unnest([3, 1, NULL, 2]) AS x"),
    ("SELECT x, COUNT(*) FROM t CROSS JOIN UNNEST(ARRAY_APPEND(al, n)) AS u(x) GROUP BY x",
     "SELECT x, COUNT(*) FROM (SELECT unnest(list_append(al, n)) AS x FROM t WHERE al IS NOT NULL) GROUP BY x"),
    ("SELECT s, x FROM t CROSS JOIN UNNEST(s) AS u(x)", "SELECT s, s FROM t WHERE s IS NOT NULL"),
    # aggregates making arrays
    ("SELECT ARRAY_AGG(s), ARRAY_AGG(n), ARRAY_AGG(DISTINCT s), ARRAY_AGG(DISTINCT n) FROM t",
     "SELECT list(s ORDER BY __time), list(n ORDER BY __time), list_sort(list(DISTINCT s), 'ASC', 'NULLS FIRST'), "
     "list_sort(list(DISTINCT n), 'ASC', 'NULLS FIRST') FROM t"),
    ("SELECT n, ARRAY_AGG(DISTINCT s), ARRAY_AGG(DISTINCT ARRAY_LENGTH(al)) FROM t GROUP BY n",
     "SELECT n, list_sort(list(DISTINCT s), 'ASC', 'NULLS FIRST'), "
     "list_sort(list(DISTINCT len(al)), 'ASC', 'NULLS FIRST') FROM t GROUP BY n"),
    ("SELECT ARRAY_AGG(s) FILTER (WHERE s = 'none'), ARRAY_AGG(DISTINCT s) FILTER (WHERE n = 2) FROM t",
     "SELECT list(s) FILTER (WHERE s = 'none'), list_sort(list(DISTINCT s) FILTER (WHERE n = 2), 'ASC', "
     "'NULLS FIRST') FROM t"),
    ("SELECT MIN(s), MAX(s), MIN(ARRAY_TO_STRING(astr, ',')) FROM t",
     "SELECT MIN(s), MAX(s), MIN(array_to_string(list_transform(astr, lambda x: coalesce(x, 'null')), ',')) FROM t"),
    # aggregates over arrays
    ("SELECT ARRAY_CONCAT_AGG(al) FROM t WHERE ARRAY_LENGTH(al) = 1",
     "SELECT flatten(list(al ORDER BY __time)) FROM t WHERE len(al) = 1"),
]


@pytest.mark.parametrize("sql,duck_sql", CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_matches_duckdb(env, sql, duck_sql):
    got = _strata(env, sql)
    want = _comparable(duck_rows(env[2], duck_sql or sql))
    assert_rows_equal(got, want, ordered=False)


def test_joins_on_whole_arrays(env):
    """Arrays as join keys (Arrow cannot join on lists): equal arrays match (nulls inside alike,
    -0.0 as 0.0, 2 and 2.0 alike across element types); a null array matches nothing."""
    table = rows()
    for left, right in (("astr", "astr"), ("al", "ad")):
        got = _strata(env, f"SELECT COUNT(*) FROM t t1 INNER JOIN t t2 ON t1.{left} = t2.{right}")

        def key(v, numeric=left != right):
            return None if v is None else tuple(None if e is None else float(e) + 0.0 if numeric else e for e in v)

        lk = [key(v) for v in table.column(left).to_pylist()]
        rk = [key(v) for v in table.column(right).to_pylist()]
        want = sum(1 for x in lk for y in rk if x is not None and x == y)
        assert got == [(want,)] and want > 0


def test_string_to_array_follows_java_split():
    """Java's String.split: no match keeps the text whole ('' stays ['']), trailing empty strings go."""
    from common.expr import evaluate, parse

    got = evaluate(parse("string_to_array(s, ',')"), {"s": pa.array(["", "a,b,,", ",", "a", None, ",a"])}, 6)
    assert got.to_pylist() == [[""], ["a", "b"], [], ["a"], None, ["", "a"]]


def test_array_errors_name_the_argument(env):
    from common.errors import ValidationError

    with pytest.raises(ValidationError, match="ARRAY_LENGTH needs an ARRAY for 's'"):
        _strata(env, "SELECT ARRAY_LENGTH(s) FROM t")
    with pytest.raises(ValidationError, match="ARRAY elements must share a type"):
        _strata(env, "SELECT ARRAY[1, 'a'] FROM t")
    with pytest.raises(ValidationError, match="nested arrays are not supported"):
        _strata(env, "SELECT ARRAY[al] FROM t")
    with pytest.raises(ValidationError, match="cannot compare ARRAY<BIGINT> with VARCHAR"):
        _strata(env, "SELECT al = 'a' FROM t")


def test_array_contains_element_filter_json_round_trip_and_errors():
    from common.errors import ValidationError
    from common.query.filters import ArrayContainsElement, filter_from_json, filter_to_json

    obj = {"type": "arrayContainsElement", "column": "al", "elementMatchValueType": "LONG", "elementMatchValue": 2}
    f = filter_from_json(obj)
    assert f == ArrayContainsElement("al", 2, "LONG") and filter_to_json(f) == obj
    with pytest.raises(ValidationError, match="needs a single non-null 'elementMatchValue'"):
        filter_from_json({"type": "arrayContainsElement", "column": "al", "elementMatchValue": [1]})


def test_json_value_returning_boolean(tmp_path):
    from common.types.column_type import JSON

    docs = [{"b": True}, {"b": False}, {"b": None}, None, {"b": 1}, {"b": 0}, {}]
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(docs))], pa.int64()),
                      "j": pa.array([None if d is None else json.dumps(d) for d in docs])})
    path = str(tmp_path / "j.sseg")
    build_segment(table, path, SegmentId("j", Interval.of("2020-01-01/2020-01-02"), "v1", 0), column_types={"j": JSON})
    segments = [Segment.open(path)]
    got = execute_sql("SELECT JSON_VALUE(j, '$.b' RETURNING BOOLEAN) AS b FROM j", FakeCatalog({"j": union_schema(
        segments)}), lambda q: execute(q, segments).table, (), {})
    assert got.column("b").to_pylist() == [True, False, None, None, True, False, None]


ARRAY_EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data", "docs_inline",
                             "array_example.json")


def test_druid_array_docs_example(tmp_path):
    """Druid's arrays doc data set (array_example, 5 rows) with the results its doc shows: equality
    with an ARRAY literal, ARRAY_CONTAINS, and GROUP BY grouping whole arrays (null and [] apart)."""
    with open(ARRAY_EXAMPLE, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    table = pa.table({
        "__time": pa.array([1672531200000] * len(docs), pa.int64()),
        "label": pa.array([d["label"] for d in docs]),
        "arrayString": pa.array([d["arrayString"] for d in docs], pa.list_(pa.string())),
        "arrayLong": pa.array([d["arrayLong"] for d in docs], pa.list_(pa.int64())),
        "arrayDouble": pa.array([d["arrayDouble"] for d in docs], pa.list_(pa.float64())),
    })
    path = str(tmp_path / "array_example.sseg")
    build_segment(table, path, SegmentId("array_example", Interval.of("2023-01-01/2023-01-02"), "v1", 0))
    segments = [Segment.open(path)]
    catalog = FakeCatalog({"array_example": union_schema(segments)})

    def sql(text):
        return execute_sql(text, catalog, lambda q: execute(q, segments).table, (), {}).to_pylist()

    assert [r["label"] for r in sql("SELECT label FROM array_example WHERE arrayLong = ARRAY[1, 2, 3] "
                                    "ORDER BY label")] == ["row3", "row4"]
    assert [r["label"] for r in sql("SELECT label FROM array_example WHERE ARRAY_CONTAINS(arrayString, 'a') "
                                    "ORDER BY label")] == ["row1", "row4"]
    groups = sql("SELECT arrayString, COUNT(*) AS c FROM array_example GROUP BY arrayString")
    assert sorted((json.dumps(r["arrayString"]), r["c"]) for r in groups) == sorted(
        [('["a", "b"]', 2), ('[null, "b"]', 1), ("[]", 1), ("null", 1)])
    # ARRAY_TO_MV as its doc shows it (doubles as Java prints them)
    assert [r["mv"] for r in sql("SELECT ARRAY_TO_MV(arrayDouble) AS mv FROM array_example ORDER BY label")] == [
        ["1.1", "2.2", None], ["999.0", None, "5.5"], [None, "2.2", "1.1"], [], None]
    assert sql("SELECT ARRAY_LENGTH(arrayDouble) AS n, ARRAY_OFFSET(arrayDouble, 0) AS first FROM array_example "
               "ORDER BY label") == [{"n": 3, "first": 1.1}, {"n": 3, "first": 999.0}, {"n": 3, "first": None},
                                     {"n": 0, "first": None}, {"n": None, "first": None}]


def test_json_keys_of_arrays_and_literals_as_druid(tmp_path):
    """Druid's json_keys: an array's indexes as text, an empty array or object no keys, a literal null."""
    from common.types.column_type import JSON

    docs = [{"x": [1, 2, 3], "y": {"a": 1, "b": 2}}, {"x": [], "y": {}}, {"x": 5, "y": "s"}, None]
    table = pa.table({"__time": pa.array([1577836800000 + i for i in range(len(docs))], pa.int64()),
                      "nester": pa.array([None if d is None else json.dumps(d) for d in docs])})
    path = str(tmp_path / "k.sseg")
    build_segment(table, path, SegmentId("k", Interval.of("2020-01-01/2020-01-02"), "v1", 0),
                  column_types={"nester": JSON})
    segments = [Segment.open(path)]
    got = execute_sql("SELECT JSON_KEYS(nester, '$.x') AS x, JSON_KEYS(nester, '$.y') AS y FROM k",
                      FakeCatalog({"k": union_schema(segments)}), lambda q: execute(q, segments).table, (), {})
    assert got.to_pylist() == [{"x": ["0", "1", "2"], "y": ["a", "b"]}, {"x": [], "y": []},
                               {"x": None, "y": None}, {"x": None, "y": None}]
