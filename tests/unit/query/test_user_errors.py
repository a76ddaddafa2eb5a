"""Inputs that used to fail deep inside Arrow (and so reach clients as internal errors) are refused
as user errors naming the thing and the fix: invalid regular expressions and LIKE escapes as soon
as the filter is built, REPEAT/LPAD results over Arrow's string capacity, counts beyond int64,
and list keys given as a bare string. GROUP BY / topN on an ARRAY column, which failed inside
Arrow, now groups whole arrays as Druid does."""

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute, query_from_json
from common.query.filters import Like, Regex

IV = ["2020-01-01/2020-01-04"]
COUNT = [{"type": "count", "name": "c"}]


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "(?<name"])
def test_an_invalid_regex_filter_is_refused_when_built(pattern):
    with pytest.raises(ValidationError, match=r"invalid regular expression .* in the regex filter on 'page'"):
        Regex("page", pattern)
    with pytest.raises(ValidationError, match="invalid regular expression"):
        query_from_json({"queryType": "scan", "dataSource": "events", "intervals": IV,
                         "filter": {"type": "regex", "dimension": "page", "pattern": pattern}})


@pytest.mark.parametrize("pattern,escape,message", [
    ("a%", "xx", "LIKE ESCAPE must be a single character, got 'xx'"),
    ("a%", "", "LIKE ESCAPE must be a single character, got ''"),
    ("a!", "!", "LIKE pattern 'a!' ends with its escape character '!'"),
    ("a!!!", "!", "ends with its escape character"),
])
def test_a_bad_like_escape_is_refused(pattern, escape, message):
    with pytest.raises(ValidationError, match=message):
        Like("page", pattern, escape)


def test_good_like_escapes_are_kept():
    assert Like("page", "a!%b!!", "!").literal_prefix() == ("a%b!", False)
    assert Like("page", "a!b", "!").pattern == "a!b"  # the native filter reads '!b' as 'b', as Druid does


@pytest.mark.parametrize("expression", ["repeat(page, 100000000)", "lpad(page, 2000000000, 'x')"])
def test_string_results_over_arrow_capacity_are_user_errors(events, expression):
    query = {"queryType": "scan", "dataSource": "events", "intervals": IV, "columns": ["v"],
             "virtualColumns": [{"type": "expression", "name": "v", "expression": expression,
                                 "outputType": "STRING"}]}
    with pytest.raises(ValidationError, match=r"makes more text than an Arrow string column holds"):
        execute(query, events.segments)


def test_grouping_on_an_array_column_groups_whole_arrays(make_segment):
    tags = [["a", "b"], ["a"], None, [], ["b", "a"], ["a", "b"], [None], ["a", None]]
    first, _ = make_segment(pa.table({"__time": pa.array([1577836800000] * 4, pa.int64()),
                                      "tags": pa.array(tags[:4]), "n": pa.array([1, 2, 3, 4])}))
    second, _ = make_segment(pa.table({"__time": pa.array([1577840400000] * 4, pa.int64()),
                                       "tags": pa.array(tags[4:]), "n": pa.array([5, 6, 7, 8])}))
    base = {"dataSource": "ds", "intervals": ["2020-01-01/2020-01-02"], "granularity": "all",
            "aggregations": [{"type": "longSum", "name": "s", "fieldName": "n"}]}
    got = execute({**base, "queryType": "groupBy", "dimensions": ["tags"]}, [first, second]).table.to_pylist()
    # Druid's order for arrays: null first, then element by element (a prefix first, null elements first).
    assert got == [{"tags": None, "s": 3}, {"tags": [], "s": 4}, {"tags": [None], "s": 7}, {"tags": ["a"], "s": 2},
                   {"tags": ["a", None], "s": 8}, {"tags": ["a", "b"], "s": 7}, {"tags": ["b", "a"], "s": 5}]
    top = execute({**base, "queryType": "topN", "dimension": "tags", "metric": "s", "threshold": 2},
                  [first, second]).table.to_pylist()
    assert top == [{"tags": ["a", None], "s": 8}, {"tags": [None], "s": 7}]


@pytest.mark.parametrize("query,message", [
    ({"queryType": "scan", "limit": 2**63}, "limit 9223372036854775808 is beyond the largest 64-bit integer"),
    ({"queryType": "scan", "offset": 2**64, "limit": 1}, "offset 18446744073709551616 is beyond"),
    ({"queryType": "groupBy", "dimensions": ["channel"], "aggregations": COUNT, "limitSpec": {"limit": 2**63}},
     "limitSpec limit 9223372036854775808 is beyond"),
    ({"queryType": "topN", "dimension": "channel", "metric": "c", "threshold": 2**70, "aggregations": COUNT},
     "threshold 1180591620717411303424 is beyond"),
])
def test_counts_beyond_int64_are_refused(query, message):
    with pytest.raises(ValidationError, match=message):
        query_from_json({"dataSource": "events", "intervals": IV, **query})


@pytest.mark.parametrize("key,value", [("dimensions", "page"), ("aggregations", "count"), ("columns", "page"),
                                       ("virtualColumns", {"name": "v"})])
def test_list_keys_given_as_a_string_are_refused_with_the_fix(key, value):
    query = {"queryType": "scan" if key == "columns" else "groupBy", "dataSource": "events", "intervals": IV,
             "aggregations": COUNT, key: value}
    with pytest.raises(ValidationError, match=f"'{key}' must be a list, got"):
        query_from_json(query)
    if isinstance(value, str):
        with pytest.raises(ValidationError, match=f'e.g. "{key}": \\["{value}"\\]'):
            query_from_json(query)
