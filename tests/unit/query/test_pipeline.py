"""run -> merge -> finalize: the split the cluster uses (historicals run and merge, the broker
merges and finalizes) must give execute()'s answer for any order and grouping of partials; and
RunStats must count what was actually read."""

import itertools

import pytest

from common.query import execute, finalize, merge, query_from_json, run, union_schema
from tests.conftest import EVENTS_START
from tests.unit.query.oracle import assert_rows_equal, engine_rows

IV = ["2020-01-01/2020-01-04"]
QUERIES = {
    "timeseries-hour": {"queryType": "timeseries", "granularity": "hour",
                        "aggregations": [{"type": "count", "name": "c"},
                                         {"type": "doubleSum", "name": "p", "fieldName": "price"},
                                         {"type": "longMax", "name": "m", "fieldName": "metro"},
                                         {"type": "stringFirst", "name": "f", "fieldName": "page"},
                                         {"type": "stringLast", "name": "l", "fieldName": "country"}]},
    "timeseries-all-filtered": {"queryType": "timeseries",
                                "filter": {"type": "equals", "column": "channel", "matchValue": "#fr.wikipedia"},
                                "aggregations": [{"type": "count", "name": "c"},
                                                 {"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}],
                                "postAggregations": [{"type": "arithmetic", "name": "r", "fn": "/", "fields": [
                                    {"type": "fieldAccess", "fieldName": "u"},
                                    {"type": "fieldAccess", "fieldName": "c"}]}]},
    "topN": {"queryType": "topN", "dimension": "page", "metric": "s", "threshold": 4, "granularity": "day",
             "aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"},
                              {"type": "doubleFirst", "name": "first_price", "fieldName": "price"}]},
    "groupBy": {"queryType": "groupBy", "dimensions": ["channel", "country", "small"],
                "aggregations": [{"type": "count", "name": "c"}, {"type": "floatSum", "name": "f", "fieldName": "score"},
                                 {"type": "longMin", "name": "mn", "fieldName": "metro"},
                                 {"type": "filtered", "name": "fc",
                                  "filter": {"type": "like", "dimension": "page", "pattern": "Main%"},
                                  "aggregator": {"type": "count", "name": "fc"}}],
                "having": {"type": "greaterThan", "aggregation": "c", "value": 3},
                "limitSpec": {"columns": [{"dimension": "c", "direction": "descending"}, "channel", "country", "small"],
                              "offset": 2, "limit": 20}},
    "scan": {"queryType": "scan", "columns": ["__time", "rid", "country", "metro"], "order": "descending",
             "offset": 3, "limit": 30, "filter": {"type": "not", "field": {"type": "null", "column": "added"}}},
}


def _query(name):
    return query_from_json({"dataSource": "events", "intervals": IV, **QUERIES[name]})


def _segments(events):
    return [s for s in events.segments if s.id.datasource == "events"]


@pytest.mark.parametrize("name", list(QUERIES))
def test_any_merge_order_gives_the_execute_answer(events, name):
    q = _query(name)
    segments = _segments(events)
    schema = union_schema(segments)
    expected = engine_rows(execute(q, events.segments).table)
    # HLL estimates come from the merged registers alone (never the in-order HIP estimate), so
    # they too are the same whatever the merge order.
    rel = 1e-6
    partials = [run(q, s, schema) for s in segments]
    for perm in itertools.permutations(partials):
        got = engine_rows(finalize(q, merge(q, list(perm)), schema))
        assert_rows_equal(got, expected, rel=rel)
    # Merges of merges, as when historicals pre-merge their own segments.
    for a, b, c in itertools.permutations(partials):
        nested = merge(q, [merge(q, [a, b]), c])
        assert_rows_equal(engine_rows(finalize(q, nested, schema)), expected, rel=rel)
        deeper = merge(q, [c, merge(q, [merge(q, [b]), a])])
        assert_rows_equal(engine_rows(finalize(q, deeper, schema)), expected, rel=rel)


def test_merged_stats_add_up(events):
    q = _query("groupBy")
    segments = _segments(events)
    schema = union_schema(segments)
    partials = [run(q, s, schema) for s in segments]
    merged = merge(q, partials)
    assert merged.stats.segments == 3
    assert merged.stats.rows_in_segments == 3600
    assert merged.stats.rows_matched == sum(p.stats.rows_matched for p in partials) == 3600
    assert merged.stats == execute(q, events.segments).stats


def test_merge_of_nothing(events):
    ts = _query("timeseries-all-filtered")
    # No segment in range: timeseries 'all' still answers one row, as SQL's aggregate without GROUP BY does.
    assert engine_rows(finalize(ts, merge(ts, []), {}), ["c", "r"]) == [(0, None)]


def test_scan_with_limit_over_an_interval_without_segments(events):
    t = execute({"queryType": "scan", "dataSource": "events", "intervals": ["2030-01-01/2030-01-02"],
                 "columns": ["rid"], "limit": 5}, events.segments).table
    assert t.num_rows == 0


@pytest.mark.parametrize("name", ["groupBy", "topN", "timeseries-hour"])
def test_query_over_an_interval_without_segments(events, name):
    q = {"dataSource": "events", "intervals": ["2030-01-01/2030-01-02"], **QUERIES[name]}
    assert execute(q, events.segments).table.num_rows == 0


def test_union_schema_lets_the_newest_version_win(events, make_segment):
    import pyarrow as pa

    from common.types import LONG, STRING

    assert union_schema(_segments(events))["country"] == STRING
    old, _ = make_segment(pa.table({"__time": pa.array([EVENTS_START], pa.int64()), "x": ["1"]}),
                          "2020-01-01/2020-01-02", version="v1")
    new, _ = make_segment(pa.table({"__time": pa.array([EVENTS_START], pa.int64()), "x": pa.array([2])}),
                          "2020-01-01/2020-01-02", version="v2")
    assert union_schema([new, old])["x"] == LONG
    # The older segment's strings are read as the newer type.
    got = execute({"queryType": "timeseries", "dataSource": "ds", "intervals": ["2020-01-01/2020-01-02"],
                   "aggregations": [{"type": "longSum", "name": "s", "fieldName": "x"}]}, [old, new]).table
    assert got.column("s").to_pylist() == [3]
    # Filters compare converted values, not the older segment's index.
    got = execute({"queryType": "scan", "dataSource": "ds", "intervals": ["2020-01-01/2020-01-02"], "columns": ["x"],
                   "filter": {"type": "range", "column": "x", "lower": 1, "matchValueType": "LONG"}}, [old, new]).table
    assert sorted(got.column("x").to_pylist()) == [1, 2]


# ---- stats --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flt,indexed", [
    ({"type": "equals", "column": "channel", "matchValue": "#de.wikipedia"}, True),
    ({"type": "in", "dimension": "page", "values": ["ab", "axb", "zzz"]}, True),
    ({"type": "like", "dimension": "page", "pattern": "Main%"}, True),
    ({"type": "and", "fields": [{"type": "equals", "column": "channel", "matchValue": "#de.wikipedia"},
                                {"type": "not", "field": {"type": "null", "column": "user"}}]}, True),
    ({"type": "equals", "column": "country", "matchValue": "FR"}, True),  # absent from one segment
    ({"type": "equals", "column": "small", "matchValue": 2}, False),  # numbers have no index
])
def test_rows_after_prefilter(events, events_duck, flt, indexed):
    res = execute({"queryType": "timeseries", "dataSource": "events", "intervals": IV, "filter": flt,
                   "aggregations": [{"type": "count", "name": "c"}]}, events.segments)
    count = res.table.column("c")[0].as_py()
    assert res.stats.rows_matched == count
    assert res.stats.rows_in_segments == 3600 and res.stats.segments == 3
    assert res.stats.rows_after_prefilter == (count if indexed else 3600)
    assert res.stats.rows_scanned == res.stats.rows_after_prefilter
    assert 0 < count < 3600


def test_time_prefilter_counts_only_rows_in_the_interval(events, events_duck):
    lo, hi = "2020-01-01T06:00:00Z", "2020-01-02T03:00:00Z"
    res = execute({"queryType": "timeseries", "dataSource": "events", "intervals": [f"{lo}/{hi}"],
                   "aggregations": [{"type": "count", "name": "c"}]}, events.segments)
    want = events_duck.execute(f"SELECT count(*) FROM events WHERE __time >= TIMESTAMPTZ '{lo}' "
                               f"AND __time < TIMESTAMPTZ '{hi}'").fetchone()[0]
    assert res.table.column("c")[0].as_py() == want
    assert res.stats.segments == 2 and res.stats.rows_in_segments == 2400
    assert res.stats.rows_after_prefilter == want == res.stats.rows_matched


def test_bytes_read_counts_only_touched_columns(events):
    def bytes_for(query):
        return execute({"dataSource": "events", "intervals": IV, **query}, events.segments).stats.bytes_read

    # (by the hour: a day segment is not one bucket, so its count is not its row count)
    count_only = bytes_for({"queryType": "timeseries", "granularity": "hour",
                            "aggregations": [{"type": "count", "name": "c"}]})
    by_day = bytes_for({"queryType": "timeseries", "granularity": "day",
                        "aggregations": [{"type": "count", "name": "c"}]})
    with_sum = bytes_for({"queryType": "timeseries", "granularity": "day",
                          "aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"}]})
    segments = _segments(events)
    time_bytes = sum(s.manifest.files["__time/values"].length for s in segments)
    added_bytes = sum(s.manifest.files["added/values"].length for s in segments)
    assert count_only == time_bytes
    assert by_day == 0  # each day segment's count is its row count: from metadata, nothing read
    assert with_sum == time_bytes + added_bytes


def test_segments_outside_the_intervals_are_not_run(events):
    res = execute({"queryType": "scan", "dataSource": "events", "intervals": ["2020-01-03/2020-01-10"],
                   "columns": ["rid"]}, events.segments)
    assert res.stats.segments == 1 and res.table.num_rows == 1200
