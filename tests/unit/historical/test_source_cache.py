"""SourceCache: a segment's table choice is made once per query JSON and segment object."""

from __future__ import annotations

from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.historical.source_cache import SourceCache


class _Segment:
    def __init__(self, day: int) -> None:
        self.id = SegmentId("wiki", Interval(day * 86_400_000, (day + 1) * 86_400_000), "v1", 0)


def test_a_choice_is_made_once_per_query_and_segment():
    cache, made = SourceCache(), []
    seg = _Segment(0)

    def make(tag):
        made.append(tag)
        return tag

    assert cache.source('{"q": 1}', seg, lambda: make("a")) == "a"
    assert cache.source('{"q": 1}', seg, lambda: make("b")) == "a"  # kept
    assert cache.source('{"q": 2}', seg, lambda: make("c")) == "c"  # another query chooses anew
    assert made == ["a", "c"]


def test_a_reloaded_segment_gets_a_new_choice():
    cache = SourceCache()
    first, again = _Segment(0), _Segment(0)  # same id, loaded again: a new object
    assert cache.source("q", first, lambda: "old") == "old"
    assert cache.source("q", again, lambda: "new") == "new"
    assert cache.source("q", again, lambda: "newer") == "new"


def test_entries_are_bounded_least_recently_used_first():
    cache = SourceCache(max_entries=2)
    segs = [_Segment(d) for d in range(3)]
    cache.source("q", segs[0], lambda: 0)
    cache.source("q", segs[1], lambda: 1)
    cache.source("q", segs[0], lambda: "unused")  # 0 is now the most recent
    cache.source("q", segs[2], lambda: 2)  # evicts 1
    assert len(cache) == 2
    assert cache.source("q", segs[0], lambda: "x") == 0
    assert cache.source("q", segs[1], lambda: "again") == "again"
