"""When a stream task hands off its realtime segments, and which segments each handoff rewrites."""

from __future__ import annotations

import pytest

from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.ingestion.core.handoff_plan import HandoffTrigger, UsedSegment, plan_handoffs

HOUR = 3_600_000
H0, H1, H2 = (Interval(h * HOUR, (h + 1) * HOUR) for h in range(3))
DAY0 = Interval(0, 24 * HOUR)


def seg(iv: Interval, version: str, partition: int = 0, rows: int = 10, realtime: bool = True,
        num_partitions: int = 1) -> UsedSegment:
    return UsedSegment(SegmentId("wiki", iv, version, partition), num_partitions, rows, realtime)


def test_a_chunk_is_due_once_its_realtime_rows_reach_max_rows_per_segment():
    trigger = HandoffTrigger(100)
    trigger.published(H1, 60)
    trigger.published(H0, 99)
    assert trigger.due() == []
    trigger.published(H1, 40)
    trigger.published(H0, 1)
    assert trigger.due() == [H0, H1]  # oldest first
    trigger.handed_off(H0)
    assert trigger.due() == [H1] and trigger.pending() == [H1]
    trigger.published(H0, 5)
    assert trigger.pending() == [H0, H1] and trigger.due() == [H1]
    with pytest.raises(ValueError, match="maxRowsPerSegment"):
        HandoffTrigger(0)


def test_a_handoff_rewrites_the_chunks_visible_segments_realtime_or_not():
    full = seg(H0, "v2", 0, rows=1000, realtime=False)  # an earlier handoff's, whose set got appended to
    appended = [seg(H0, "v2", p, rows=7) for p in (1, 2)]
    other_hour = seg(H1, "v1", rows=3)
    [plan], skipped = plan_handoffs([full, *appended, other_hour], [H0])
    assert skipped == []
    assert plan.interval == H0 and set(plan.inputs) == {full.id, appended[0].id, appended[1].id}
    assert plan.expected == plan.inputs
    assert (plan.realtime_segments, plan.realtime_rows) == (2, 14)


def test_overshadowed_segments_are_expected_but_never_read_again():
    # The last handoff's v2 is published; the coordinator has not yet marked the small v1 ones unused.
    old = [seg(H0, "v1", p, num_partitions=1) for p in (0, 1)]
    new = seg(H0, "v2", realtime=False)
    late = seg(H0, "v2", 1, rows=5)  # a micro-batch appended to the new version since
    [plan], _ = plan_handoffs([*old, new, late], [H0])
    assert set(plan.inputs) == {new.id, late.id}  # reading v1 too would load its rows twice
    assert set(plan.expected) == {new.id, late.id, old[0].id, old[1].id}
    # Nothing realtime is visible any more: nothing to do.
    assert plan_handoffs([*old, new], [H0]) == ([], [])


def test_at_task_end_every_chunk_with_a_realtime_segment_is_handed_off():
    used = [seg(H0, "v1"), seg(H1, "v1", realtime=False), seg(H2, "v3"), seg(H2, "v3", 1, rows=2)]
    plans, skipped = plan_handoffs(used)
    assert [(p.interval, p.realtime_rows) for p in plans] == [(H0, 10), (H2, 12)] and skipped == []


def test_a_chunk_a_wider_segment_reaches_into_is_skipped_with_the_reason():
    day = seg(DAY0, "v0", realtime=False)
    hour = seg(H1, "v1")  # cannot arise from allocation, but metadata could hold it
    plans, skipped = plan_handoffs([day, hour], [H1])
    assert plans == []
    assert len(skipped) == 1 and str(day.id) in skipped[0] and "compact a wider interval" in skipped[0]
