"""Timeline: Druid's versioned, partition-aware visibility, checked by example and against a
per-millisecond brute-force reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.segment.timeline import Timeline, TimelineChunk, TimelineSegment
from common.types.interval import Interval


def seg(start: int, end: int, version: str, partition: int = 0, num_partitions: int = 1,
        ds: str = "ds") -> TimelineSegment:
    return TimelineSegment(SegmentId(ds, Interval(start, end), version, partition), num_partitions)


def chunks(timeline: Timeline, *intervals: Interval) -> list[tuple[int, int, str, int]]:
    """(start, end, version, number of segments) per chunk, for compact assertions."""
    found = timeline.lookup(list(intervals)) if intervals else timeline.lookup()
    return [(c.interval.start, c.interval.end, c.version, len(c.segments)) for c in found]


def test_single_segment_is_visible_over_its_interval_and_clipped_to_the_query():
    tl = Timeline(segments=[seg(0, 10, "v1")])
    assert chunks(tl) == [(0, 10, "v1", 1)]
    [chunk] = tl.lookup(Interval(3, 20))
    assert chunk == TimelineChunk(Interval(3, 10), "v1", (seg(0, 10, "v1").id,), Interval(0, 10))
    assert tl.lookup(Interval(10, 20)) == []
    assert tl.overshadowed() == set()


def test_newer_version_over_the_same_interval_overshadows_the_older():
    old, new = seg(0, 10, "v1"), seg(0, 10, "v2")
    tl = Timeline(segments=[old, new])
    assert chunks(tl) == [(0, 10, "v2", 1)]
    assert tl.overshadowed() == {old.id}


def test_partially_overlapping_newer_version_leaves_the_older_visible_around_it():
    old, new = seg(0, 10, "v1"), seg(3, 6, "v2")
    tl = Timeline(segments=[new, old])
    assert chunks(tl) == [(0, 3, "v1", 1), (3, 6, "v2", 1), (6, 10, "v1", 1)]
    assert [c.true_interval for c in tl.lookup()] == [Interval(0, 10), Interval(3, 6), Interval(0, 10)]
    assert tl.overshadowed() == set()


def test_several_newer_sets_together_can_overshadow_one_older_segment():
    old = seg(0, 10, "v1")
    tl = Timeline(segments=[old, seg(0, 4, "v2"), seg(4, 10, "v3")])
    assert tl.overshadowed() == {old.id}
    tl.remove(seg(4, 10, "v3").id)
    assert tl.overshadowed() == set()
    assert chunks(tl) == [(0, 4, "v2", 1), (4, 10, "v1", 1)]


def test_older_version_does_not_overshadow_newer_wherever_it_was_added():
    tl = Timeline(segments=[seg(0, 10, "v2"), seg(0, 20, "v1")])
    assert chunks(tl) == [(0, 10, "v2", 1), (10, 20, "v1", 1)]
    assert tl.overshadowed() == set()


def test_incomplete_newer_set_does_not_overshadow_older_complete_one_until_complete():
    old = seg(0, 10, "v1")
    tl = Timeline(segments=[old, seg(0, 10, "v2", 0, 3), seg(0, 10, "v2", 2, 3)])
    assert not tl.is_complete(Interval(0, 10), "v2")
    assert chunks(tl) == [(0, 10, "v1", 1)]
    assert tl.overshadowed() == set()

    tl.add(seg(0, 10, "v2", 1, 3))
    assert tl.is_complete(Interval(0, 10), "v2")
    [chunk] = tl.lookup()
    assert chunk.version == "v2"
    assert [s.partition for s in chunk.segments] == [0, 1, 2]
    assert tl.overshadowed() == {old.id}


def test_incomplete_older_set_is_overshadowed_by_a_complete_newer_one():
    partial = seg(0, 10, "v1", 1, 2)
    tl = Timeline(segments=[partial, seg(0, 10, "v2")])
    assert tl.overshadowed() == {partial.id}


def test_incomplete_set_alone_is_neither_visible_nor_overshadowed():
    tl = Timeline(segments=[seg(0, 10, "v1", 0, 2), seg(0, 10, "v2", 0, 2)])
    assert tl.lookup() == []
    assert tl.overshadowed() == set()


def test_removing_the_newer_version_restores_the_older():
    old, new = seg(0, 10, "v1"), seg(0, 10, "v2")
    tl = Timeline(segments=[old, new])
    assert tl.remove(new.id) is True
    assert tl.remove(new.id) is False
    assert chunks(tl) == [(0, 10, "v1", 1)]
    assert tl.overshadowed() == set()
    assert new.id not in tl and old.id in tl and len(tl) == 1


def test_removing_one_partition_makes_the_set_incomplete_and_invisible():
    tl = Timeline(segments=[seg(0, 10, "v1"), seg(0, 10, "v2", 0, 2), seg(0, 10, "v2", 1, 2)])
    assert chunks(tl) == [(0, 10, "v2", 2)]
    tl.remove(seg(0, 10, "v2", 1, 2).id)
    assert chunks(tl) == [(0, 10, "v1", 1)]


def test_lookup_merges_overlapping_query_intervals_and_skips_gaps():
    tl = Timeline(segments=[seg(0, 5, "v1"), seg(8, 12, "v1")])
    assert chunks(tl, Interval(2, 4), Interval(3, 9), Interval(11, 30)) == [
        (2, 5, "v1", 1), (8, 9, "v1", 1), (11, 12, "v1", 1)]


def test_adding_the_same_segment_twice_is_a_no_op():
    tl = Timeline(segments=[seg(0, 10, "v1"), seg(0, 10, "v1")])
    assert len(tl) == 1
    assert list(tl) == [seg(0, 10, "v1")]


def test_overshadows_answers_for_an_interval_and_version_not_in_the_timeline():
    tl = Timeline(segments=[seg(0, 5, "v2"), seg(5, 10, "v3")])
    assert tl.overshadows(Interval(0, 10), "v1")
    assert tl.overshadows(Interval(2, 7), "v1")
    assert not tl.overshadows(Interval(0, 10), "v2")  # [0,5) is v2 itself, not newer
    assert not tl.overshadows(Interval(0, 11), "v1")  # [10,11) is not covered
    assert Timeline().overshadows(Interval(0, 1), "v1") is False


def test_same_version_overlapping_sets_resolve_by_interval_regardless_of_order():
    a, b = seg(0, 10, "v1"), seg(5, 15, "v1")
    assert Timeline(segments=[a, b]).lookup() == Timeline(segments=[b, a]).lookup()
    assert chunks(Timeline(segments=[a, b])) == [(0, 5, "v1", 1), (5, 15, "v1", 1)]
    assert Timeline(segments=[a, b]).overshadowed() == set()


@pytest.mark.parametrize("bad, message", [
    (seg(0, 10, "v1", ds="other"), "datasource 'other'"),
    (seg(0, 10, "v1", partition=1, num_partitions=3), "already in the set"),
    (seg(5, 5, "v1"), "empty interval"),
    (seg(0, 10, "v1", num_partitions=0), "num_partitions must be >= 1"),
])
def test_invalid_segments_are_rejected_with_the_segment_named(bad, message):
    tl = Timeline("ds", [seg(0, 10, "v1", 0, 2)])
    with pytest.raises(ValidationError, match=message) as err:
        tl.add(bad)
    assert str(bad.id) in str(err.value)


# --- property test against a brute-force reference -------------------------------------------

SPAN = 16
VERSIONS = ["v1", "v2", "v3", "v4"]


@st.composite
def segment_sets(draw):
    """Partition sets over small integer intervals; each set keeps a random subset of its
    partitions so both complete and incomplete sets occur."""
    out: list[TimelineSegment] = []
    seen: set[tuple[int, int, str]] = set()
    for _ in range(draw(st.integers(0, 7))):
        start = draw(st.integers(0, SPAN - 1))
        end = draw(st.integers(start + 1, SPAN))
        version = draw(st.sampled_from(VERSIONS))
        if (start, end, version) in seen:
            continue
        seen.add((start, end, version))
        n = draw(st.integers(1, 3))
        present = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
        out.extend(seg(start, end, version, p, n) for p in present)
    return out


def reference(segments: list[TimelineSegment], queries: list[tuple[int, int]]):
    """Per-millisecond visibility: the complete set with the highest (version, start, end)."""
    sets: dict[tuple[int, int, str], dict] = {}
    for s in segments:
        key = (s.id.interval.start, s.id.interval.end, s.id.version)
        entry = sets.setdefault(key, {"n": s.num_partitions, "parts": {}})
        entry["parts"][s.id.partition] = s.id
    complete = {k: v for k, v in sets.items() if len(v["parts"]) == v["n"]}

    def winner(ms: int):
        covering = [k for k in complete if k[0] <= ms < k[1]]
        return max(covering, key=lambda k: (k[2], k[0], k[1])) if covering else None

    queried = sorted({ms for lo, hi in queries for ms in range(lo, hi)})
    result: list[TimelineChunk] = []
    run: list = []  # [start, end, key]
    for ms in queried:
        key = winner(ms)
        if run and run[2] == key and run[1] == ms:
            run[1] = ms + 1
            continue
        if run and run[2] is not None:
            result.append(_ref_chunk(run, complete))
        run = [ms, ms + 1, key]
    if run and run[2] is not None:
        result.append(_ref_chunk(run, complete))

    overshadowed = set()
    for (lo, hi, version), entry in sets.items():
        if all((w := winner(ms)) is not None and w[2] > version for ms in range(lo, hi)):
            overshadowed.update(entry["parts"].values())
    return result, overshadowed


def _ref_chunk(run, complete) -> TimelineChunk:
    lo, hi, version = run[2]
    parts = complete[run[2]]["parts"]
    return TimelineChunk(Interval(run[0], run[1]), version, tuple(parts[p] for p in sorted(parts)),
                         Interval(lo, hi))


queries_st = st.lists(st.tuples(st.integers(0, SPAN), st.integers(0, SPAN)).map(sorted).filter(lambda q: q[0] < q[1]),
                      min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(segments=segment_sets(), removals=st.lists(st.integers(0, 30), max_size=3), queries=queries_st,
       data=st.data())
def test_timeline_matches_per_millisecond_reference(segments, removals, queries, data):
    order = data.draw(st.permutations(segments))
    tl = Timeline("ds", order)
    kept = list(segments)
    for r in removals:
        if kept:
            gone = kept.pop(r % len(kept))
            assert tl.remove(gone.id)
    expected_chunks, expected_overshadowed = reference(kept, [tuple(q) for q in queries])
    assert tl.lookup([Interval(lo, hi) for lo, hi in queries]) == expected_chunks
    assert tl.overshadowed() == expected_overshadowed
    assert len(tl) == len(kept)
    # Whole-timeline lookup agrees too, and overshadows() agrees with overshadowed() per segment.
    assert tl.lookup() == reference(kept, [(0, SPAN)])[0]
    for s in kept:
        assert tl.is_overshadowed(s.id) == (s.id in expected_overshadowed)


def test_appended_partitions_ride_on_a_complete_core_set():
    # An INSERT into an existing chunk adds partitions after the core ones (Druid's non-core partitions).
    core = [seg(0, 10, "v1", partition=p, num_partitions=2) for p in (0, 1)]
    extra = seg(0, 10, "v1", partition=2, num_partitions=2)
    tl = Timeline(segments=[*core, extra])
    assert [c.segments for c in tl.lookup()] == [tuple(s.id for s in (*core, extra))]
    # Appended partitions alone never make an incomplete set visible.
    assert Timeline(segments=[core[0], extra]).lookup() == []
