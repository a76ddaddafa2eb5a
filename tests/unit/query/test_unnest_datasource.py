"""The native ``unnest`` data source and the per-element index of ARRAY columns, over real
segments, compared with DuckDB's ``unnest`` and ``list_contains`` on the same rows.

The rows are mean: null arrays, empty arrays, arrays holding nulls, long arrays (hundreds of
elements), non-ASCII text, -0.0 and fractions; several segments, one of them written without the
element index (as a segment from before it), so the index path and the value path answer the same
query side by side. SQL statements are checked to plan to the native unnest data source (nothing
is exploded on the broker) and their rows against DuckDB's.
"""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.query.engine import union_schema
from common.query.model import query_from_json
from common.query.unnest_datasource import UnnestDataSource
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql
from common.types.column_type import JSON
from common.types.interval import Interval
from tests.conftest import duck_connect
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.fake_catalog import FakeCatalog

WORDS = ["a", "b", "", "é", "ключ", "zz", "a b"]
T0 = 1577836800000
INTERVAL = "2020-01-01/2020-01-02"


def _array(rng: random.Random, make):
    r = rng.random()
    if r < 0.12:
        return None
    if r < 0.24:
        return []
    if r < 0.28:
        return [make() for _ in range(rng.randint(100, 300))]  # long
    return [None if rng.random() < 0.15 else make() for _ in range(rng.randint(1, 5))]


def rows(n: int = 480) -> pa.Table:
    rng = random.Random(3030)
    longs = [_array(rng, lambda: rng.choice([0, 1, 2, 3, -5, 2**40])) for _ in range(n)]
    doubles = [_array(rng, lambda: rng.choice([0.0, -0.0, 1.5, 2.0, -3.25, 1e-3])) for _ in range(n)]
    texts = [_array(rng, lambda: rng.choice(WORDS)) for _ in range(n)]
    tags = [_array(rng, lambda: rng.choice(["red", "green", "blue"])) for _ in range(n)]
    return pa.table({
        "__time": pa.array([T0 + i * 60_000 for i in range(n)], pa.int64()),
        "s": pa.array([rng.choice(WORDS + [None]) for _ in range(n)], pa.string()),
        "n": pa.array([rng.choice([0, 1, 2, 3, None]) for _ in range(n)], pa.int64()),
        "al": pa.array(longs, pa.list_(pa.int64())),
        "ad": pa.array(doubles, pa.list_(pa.float64())),
        "astr": pa.array(texts, pa.list_(pa.string())),
        "tags": pa.array(tags, pa.list_(pa.string())),  # DuckDB's copy of the JSON documents' arrays
    })


def _segment_table(chunk: pa.Table) -> pa.Table:
    docs = [None if t is None else json.dumps({"tags": t, "k": 1}) for t in chunk.column("tags").to_pylist()]
    return chunk.drop_columns(["tags"]).append_column("j", pa.array(docs, pa.string()))


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    table = rows()
    base = tmp_path_factory.mktemp("unnest")
    segments = []
    for part in range(4):  # several segments: partials merge; the last one has no element index
        chunk = _segment_table(table.slice(part * 120, 120))
        path = str(base / f"u{part}.sseg")
        options = {c: {"elementIndex": False} for c in ("al", "ad", "astr", "j")} if part == 3 else None
        build_segment(chunk, path, SegmentId("t", Interval.of(INTERVAL), "v1", part), column_types={"j": JSON},
                      column_options=options)
        segments.append(Segment.open(path))
    catalog = FakeCatalog({"t": union_schema(segments)})
    con = duck_connect()
    con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
    con.register("t_arrow", table)
    con.execute("CREATE TABLE t AS SELECT * FROM t_arrow")
    con.unregister("t_arrow")
    yield catalog, segments, con
    con.close()


def _strata(env, sql: str, pushed: list | None = None) -> list[tuple]:
    catalog, segments, _ = env

    def run(q):
        if pushed is not None:
            pushed.append(q)
        return execute(q, segments).table

    table = execute_sql(sql, catalog, run, (), {})
    return _comparable(engine_rows(table))


def _comparable(found: list[tuple]) -> list[tuple]:
    return [tuple(json.dumps(v) if isinstance(v, list) else v for v in row) for row in found]


CASES = [
    # every element kept (null elements too); null and empty arrays give no rows
    ("SELECT s, x FROM t CROSS JOIN UNNEST(al) AS u(x)", "SELECT s, unnest(al) FROM t"),
    ("SELECT __time, n, x FROM t, UNNEST(ad) AS u(x)", "SELECT __time, n, unnest(ad) FROM t"),
    # filters on the element (the unnestFilter, answered through the element index) and on the row
    ("SELECT s, x FROM t CROSS JOIN UNNEST(astr) AS u(x) WHERE x = 'a'",
     "SELECT s, x FROM (SELECT s, unnest(astr) AS x FROM t) WHERE x = 'a'"),
    ("SELECT x, COUNT(*), SUM(n) FROM t CROSS JOIN UNNEST(astr) AS u(x) WHERE x IN ('a', 'ключ', '') AND "
     "s <> 'b' GROUP BY x",
     "SELECT x, COUNT(*), SUM(n) FROM (SELECT s, n, unnest(astr) AS x FROM t) WHERE x IN ('a', 'ключ', '') "
     "AND s <> 'b' GROUP BY x"),
    ("SELECT n, COUNT(*) FROM t CROSS JOIN UNNEST(astr) AS u(x) WHERE x IS NULL GROUP BY n",
     "SELECT n, COUNT(*) FROM (SELECT n, unnest(astr) AS x FROM t) WHERE x IS NULL GROUP BY n"),
    ("SELECT x, COUNT(*) FROM t CROSS JOIN UNNEST(al) AS u(x) WHERE x = 2 OR x = 1099511627776 GROUP BY x",
     "SELECT x, COUNT(*) FROM (SELECT unnest(al) AS x FROM t) WHERE x IN (2, 1099511627776) GROUP BY x"),
    ("SELECT u.d FROM t CROSS JOIN UNNEST(ad) AS u(d) WHERE t.n = 2 AND u.d > 0",
     "SELECT d FROM (SELECT n, unnest(ad) AS d FROM t) WHERE n = 2 AND d > 0"),
    ("SELECT x, s FROM t CROSS JOIN UNNEST(astr) AS u(x) WHERE x = s OR x = 'zz'",
     "SELECT x, s FROM (SELECT s, unnest(astr) AS x FROM t) WHERE x = s OR x = 'zz'"),
    # a plain count counts exploded rows, never the segments' row counts from their metadata
    ("SELECT COUNT(*) FROM t CROSS JOIN UNNEST(al) AS u(x)", "SELECT COUNT(*) FROM (SELECT unnest(al) FROM t)"),
    ("SELECT COUNT(*) FROM t CROSS JOIN UNNEST(astr) AS u(x) WHERE __time >= TIMESTAMP '2000-01-01 00:00:00'",
     "SELECT COUNT(*) FROM (SELECT unnest(astr) FROM t)"),
    ("SELECT COUNT(*), COUNT(x), MIN(x), MAX(x) FROM t CROSS JOIN UNNEST(al) AS u(x) WHERE x <> 0",
     "SELECT COUNT(*), COUNT(x), MIN(x), MAX(x) FROM (SELECT unnest(al) AS x FROM t) WHERE x <> 0"),
    # expressions over the element and the row
    ("SELECT UPPER(x) || s, x FROM t CROSS JOIN UNNEST(astr) AS u(x) WHERE LENGTH(x) > 1",
     "SELECT UPPER(x) || s, x FROM (SELECT s, unnest(astr) AS x FROM t) WHERE LENGTH(x) > 1"),
    # nested UNNESTs: every pair
    ("SELECT x, y, COUNT(*) FROM t CROSS JOIN UNNEST(al) AS u(x) CROSS JOIN UNNEST(astr) AS v(y) "
     "WHERE y = 'a' AND x > 0 GROUP BY x, y",
     "SELECT x, y, COUNT(*) FROM (SELECT unnest(al) AS x, astr FROM t) CROSS JOIN (SELECT unnest(astr) AS y) "
     "WHERE y = 'a' AND x > 0 GROUP BY x, y"),
    # ARRAY[...] literals and computed arrays
    ("SELECT s, x FROM t CROSS JOIN UNNEST(ARRAY['p', NULL, 'q']) AS u(x) WHERE n = 1",
     "SELECT s, unnest(['p', NULL, 'q']) FROM t WHERE n = 1"),
    ("SELECT x, COUNT(*) FROM t CROSS JOIN UNNEST(ARRAY_APPEND(al, n)) AS u(x) GROUP BY x",
     "SELECT x, COUNT(*) FROM (SELECT unnest(list_append(al, n)) AS x FROM t WHERE al IS NOT NULL) GROUP BY x"),
    # arrays inside JSON documents: the elements are JSON values (text '"red"'), as Druid's COMPLEX<json>
    ("SELECT x, COUNT(*) FROM t CROSS JOIN UNNEST(JSON_QUERY_ARRAY(j, '$.tags')) AS u(x) GROUP BY x",
     None),
    # a string unnests as a one-element array
    ("SELECT s, x FROM t CROSS JOIN UNNEST(s) AS u(x) WHERE x <> 'a'",
     "SELECT s, s FROM t WHERE s IS NOT NULL AND s <> 'a'"),
    # time ordering and limits over exploded rows
    ("SELECT __time, x FROM t CROSS JOIN UNNEST(al) AS u(x) ORDER BY __time DESC LIMIT 40", None),
    # ARRAY_CONTAINS (arrayContainsElement): the element index on three segments, values on one
    ("SELECT COUNT(*) FROM t WHERE ARRAY_CONTAINS(astr, 'a')", "SELECT COUNT(*) FROM t WHERE list_contains(astr, 'a')"),
    ("SELECT __time FROM t WHERE ARRAY_CONTAINS(al, 2) AND NOT ARRAY_CONTAINS(ad, 1.5)",
     "SELECT __time FROM t WHERE list_contains(al, 2) AND NOT list_contains(ad, 1.5)"),
    ("SELECT s, COUNT(*) FROM t WHERE NOT ARRAY_CONTAINS(astr, 'é') GROUP BY s",
     "SELECT s, COUNT(*) FROM t WHERE NOT list_contains(astr, 'é') GROUP BY s"),
    ("SELECT COUNT(*) FROM t WHERE ARRAY_CONTAINS(ad, 0) OR ARRAY_CONTAINS(al, 1099511627776)",
     "SELECT COUNT(*) FROM t WHERE list_contains(ad, 0.0) OR list_contains(al, 1099511627776)"),
]


def _duck_sql(sql: str, duck_sql: str | None) -> str:
    if duck_sql is not None:
        return duck_sql
    if "JSON_QUERY_ARRAY" in sql:
        return "SELECT to_json(x)::VARCHAR, COUNT(*) FROM (SELECT unnest(tags) AS x FROM t) GROUP BY x"
    return "SELECT __time, x FROM (SELECT __time, unnest(al) AS x FROM t) ORDER BY __time DESC LIMIT 40"


@pytest.mark.parametrize("sql,duck_sql", CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_matches_duckdb(env, sql, duck_sql):
    pushed: list = []
    got = _strata(env, sql, pushed)
    want = _comparable(duck_rows(env[2], _duck_sql(sql, duck_sql)))
    if "ORDER BY __time DESC LIMIT" in sql:
        # the elements of one row tie on __time, so which of the last row's elements the limit
        # keeps is either's choice: the times in order, and the rows before the last time
        assert [r[0] for r in got] == [r[0] for r in want]
        last = got[-1][0]
        got, want = [r for r in got if r[0] != last], [r for r in want if r[0] != last]
    assert_rows_equal(got, want, ordered=False)
    if "UNNEST" in sql:  # exploded on the historicals: the pushed query reads an unnest data source
        assert pushed and all(isinstance(q.datasource, UnnestDataSource) for q in pushed), pushed


def test_filters_on_the_element_become_the_unnest_filter(env):
    pushed: list = []
    _strata(env, "SELECT s, x FROM t CROSS JOIN UNNEST(astr) AS u(x) WHERE x = 'a' AND s = 'b' AND "
                 "(x = 'zz' OR s = 'é')", pushed)
    (query,) = pushed
    ds = query.to_json()["dataSource"]
    assert ds["type"] == "unnest" and ds["base"] == {"type": "table", "name": "t"}
    assert ds["virtualColumn"]["name"] == "j0.unnest"
    assert ds["unnestFilter"] == {"type": "equals", "column": "j0.unnest", "matchValue": "a", "matchValueType": "STRING"}
    # what reads the row's columns stays the query's filter
    assert "s" in json.dumps(query.to_json()["filter"])


def _native(unnest_filter=None, **extra):
    ds = {"type": "unnest", "base": {"type": "table", "name": "t"},
          "virtualColumn": {"type": "expression", "name": "j0.unnest", "expression": "\"astr\"",
                            "outputType": "STRING"}}
    if unnest_filter is not None:
        ds["unnestFilter"] = unnest_filter
    return {"queryType": "groupBy", "dataSource": ds, "intervals": [INTERVAL], "granularity": "all",
            "dimensions": ["j0.unnest"], "aggregations": [{"type": "count", "name": "c"},
                                                          {"type": "longSum", "name": "n", "fieldName": "n"}], **extra}


def test_druid_json_round_trips_and_runs(env):
    _, segments, con = env
    obj = _native({"type": "in", "dimension": "j0.unnest", "values": ["a", "ключ"]},
                  filter={"type": "equals", "column": "s", "matchValue": "b"})
    query = query_from_json(obj)
    assert query_from_json(query.to_json()).to_json() == query.to_json()
    assert isinstance(query.datasource, UnnestDataSource) and query.table == "t"
    got = engine_rows(execute(obj, segments).table)
    want = duck_rows(con, "SELECT x, COUNT(*), SUM(n) FROM (SELECT s, n, unnest(astr) AS x FROM t) "
                          "WHERE x IN ('a', 'ключ') AND s = 'b' GROUP BY x")
    assert_rows_equal(got, want, ordered=False)


def test_scan_of_every_column_includes_the_element(env):
    _, segments, _ = env
    obj = {"queryType": "scan", "dataSource": _native()["dataSource"], "intervals": [INTERVAL], "limit": 5}
    table = execute(obj, segments).table
    assert table.column_names[-1] == "j0.unnest" and "astr" in table.column_names and table.num_rows == 5
    for elem, arr in zip(table.column("j0.unnest").to_pylist(), table.column("astr").to_pylist()):
        assert elem in arr


def test_bad_unnest_queries_name_the_problem(env):
    _, segments, _ = env
    bad = _native()
    bad["dataSource"]["virtualColumn"]["expression"] = "\"nope\""
    with pytest.raises(ValidationError, match="unnest virtual column 'j0.unnest'.*nope"):
        execute(bad, segments)
    with pytest.raises(ValidationError, match="unnestFilter may read only the unnested column"):
        execute(_native({"type": "equals", "column": "s", "matchValue": "a"}), segments)
    clash = _native()
    clash["dataSource"]["virtualColumn"]["name"] = "s"
    with pytest.raises(ValidationError, match="has the name of a column"):
        execute(clash, segments)
    with pytest.raises(ValidationError, match="'base' must be a table or another unnest"):
        query_from_json({**_native(), "dataSource": {"type": "unnest", "base": {"type": "lookup"},
                                                     "virtualColumn": {"name": "u", "expression": "1"}}})
    with pytest.raises(ValidationError, match="needs a 'virtualColumn'"):
        query_from_json({**_native(), "dataSource": {"type": "unnest", "base": "t"}})


# ---- the element index ------------------------------------------------------------------------

def _count(segments, column: str, value, negate: bool = False, value_type=None):
    f = {"type": "arrayContainsElement", "column": column, "elementMatchValue": value}
    if value_type:
        f["elementMatchValueType"] = value_type
    q = {"queryType": "timeseries", "dataSource": "t", "intervals": [INTERVAL], "granularity": "all",
         "aggregations": [{"type": "count", "name": "c"}], "filter": {"type": "not", "field": f} if negate else f}
    return execute(q, segments)


@pytest.mark.parametrize("column,value,duck_value", [("astr", "a", "'a'"), ("astr", "", "''"), ("astr", "nope", "'nope'"),
                                                     ("al", 2, "2"), ("al", 2.0, "2"), ("ad", 0, "0.0"),
                                                     ("ad", -3.25, "-3.25")])
@pytest.mark.parametrize("negate", [False, True])
def test_element_index_answers_as_the_values_do(env, column, value, duck_value, negate):
    """Segments 0-2 answer from the index (the pre-filter keeps only matching rows), segment 3 (no
    index, as an older segment) from values: the counts agree with DuckDB's list_contains."""
    _, segments, con = env
    indexed, old = segments[:3], segments[3:]
    result = _count(indexed, column, value, negate)
    fallback = _count(old, column, value, negate)
    pred = f"{'NOT ' if negate else ''}list_contains({column}, {duck_value})"
    want_indexed = duck_rows(con, f"SELECT COUNT(*) FROM t WHERE {pred} AND __time < {T0 + 360 * 60_000}")[0][0]
    want_old = duck_rows(con, f"SELECT COUNT(*) FROM t WHERE {pred} AND __time >= {T0 + 360 * 60_000}")[0][0]
    got_indexed = result.table.column("c").to_pylist()[0] if result.table.num_rows else 0
    got_old = fallback.table.column("c").to_pylist()[0] if fallback.table.num_rows else 0
    assert (got_indexed, got_old) == (want_indexed, want_old)
    # the index path selects exactly the matching rows before reading any values; the values path
    # reads every row
    assert result.stats.rows_after_prefilter == want_indexed
    assert fallback.stats.rows_after_prefilter == fallback.stats.rows_in_segments


def test_unnest_filter_narrows_base_rows_through_the_index(env):
    _, segments, con = env
    obj = _native({"type": "equals", "column": "j0.unnest", "matchValue": "ключ"})
    indexed = execute(obj, segments[:3])
    rows_with = duck_rows(con, f"SELECT COUNT(*) FROM t WHERE list_contains(astr, 'ключ') AND "
                               f"__time < {T0 + 360 * 60_000}")[0][0]
    assert indexed.stats.rows_after_prefilter == rows_with < indexed.stats.rows_in_segments
    old = execute(obj, segments[3:])
    assert old.stats.rows_after_prefilter == old.stats.rows_in_segments  # no index: every row's array read
    want = duck_rows(con, "SELECT x, COUNT(*), SUM(n) FROM (SELECT n, unnest(astr) AS x FROM t) WHERE x = 'ключ' "
                          "GROUP BY x")
    assert_rows_equal(engine_rows(execute(obj, segments).table), want, ordered=False)


def test_segments_without_the_index_read_and_say_so(env, tmp_path):
    _, segments, _ = env
    old = segments[3]
    assert old.column("astr").element_index() is None
    assert "elementIndex" not in json.dumps(old.manifest.to_json())
    new = segments[0]
    index = new.column("astr").element_index()
    assert index is not None and index.cardinality > 0
    arrays = new.column("astr").values().to_pylist()
    for value in ("a", "é", ""):
        assert list(index.rows_with(value)) == [i for i, a in enumerate(arrays) if a is not None and value in a]
    assert list(index.null_bitmap()) == [i for i, a in enumerate(arrays) if a is None]


def test_element_index_of_all_null_and_empty_arrays(tmp_path):
    table = pa.table({"__time": pa.array([T0, T0 + 1, T0 + 2], pa.int64()),
                      "a": pa.array([None, [], [None]], pa.list_(pa.string()))})
    path = str(tmp_path / "e.sseg")
    build_segment(table, path, SegmentId("e", Interval.of(INTERVAL), "v1", 0))
    seg = Segment.open(path)
    index = seg.column("a").element_index()
    assert index.cardinality == 0 and list(index.null_bitmap()) == [0] and not index.rows_with("x")
    got = execute({"queryType": "scan", "dataSource": {"type": "unnest", "base": "e", "virtualColumn": {
        "type": "expression", "name": "u", "expression": "a"}}, "intervals": [INTERVAL], "columns": ["u"]}, [seg])
    assert got.table.column("u").to_pylist() == [None]


def test_unnest_filter_by_a_number_on_text_elements_is_not_narrowed_by_text(tmp_path):
    """An equality with the number 2 matches the text elements '2' and '2.0' (compared as numbers);
    the element index, which compares text, must not narrow the rows for it."""
    table = pa.table({"__time": pa.array([T0, T0 + 1, T0 + 2], pa.int64()),
                      "a": pa.array([["2.0", "x"], ["2"], ["3"]], pa.list_(pa.string()))})
    path = str(tmp_path / "n.sseg")
    build_segment(table, path, SegmentId("n", Interval.of(INTERVAL), "v1", 0))
    seg = Segment.open(path)
    ds = {"type": "unnest", "base": "n", "virtualColumn": {"type": "expression", "name": "u", "expression": "a"},
          "unnestFilter": {"type": "equals", "column": "u", "matchValue": 2, "matchValueType": "LONG"}}
    got = execute({"queryType": "scan", "dataSource": ds, "intervals": [INTERVAL], "columns": ["u"]}, [seg])
    assert sorted(got.table.column("u").to_pylist()) == ["2", "2.0"]
    ds["unnestFilter"] = {"type": "equals", "column": "u", "matchValue": "2"}
    got = execute({"queryType": "scan", "dataSource": ds, "intervals": [INTERVAL], "columns": ["u"]}, [seg])
    assert got.table.column("u").to_pylist() == ["2"] and got.stats.rows_after_prefilter == 1


def test_unnest_of_a_string_column_narrows_by_its_index(env):
    """SQL's UNNEST(s) of a VARCHAR reads it as a one-element array; a filter on the element then
    selects rows through the string column's own index before anything is exploded."""
    catalog, segments, con = env
    pushed: list = []
    got = _strata(env, "SELECT n, x FROM t CROSS JOIN UNNEST(s) AS u(x) WHERE x = 'ключ'", pushed)
    assert_rows_equal(got, duck_rows(con, "SELECT n, s FROM t WHERE s = 'ключ'"), ordered=False)
    result = execute(pushed[0], segments)
    assert result.stats.rows_after_prefilter == len(got) < result.stats.rows_in_segments
