"""What the engine keeps between runs of one query over projection rows (issue 11).

``execute`` prepares each query text once over a set of segment objects (``PreparedQuery``: the
parsed query, the schema, each segment's chosen source); ``grouped_engine.run_together`` keeps the
selection and keying of a batch of projection sources on it (``projection_batch``); no aggregate's
result is kept (a sketch union is made again on every run). Every run must still answer exactly what base rows answer, with
the same stats, fail when a segment file changed on disk, and not reuse what was kept under
other declared types or for other segment objects.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError
from common.query import engine, query_runner
from common.query.prepared_query import PreparedCache
from common.query.sketch_aggregators import HllSketch
from tests.unit.query.test_prepared_query import _run as _prepared_run
from common.segment.segment import Segment
from common.types.column_type import ColumnType
from tests.unit.query.test_projections import CORPUS, _same, segments  # noqa: F401 - segments is a fixture


def _run(query: dict, segs, **context):
    result = query_runner.execute(dict(query, context={**query.get("context", {}), **context}), segs)
    return result.table, result.stats


@pytest.mark.parametrize("query", CORPUS[::3], ids=[f"q{i}" for i in range(0, len(CORPUS), 3)])
def test_every_run_of_a_kept_query_answers_what_base_rows_answer(segments, query):
    base, base_stats = _run(query, segments, noProjections=True)
    first, first_stats = _run(query, segments)
    for _ in range(2):  # kept query, sources and batch plan
        again, stats = _run(query, segments)
        assert _same(again, base), (query, again.to_pylist()[:5], base.to_pylist()[:5])
        assert _same(again, first)
        assert stats == first_stats
    query_runner.PREPARED.clear()
    fresh, fresh_stats = _run(query, segments)  # chosen again from scratch: the same
    assert _same(fresh, first) and fresh_stats == first_stats


HOURLY = {"queryType": "timeseries", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
          "granularity": "hour", "aggregations": [{"type": "count", "name": "c"},
                                                  {"type": "longSum", "name": "a", "fieldName": "added"}]}


def test_execute_prepares_once_per_text_and_segment_objects(segments):
    query_runner.PREPARED.clear()
    query_runner.execute(HOURLY, segments)
    prepared = query_runner.prepare(HOURLY, segments)
    assert query_runner.prepare(dict(HOURLY), segments) is prepared  # an equal dict: the same text
    sources = list(prepared.sources)
    query_runner.execute(dict(HOURLY), segments)
    assert query_runner.prepare(HOURLY, segments).sources == sources
    # Another object for the same file (a new generation) prepares again; 1 and 1.0 are other texts.
    other = Segment.open(segments[0].path)
    try:
        again = query_runner.prepare(HOURLY, [other, *segments[1:]])
        assert again is not prepared and again.sources[0] is not sources[0]
    finally:
        other.close()
    assert query_runner.fingerprint({"a": 1}) != query_runner.fingerprint({"a": 1.0})
    assert query_runner.fingerprint({"a": object()}) is None  # not plain JSON: nothing kept


def test_a_bad_query_fails_on_every_run(segments):
    bad = dict(HOURLY, aggregations=[{"type": "longSum", "name": "a", "fieldName": "no_such_column"}])
    for _ in range(2):
        with pytest.raises(Exception, match="no_such_column"):
            query_runner.execute(bad, segments)


def _copies(segments, tmp_path):
    out = []
    for s in segments:
        path = str(tmp_path / os.path.basename(s.path))
        with open(s.path, "rb") as src, open(path, "wb") as dst:
            dst.write(src.read())
        out.append(Segment.open(path))
    return out


@pytest.mark.parametrize("query", [
    HOURLY,
    # No aggregator: no intermediate column is read on a kept plan, the file is checked anyway.
    {"queryType": "groupBy", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
     "granularity": "all", "dimensions": ["channel"], "aggregations": []},
    {"queryType": "timeseries", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"], "granularity": "day",
     "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}]},
], ids=["count_sum", "no_aggregator", "hll"])
def test_a_segment_file_changed_on_disk_fails_a_kept_query(segments, tmp_path, query):
    copies = _copies(segments, tmp_path)
    try:
        first, _ = _run(query, copies)
        again, _ = _run(query, copies)
        assert _same(again, first) and first.num_rows > 0
        with open(copies[2].path, "ab") as f:  # a projection segment, damaged from outside
            f.write(b"\0" * 16)
        with pytest.raises(SegmentCorruptError, match="changed on disk"):
            _run(query, copies)
    finally:
        for s in copies:
            s.close()


@pytest.mark.parametrize("declared", ["LONG", "DOUBLE"])
def test_a_kept_plan_is_not_reused_under_another_declared_type(segments, declared):
    # Grouped by 'code' (text such as "1", "10", "-3.5", "abc") over the filtered projection:
    # declared a number, its values group as numbers, so the kept keys must not serve that run.
    query = {"queryType": "groupBy", "dataSource": "events", "intervals": ["2020-01-01/2020-01-04"],
             "granularity": "all", "dimensions": ["code"],
             "filter": {"type": "in", "dimension": "channel", "values": ["#en.wikipedia", "#fr.wikipedia"]},
             "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"}]}
    schema = engine.union_schema(segments)
    numeric = {**schema, "code": ColumnType.parse(declared)}
    cache = PreparedCache(memory=None)
    base_query = {**query, "context": {"noProjections": True}}
    answers, kept = {}, {}
    for types in (schema, numeric, schema, numeric):
        base, _, _ = _prepared_run(cache, base_query, segments, types)
        got, _, prepared = _prepared_run(cache, query, segments, types)
        assert _same(got, base), (declared, types["code"])
        projected = tuple(src for src in prepared.sources if src.pre_aggregated)
        assert len(projected) == 2 and prepared.kept("batch", projected) is not None  # kept for these types
        assert kept.setdefault(str(types["code"]), prepared) is prepared  # found again under the same types
        answers.setdefault(str(types["code"]), got)
    assert kept["STRING"] is not kept[declared]
    assert not _same(answers["STRING"], answers[declared])


def test_hll_unions_per_source_match_one_union_and_are_made_again_each_run():
    import datasketches as ds

    def sketch(values):
        s = ds.hll_sketch(12, ds.tgt_hll_type.HLL_4)
        for v in values:
            s.update(v)
        return s.serialize_compact()

    agg = HllSketch("u", field_name="user", lg_k=12)
    a = pa.array([sketch(range(0, 3000)), sketch(range(10))], pa.binary())
    b = pa.array([sketch(range(5000, 5100)), sketch(range(2000, 4000))], pa.binary())
    gids = [np.array([0, 1]), np.array([1, 1])]
    expected = agg.combine(pa.concat_arrays([a, b]), np.concatenate(gids), 2)
    first = agg.combine_parts([a, b], gids, 2)
    assert [agg._estimate(x) for x in first.to_pylist()] == [agg._estimate(x) for x in expected.to_pylist()]
    again = agg.combine_parts([a, b], gids, 2)
    assert again is not first  # no union result is kept between runs: each run merges again
    assert again.to_pylist() == first.to_pylist()
    c = pa.array([sketch(range(7000, 9000)), sketch(range(3))], pa.binary())
    other = agg.combine_parts([a, c], gids, 2)
    want = agg.combine(pa.concat_arrays([a, c]), np.concatenate(gids), 2)
    assert [agg._estimate(x) for x in other.to_pylist()] == [agg._estimate(x) for x in want.to_pylist()]


def test_threads_running_the_same_queries_get_the_same_answers(segments):
    from concurrent.futures import ThreadPoolExecutor

    queries = CORPUS[::17]
    expected = [_run(q, segments) for q in queries]
    query_runner.PREPARED.clear()

    def one(i: int):
        q = queries[i % len(queries)]
        return i % len(queries), _run(q, segments)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for i, (table, stats) in pool.map(one, range(20 * len(queries))):
            assert _same(table, expected[i][0]) and stats == expected[i][1], queries[i]
