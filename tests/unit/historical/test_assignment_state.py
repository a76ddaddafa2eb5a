"""AssignmentState: feed events, assert the exact commands (no threads, no files)."""

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.historical.core.assignment_state import (
    Announce,
    Assigned,
    AssignmentsResynced,
    AssignmentState,
    Drop,
    Load,
    LoadFailed,
    LoadSucceeded,
    SegmentCorrupted,
    Unannounce,
    Unassigned,
)


def descriptor(day: int, partition: int = 0) -> SegmentDescriptor:
    start = day * 86_400_000
    sid = SegmentId("wiki", Interval(start, start + 86_400_000), "v1", partition)
    return SegmentDescriptor(sid, 1000, 10, f"wiki/{day}.sseg", 1, "{}")


def test_assign_load_announce():
    s, d = AssignmentState(), descriptor(1)
    assert s.handle(Assigned(d)) == [Load(d)]
    assert s.handle(Assigned(d)) == []  # a repeated put while loading is not a second load
    assert s.handle(LoadSucceeded(d.id)) == [Announce(d)]
    assert s.served == {d.id} and not s.loading


def test_unassign_served_unannounces_then_drops():
    s, d = AssignmentState(), descriptor(1)
    s.handle(Assigned(d))
    s.handle(LoadSucceeded(d.id))
    assert s.handle(Unassigned(d.id)) == [Unannounce(d.id), Drop(d.id)]
    assert s.served == set() and s.assigned == {}


def test_unassigned_while_loading_drops_when_load_finishes():
    s, d = AssignmentState(), descriptor(1)
    s.handle(Assigned(d))
    assert s.handle(Unassigned(d.id)) == []
    assert s.handle(LoadSucceeded(d.id)) == [Drop(d.id)]
    assert s.served == set()


def test_failed_load_is_recorded_and_a_new_assignment_retries():
    s, d = AssignmentState(), descriptor(1)
    s.handle(Assigned(d))
    assert s.handle(LoadFailed(d.id, "checksum")) == []
    assert s.failed == {d.id: "checksum"}
    assert s.handle(Assigned(d)) == [Load(d)]
    assert s.failed == {}


def test_resync_drops_missing_and_loads_new():
    s, a, b, c = AssignmentState(), descriptor(1), descriptor(2), descriptor(3)
    for d in (a, b):
        s.handle(Assigned(d))
        s.handle(LoadSucceeded(d.id))
    out = s.handle(AssignmentsResynced((b, c)))
    assert out == [Unannounce(a.id), Drop(a.id), Load(c)]


def test_corrupted_segment_is_unannounced_and_refetched():
    s, d = AssignmentState(), descriptor(1)
    s.handle(Assigned(d))
    s.handle(LoadSucceeded(d.id))
    assert s.handle(SegmentCorrupted(d.id)) == [Unannounce(d.id), Load(d, force_refetch=True)]
    assert s.handle(LoadSucceeded(d.id)) == [Announce(d)]
    assert s.handle(SegmentCorrupted(descriptor(9).id)) == []
