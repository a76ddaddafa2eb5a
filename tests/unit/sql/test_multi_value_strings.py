"""Multi-value string columns (Druid's multi-value dimensions) through SQL over real segments.

Two proofs: Druid's own example from its multi-value dimensions page (the ``tags`` data set,
results exactly as published), and DuckDB differential cases on mean rows (empty lists, null
rows, null elements, repeated values in a row, long lists, non-ASCII text, several segments) for
each of the three multiValueHandling modes. DuckDB has no multi-value type, so each case states
Druid's rule with lists: the stored form is the handled list (sorted, a set, or as given) with an
empty list read as NULL; a filter matches a row when any value does (three-valued: a null value
makes a non-match unknown); GROUP BY makes one group per value, a row without values once in
the null group.
"""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import union_schema
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql, plan_sql
from common.types.column_type import MULTI_VALUE_STRING
from common.types.interval import Interval
from tests.conftest import duck_connect
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.fake_catalog import FakeCatalog

T_OLD = 1577836800000  # 2020-01-01
DAY_MS = 86_400_000
DOCS_ROWS = [
    ("2011-01-12T00:00:00.000Z", "row1", ["t1", "t2", "t3"]),
    ("2011-01-13T00:00:00.000Z", "row2", ["t3", "t4", "t5"]),
    ("2011-01-14T00:00:00.000Z", "row3", ["t5", "t6", "t7"]),
    ("2011-01-14T00:00:00.000Z", "row4", []),
]


def _segments(table: pa.Table, base, name: str, datasource: str, interval: str, parts: int,
              options: dict | None = None) -> list[Segment]:
    out = []
    size = -(-table.num_rows // parts)
    for part in range(parts):
        path = str(base / f"{name}{part}.sseg")
        build_segment(table.slice(part * size, size), path, SegmentId(datasource, Interval.of(interval), "v1", part),
                      column_types={"tags": MULTI_VALUE_STRING}, column_options={"tags": options or {}})
        out.append(Segment.open(path))
    return out


def _run(catalog, segments, sql: str) -> pa.Table:
    return execute_sql(sql, catalog, lambda q: execute(q, segments).table, (), {})


# ---- Druid's published example ------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    from common.types.interval import parse_instant

    table = pa.table({
        "__time": pa.array([parse_instant(t) for t, _, _ in DOCS_ROWS], pa.int64()),
        "label": [label for _, label, _ in DOCS_ROWS],
        "tags": pa.array([tags for _, _, tags in DOCS_ROWS], pa.list_(pa.string())),
    })
    segments = _segments(table, tmp_path_factory.mktemp("mvd"), "d", "mvd_example_rollup", "2011-01-01/2011-02-01", 1)
    return FakeCatalog({"mvd_example_rollup": union_schema(segments)}), segments


def test_docs_filter_or(docs):
    got = _run(*docs, 'SELECT * FROM "mvd_example_rollup" WHERE tags = \'t1\' OR tags = \'t3\'')
    assert got.column("label").to_pylist() == ["row1", "row2"]
    assert got.column("tags").to_pylist() == ['["t1","t2","t3"]', '["t3","t4","t5"]']
    assert got.schema.field("tags").type == pa.string()


def test_docs_empty_row_is_null(docs):
    got = _run(*docs, 'SELECT label, tags FROM "mvd_example_rollup" WHERE tags is null')
    assert got.to_pylist() == [{"label": "row4", "tags": None}]


def test_docs_group_by_without_filter(docs):
    got = _run(*docs, 'SELECT label, tags FROM "mvd_example_rollup" GROUP BY 1,2')
    assert got.to_pylist() == [
        {"label": "row1", "tags": "t1"}, {"label": "row1", "tags": "t2"}, {"label": "row1", "tags": "t3"},
        {"label": "row2", "tags": "t3"}, {"label": "row2", "tags": "t4"}, {"label": "row2", "tags": "t5"},
        {"label": "row3", "tags": "t5"}, {"label": "row3", "tags": "t6"}, {"label": "row3", "tags": "t7"},
        {"label": "row4", "tags": None}]


def test_docs_group_by_with_filter(docs):
    got = _run(*docs, "SELECT label, tags FROM \"mvd_example_rollup\" WHERE label in ('row1','row2') GROUP BY 1,2")
    assert got.to_pylist() == [
        {"label": "row1", "tags": "t1"}, {"label": "row1", "tags": "t2"}, {"label": "row1", "tags": "t3"},
        {"label": "row2", "tags": "t3"}, {"label": "row2", "tags": "t4"}, {"label": "row2", "tags": "t5"}]


def test_docs_counts_per_tag(docs):
    # The page's native groupBy (dimension tags, count): the rows exploded and merged. Its listing
    # predates row4; that row, without values, is the null group (as the SQL example shows it).
    got = _run(*docs, 'SELECT tags, COUNT(*) AS "count" FROM "mvd_example_rollup" GROUP BY tags')
    assert got.to_pylist() == [{"tags": None, "count": 1}] + [
        {"tags": t, "count": c} for t, c in [("t1", 1), ("t2", 1), ("t3", 2), ("t4", 1), ("t5", 2), ("t6", 1),
                                             ("t7", 1)]]


def test_docs_selector_filter_then_explode(docs):
    # The page's groupBy with the selector filter t3: the filter keeps row1 and row2, whose
    # values are all grouped ("t1", "t2", "t4" and "t5" included, as the page explains).
    got = _run(*docs, "SELECT tags, COUNT(*) AS \"count\" FROM \"mvd_example_rollup\" WHERE tags = 't3' GROUP BY tags")
    assert got.to_pylist() == [{"tags": t, "count": c} for t, c in [("t1", 1), ("t2", 1), ("t3", 2), ("t4", 1),
                                                                     ("t5", 1)]]
    # ... and with only the filtered value kept (the page's filtered dimensionSpec, MV_FILTER_ONLY
    # in SQL): the t3 group alone.
    got = _run(*docs, "SELECT MV_FILTER_ONLY(tags, ARRAY['t3']) AS tags, COUNT(*) AS \"count\" "
                      "FROM \"mvd_example_rollup\" WHERE tags = 't3' GROUP BY 1")
    assert got.to_pylist() == [{"tags": "t3", "count": 2}]
    got = _run(*docs, "SELECT MV_FILTER_NONE(tags, ARRAY['t3', 't5']), COUNT(*) FROM mvd_example_rollup GROUP BY 1")
    assert got.to_pylist() == [{"EXPR$0": None, "EXPR$1": 1}] + [{"EXPR$0": t, "EXPR$1": 1}
                                                                for t in ["t1", "t2", "t4", "t6", "t7"]]


NATIVE_GROUP_BY = {"queryType": "groupBy", "dataSource": "mvd_example_rollup",
                   "intervals": ["1970-01-01T00:00:00.000Z/3000-01-01T00:00:00.000Z"], "granularity": {"type": "all"},
                   "dimensions": [{"type": "default", "dimension": "tags", "outputName": "tags"}],
                   "aggregations": [{"type": "count", "name": "count"}]}


def test_docs_native_group_by(docs):
    _, segments = docs
    got = execute(NATIVE_GROUP_BY, segments).table.to_pylist()
    # The page's result, plus row4 (no values) in the null group: its listing predates row4.
    assert got == [{"tags": None, "count": 1}] + [{"tags": t, "count": c} for t, c in [
        ("t1", 1), ("t2", 1), ("t3", 2), ("t4", 1), ("t5", 2), ("t6", 1), ("t7", 1)]]


def test_docs_native_group_by_with_selector_filter(docs):
    _, segments = docs
    query = {**NATIVE_GROUP_BY, "filter": {"type": "selector", "dimension": "tags", "value": "t3"}}
    assert execute(query, segments).table.to_pylist() == [
        {"tags": t, "count": c} for t, c in [("t1", 1), ("t2", 1), ("t3", 2), ("t4", 1), ("t5", 1)]]


def test_docs_native_top_n_with_and_filter(docs):
    # "a topN on the dimension tags with filter t1 AND t3 would match only row1, and generate a
    # result with three groups: t1, t2, and t3"
    _, segments = docs
    query = {"queryType": "topN", "dataSource": "mvd_example_rollup", "intervals": ["1970/3000"], "granularity": "all",
             "dimension": "tags", "metric": "count", "threshold": 10, "aggregations": [{"type": "count", "name": "count"}],
             "filter": {"type": "and", "fields": [{"type": "selector", "dimension": "tags", "value": "t1"},
                                                  {"type": "selector", "dimension": "tags", "value": "t3"}]}}
    assert sorted(r["tags"] for r in execute(query, segments).table.to_pylist()) == ["t1", "t2", "t3"]


def test_docs_and_filter_matches_row1_only(docs):
    got = _run(*docs, "SELECT label FROM \"mvd_example_rollup\" WHERE tags = 't1' AND tags = 't3'")
    assert got.column("label").to_pylist() == ["row1"]


def test_filters_plan_to_column_filters(docs):
    catalog, _ = docs
    plan = plan_sql("SELECT label FROM mvd_example_rollup WHERE tags = 't1' OR tags IN ('t4', 't7') "
                    "OR tags LIKE 't9%' OR MV_CONTAINS(tags, 't2')", catalog, (), {})
    flt = json.dumps(plan.native_queries()[0]["filter"])
    assert '"equals"' in flt and '"in"' in flt and '"like"' in flt and '"arrayContainsElement"' in flt
    assert '"expression"' not in flt


def test_information_schema_says_varchar(docs):
    got = _run(*docs, "SELECT COLUMN_NAME, DATA_TYPE, JDBC_TYPE, ELEMENT_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                      "WHERE TABLE_NAME = 'mvd_example_rollup' AND COLUMN_NAME = 'tags'")
    assert got.to_pylist() == [{"COLUMN_NAME": "tags", "DATA_TYPE": "VARCHAR", "JDBC_TYPE": 12, "ELEMENT_TYPE": None}]


@pytest.mark.parametrize("sql", [
    "SELECT UPPER(tags) FROM mvd_example_rollup",
    # value by value only as a native filter against constants: elsewhere a list would be compared
    "SELECT CASE WHEN tags = 't1' THEN 1 ELSE 0 END FROM mvd_example_rollup",
    "SELECT label FROM mvd_example_rollup WHERE tags = label",
    # Druid aggregates each value; rows would give other answers
    "SELECT COUNT(DISTINCT tags) FROM mvd_example_rollup",
    "SELECT APPROX_COUNT_DISTINCT(tags) FROM mvd_example_rollup",
    "SELECT MIN(tags) FROM mvd_example_rollup",
])
def test_what_would_read_the_lists_as_one_value_is_refused_with_a_hint(docs, sql):
    from common.errors import ValidationError

    with pytest.raises(ValidationError, match="multi-value string 'tags'.*(MV_TO_ARRAY|MV_CONTAINS)"):
        _run(*docs, sql)


def test_count_and_filtered_aggregates_read_rows(docs):
    got = _run(*docs, "SELECT COUNT(tags) AS c, COUNT(*) FILTER (WHERE tags = 't3') AS f FROM mvd_example_rollup")
    assert got.to_pylist() == [{"c": 3, "f": 2}]


def test_segments_written_before_the_column_became_multi_value(tmp_path):
    # An older segment holds tags as single strings, a newer one as a multi-value string: the
    # union is multi-value, and the old rows read as one value each, in filters, groups and text.
    old = pa.table({"__time": pa.array([T_OLD, T_OLD + 1], pa.int64()), "tags": pa.array(["a", None])})
    new = pa.table({"__time": pa.array([T_OLD + DAY_MS], pa.int64()),
                    "tags": pa.array([["b", "a"]], pa.list_(pa.string()))})
    segments = []
    for i, (table, types) in enumerate([(old, {}), (new, {"tags": MULTI_VALUE_STRING})]):
        path = str(tmp_path / f"s{i}.sseg")
        iv = Interval(T_OLD + i * DAY_MS, T_OLD + (i + 1) * DAY_MS)
        build_segment(table, path, SegmentId("mixed", iv, "v1", 0), column_types=types)
        segments.append(Segment.open(path))
    catalog = FakeCatalog({"mixed": union_schema(segments)})
    assert catalog.schemas["mixed"]["tags"] == MULTI_VALUE_STRING
    assert _run(catalog, segments, "SELECT tags FROM mixed ORDER BY __time").column(0).to_pylist() == \
        ["a", None, '["a","b"]']
    assert _run(catalog, segments, "SELECT COUNT(*) AS c FROM mixed WHERE tags = 'a'").to_pylist() == [{"c": 2}]
    got = _run(catalog, segments, "SELECT tags, COUNT(*) AS c FROM mixed GROUP BY 1").to_pylist()
    assert got == [{"tags": None, "c": 1}, {"tags": "a", "c": 2}, {"tags": "b", "c": 1}]
    native = {"queryType": "groupBy", "dataSource": "mixed", "intervals": ["2020/2021"], "granularity": "all",
              "dimensions": ["tags"], "aggregations": [{"type": "count", "name": "c"}]}
    assert execute(native, segments).table.to_pylist() == got


# ---- DuckDB differential on mean rows -----------------------------------------------------------

WORDS = ["a", "b", "", "é", "ключ", "zz", "a b", "B"]
MODES = {"SORTED_ARRAY": "mv", "SORTED_SET": "mvs", "ARRAY": "mva"}


def _mean_rows(n: int = 600) -> pa.Table:
    rng = random.Random(3030)
    tags = []
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            tags.append(None)
        elif r < 0.2:
            tags.append([])
        elif r < 0.24:
            tags.append([rng.choice(WORDS) for _ in range(rng.randint(60, 200))])  # long, full of repeats
        else:
            tags.append([None if rng.random() < 0.1 else rng.choice(WORDS) for _ in range(rng.randint(1, 5))])
    return pa.table({
        "__time": pa.array([1577836800000 + i * 60_000 for i in range(n)], pa.int64()),
        "n": pa.array([rng.choice([1, 2, 5, None]) for _ in range(n)], pa.int64()),
        "tags": pa.array(tags, pa.list_(pa.string())),
    })


# The stored lists as DuckDB spells each mode (an empty list reads as NULL). Druid sorts a null
# value first; DuckDB's list_distinct drops nulls, so a set keeps one null back in front.
_HAS_NULL = "len(list_filter(tags, lambda x: x IS NULL)) > 0"
_STORED = {
    "SORTED_ARRAY": "list_sort(tags, 'ASC', 'NULLS FIRST')",
    "SORTED_SET": f"CASE WHEN {_HAS_NULL} THEN list_prepend(NULL, list_sort(list_distinct(tags))) "
                  f"ELSE list_sort(list_distinct(tags)) END",
    "ARRAY": "tags",
}


@pytest.fixture(scope="module")
def mean(tmp_path_factory):
    table = _mean_rows()
    base = tmp_path_factory.mktemp("mv_mean")
    schemas, segments = {}, []
    for mode, name in MODES.items():
        segs = _segments(table, base, name, name, "2020-01-01/2020-01-02", 3, {"multiValueHandling": mode})
        schemas[name] = union_schema(segs)
        segments += segs
    catalog = FakeCatalog(schemas)
    con = duck_connect()
    con.register("t_arrow", table)
    for mode, name in MODES.items():
        con.execute(f"CREATE TABLE {name} AS SELECT __time, n, CASE WHEN len(tags) = 0 THEN NULL "
                    f"ELSE {_STORED[mode]} END AS tags FROM t_arrow")
    con.unregister("t_arrow")
    # any value of l passes p: true / unknown (a null value, none passing) / false; a null row is
    # one null value (Druid's empty row is null).
    con.execute("CREATE MACRO vals(l) AS CASE WHEN l IS NULL THEN [NULL::VARCHAR] ELSE l END")
    yield catalog, segments, con
    con.close()


def _strata(env, sql: str) -> list[tuple]:
    catalog, segments, _ = env
    return [tuple(json.dumps(v) if isinstance(v, list) else v for v in row)
            for row in engine_rows(_run(catalog, segments, sql))]


def _duck(env, sql: str) -> list[tuple]:
    return [tuple(json.dumps(v) if isinstance(v, list) else v for v in row) for row in duck_rows(env[2], sql)]


def _any(pred: str) -> str:
    """DuckDB: the row filter Druid's any-value rule makes of the per-value test ``pred`` (on x)."""
    hit = f"len(list_filter(vals(tags), lambda x: ({pred}) IS TRUE)) > 0"
    unknown = f"len(list_filter(vals(tags), lambda x: ({pred}) IS NULL)) > 0"
    return f"(CASE WHEN {hit} THEN TRUE WHEN {unknown} THEN NULL ELSE FALSE END)"


FILTERS = [
    ("tags = 'a'", "x = 'a'"),
    ("tags = ''", "x = ''"),
    ("tags IN ('é', 'zz', 'nope')", "x IN ('é', 'zz', 'nope')"),
    ("tags LIKE 'a%'", "x LIKE 'a%'"),
    ("tags LIKE '%b'", "x LIKE '%b'"),
    ("tags > 'b'", "x > 'b'"),
    ("tags >= 'B' AND tags < 'a b'", None),
    ("tags <> 'a'", None),
    ("NOT (tags = 'a' OR tags = 'b')", None),
]


def _duck_condition(sql_condition: str, value_pred: str | None) -> str:
    if value_pred is not None:
        return _any(value_pred)
    is_a, is_b = _any("x = 'a'"), _any("x = 'b'")
    return {
        "tags >= 'B' AND tags < 'a b'": _any("x >= 'B'") + " AND " + _any("x < 'a b'"),
        "tags <> 'a'": f"NOT {is_a}",
        "NOT (tags = 'a' OR tags = 'b')": f"NOT ({is_a} OR {is_b})",
    }[sql_condition]


@pytest.mark.parametrize("name", list(MODES.values()))
@pytest.mark.parametrize("condition,value_pred", FILTERS)
def test_filter_matches_any_value(mean, name, condition, value_pred):
    got = _strata(mean, f"SELECT __time, n FROM {name} WHERE {condition}")
    want = _duck(mean, f"SELECT __time, n FROM {name} WHERE {_duck_condition(condition, value_pred)}")
    assert_rows_equal(got, want, ordered=False)


@pytest.mark.parametrize("name", list(MODES.values()))
@pytest.mark.parametrize("condition,value_pred", FILTERS)
def test_filter_from_values_matches_any_value(mean, name, condition, value_pred):
    # OR with an expression no index answers: the whole condition runs on the rows' values.
    got = _strata(mean, f"SELECT __time FROM {name} WHERE ({condition}) OR n * 2 = 10")
    want = _duck(mean, f"SELECT __time FROM {name} WHERE ({_duck_condition(condition, value_pred)}) OR n * 2 = 10")
    assert_rows_equal(got, want, ordered=False)
    catalog = mean[0]
    flt = plan_sql(f"SELECT __time FROM {name} WHERE ({condition}) OR n * 2 = 10", catalog, (), {}).native_queries()
    assert '"expression"' in json.dumps(flt)


@pytest.mark.parametrize("name", list(MODES.values()))
def test_is_null_matches_rows_without_values_or_with_a_null(mean, name):
    got = _strata(mean, f"SELECT __time FROM {name} WHERE tags IS NULL")
    want = _duck(mean, f"SELECT __time FROM {name} WHERE tags IS NULL OR {_HAS_NULL}")
    assert_rows_equal(got, want, ordered=False)
    got = _strata(mean, f"SELECT COUNT(*) FROM {name} WHERE tags IS NOT NULL")
    want = _duck(mean, f"SELECT COUNT(*) FROM {name} WHERE tags IS NOT NULL AND NOT {_HAS_NULL}")
    assert got == want


@pytest.mark.parametrize("name", list(MODES.values()))
def test_group_by_one_group_per_value(mean, name):
    got = _strata(mean, f"SELECT tags, COUNT(*), SUM(n) FROM {name} GROUP BY tags")
    want = _duck(mean, f"SELECT v, COUNT(*), SUM(n) FROM {name}, UNNEST(vals(tags)) AS u(v) GROUP BY v")
    assert_rows_equal(got, want, ordered=False)


@pytest.mark.parametrize("name", list(MODES.values()))
def test_native_group_by_explodes_each_row(mean, name):
    _, segments, con = mean
    query = {"queryType": "groupBy", "dataSource": name, "intervals": ["2020-01-01/2020-01-02"], "granularity": "all",
             "dimensions": ["tags", "n"], "aggregations": [{"type": "count", "name": "c"},
                                                          {"type": "longSum", "name": "s", "fieldName": "n"}],
             "filter": {"type": "not", "field": {"type": "equals", "column": "tags", "matchValue": "zz",
                                                 "matchValueType": "STRING"}}}
    got = engine_rows(execute(query, segments).table, ["tags", "n", "c", "s"])
    has_zz = _any("x = 'zz'")
    want = duck_rows(con, f"SELECT v, n, COUNT(*), SUM(n) FROM {name}, UNNEST(vals(tags)) AS u(v) "
                          f"WHERE NOT {has_zz} GROUP BY v, n")
    assert_rows_equal(got, want, ordered=False)


@pytest.mark.parametrize("name", list(MODES.values()))
def test_group_by_after_filter_keeps_every_value_of_matching_rows(mean, name):
    got = _strata(mean, f"SELECT tags AS k, COUNT(*) FROM {name} WHERE tags = 'a' GROUP BY 1")
    want = _duck(mean, f"SELECT v, COUNT(*) FROM {name}, UNNEST(vals(tags)) AS u(v) "
                       f"WHERE list_contains(tags, 'a') GROUP BY v")
    assert_rows_equal(got, want, ordered=False)


@pytest.mark.parametrize("name", list(MODES.values()))
def test_stored_values_and_mv_functions(mean, name):
    got = _strata(mean, f"SELECT __time, MV_TO_ARRAY(tags), MV_LENGTH(tags), MV_OFFSET(tags, 0), "
                        f"MV_ORDINAL(tags, 2), MV_CONTAINS(tags, 'zz') FROM {name}")
    want = _duck(mean, f"SELECT __time, tags, len(tags), tags[1], tags[2], list_contains(tags, 'zz') FROM {name}")
    assert_rows_equal(got, want, ordered=False)


@pytest.mark.parametrize("name", list(MODES.values()))
def test_selected_as_druid_text(mean, name):
    got = _strata(mean, f"SELECT __time, tags FROM {name}")
    rows = duck_rows(mean[2], f"SELECT __time, tags FROM {name}")

    def text(values):
        if not values:
            return None
        if len(values) == 1:
            return values[0]
        return json.dumps(values, ensure_ascii=False, separators=(",", ":"))

    assert_rows_equal(got, [(t, text(v)) for t, v in rows], ordered=False)


@pytest.mark.parametrize("name", list(MODES.values()))
def test_unnest_of_mv_to_array(mean, name):
    got = _strata(mean, f"SELECT u.v, COUNT(*) FROM {name} CROSS JOIN UNNEST(MV_TO_ARRAY(tags)) AS u(v) GROUP BY 1")
    want = _duck(mean, f"SELECT v, COUNT(*) FROM {name}, UNNEST(tags) AS u(v) GROUP BY v")
    assert_rows_equal(got, want, ordered=False)


@pytest.mark.parametrize("name", list(MODES.values()))
def test_mv_overlap_and_contains_filters(mean, name):
    got = _strata(mean, f"SELECT COUNT(*) FROM {name} WHERE MV_OVERLAP(tags, ARRAY['é', 'B'])")
    want = _duck(mean, f"SELECT COUNT(*) FROM {name} WHERE list_has_any(tags, ['é', 'B'])")
    assert got == want
    got = _strata(mean, f"SELECT COUNT(*) FROM {name} WHERE MV_CONTAINS(tags, 'ключ') AND NOT MV_CONTAINS(tags, 'a')")
    want = _duck(mean, f"SELECT COUNT(*) FROM {name} WHERE list_contains(tags, 'ключ') AND NOT list_contains(tags, 'a')")
    assert got == want
