"""Malformed queries fail with ValidationError before touching data, and the message says what is
wrong and what would be valid: 'did you mean' for misspelt names, the list of valid kinds for
unknown types."""

import pyarrow as pa
import pytest

from common.errors import StrataError, ValidationError
from common.query import execute, query_from_json
from common.query.filters import FILTER_TYPES

IV = ["2020-01-01/2020-01-04"]


def fails(events, query: dict) -> str:
    with pytest.raises(ValidationError) as err:
        execute({"dataSource": "events", "intervals": IV, **query}, events.segments)
    return str(err.value)


COUNT = [{"type": "count", "name": "c"}]


@pytest.mark.parametrize("query,message", [
    ({"queryType": "scan", "filter": {"type": "equals", "column": "chanel", "matchValue": "x"}},
     "filter: unknown column 'chanel'; did you mean 'channel'?"),
    ({"queryType": "scan", "filter": {"type": "not", "field": {"type": "like", "dimension": "pgae", "pattern": "x%"}}},
     "filter: unknown column 'pgae'; did you mean 'page'?"),
    ({"queryType": "scan", "columns": ["__time", "counrty"]}, "scan columns: unknown column 'counrty'; did you mean 'country', 'score'?"),
    ({"queryType": "groupBy", "dimensions": ["channel", "smal"], "aggregations": COUNT},
     "dimension: unknown column 'smal'; did you mean 'small'?"),
    ({"queryType": "topN", "dimension": "usr", "metric": "c", "threshold": 3, "aggregations": COUNT},
     "dimension: unknown column 'usr'; did you mean 'user', 'score'?"),
    ({"queryType": "timeseries", "aggregations": [{"type": "longSum", "name": "s", "fieldName": "addd"}]},
     "aggregator 's': unknown column 'addd'; did you mean 'added'?"),
    ({"queryType": "timeseries", "aggregations": [{"type": "filtered", "name": "f",
                                                   "filter": {"type": "equals", "column": "chanel", "matchValue": "x"},
                                                   "aggregator": {"type": "count", "name": "f"}}]},
     "aggregator 'f': unknown column 'chanel'; did you mean 'channel'?"),
    ({"queryType": "timeseries", "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "users"}]},
     "aggregator 'u': unknown column 'users'; did you mean 'user'?"),
    ({"queryType": "topN", "dimension": "channel", "metric": "cnt", "threshold": 3, "aggregations": COUNT},
     "topN metric: unknown output 'cnt'; did you mean 'c'?"),
    ({"queryType": "groupBy", "dimensions": ["channel"], "aggregations": COUNT, "limitSpec": {"columns": ["chanel"]}},
     "limitSpec: unknown output column 'chanel'; did you mean 'channel'?"),
    ({"queryType": "groupBy", "dimensions": ["channel"], "aggregations": COUNT,
      "having": {"type": "greaterThan", "aggregation": "cc", "value": 1}},
     "having: unknown output column 'cc'; did you mean 'c'?"),
    ({"queryType": "groupBy", "dimensions": ["channel"], "aggregations": COUNT,
      "postAggregations": [{"type": "fieldAccess", "name": "x", "fieldName": "cc"}]},
     "unknown field in fieldAccess 'cc'; did you mean 'c'?"),
])
def test_unknown_names_suggest_the_closest(events, query, message):
    assert fails(events, query) == message


def test_no_close_name_lists_what_is_available(events):
    msg = fails(events, {"queryType": "scan", "columns": ["zzzzzz"]})
    assert msg.startswith("scan columns: unknown column 'zzzzzz'; available: __time, added, channel, code")


@pytest.mark.parametrize("flt,column,ctype,value", [
    ({"type": "equals", "column": "added", "matchValue": "abc"}, "added", "BIGINT", "abc"),
    ({"type": "equals", "column": "price", "matchValue": "cheap", "matchValueType": "STRING"}, "price", "DOUBLE",
     "cheap"),
    ({"type": "in", "dimension": "small", "values": [1, "two"]}, "small", "BIGINT", "two"),
    ({"type": "range", "column": "delta", "lower": "low", "matchValueType": "LONG"}, "delta", "BIGINT", "low"),
    ({"type": "bound", "dimension": "score", "upper": "high", "ordering": "numeric"}, "score", "FLOAT", "high"),
    ({"type": "selector", "dimension": "metro", "value": "x"}, "metro", "BIGINT", "x"),
])
def test_wrong_type_in_filter(events, flt, column, ctype, value):
    msg = fails(events, {"queryType": "scan", "filter": flt})
    assert msg == (f"wrong type in a filter: column '{column}' is {ctype} but the filter compares it with "
                   f"'{value}'; use a number")


def test_filter_on_array_column_needs_an_expression(make_segment):
    table = pa.table({"__time": pa.array([1577836800000], pa.int64()), "tags": pa.array([["a"]])})
    seg, _ = make_segment(table)
    with pytest.raises(ValidationError, match=r"column 'tags' of type ARRAY<VARCHAR> cannot be filtered this way"):
        execute({"queryType": "scan", "dataSource": "ds", "intervals": ["2020-01-01/2020-01-02"],
                 "filter": {"type": "equals", "column": "tags", "matchValue": "a"}}, [seg])


def test_numeric_aggregator_on_array_column(make_segment):
    table = pa.table({"__time": pa.array([1577836800000], pa.int64()), "tags": pa.array([[1]])})
    seg, _ = make_segment(table)
    with pytest.raises(ValidationError, match="aggregator 's' needs a number, but 'tags' is ARRAY<BIGINT>"):
        execute({"queryType": "timeseries", "dataSource": "ds", "intervals": ["2020-01-01/2020-01-02"],
                 "aggregations": [{"type": "longSum", "name": "s", "fieldName": "tags"}]}, [seg])


def _base(**kw):
    return {"queryType": "timeseries", "dataSource": "events", "intervals": IV, "aggregations": COUNT, **kw}


@pytest.mark.parametrize("query,match", [
    ({"queryType": "select", "dataSource": "events", "intervals": IV},
     r"unknown queryType 'select'; valid: scan, timeseries, topN, groupBy"),
    ({"dataSource": "events", "intervals": IV}, r"unknown queryType 'None'; valid: scan, timeseries, topN, groupBy"),
    (_base(granularity="fortnight"),
     r"unknown granularity 'fortnight'; valid: none, all, second, minute, five_minute, ten_minute, fifteen_minute, "
     r"thirty_minute, hour, six_hour, eight_hour, day, week, month, quarter, year, or an ISO-8601 period"),
    (_base(granularity={"type": "period", "period": "P1D", "timeZone": "Mars/Olympus"}),
     "unknown time zone 'Mars/Olympus'"),
    (_base(filter={"type": "fuzzy", "column": "channel"}),
     "unknown filter type 'fuzzy'; valid types: " + ", ".join(FILTER_TYPES)),
    (_base(aggregations=[{"type": "longAvg", "name": "x", "fieldName": "added"}]),
     r"unknown aggregator type 'longAvg'; valid types: count, longSum, doubleSum, floatSum, longMin, longMax, "
     r"doubleMin, doubleMax, floatMin, floatMax, stringAny, longAny, doubleAny, arrayAny, stringFirst, stringLast, "
     r"longFirst, longLast, doubleFirst, doubleLast, arrayFirst, arrayLast, filtered, HLLSketchBuild"),
    (_base(postAggregations=[{"type": "javascript", "name": "x"}]),
     "unknown post-aggregator type 'javascript'; valid: arithmetic, fieldAccess, finalizingFieldAccess, constant, "
     "expression"),
    (dict(_base(), dataSource={"type": "lookup", "lookup": "x"}), "unknown dataSource type 'lookup'; valid: table, query"),
    ({"queryType": "groupBy", "dataSource": "events", "intervals": IV, "dimensions": ["channel"],
      "having": {"type": "between", "aggregation": "c"}},
     "unknown having type 'between'; valid: filter, greaterThan, lessThan, equalTo, and, or, not"),
    ({"queryType": "topN", "dataSource": "events", "intervals": IV, "dimension": "channel", "threshold": 3,
      "metric": {"type": "alphabetical"}, "aggregations": COUNT},
     "unknown topN metric type 'alphabetical'; valid: numeric, inverted, dimension"),
    ({"queryType": "groupBy", "dataSource": "events", "intervals": IV,
      "dimensions": [{"type": "extraction", "dimension": "channel"}]}, "unknown dimension spec type 'extraction'"),
    ({"queryType": "scan", "dataSource": "events", "intervals": IV, "order": "sideways"},
     "scan 'order' must be none, ascending or descending, got 'sideways'"),
    ({"queryType": "scan", "dataSource": "events"}, r"query needs 'intervals'"),
    ({"queryType": "scan", "dataSource": "events", "intervals": []}, r"query 'intervals' must not be empty"),
    ({"queryType": "scan", "dataSource": "events", "intervals": ["2020-01-02/2020-01-01"]}, "is before its start"),
    ({"queryType": "scan", "intervals": IV}, "query needs a 'dataSource'"),
    ({"queryType": "topN", "dataSource": "events", "intervals": IV, "dimension": "channel", "metric": "c",
      "aggregations": COUNT}, "topN query needs 'threshold'"),
    ({"queryType": "topN", "dataSource": "events", "intervals": IV, "dimension": "channel", "metric": "c",
      "threshold": 0, "aggregations": COUNT}, "topN 'threshold' must be positive, got 0"),
    (_base(aggregations=COUNT * 2), r"duplicate output names \['c'\] among aggregations and post-aggregations"),
    (_base(aggregations=[{"type": "count"}]), "aggregator of type 'count' needs a 'name'"),
    (_base(aggregations=[{"type": "longSum", "name": "s"}]), r"aggregator 's' \(longSum\) needs 'fieldName' or "
                                                             r"'expression'"),
    (_base(aggregations=[{"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "lgK": 22}]),
     "aggregator 'u': lgK must be within 4..21, got 22"),
    (_base(postAggregations=[{"type": "arithmetic", "name": "x", "fn": "+", "fields": [{"type": "constant",
                                                                                      "value": 1}]}]),
     "arithmetic post-aggregator 'x' needs at least two fields"),
    (_base(filter={"type": "equals", "column": "channel", "matchValue": None}),
     "'equals' filter needs a non-null 'matchValue'; use a 'null' filter for IS NULL"),
    (_base(filter={"type": "and", "fields": []}), "'and' filter needs a non-empty list 'fields'"),
    (_base(filter={"type": "in", "dimension": "channel", "values": "a"}), "'in' filter needs a list 'values'"),
    (_base(filter={"type": "equals", "matchValue": "a"}), r"'equals' filter needs a 'column' \(or 'dimension'\)"),
    (_base(filter="channel = 'a'"), "a filter must be an object with a 'type'"),
    ({"queryType": "groupBy", "dataSource": "events", "intervals": IV, "dimensions": ["channel"],
      "limitSpec": {"limit": -1}}, "limit must be >= 0, got -1"),
])
def test_invalid_queries_say_what_is_valid(query, match):
    with pytest.raises(ValidationError, match=match):
        query_from_json(query)


def test_unknown_arithmetic_fn_fails_at_execution(events):
    msg = fails(events, {"queryType": "timeseries", "aggregations": COUNT, "postAggregations": [
        {"type": "arithmetic", "name": "x", "fn": "%", "fields": [{"type": "fieldAccess", "fieldName": "c"},
                                                                   {"type": "constant", "value": 2}]}]})
    assert msg == "post-aggregator 'x': unknown fn '%'; valid: + - * / quotient pow"


def test_not_a_query_object():
    with pytest.raises(ValidationError, match="a query must be a JSON object, got list"):
        query_from_json([])


def test_errors_are_strata_errors_and_value_errors():
    with pytest.raises(StrataError):
        query_from_json({"queryType": "nope"})
    with pytest.raises(ValueError):
        query_from_json({"queryType": "nope"})


def test_json_round_trip_of_queries():
    # The broker ships queries to historicals as JSON: to_json must parse back to the same query.
    queries = [
        {"queryType": "groupBy", "dataSource": "events", "intervals": IV, "granularity": "day",
         "dimensions": ["channel", {"type": "default", "dimension": "small", "outputName": "s", "outputType": "STRING"}],
         "filter": {"type": "and", "fields": [{"type": "in", "dimension": "channel", "values": ["a", None]},
                                              {"type": "not", "field": {"type": "like", "dimension": "page",
                                                                        "pattern": "a!%%", "escape": "!"}},
                                              {"type": "bound", "dimension": "added", "lower": "1",
                                               "ordering": "numeric", "lowerStrict": True}]},
         "aggregations": [{"type": "count", "name": "c"},
                          {"type": "filtered", "name": "f", "filter": {"type": "null", "column": "user"},
                           "aggregator": {"type": "doubleMax", "name": "f", "fieldName": "price"}},
                          {"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "lgK": 11, "round": True},
                          {"type": "stringLast", "name": "l", "fieldName": "page"}],
         "postAggregations": [{"type": "arithmetic", "name": "r", "fn": "/", "fields": [
             {"type": "fieldAccess", "fieldName": "u"}, {"type": "constant", "name": "k", "value": 2}]}],
         "having": {"type": "greaterThan", "aggregation": "c", "value": 1},
         "limitSpec": {"columns": [{"dimension": "c", "direction": "descending", "dimensionOrder": "numeric"}],
                       "limit": 5, "offset": 1}},
        {"queryType": "topN", "dataSource": "events", "intervals": IV, "dimension": "page", "threshold": 2,
         "metric": {"type": "inverted", "metric": "c"}, "aggregations": COUNT,
         "granularity": {"type": "period", "period": "PT6H", "timeZone": "America/Los_Angeles"}},
        {"queryType": "timeseries", "dataSource": {"type": "query", "query": {
            "queryType": "scan", "dataSource": "events", "intervals": IV, "columns": ["__time"], "limit": 3}},
         "intervals": IV, "descending": True, "limit": 2, "aggregations": COUNT,
         "context": {"skipEmptyBuckets": True}},
        {"queryType": "scan", "dataSource": "events", "intervals": IV, "order": "descending", "offset": 2,
         "limit": 9, "columns": ["rid"], "filter": {"type": "selector", "dimension": "page", "value": None}},
    ]
    for q in queries:
        parsed = query_from_json(q)
        again = query_from_json(parsed.to_json())
        assert again == parsed
        assert again.context == parsed.context


@pytest.mark.parametrize("query", [
    {"queryType": "scan", "columns": ["rid"], "offset": -1, "limit": 2},
    {"queryType": "scan", "columns": ["rid"], "limit": -1},
    {"queryType": "groupBy", "dimensions": ["channel"], "aggregations": COUNT, "limitSpec": {"limit": 2, "offset": -1}},
    {"queryType": "timeseries", "granularity": "day", "aggregations": COUNT, "limit": -1},
])
def test_negative_limits_and_offsets_are_rejected(events, query):
    with pytest.raises(ValidationError, match="must be >= 0"):
        execute({"dataSource": "events", "intervals": IV, **query}, events.segments)
