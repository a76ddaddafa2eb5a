"""Auto-compaction's planner: chunks whose projections differ from the catalog's, bounded."""

from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.core.compaction_plan import Compaction, plan_compactions

DAY = 86_400_000
P = {"type": "aggregate", "name": "p", "groupingColumns": [{"name": "channel"}],
     "aggregators": [{"type": "count", "name": "n"}]}
# The same definition spelled as a segment stores it (normalized by ProjectionSpec.to_json).
P_STORED = {"type": "aggregate", "name": "p", "groupingColumns": [{"type": "auto", "name": "channel"}],
            "aggregators": [{"name": "n", "type": "count"}]}


def sid(ds, day, part=0):
    return SegmentId(ds, Interval(day * DAY, (day + 1) * DAY), "v1", part)


def test_chunks_whose_projections_differ_are_compacted_oldest_first_within_the_limit():
    segments = [(sid("a", 2), []), (sid("a", 1), [P_STORED]), (sid("a", 0), []), (sid("a", 0, 1), [P_STORED]),
                (sid("b", 0), [])]
    got = plan_compactions(segments, {"a": [P]}, [], limit=5)
    assert got == [Compaction("a", Interval(0, DAY)), Compaction("a", Interval(2 * DAY, 3 * DAY))]
    assert plan_compactions(segments, {"a": [P]}, [], limit=1) == [Compaction("a", Interval(0, DAY))]


def test_chunks_under_way_and_the_limit_hold_back_new_ones():
    segments = [(sid("a", 0), []), (sid("a", 1), [])]
    busy = [Compaction("a", Interval(0, DAY))]
    assert plan_compactions(segments, {"a": [P]}, busy, limit=2) == [Compaction("a", Interval(DAY, 2 * DAY))]
    assert plan_compactions(segments, {"a": [P]}, busy, limit=1) == []


def test_dropped_projections_and_uncatalogued_datasources():
    assert plan_compactions([(sid("a", 0), [P_STORED])], {"a": []}, [], 1) == [Compaction("a", Interval(0, DAY))]
    assert plan_compactions([(sid("x", 0), [P_STORED])], {}, [], 1) == []
