"""Projections answer exactly what base rows answer.

Three day segments of the events data; two carry projections (hourly by channel with counts,
sums, min/max and an HLL sketch; daily by channel and page; a filtered one), one carries none.
Every query in a generated corpus runs with ``noProjections`` and without it: identical results,
and the queries that fit a projection scan far fewer rows.
"""

from __future__ import annotations

import itertools
import math
import os

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.query.projection import ProjectionSpec, projection_rows
from common.query.projection_match import RefusalReason, finer_or_equal, implies, match_projection
from common.query.filters import filter_from_json
from common.segment.builder import build_segment
from common.segment.scan_spec import ScanSpec
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.granularity import Granularity
from tests.conftest import EVENTS_DAYS, EVENTS_INTERVAL, day_interval, make_events_table

HOURLY = {
    "type": "aggregate", "name": "hourly_channel",
    "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
    "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
    "aggregators": [
        {"type": "count", "name": "rows"},
        {"type": "longSum", "name": "added_sum", "fieldName": "added"},
        {"type": "longSum", "name": "delta_sum", "fieldName": "delta"},
        {"type": "doubleSum", "name": "price_sum", "fieldName": "price"},
        {"type": "longMin", "name": "delta_min", "fieldName": "delta"},
        {"type": "longMax", "name": "delta_max", "fieldName": "delta"},
        {"type": "HLLSketchBuild", "name": "users", "fieldName": "user", "lgK": 12},
    ],
}
DAILY_PAGES = {
    "type": "aggregate", "name": "daily_channel_page",
    "virtualColumns": [{"type": "expression", "name": "d", "expression": "timestamp_floor(__time, 'P1D')"},
                       {"type": "expression", "name": "lp", "expression": "lower(page)"}],
    "groupingColumns": [{"type": "long", "name": "d"}, {"type": "string", "name": "channel"},
                        {"type": "string", "name": "page"}, {"type": "string", "name": "lp"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
}
FILTERED = {
    "type": "aggregate", "name": "big_channels",
    "groupingColumns": [{"type": "string", "name": "channel"}, {"type": "string", "name": "code"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
    "filter": {"type": "in", "dimension": "channel", "values": ["#en.wikipedia", "#fr.wikipedia", "#de.wikipedia"]},
}
SPECS = [ProjectionSpec.from_json(s) for s in (HOURLY, DAILY_PAGES, FILTERED)]


@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("projections"))
    table = make_events_table()
    times = table.column("__time").cast(pa.int64()).to_numpy()
    out = []
    for d in range(EVENTS_DAYS):
        iv = day_interval(d)
        part = table.filter(pa.array((times >= iv.start) & (times < iv.end)))
        # Day 1 has no projections: the same query mixes projection and base rows.
        projections = [] if d == 1 else [projection_rows(s, part) for s in SPECS]
        path = os.path.join(directory, f"p{d}.sseg")
        build_segment(part, path, SegmentId("events", iv, "v1", 0), ("channel",) if d == 0 else (),
                      projections=projections)
        out.append(Segment.open(path, verify=True))
    yield out
    for s in out:
        s.close()


def _run(query: dict, segments, **context):
    q = dict(query, context={**query.get("context", {}), **context})
    result = execute(q, segments)
    return result.table, result.stats


def _same(a: pa.Table, b: pa.Table) -> bool:
    if a.column_names != b.column_names or a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.to_pylist(), b.to_pylist()):
        for k in x:
            u, v = x[k], y[k]
            if isinstance(u, float) and isinstance(v, float):
                if not math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif u != v:
                return False
    return True


FILTERS = [
    None,
    {"type": "equals", "column": "channel", "matchValue": "#en.wikipedia"},
    {"type": "in", "dimension": "channel", "values": ["#fr.wikipedia", "", None]},
    {"type": "like", "dimension": "channel", "pattern": "#%"},
    {"type": "not", "field": {"type": "null", "column": "channel"}},
    {"type": "equals", "column": "page", "matchValue": "Main_Page"},  # not in the hourly projection
    {"type": "range", "column": "delta", "lower": 0, "matchValueType": "LONG"},  # in no projection
]
AGGREGATIONS = [
    [{"type": "count", "name": "c"}],
    [{"type": "longSum", "name": "a", "fieldName": "added"}, {"type": "count", "name": "c"}],
    [{"type": "longMin", "name": "lo", "fieldName": "delta"}, {"type": "longMax", "name": "hi", "fieldName": "delta"},
     {"type": "doubleSum", "name": "p", "fieldName": "price"}],
    [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "round": True}],
    [{"type": "doubleMax", "name": "x", "fieldName": "price"}],  # in no projection
    # Filtered aggregators over stored unfiltered intermediates: the filter runs on projection rows.
    [{"type": "filtered", "name": "f", "filter": {"type": "equals", "column": "channel", "matchValue": "#en.wikipedia"},
      "aggregator": {"type": "longSum", "name": "f", "fieldName": "added"}},
     {"type": "filtered", "name": "u", "filter": {"type": "not", "field": {"type": "null", "column": "channel"}},
      "aggregator": {"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "round": True}},
     {"type": "filtered", "name": "m", "filter": {"type": "in", "dimension": "channel", "values": ["#fr.wikipedia"]},
      "aggregator": {"type": "longMin", "name": "m", "fieldName": "delta"}}],
]


def corpus():
    out = []
    for gran, flt, aggs in itertools.product(["hour", "day", "all", "PT6H", "minute"], FILTERS, AGGREGATIONS):
        q = {"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL],
             "granularity": gran, "aggregations": aggs}
        if flt:
            q["filter"] = flt
        out.append(q)
    for flt, aggs in itertools.product(FILTERS, AGGREGATIONS[:4]):
        q = {"queryType": "topN", "dataSource": "events", "intervals": [EVENTS_INTERVAL], "granularity": "day",
             "dimension": "channel", "metric": aggs[0]["name"], "threshold": 3, "aggregations": aggs}
        if flt:
            q["filter"] = flt
        out.append(q)
    for dims, flt in itertools.product([["channel"], ["channel", "page"], ["code", "channel"], ["lp"]], FILTERS[:4]):
        q = {"queryType": "groupBy", "dataSource": "events", "intervals": [EVENTS_INTERVAL], "granularity": "all",
             "dimensions": dims, "aggregations": [{"type": "count", "name": "n"},
                                                  {"type": "longSum", "name": "added", "fieldName": "added"}],
             "virtualColumns": [{"type": "expression", "name": "lp", "expression": "lower(page)"}]}
        if flt:
            q["filter"] = flt
        out.append(q)
    # Intervals cutting the segments on and off the projections' bucket edges.
    for iv in ["2020-01-01T05:00:00/2020-01-02T07:00:00", "2020-01-01T05:30:00/2020-01-03T00:00:00"]:
        out.append({"queryType": "timeseries", "dataSource": "events", "intervals": [iv], "granularity": "hour",
                    "aggregations": [{"type": "count", "name": "c"}]})
    return out


CORPUS = corpus()


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 200


@pytest.mark.parametrize("query", CORPUS, ids=[f"q{i}" for i in range(len(CORPUS))])
def test_projections_answer_exactly_what_base_rows_answer(segments, query):
    base, base_stats = _run(query, segments, noProjections=True)
    got, stats = _run(query, segments)
    assert _same(got, base), (query, got.to_pylist()[:5], base.to_pylist()[:5])
    assert stats.rows_scanned <= base_stats.rows_scanned


def test_a_matching_query_scans_projection_rows(segments):
    query = {"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL], "granularity": "day",
             "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"}]}
    _, base = _run(query, segments, noProjections=True)
    _, used = _run(query, segments)
    day1 = segments[1].num_rows  # the segment without projections reads its base rows
    assert used.rows_scanned < day1 + 2 * 24 * 7
    assert base.rows_scanned == sum(s.num_rows for s in segments)


def test_filtered_projection_is_used_when_the_query_implies_its_filter(segments):
    query = {"queryType": "groupBy", "dataSource": "events", "intervals": [EVENTS_INTERVAL], "granularity": "all",
             "dimensions": ["code"], "filter": {"type": "equals", "column": "channel", "matchValue": "#fr.wikipedia"},
             "aggregations": [{"type": "count", "name": "n"}], "context": {"useProjection": "big_channels"}}
    seg = segments[0]
    from common.query.engine import source_for
    from common.query.model import query_from_json

    src = source_for(query_from_json(query), seg)
    assert src.projection == "big_channels" and src.pre_aggregated
    # A filter the projection's filter does not cover cannot use it, and says so.
    query["filter"] = {"type": "equals", "column": "channel", "matchValue": "#ja.wikipedia"}
    with pytest.raises(ValidationError, match="does not imply the projection's filter"):
        source_for(query_from_json(query), seg)


def test_use_and_force_projection_errors_name_the_reason(segments):
    query = {"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL], "granularity": "hour",
             "aggregations": [{"type": "doubleMax", "name": "x", "fieldName": "price"}]}
    with pytest.raises(ValidationError, match="useProjection 'hourly_channel' cannot serve.*no projection aggregator"):
        _run(query, segments, useProjection="hourly_channel")
    with pytest.raises(ValidationError, match="forceProjections is set"):
        _run(query, segments, forceProjections=True)


def test_matcher_reasons():
    seg_iv = day_interval(0)
    from common.segment.manifest import ProjectionManifest

    proj = ProjectionManifest("hourly_channel", HOURLY, ("__time", "channel"), (), 10, (), ())
    spec = ScanSpec(grouping_columns=("page",), granularity=Granularity.parse("all"))
    got = match_projection(proj, spec, seg_iv)
    assert got.reason is RefusalReason.MISSING_COLUMN and "column 'page' is not a grouping column" in got.detail
    spec = ScanSpec(grouping_columns=(), granularity=Granularity.parse("minute"))
    got = match_projection(proj, spec, seg_iv)
    assert got.reason is RefusalReason.GRANULARITY and "coarser than" in got.detail
    spec = ScanSpec(grouping_columns=(), granularity=Granularity.parse("all"),
                    intervals=(day_interval(0).__class__(seg_iv.start + 1800_000, seg_iv.end),))
    got = match_projection(proj, spec, seg_iv)
    assert got.reason is RefusalReason.INTERVAL and "not on a" in str(got)


@pytest.mark.parametrize("fine, coarse, ok", [
    ("hour", "day", True), ("PT15M", "hour", True), ("hour", "PT6H", True), ("PT6H", "hour", False),
    ("day", "month", True), ("hour", "year", True), ("PT7H", "day", False), ("day", "week", True),
    ("week", "month", False), ("P3M", "year", True), ("month", "P3M", True), ("P3M", "P2M", False),
    ("none", "hour", True), ("hour", "all", True),
    ({"type": "period", "period": "PT1H", "timeZone": "America/New_York"}, "day", False),
    ({"type": "period", "period": "PT1H", "timeZone": "America/New_York"},
     {"type": "period", "period": "P1D", "timeZone": "America/New_York"}, True),
])
def test_finer_or_equal(fine, coarse, ok):
    assert finer_or_equal(Granularity.parse(fine), Granularity.parse(coarse)) is ok


@pytest.mark.parametrize("q, p, ok", [
    ({"type": "equals", "column": "c", "matchValue": "a"}, {"type": "in", "dimension": "c", "values": ["a", "b"]}, True),
    ({"type": "in", "dimension": "c", "values": ["a"]}, {"type": "in", "dimension": "c", "values": ["a", "b"]}, True),
    ({"type": "in", "dimension": "c", "values": ["a", "z"]}, {"type": "in", "dimension": "c", "values": ["a"]}, False),
    ({"type": "range", "column": "n", "lower": 5, "upper": 7, "matchValueType": "LONG"},
     {"type": "range", "column": "n", "lower": 0, "matchValueType": "LONG"}, True),
    ({"type": "range", "column": "n", "lower": 0, "lowerOpen": False, "matchValueType": "LONG"},
     {"type": "range", "column": "n", "lower": 0, "lowerOpen": True, "matchValueType": "LONG"}, False),
    ({"type": "equals", "column": "n", "matchValue": 3}, {"type": "range", "column": "n", "lower": 0,
                                                          "matchValueType": "LONG"}, True),
    ({"type": "and", "fields": [{"type": "equals", "column": "c", "matchValue": "a"},
                                {"type": "equals", "column": "d", "matchValue": "x"}]},
     {"type": "equals", "column": "d", "matchValue": "x"}, True),
    ({"type": "equals", "column": "c", "matchValue": "a"}, {"type": "equals", "column": "d", "matchValue": "a"}, False),
])
def test_filter_implication(q, p, ok):
    assert implies(filter_from_json(q), filter_from_json(p)) is ok


@pytest.mark.parametrize("spec, message", [
    ({**HOURLY, "groupingColumns": [{"name": "nope"}]}, "grouping column: unknown column 'nope'"),
    ({**HOURLY, "aggregators": HOURLY["aggregators"] + [{"type": "count", "name": "rows"}]}, "duplicate names"),
])
def test_invalid_projection_specs_name_the_problem(spec, message):
    schema = {f.name: __import__("common.types.column_type", fromlist=["ColumnType"]).ColumnType.from_arrow(f.type)
              for f in make_events_table(10, 1).schema}
    with pytest.raises(ValidationError, match=message):
        ProjectionSpec.from_json(spec).validate(schema)


def test_an_aggregator_without_a_combining_form_cannot_be_pre_aggregated():
    from dataclasses import dataclass

    from common.query.aggregators import Aggregator
    from common.types.column_type import LONG

    @dataclass(frozen=True)
    class RowsOnly(Aggregator):
        def result_type(self, types):
            return LONG

        def to_json(self):
            return {"type": "rowsOnly", "name": self.name}

    spec = ProjectionSpec("p", ("channel",), (RowsOnly("r"),))
    with pytest.raises(ValidationError, match="aggregator 'r' \\(rowsOnly\\) cannot be combined"):
        spec.validate({"channel": __import__("common.types.column_type", fromlist=["STRING"]).STRING})


@pytest.mark.parametrize("reason, kind", [
    ("missing_column: grouping: column 'page' is not a grouping column of the projection", "missing_column"),
    ("filter: the query's filter does not imply the projection's filter term", "filter"),
    ("aggregator: no projection aggregator gives the intermediate of 'x'", "aggregator"),
    ("granularity: the projection keeps time by hour, coarser than the query's minute", "granularity"),
    ("interval: the query's interval edge 2020-01-01T05:30:00.000Z is not on a hour bucket edge", "interval"),
    ("raw_time: grouping: the query reads __time itself", "raw_time"),
    ("something new: with a colon", "other"),
    ("no colon at all", "other"),
])
def test_miss_reasons_fall_into_few_metric_labels(reason, kind):
    from common.query.projection_match import reason_kind

    assert reason_kind(reason) == kind


def test_partials_say_which_table_served_them(segments):
    from common.query.engine import run
    from common.query.model import query_from_json

    q = query_from_json({"queryType": "groupBy", "dataSource": "events", "intervals": [EVENTS_INTERVAL],
                         "granularity": "all", "dimensions": ["user"], "aggregations": [{"type": "count", "name": "n"}]})
    partial = run(q, segments[0])
    assert partial.projection is None
    assert {name for name, _ in partial.rejected} == {"hourly_channel", "big_channels", "daily_channel_page"}
    q2 = query_from_json({"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL],
                          "granularity": "day", "aggregations": [{"type": "count", "name": "n"},
                                                                 {"type": "longSum", "name": "a", "fieldName": "added"}]})
    assert run(q2, segments[0]).projection == "daily_channel_page"  # the smallest that matches
    # a plain count of whole day segments is their row count: base rows' metadata, no projection
    q3 = query_from_json({"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL],
                          "granularity": "day", "aggregations": [{"type": "count", "name": "n"}]})
    assert run(q3, segments[0]).projection is None
    assert run(query_from_json({**q3.to_json(), "context": {"useProjection": "daily_channel_page"}}),
               segments[0]).projection == "daily_channel_page"


def test_explain_says_a_plain_count_reads_base_rows(segments):
    from common.query.model import query_from_json
    from common.query.projection_report import explain_projections

    q = query_from_json({"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL],
                         "granularity": "day", "aggregations": [{"type": "count", "name": "n"}]})
    assert explain_projections(q, [s.manifest.to_json() for s in segments]) == \
        [{"projection": "base", "segments": 3, "rejected": {}}]


def test_explain_groups_segments_by_the_table_they_read(segments):
    from common.query.model import query_from_json
    from common.query.projection_report import explain_projections

    manifests = [s.manifest.to_json() for s in segments]
    q = query_from_json({"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL],
                         "granularity": "hour", "aggregations": [{"type": "count", "name": "n"}]})
    groups = explain_projections(q, manifests)
    assert groups[0] == {"projection": "hourly_channel", "segments": 2,
                         "rejected": {"big_channels": groups[0]["rejected"]["big_channels"],
                                      "daily_channel_page": groups[0]["rejected"]["daily_channel_page"]}}
    daily = groups[0]["rejected"]["daily_channel_page"]
    assert daily.startswith("granularity: ") and "coarser than" in daily
    assert groups[1] == {"projection": "base", "segments": 1, "rejected": {}}  # the day without projections
    q = query_from_json({"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL],
                         "granularity": "hour", "aggregations": [{"type": "count", "name": "n"}],
                         "context": {"useProjection": "big_channels"}})
    errors = [g for g in explain_projections(q, manifests) if g.get("error")]
    assert errors and "useProjection 'big_channels' cannot serve" in errors[0]["error"]


def _batched(query: dict, segments):
    from common.query import engine
    from common.query.model import query_from_json

    q = query_from_json(query)
    schema = engine.union_schema(segments)
    sources = [engine.source_for(q, s) for s in segments]
    return q, schema, sources, engine.batches(q, sources)


@pytest.mark.parametrize("query", CORPUS[::5], ids=[f"q{i}" for i in range(0, len(CORPUS), 5)])
def test_projection_rows_of_several_segments_in_one_pass_equal_their_merged_partials(segments, query):
    from common.query import engine
    from common.query.prepared_query import PreparedQuery
    from common.query.query_runner import QueryRunner

    q, schema, sources, batches = _batched(query, segments)
    one_by_one = engine.merge(q, [engine.run(q, src, schema) for src in sources])
    together = QueryRunner().run(PreparedQuery(None, q, schema, (), sources))  # batches run together
    assert _same(engine.finalize(q, together, schema), engine.finalize(q, one_by_one, schema))
    assert together.stats == one_by_one.stats


def test_the_projection_sources_of_a_query_share_a_batch_sketches_too(segments):
    hourly = {"queryType": "timeseries", "dataSource": "events", "intervals": [EVENTS_INTERVAL], "granularity": "day",
              "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"}]}
    _, _, sources, batches = _batched(hourly, segments)
    projected = [i for i, src in enumerate(sources) if src.pre_aggregated]
    assert len(projected) == 2 and projected in batches  # day 1 has no projection: a batch of its own
    assert sorted(i for b in batches for i in b) == list(range(len(sources)))
    sketch = dict(hourly, aggregations=[{"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}])
    _, _, sources, batches = _batched(sketch, segments)
    # Sketches combine each source's rows on their own (Aggregator.combine_parts), in one batch.
    projected = [i for i, src in enumerate(sources) if src.pre_aggregated]
    assert len(projected) == 2 and projected in batches
