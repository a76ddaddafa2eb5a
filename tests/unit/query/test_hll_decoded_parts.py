"""A projection's stored HLL sketches are decoded once per open segment file and the decoding is
kept in the node's part cache under that file (``ValueColumn.derived_values``): charged to the
part budget, dropped when the segment closes, and never found by another segment, whatever
buffer addresses the allocator hands out again (issue 24: no cache keyed by buffer addresses)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from common.query import query_runner
from common.segment.builder import build_segment
from common.segment.part_cache import PROCESS_CACHE
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from tests.conftest import day_interval, make_events_table
from tests.unit.query.test_projections import SPECS, _same
from common.query.projection import projection_rows

QUERY = {"queryType": "timeseries", "dataSource": "events", "intervals": ["2020-01-01/2020-01-02"],
         "granularity": "hour", "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user"}]}


def _segment(path: str, seed: int) -> Segment:
    table = make_events_table(rows_per_day=900, days=1, seed=seed)
    iv = day_interval(0)
    build_segment(table, path, SegmentId("events", iv, "v1", 0), (),
                  projections=[projection_rows(s, table) for s in SPECS])
    return Segment.open(path)


def _run(segment: Segment, **context) -> pa.Table:
    return query_runner.execute(dict(QUERY, context=context), [segment]).table


def _decodings(segment: Segment) -> list:
    token = segment._container._token
    return [k for k in list(PROCESS_CACHE._entries)
            if k[0] == token and str(k[2]).startswith("derived:hll-decoded")]


@pytest.fixture(autouse=True)
def _fresh():
    query_runner.PREPARED.clear()
    yield
    query_runner.PREPARED.clear()


def test_a_segment_keeps_its_decoding_until_it_closes(tmp_path):
    segment = _segment(os.path.join(tmp_path, "a.sseg"), seed=3)
    base = _run(segment, noProjections=True)
    for _ in range(3):  # first run: whole columns read; later runs: the kept batch plan
        assert _same(_run(segment), base)
    kept = _decodings(segment)
    assert kept, "the projection's sketch column was not kept decoded"
    held = sum(PROCESS_CACHE._entries[k][1] for k in kept)
    assert held > 0  # charged to the node's part budget
    segment.close()
    assert _decodings(segment) == []  # gone with the file


def test_a_segment_opened_after_another_closed_never_sees_its_decoding(tmp_path):
    # The same path, the same layout, other users: under address keys a freed buffer reused for
    # the second file's column could find the first one's decoding.
    path = os.path.join(tmp_path, "s.sseg")
    first = _segment(path, seed=3)
    first_answer = _run(first)
    _run(first)
    first.close()
    os.unlink(path)
    second = _segment(path, seed=11)
    try:
        base = _run(second, noProjections=True)
        for _ in range(3):
            got = _run(second)
            assert _same(got, base)
        assert not _same(got, first_answer)  # the data differ, so a stale decoding would show
        assert _decodings(second)
    finally:
        second.close()
