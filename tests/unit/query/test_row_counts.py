"""COUNT(*) answered from segment metadata (``engine.counts_rows`` / ``row_counts``): a query of
plain counts with no filter, over segments wholly inside its intervals and, when it buckets time,
each inside one bucket, reads no column; every other segment is run as before. Answers are
DuckDB's and the answer of the same query made to scan (a filter every row passes); the stats say
which segments were read."""

from __future__ import annotations

import pytest

from common.query import execute
from common.types import parse_instant
from tests.unit.query.oracle import assert_rows_equal, engine_rows

ALL = ["2020-01-01/2020-01-04"]
# Every row passes it, but it is a filter: the query runs over the rows, the old way.
KEEP_ALL = {"type": "not", "field": {"type": "null", "column": "__time"}}
COUNT = {"type": "count", "name": "c"}


def _run(events, query: dict):
    return execute({"dataSource": "events", **query}, events.segments)


def _scanned(events, query: dict):
    return _run(events, {**query, "filter": KEEP_ALL})


def _ms(text: str) -> int:
    return parse_instant(text)


@pytest.mark.parametrize("query,from_metadata", [
    ({"queryType": "timeseries", "intervals": ALL, "aggregations": [COUNT]}, 3),
    ({"queryType": "timeseries", "intervals": ["1000-01-01/3000-01-01"], "aggregations": [COUNT]}, 3),
    ({"queryType": "timeseries", "intervals": ALL, "aggregations": [COUNT, {"type": "count", "name": "d"}]}, 3),
    ({"queryType": "groupBy", "intervals": ALL, "dimensions": [], "aggregations": [COUNT]}, 3),
    # each day segment is one day bucket; an hour bucket holds no segment whole
    ({"queryType": "timeseries", "intervals": ALL, "granularity": "day", "aggregations": [COUNT]}, 3),
    ({"queryType": "timeseries", "intervals": ALL, "granularity": "month", "aggregations": [COUNT]}, 3),
    ({"queryType": "timeseries", "intervals": ALL, "granularity": "hour", "aggregations": [COUNT]}, 0),
    ({"queryType": "timeseries", "intervals": ALL, "aggregations": [COUNT],
      "granularity": {"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"}}, 0),
    # intervals that cut some segments: those run, the whole ones do not
    ({"queryType": "timeseries", "intervals": ["2020-01-01T06:00:00Z/2020-01-04"], "aggregations": [COUNT]}, 2),
    ({"queryType": "timeseries", "intervals": ["2020-01-01/2020-01-02", "2020-01-03T01:00:00Z/2020-01-03T02:00:00Z"],
      "aggregations": [COUNT]}, 1),
    ({"queryType": "timeseries", "intervals": ["2020-01-02/2020-01-02T12:00:00Z"], "granularity": "day",
      "aggregations": [COUNT]}, 0),
    # not only counts, a filter, or a grouping: every segment runs
    ({"queryType": "timeseries", "intervals": ALL, "aggregations": [COUNT, {"type": "longSum", "name": "s",
                                                                              "fieldName": "added"}]}, 0),
    ({"queryType": "timeseries", "intervals": ALL, "aggregations": [
        {"type": "filtered", "name": "c", "filter": {"type": "equals", "column": "channel", "matchValue": "#en.wikipedia"},
         "aggregator": COUNT}]}, 0),
    ({"queryType": "groupBy", "intervals": ALL, "dimensions": ["channel"], "aggregations": [COUNT]}, 0),
])
def test_counts_agree_with_a_scan(events, query, from_metadata):
    got = _run(events, query)
    want = _scanned(events, query)
    assert_rows_equal(engine_rows(got.table), engine_rows(want.table))
    assert got.stats.rows_matched == want.stats.rows_matched
    assert got.stats.segments == want.stats.segments
    # segments answered from metadata scan no row
    counted_rows = want.stats.rows_scanned - got.stats.rows_scanned
    if from_metadata:
        assert counted_rows == 1200 * from_metadata
    else:
        assert counted_rows == 0


def test_counts_agree_with_duckdb(events, events_duck):
    lo, hi = "2020-01-01T06:00:00Z", "2020-01-04"
    got = _run(events, {"queryType": "timeseries", "intervals": [f"{lo}/{hi}"], "granularity": "day",
                        "aggregations": [COUNT]})
    want = events_duck.execute(f"SELECT t // 86400000 * 86400000 AS d, count(*) FROM events WHERE t >= {_ms(lo)} "
                               f"AND t < {_ms(hi)} GROUP BY d ORDER BY d").fetchall()
    assert engine_rows(got.table) == [tuple(r) for r in want]
    total = _run(events, {"queryType": "timeseries", "intervals": ALL, "aggregations": [COUNT]})
    assert total.table.column("c").to_pylist() == [events_duck.execute("SELECT count(*) FROM events").fetchone()[0]]
    assert total.stats.bytes_read == 0 and total.stats.rows_scanned == 0


def test_no_segment_in_the_intervals_counts_zero(events):
    got = _run(events, {"queryType": "timeseries", "intervals": ["2030-01-01/2030-01-02"], "aggregations": [COUNT]})
    assert got.table.column("c").to_pylist() == [0]

