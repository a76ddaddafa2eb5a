"""Projection sources kept and run again, as a historical runs them (issue 11).

A historical prepares each query once over its segments (``PreparedQuery``: each segment's
source) and runs it on every repeat of the query; the rows a filter selects from projection rows
are kept on the prepared query (``selection.select_projection_rows``). Over the projections
corpus, every run of the kept sources gives what base rows give, with the same stats each time,
and a kept selection is not reused when the declared type of a filtered column changes (another
declaration is another prepared query).
"""

from __future__ import annotations

import pytest

from common.query import engine
from common.query.model import query_from_json
from common.query.prepared_query import PreparedKey, PreparedQuery
from common.query.query_runner import QueryRunner
from common.types.column_type import ColumnType
from tests.unit.query.test_projections import CORPUS, _same, segments  # noqa: F401 - segments is a fixture


_PREPARED: dict = {}


def _historical_run(query, sources, schema):
    """What a historical does with its sources: prepared once per query, sources and declared
    types; projection sources of one projection in one pass, the others one by one; then merged
    and finalized as the broker would."""
    key = PreparedKey(query.json_text(), tuple(schema.items()), ())
    prepared = _PREPARED.setdefault((key, tuple(sources)), PreparedQuery(key, query, schema, (), sources))
    merged = QueryRunner().run(prepared)
    return engine.finalize(query, merged, schema), merged.stats


def _sources(query, segments):
    chosen = [s for s in segments if any(iv.overlaps(s.interval) for iv in query.intervals)]
    return [engine.source_for(query, s) for s in chosen]


@pytest.mark.parametrize("query", CORPUS, ids=[f"q{i}" for i in range(len(CORPUS))])
def test_kept_sources_answer_the_same_on_every_run(segments, query):
    schema = engine.union_schema(segments)
    base_query = query_from_json({**query, "context": {"noProjections": True}})
    base, base_stats = _historical_run(base_query, _sources(base_query, segments), schema)
    q = query_from_json(query)
    sources = _sources(q, segments)
    first, first_stats = _historical_run(q, sources, schema)
    again, again_stats = _historical_run(q, sources, schema)
    assert _same(first, base), (query, first.to_pylist()[:5], base.to_pylist()[:5])
    assert _same(again, first)
    assert again_stats == first_stats
    assert first_stats.rows_scanned <= base_stats.rows_scanned


def test_a_kept_selection_is_not_reused_under_another_declared_type(segments):
    query = {"queryType": "timeseries", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
             "granularity": "day", "filter": {"type": "null", "column": "channel"},
             "aggregations": [{"type": "count", "name": "c"}]}
    schema = engine.union_schema(segments)
    q = query_from_json(query)
    sources = _sources(q, segments)
    assert any(src.pre_aggregated for src in sources)
    as_text, _ = _historical_run(q, sources, schema)
    assert sum(as_text.column("c").to_pylist()) > 0
    # Declared a number (as a newer segment may declare it), the channel's text values read as
    # null, so the rows selected differ and the selection must be made again.
    numeric = {**schema, "channel": ColumnType.parse("LONG")}
    base_query = query_from_json({**query, "context": {"noProjections": True}})
    base, _ = _historical_run(base_query, _sources(base_query, segments), numeric)
    got, _ = _historical_run(q, sources, numeric)
    assert _same(got, base) and not _same(got, as_text)
    again, _ = _historical_run(q, sources, schema)
    assert _same(again, as_text)


def test_a_large_selection_is_not_kept(segments, monkeypatch):
    from common.query import selection

    monkeypatch.setattr(selection, "MEMO_MAX_ROWS", 3)
    query = query_from_json({"queryType": "timeseries", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
                             "granularity": "hour", "filter": {"type": "not", "field": {"type": "null", "column": "channel"}},
                             "aggregations": [{"type": "count", "name": "c"}]})
    schema = engine.union_schema(segments)
    sources = [s for s in _sources(query, segments) if s.pre_aggregated]
    assert sources
    first, _ = _historical_run(query, sources, schema)
    prepared = [p for (key, srcs), p in _PREPARED.items() if srcs == tuple(sources)]
    assert len(prepared) == 1 and all(prepared[0].kept("selection", src) is None for src in sources)  # made again
    again, _ = _historical_run(query, sources, schema)
    assert _same(again, first) and first.num_rows > 0


@pytest.mark.parametrize("declared", ["LONG", "DOUBLE"])
def test_kept_projection_rows_filter_a_text_column_declared_numeric(segments, declared):
    # The filtered projection groups by 'code' (text such as "1", "10", "-3.5", "abc"); declared a
    # number, its values read as numbers and filters compare with numbers, on kept projection rows as
    # on base rows (the filter used to compare the numbers with a set of strings and fail).
    channels = {"type": "in", "dimension": "channel", "values": ["#en.wikipedia", "#fr.wikipedia"]}
    query = {"queryType": "groupBy", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
             "granularity": "all", "dimensions": ["channel"], "aggregations": [{"type": "count", "name": "c"}]}
    schema = engine.union_schema(segments)
    numeric = {**schema, "code": ColumnType.parse(declared)}
    for code in ({"type": "in", "dimension": "code", "values": ["1", "10"]},
                 {"type": "selector", "dimension": "code", "value": "-3.5"},
                 {"type": "bound", "dimension": "code", "lower": "1", "upper": "2", "ordering": "numeric"}):
        flt = {"type": "and", "fields": [channels, code]}
        q = query_from_json({**query, "filter": flt})
        sources = _sources(q, segments)
        assert any(src.pre_aggregated for src in sources)
        base_query = query_from_json({**query, "filter": flt, "context": {"noProjections": True}})
        for types in (numeric, schema, numeric):
            base, _ = _historical_run(base_query, _sources(base_query, segments), types)
            got, _ = _historical_run(q, sources, types)
            assert _same(got, base), (code, types["code"])
            assert sum(got.column("c").to_pylist()) > 0 or code["type"] == "selector"
