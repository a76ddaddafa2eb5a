"""kept_queries keeps nothing alive: a segment let go of is freed (and an evicted segment's file
with it) although queries over it were kept."""

from __future__ import annotations

import gc
import weakref

from common.query import kept_queries


class _Segment:
    pass


class _Source:
    def __init__(self, segment) -> None:
        self.segment = segment  # as a row source reads its segment's files


def _prepare(text, segments):
    sources = [kept_queries.source(text, s, lambda s=s: _Source(s)) for s in segments]
    return {"x": "LONG"}, sources


def test_a_kept_preparation_is_reused_while_its_segments_live_and_frees_them_after():
    text = kept_queries.query_text({"queryType": "timeseries", "n": 1})
    segments = [_Segment(), _Segment()]
    first = kept_queries.prepared(text, segments, lambda: _prepare(text, segments))
    again = kept_queries.prepared(text, segments, lambda: (_ for _ in ()).throw(AssertionError("prepared again")))
    assert again[0] is first[0] and all(a is b for a, b in zip(again[1], first[1]))
    refs = [weakref.ref(s) for s in segments]
    del segments, first, again
    gc.collect()
    assert all(r() is None for r in refs), "a kept query held a segment the caller let go of"


def test_another_segment_object_prepares_again():
    text = kept_queries.query_text({"queryType": "timeseries", "n": 2})
    one = [_Segment()]
    kept_queries.prepared(text, one, lambda: _prepare(text, one))
    other = [_Segment()]
    made = []
    kept_queries.prepared(text, other, lambda: made.append(1) or _prepare(text, other))
    assert made == [1]
