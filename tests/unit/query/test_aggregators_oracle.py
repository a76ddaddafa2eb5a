"""Aggregators and post-aggregators against DuckDB, with SQL null semantics: COUNT is never null,
SUM/MIN/MAX of a group without a non-null input is null. Also HLL sketches against the exact
distinct count, and exact distinct counts through a groupBy subquery."""

import math

import pyarrow as pa
import pytest

from common.query import execute
from common.query.aggregators import AnyValue, EarliestLatest, aggregator_from_json
from tests.conftest import EVENTS_START
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows, run_events

DAY = 86_400_000

# (native aggregator, SQL expression)
SIMPLE = {
    "count": ({"type": "count"}, "count(*)"),
    "longSum": ({"type": "longSum", "fieldName": "added"}, "sum(added)"),
    "longMin": ({"type": "longMin", "fieldName": "delta"}, "min(delta)"),
    "longMax": ({"type": "longMax", "fieldName": "added"}, "max(added)"),
    "doubleSum": ({"type": "doubleSum", "fieldName": "price"}, "sum(price)"),
    "doubleMin": ({"type": "doubleMin", "fieldName": "price"}, "min(price)"),
    "doubleMax": ({"type": "doubleMax", "fieldName": "price"}, "max(price)"),
    "floatSum": ({"type": "floatSum", "fieldName": "score"}, "sum(score)"),
    "floatMin": ({"type": "floatMin", "fieldName": "score"}, "min(score)"),
    "floatMax": ({"type": "floatMax", "fieldName": "score"}, "max(score)"),
    "doubleSum-of-long": ({"type": "doubleSum", "fieldName": "added"}, "sum(added)::DOUBLE"),
    # Druid casts each double to long before summing: truncation toward zero.
    "longSum-of-double": ({"type": "longSum", "fieldName": "price"}, "sum(CAST(trunc(price) AS BIGINT))"),
    "longMax-of-double": ({"type": "longMax", "fieldName": "price"}, "max(CAST(trunc(price) AS BIGINT))"),
    "longSum-missing-in-a-segment": ({"type": "longSum", "fieldName": "metro"}, "sum(metro)"),
    "doubleMin-missing-in-a-segment": ({"type": "doubleMin", "fieldName": "metro"}, "min(metro)::DOUBLE"),
    "longFirst": ({"type": "longFirst", "fieldName": "added"}, "arg_min(added, t) FILTER (WHERE added IS NOT NULL)"),
    "longLast": ({"type": "longLast", "fieldName": "added"}, "arg_max(added, t) FILTER (WHERE added IS NOT NULL)"),
    "doubleFirst": ({"type": "doubleFirst", "fieldName": "price"}, "arg_min(price, t) FILTER (WHERE price IS NOT NULL)"),
    "doubleLast": ({"type": "doubleLast", "fieldName": "price"}, "arg_max(price, t) FILTER (WHERE price IS NOT NULL)"),
    "stringFirst": ({"type": "stringFirst", "fieldName": "page"}, "arg_min(page, t) FILTER (WHERE page IS NOT NULL)"),
    "stringLast": ({"type": "stringLast", "fieldName": "page"}, "arg_max(page, t) FILTER (WHERE page IS NOT NULL)"),
    "stringLast-missing-in-a-segment": ({"type": "stringLast", "fieldName": "country"},
                                        "arg_max(country, t) FILTER (WHERE country IS NOT NULL)"),
    "filtered-count": ({"type": "filtered", "filter": {"type": "equals", "column": "page", "matchValue": "ab"},
                        "aggregator": {"type": "count", "name": "x"}}, "count(*) FILTER (WHERE page = 'ab')"),
    "filtered-sum-not": ({"type": "filtered",
                          "filter": {"type": "not", "field": {"type": "in", "dimension": "small", "values": [1, 2]}},
                          "aggregator": {"type": "longSum", "fieldName": "delta", "name": "x"}},
                         "sum(delta) FILTER (WHERE NOT small IN (1, 2))"),
    "filtered-max-on-nulls": ({"type": "filtered", "filter": {"type": "null", "column": "added"},
                               "aggregator": {"type": "longMax", "fieldName": "added", "name": "x"}},
                              "max(added) FILTER (WHERE added IS NULL)"),
    "filtered-min-range": ({"type": "filtered",
                            "filter": {"type": "range", "column": "delta", "lower": 0, "matchValueType": "LONG"},
                            "aggregator": {"type": "doubleMin", "fieldName": "price", "name": "x"}},
                           "min(price) FILTER (WHERE delta >= 0)"),
}


def _agg(name: str) -> dict:
    spec = dict(SIMPLE[name][0])
    spec["name"] = "m"
    return spec


@pytest.mark.parametrize("name", list(SIMPLE))
def test_aggregator_by_channel(events, events_duck, name):
    got = engine_rows(run_events(events, {"queryType": "groupBy", "dimensions": ["channel"],
                                          "aggregations": [_agg(name)]}).table, ["channel", "m"])
    want = duck_rows(events_duck, f"SELECT channel, {SIMPLE[name][1]} FROM events GROUP BY channel "
                                  "ORDER BY channel NULLS FIRST")
    assert_rows_equal(got, want, rel=1e-6 if name.startswith("float") else 1e-9)


@pytest.mark.parametrize("name", list(SIMPLE))
def test_aggregator_by_day_timeseries(events, events_duck, name):
    got = engine_rows(run_events(events, {"queryType": "timeseries", "granularity": "day",
                                          "aggregations": [_agg(name)]}).table, ["__time", "m"])
    want = duck_rows(events_duck, f"SELECT t // {DAY} * {DAY} b, {SIMPLE[name][1]} FROM events GROUP BY b ORDER BY b")
    assert_rows_equal(got, want, rel=1e-6 if name.startswith("float") else 1e-9)


def test_all_null_groups_are_null_but_count_is_zero(events):
    aggs = [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "metro"},
            {"type": "longMin", "name": "mn", "fieldName": "metro"}, {"type": "doubleMax", "name": "mx",
                                                                      "fieldName": "metro"},
            {"type": "longFirst", "name": "f", "fieldName": "metro"}, {"type": "longAny", "name": "a",
                                                                       "fieldName": "metro"},
            {"type": "filtered", "name": "fc", "filter": {"type": "false"}, "aggregator": {"type": "count",
                                                                                              "name": "fc"}},
            {"type": "filtered", "name": "fs", "filter": {"type": "false"},
             "aggregator": {"type": "doubleSum", "name": "fs", "fieldName": "price"}}]
    rows = run_events(events, {"queryType": "timeseries", "granularity": "day", "aggregations": aggs}).table.to_pylist()
    last = rows[-1]  # day 3's segment has no 'metro' column at all
    assert {k: last[k] for k in ("c", "s", "mn", "mx", "f", "a", "fc", "fs")} == {
        "c": 1200, "s": None, "mn": None, "mx": None, "f": None, "a": None, "fc": 0, "fs": None}
    assert all(r["fc"] == 0 and r["fs"] is None for r in rows)
    assert rows[0]["s"] is not None


def test_result_types(events):
    aggs = [{"type": t, "name": t, "fieldName": f} for t, f in (
        ("longSum", "added"), ("doubleSum", "added"), ("floatSum", "score"), ("longMax", "price"),
        ("stringFirst", "page"), ("doubleLast", "price"))] + [{"type": "count", "name": "count"}]
    schema = run_events(events, {"queryType": "timeseries", "aggregations": aggs}).table.schema
    assert [str(schema.field(a["name"]).type) for a in aggs] == [
        "int64", "double", "float", "int64", "string", "double", "int64"]


@pytest.mark.parametrize("kind,field", [("stringAny", "country"), ("longAny", "added"), ("doubleAny", "price"),
                                        ("floatAny", "score")])
def test_any_returns_a_value_of_the_group(events, events_duck, kind, field):
    got = run_events(events, {"queryType": "groupBy", "dimensions": ["small"],
                              "aggregations": [{"type": kind, "name": "a", "fieldName": field}]}).table
    values = {}
    for small, v in events_duck.execute(f"SELECT small, {field} FROM events").fetchall():
        values.setdefault(small, set()).add(v)
    assert got.num_rows == len(values)
    for small, a in zip(got.column("small").to_pylist(), got.column("a").to_pylist()):
        non_null = values[small] - {None}
        assert (a is None) == (not non_null)
        assert a is None or (a in non_null or any(math.isclose(a, v) for v in non_null if isinstance(v, float)))


def test_first_last_with_time_column(events, events_duck):
    aggs = [{"type": "longFirst", "name": "f", "fieldName": "rid", "timeColumn": "delta"},
            {"type": "longLast", "name": "l", "fieldName": "rid", "timeColumn": "delta"}]
    got = run_events(events, {"queryType": "groupBy", "dimensions": ["channel"], "aggregations": aggs}).table
    # delta has ties: the engine takes the earliest row among equal keys, so only check the key.
    want = dict(((c, (lo, hi)) for c, lo, hi in events_duck.execute(
        "SELECT channel, min(delta), max(delta) FROM events GROUP BY channel").fetchall()))
    delta_of = dict(events_duck.execute("SELECT rid, delta FROM events").fetchall())
    for ch, f, l in zip(*(got.column(n).to_pylist() for n in ("channel", "f", "l"))):
        assert (delta_of[f], delta_of[l]) == want[ch]


@pytest.mark.parametrize("agg,sql", [
    ({"type": "doubleSum", "fieldName": "code"}, "sum(TRY_CAST(code AS DOUBLE))"),
    ({"type": "longMin", "fieldName": "page"}, "min(TRY_CAST(page AS BIGINT))"),
    ({"type": "doubleFirst", "fieldName": "code"},
     "arg_min(TRY_CAST(code AS DOUBLE), t) FILTER (WHERE TRY_CAST(code AS DOUBLE) IS NOT NULL)"),
])
def test_numeric_aggregator_over_strings(events, events_duck, agg, sql):
    got = engine_rows(run_events(events, {"queryType": "timeseries", "aggregations": [dict(agg, name="m")]}).table,
                      ["m"])
    assert_rows_equal(got, duck_rows(events_duck, f"SELECT {sql} FROM events"))


# ---- HLL sketches and exact distinct counts ------------------------------------------------------------
def test_hll_within_two_percent(events, events_duck):
    aggs = [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "lgK": 12},
            {"type": "HLLSketchBuild", "name": "c", "fieldName": "country"},  # absent from one segment
            {"type": "HLLSketchBuild", "name": "ur", "fieldName": "user", "round": True},
            {"type": "HLLSketchBuild", "name": "a", "fieldName": "added"}]
    row = run_events(events, {"queryType": "timeseries", "aggregations": aggs}).table.to_pylist()[0]
    exact_users, exact_added = events_duck.execute("SELECT count(DISTINCT \"user\"), count(DISTINCT added) "
                                                   "FROM events").fetchone()
    assert exact_users > 2500  # enough distinct values for the estimate to matter
    assert abs(row["u"] - exact_users) <= 0.02 * exact_users
    assert row["ur"] == round(row["u"]) and isinstance(row["ur"], int)
    assert abs(row["a"] - exact_added) <= 0.02 * exact_added
    assert round(row["c"]) == events_duck.execute("SELECT count(DISTINCT country) FROM events").fetchone()[0]


def test_hll_per_group_and_small_cardinalities(events, events_duck):
    got = run_events(events, {"queryType": "groupBy", "dimensions": ["channel"],
                              "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user"},
                                               {"type": "HLLSketchBuild", "name": "p", "fieldName": "page"},
                                               {"type": "HLLSketchBuild", "name": "s", "fieldName": "score"}]}).table
    want = events_duck.execute("SELECT channel, count(DISTINCT \"user\"), count(DISTINCT page), count(DISTINCT score) "
                               "FROM events GROUP BY channel ORDER BY channel NULLS FIRST").fetchall()
    for (ch, u, p, s), (wch, wu, wp, ws) in zip(engine_rows(got, ["channel", "u", "p", "s"]), want):
        assert ch == wch
        # lgK 12: relative standard error 1.04/sqrt(4096) = 1.6%; allow three of them.
        assert abs(u - wu) <= 0.05 * wu
        assert round(p) == wp and round(s) == ws  # tiny sets are counted exactly


def test_hll_merges_across_segments_exactly_like_one_sketch(events):
    per_day = run_events(events, {"queryType": "timeseries", "granularity": "day",
                                  "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}]})
    total = run_events(events, {"queryType": "timeseries",
                                "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}]})
    days = per_day.table.column("u").to_pylist()
    assert len(days) == 3 and total.table.column("u")[0].as_py() < sum(days)  # users repeat across days


def _distinct_users_subquery(granularity: str, intervals: list[str]) -> dict:
    inner = {"queryType": "groupBy", "dataSource": "events", "intervals": intervals, "granularity": granularity,
             "dimensions": ["user"], "aggregations": [{"type": "count", "name": "rows"}]}
    return {"queryType": "timeseries", "dataSource": {"type": "query", "query": inner}, "intervals": intervals,
            "filter": {"type": "not", "field": {"type": "null", "column": "user"}},
            "aggregations": [{"type": "count", "name": "distinct_users"},
                             {"type": "longSum", "name": "rows", "fieldName": "rows"}]}


def test_exact_distinct_per_day_via_subquery(events, events_duck):
    q = _distinct_users_subquery("day", ["2020-01-01/2020-01-04"])
    q["granularity"] = "day"
    got = engine_rows(execute(q, events.segments).table, ["__time", "distinct_users", "rows"])
    want = duck_rows(events_duck, f"SELECT t // {DAY} * {DAY} b, count(DISTINCT \"user\"), count(\"user\") "
                                  "FROM events GROUP BY b ORDER BY b")
    assert got == want


def test_exact_distinct_via_subquery(events, events_duck):
    got = execute(_distinct_users_subquery("all", ["2020-01-01/2020-01-04"]), events.segments).table
    want = events_duck.execute("SELECT count(DISTINCT \"user\"), count(\"user\") FROM events").fetchone()
    assert engine_rows(got, ["__time", "distinct_users", "rows"]) == [(EVENTS_START, *want)]


def test_exact_distinct_via_subquery_values(events, events_duck):
    # Same as above with outer intervals that happen to include epoch 0: the counts are right.
    q = _distinct_users_subquery("all", ["2020-01-01/2020-01-04"])
    q["intervals"] = ["1970-01-01/2100-01-01"]
    got = execute(q, events.segments).table
    want = events_duck.execute("SELECT count(DISTINCT \"user\"), count(\"user\") FROM events").fetchone()
    assert engine_rows(got, ["distinct_users", "rows"]) == [want]


# ---- post-aggregators ------------------------------------------------------------------------------
def _field(name):
    return {"type": "fieldAccess", "fieldName": name}


def _arith(name, fn, *fields):
    return {"type": "arithmetic", "name": name, "fn": fn, "fields": list(fields)}


def test_arithmetic_post_aggregators(events, events_duck):
    aggs = [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"},
            {"type": "longSum", "name": "d", "fieldName": "delta"}, {"type": "doubleSum", "name": "p",
                                                                     "fieldName": "price"},
            {"type": "filtered", "name": "z", "filter": {"type": "equals", "column": "channel", "matchValue": "é漢字"},
             "aggregator": {"type": "count", "name": "z"}}]
    posts = [
        _arith("plus", "+", _field("a"), _field("d"), {"type": "constant", "name": "k", "value": 1}),
        _arith("minus", "-", _field("a"), _field("d")),
        _arith("times", "*", _field("c"), {"type": "constant", "name": "k", "value": 2.5}),
        _arith("div", "/", _field("p"), _field("c")),
        _arith("div_zero", "/", _field("a"), _field("z")),  # z is 0 for some groups
        _arith("quot", "quotient", _field("a"), _field("c")),
        _arith("nested", "*", _arith("inner", "-", _field("a"), _field("d")), {"type": "constant", "name": "k",
                                                                               "value": 0.5}),
        {"type": "finalizingFieldAccess", "name": "c_again", "fieldName": "c"},
        {"type": "constant", "name": "const", "value": 7},
    ]
    table = run_events(events, {"queryType": "groupBy", "dimensions": ["channel", "small"], "aggregations": aggs,
                                "postAggregations": posts}).table
    assert table.column_names[-len(posts):] == [p["name"] for p in posts]
    got = engine_rows(table, ["channel", "small"] + [p["name"] for p in posts])
    want = duck_rows(events_duck, """
        SELECT channel, small,
               sum(added) + sum(delta) + 1, sum(added) - sum(delta), count(*) * 2.5, sum(price) / count(*),
               sum(added) / NULLIF(count(*) FILTER (WHERE channel = 'é漢字'), 0), sum(added) / count(*),
               (sum(added) - sum(delta)) * 0.5, count(*), 7
        FROM events GROUP BY ALL ORDER BY channel NULLS FIRST, small NULLS FIRST""")
    assert_rows_equal(got, want)
    # Division by zero is null, never inf or Druid's legacy 0.
    assert [r[6] is None for r in got] == [r[0] != "é漢字" for r in got]


def test_post_aggregator_with_null_input_and_ordering(events, events_duck):
    aggs = [{"type": "longSum", "name": "m", "fieldName": "metro"}, {"type": "count", "name": "c"}]
    posts = [_arith("per_row", "/", _field("m"), _field("c"))]
    got = run_events(events, {"queryType": "timeseries", "granularity": "day", "aggregations": aggs,
                              "postAggregations": posts}).table
    want = duck_rows(events_duck, f"SELECT t // {DAY} * {DAY} b, sum(metro), count(*), sum(metro) / count(*) "
                                  "FROM events GROUP BY b ORDER BY b")
    assert_rows_equal(engine_rows(got), want)
    assert got.column("per_row")[2].as_py() is None


def _has_expr() -> bool:
    try:
        from common.expr import parse  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_expr(), reason="common.expr (the expression language) has not landed yet")
def test_expression_post_aggregator_and_aggregator(events, events_duck):
    aggs = [{"type": "longSum", "name": "a", "fieldName": "added"}, {"type": "count", "name": "c"},
            {"type": "doubleSum", "name": "twice", "expression": "added * 2"}]
    posts = [{"type": "expression", "name": "avg", "expression": "a / c"}]
    got = run_events(events, {"queryType": "groupBy", "dimensions": ["channel"], "aggregations": aggs,
                              "postAggregations": posts}).table
    want = duck_rows(events_duck, "SELECT channel, sum(added), count(*), sum(added * 2)::DOUBLE, sum(added) // count(*) "
                                  "FROM events GROUP BY channel ORDER BY channel NULLS FIRST")
    assert_rows_equal(engine_rows(got, ["channel", "a", "c", "twice", "avg"]), want)


def test_array_first_last_any_round_trip_through_native_json():
    """EARLIEST/LATEST(_BY) and ANY_VALUE of whole arrays plan to arrayFirst/arrayLast/arrayAny,
    which read back as the same aggregators (time column kept)."""
    for agg in (EarliestLatest("e", "a", "array"), EarliestLatest("l", "a", "array", True, "t"), AnyValue("v", "a", "array")):
        assert aggregator_from_json(agg.to_json()) == agg
    assert EarliestLatest("l", "a", "array", True, "t").to_json() == {"type": "arrayLast", "name": "l", "fieldName": "a",
                                                                      "timeColumn": "t"}
