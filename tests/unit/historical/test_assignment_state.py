"""AssignmentState: feed events, assert the exact commands and their stimulus ids, and validate the
state after every event (as dask's worker state machine tests do); no threads, no files."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.historical.core.assignment_state import (
    Announce,
    Assigned,
    AssignmentsResynced,
    AssignmentState,
    ClearLoadFailure,
    Drop,
    InvalidState,
    Load,
    LoadFailed,
    LoadFailure,
    LoadFailureForgotten,
    LoadSucceeded,
    ReportLoadFailure,
    SegmentCorrupted,
    Unannounce,
    Unassigned,
)


def descriptor(day: int, partition: int = 0) -> SegmentDescriptor:
    start = day * 86_400_000
    sid = SegmentId("wiki", Interval(start, start + 86_400_000), "v1", partition)
    return SegmentDescriptor(sid, 1000, 10, f"wiki/{day}.sseg", 1, "{}")


def machine() -> AssignmentState:
    return AssignmentState(validate=True)  # every handle() validates the state after the event


def test_assign_load_announce():
    s, d = machine(), descriptor(1)
    assert s.handle(Assigned(d, "put-1")) == [Load(d, "put-1")]
    assert s.handle(Assigned(d, "put-2")) == []  # a repeated put while loading is not a second load
    assert s.handle(LoadSucceeded(d.id, "ok-1")) == [Announce(d, "ok-1")]
    assert s.served == {d.id} and not s.loading
    assert [sid for sid, _ in s.stimulus_log] == ["put-1", "put-2", "ok-1"]


def test_unassign_served_unannounces_then_drops():
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadSucceeded(d.id, "ok-1"))
    assert s.handle(Unassigned(d.id, "del-1")) == [Unannounce(d.id, "del-1"), Drop(d.id, "del-1")]
    assert s.served == set() and s.assigned == {}


def test_unassigned_while_loading_drops_when_load_finishes():
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    assert s.handle(Unassigned(d.id, "del-1")) == []
    assert s.handle(LoadSucceeded(d.id, "ok-1")) == [Drop(d.id, "ok-1")]
    assert s.served == set() and s.loading == set()


def test_a_failed_load_is_reported_and_a_repeated_assignment_retries_it():
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    assert s.handle(LoadFailed(d.id, "not found", "fail-1")) == [ReportLoadFailure(d.id, "not found", 1, "fail-1")]
    assert s.failed == {d.id: LoadFailure("not found", 1)} and not s.loading
    # The coordinator puts the assignment again after its backoff: a retry, from a fresh copy.
    assert s.handle(Assigned(d, "put-2")) == [Load(d, "put-2", force_refetch=True)]
    assert s.failed == {d.id: LoadFailure("not found", 1)}  # the count survives until a load succeeds
    assert s.handle(LoadFailed(d.id, "checksum", "fail-2")) == [ReportLoadFailure(d.id, "checksum", 2, "fail-2")]
    s.handle(Assigned(d, "put-3"))
    assert s.handle(LoadSucceeded(d.id, "ok-1")) == [ClearLoadFailure(d.id, "ok-1"), Announce(d, "ok-1")]
    assert s.failed == {} and s.served == {d.id}


def test_a_failure_outlives_the_unassignment_so_the_coordinator_still_sees_it():
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadFailed(d.id, "disk full", "fail-1"))
    assert s.handle(Unassigned(d.id, "del-1")) == []  # moved elsewhere: nothing was served here
    # Kept until the coordinator deletes the record (its give-up expiry; see below).
    assert s.failed == {d.id: LoadFailure("disk full", 1)} and s.assigned == {}
    assert s.handle(Assigned(d, "put-2")) == [Load(d, "put-2", force_refetch=True)]
    assert s.handle(LoadFailed(d.id, "disk full", "fail-2")) == [ReportLoadFailure(d.id, "disk full", 2, "fail-2")]


def test_the_failure_of_an_unassigned_segment_is_forgotten_when_the_coordinator_deletes_it():
    """The give-up expired: the coordinator deleted the record; the count goes with it, so the
    next assignment here counts from one, and its failures are reported (and given up) anew."""
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    for i in (1, 2, 3):
        s.handle(LoadFailed(d.id, "S3 down", f"fail-{i}"))
        if i < 3:
            s.handle(Assigned(d, f"retry-{i}"))
    s.handle(Unassigned(d.id, "del-1"))  # gave up: moved elsewhere, the record stays...
    assert s.failed == {d.id: LoadFailure("S3 down", 3)}
    assert s.handle(LoadFailureForgotten(d.id, "forget-1")) == [ClearLoadFailure(d.id, "forget-1")]  # ...until now
    assert s.failed == {} and s.assigned == {} and s.loading == set()
    assert s.handle(LoadFailureForgotten(d.id, "forget-2")) == []  # the deletion our clear causes
    # Assigned here again (the other holder died): a plain load, and a failure is attempt 1.
    assert s.handle(Assigned(d, "put-2")) == [Load(d, "put-2")]
    assert s.handle(LoadFailed(d.id, "S3 down", "fail-4")) == [ReportLoadFailure(d.id, "S3 down", 1, "fail-4")]
    s.handle(Assigned(d, "retry-4"))
    assert s.handle(LoadFailed(d.id, "S3 down", "fail-5")) == [ReportLoadFailure(d.id, "S3 down", 2, "fail-5")]
    s.handle(Assigned(d, "retry-5"))
    assert s.handle(LoadSucceeded(d.id, "ok-1")) == [ClearLoadFailure(d.id, "ok-1"), Announce(d, "ok-1")]


def test_a_forgotten_record_of_a_segment_being_loaded_again_restarts_the_count():
    # The coordinator forgets the record and assigns the segment here in one run; the assignment
    # can arrive first (two watches). The load in flight then reports afresh.
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadFailed(d.id, "x", "fail-1"))
    s.handle(Unassigned(d.id, "del-1"))
    assert s.handle(Assigned(d, "put-2")) == [Load(d, "put-2", force_refetch=True)]
    assert s.handle(LoadFailureForgotten(d.id, "forget-1")) == [ClearLoadFailure(d.id, "forget-1")]
    assert s.loading == {d.id} and s.failed == {}
    assert s.handle(LoadFailed(d.id, "x", "fail-2")) == [ReportLoadFailure(d.id, "x", 1, "fail-2")]


def test_a_deleted_record_of_a_segment_awaiting_its_retry_is_put_back():
    # Still assigned, not loading: the coordinator retries on the strength of the record, so a
    # deletion it did not make (a lost lease) must not leave the segment waiting for ever.
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadFailed(d.id, "x", "fail-1"))
    s.handle(Assigned(d, "retry-1"))
    s.handle(LoadFailed(d.id, "y", "fail-2"))
    assert s.handle(LoadFailureForgotten(d.id, "lease-lost-1")) == [ReportLoadFailure(d.id, "y", 2, "lease-lost-1")]
    assert s.failed == {d.id: LoadFailure("y", 2)}


def test_a_failure_after_the_unassignment_reports_nothing():
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(Unassigned(d.id, "del-1"))
    assert s.handle(LoadFailed(d.id, "gone", "fail-1")) == []
    assert s.failed == {} and s.loading == set()


def test_stale_outcomes_change_nothing():
    s, d = machine(), descriptor(1)
    assert s.handle(LoadSucceeded(d.id, "ok-1")) == []
    assert s.handle(LoadFailed(d.id, "x", "fail-1")) == []
    assert s.handle(Unassigned(d.id, "del-1")) == []
    assert (s.assigned, s.loading, s.served, s.failed) == ({}, set(), set(), {})


def test_resync_drops_missing_and_loads_new():
    s, a, b, c = machine(), descriptor(1), descriptor(2), descriptor(3)
    for i, d in enumerate((a, b)):
        s.handle(Assigned(d, f"put-{i}"))
        s.handle(LoadSucceeded(d.id, f"ok-{i}"))
    out = s.handle(AssignmentsResynced((b, c), "resync-1"))
    assert out == [Unannounce(a.id, "resync-1"), Drop(a.id, "resync-1"), Load(c, "resync-1")]


def test_corrupted_segment_is_unannounced_and_refetched():
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadSucceeded(d.id, "ok-1"))
    assert s.handle(SegmentCorrupted(d.id, "corrupt-1")) == [Unannounce(d.id, "corrupt-1"),
                                                             Load(d, "corrupt-1", force_refetch=True)]
    assert s.handle(LoadSucceeded(d.id, "ok-2")) == [Announce(d, "ok-2")]
    assert s.handle(SegmentCorrupted(descriptor(9).id, "corrupt-2")) == []


def test_a_refetch_after_corruption_that_fails_is_reported():
    s, d = machine(), descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadSucceeded(d.id, "ok-1"))
    s.handle(SegmentCorrupted(d.id, "corrupt-1"))
    assert s.handle(LoadFailed(d.id, "checksum", "fail-1")) == [ReportLoadFailure(d.id, "checksum", 1, "fail-1")]
    assert s.served == set() and s.failed == {d.id: LoadFailure("checksum", 1)}


def test_validation_names_a_broken_invariant():
    d = descriptor(1)
    with pytest.raises(InvalidState, match="both loading and served"):
        AssignmentState(assigned={d.id: d}, loading={d.id}, served={d.id}).validate_state()
    with pytest.raises(InvalidState, match="served without an assignment"):
        AssignmentState(served={d.id}).validate_state()
    with pytest.raises(InvalidState, match="served yet recorded as failed"):
        AssignmentState(assigned={d.id: d}, served={d.id}, failed={d.id: LoadFailure("x", 1)}).validate_state()


def test_a_new_shape_is_fetched_while_the_old_copy_serves_then_announced():
    s = machine()
    d = descriptor(1)
    s.handle(Assigned(d, "put-1", ("a",)))
    assert s.handle(LoadSucceeded(d.id, "ok-1", ("a",))) == [Announce(d, "ok-1", ("a",))]
    # The rule changed: a reload, no unannounce (the old copy keeps serving).
    assert s.handle(Assigned(d, "put-2", ("a", "b"))) == [Load(d, "put-2", projections=("a", "b"), reload=True)]
    assert s.served == {d.id} and s.reloading == {d.id}
    assert s.handle(Assigned(d, "put-3", ("a", "b"))) == []  # the same shape again: already under way
    assert s.handle(LoadSucceeded(d.id, "ok-2", ("a", "b"))) == [Announce(d, "ok-2", ("a", "b"))]
    # Partial -> whole, changed again to partial while the whole copy is fetched: one more reload.
    assert s.handle(Assigned(d, "put-4")) == [Load(d, "put-4", reload=True)]
    assert s.handle(Assigned(d, "put-5", ("b",))) == []
    assert s.handle(LoadSucceeded(d.id, "ok-3")) == [Announce(d, "ok-3"), Load(d, "ok-3", projections=("b",),
                                                                              reload=True)]
    assert s.handle(LoadSucceeded(d.id, "ok-4", ("b",))) == [Announce(d, "ok-4", ("b",))]


def test_a_failed_reload_keeps_the_old_copy_and_is_reported():
    s = machine()
    d = descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadSucceeded(d.id, "ok-1"))
    s.handle(Assigned(d, "put-2", ("a",)))
    assert s.handle(LoadFailed(d.id, "no such projection", "fail-1")) == [
        ReportLoadFailure(d.id, "no such projection", 1, "fail-1")]
    assert s.served == {d.id} and s.served_shapes == {}  # still serving the whole copy
    # The coordinator's retry: reloaded again, not forced (that would evict the serving copy).
    assert s.handle(Assigned(d, "put-3", ("a",))) == [Load(d, "put-3", projections=("a",), reload=True)]
    assert s.handle(LoadSucceeded(d.id, "ok-2", ("a",))) == [ClearLoadFailure(d.id, "ok-2"), Announce(d, "ok-2", ("a",))]
    # Failed again, then assigned back to the shape it serves: the failure no longer holds.
    s.handle(Assigned(d, "put-4"))
    s.handle(LoadFailed(d.id, "x", "fail-2"))
    assert s.handle(Assigned(d, "put-5", ("a",))) == [ClearLoadFailure(d.id, "put-5")]


def test_unassigned_or_corrupted_while_reloading():
    s = machine()
    d = descriptor(1)
    s.handle(Assigned(d, "put-1"))
    s.handle(LoadSucceeded(d.id, "ok-1"))
    s.handle(Assigned(d, "put-2", ("a",)))
    assert s.handle(Unassigned(d.id, "del-1")) == [Unannounce(d.id, "del-1"), Drop(d.id, "del-1")]
    assert s.handle(LoadSucceeded(d.id, "ok-2", ("a",))) == [Drop(d.id, "ok-2")]  # what the fetch brought goes too
    s.handle(Assigned(d, "put-3"))
    s.handle(LoadSucceeded(d.id, "ok-3"))
    s.handle(Assigned(d, "put-4", ("a",)))
    # Corrupt while the new shape is fetched: unannounced, and that fetch is the repair.
    assert s.handle(SegmentCorrupted(d.id, "bad-1")) == [Unannounce(d.id, "bad-1")]
    assert s.handle(LoadSucceeded(d.id, "ok-4", ("a",))) == [Announce(d, "ok-4", ("a",))]


SEGMENTS = [descriptor(day, part) for day in (1, 2) for part in (0, 10)]  # partition 10 vs 1: distinct ids
_seg = st.sampled_from(SEGMENTS)
_shape = st.sampled_from([(), ("a",), ("a", "b")])  # whole, or partial copies of other projections
EVENTS = st.one_of(
    st.builds(lambda d, p: ("assigned", d, p), _seg, _shape),
    st.builds(lambda d: ("unassigned", d), _seg),
    st.builds(lambda d: ("succeeded", d), _seg),
    st.builds(lambda d, r: ("failed", d, r), _seg, st.sampled_from(["", "not found", "é\n\x00"])),
    st.builds(lambda d: ("corrupted", d), _seg),
    st.builds(lambda d: ("forgotten", d), _seg),
    st.builds(lambda ds: ("resync", ds), st.lists(_seg, unique=True, max_size=4)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENTS, max_size=60))
def test_any_event_sequence_keeps_the_invariants_and_every_command_names_its_stimulus(events):
    """The node feeds outcomes only for loads it started, as the real shell does; everything else
    (assignment changes, corruption reports, resyncs) comes in any order."""
    s = machine()
    in_flight: dict = {}  # segment -> the shape its load fetches
    for i, ev in enumerate(events):
        stimulus = f"s-{i}"
        kind, d = ev[0], ev[1]
        if kind == "assigned":
            event = Assigned(d, stimulus, ev[2])
        elif kind == "unassigned":
            event = Unassigned(d.id, stimulus)
        elif kind == "succeeded":
            if d.id not in in_flight:
                continue
            event = LoadSucceeded(d.id, stimulus, in_flight.pop(d.id))
        elif kind == "failed":
            if d.id not in in_flight:
                continue
            in_flight.pop(d.id)
            event = LoadFailed(d.id, ev[2], stimulus)
        elif kind == "corrupted":
            event = SegmentCorrupted(d.id, stimulus)
        elif kind == "forgotten":
            event = LoadFailureForgotten(d.id, stimulus)
        else:
            event = AssignmentsResynced(tuple(d), stimulus)
        had_failure = d.id in s.failed if kind == "forgotten" else None
        commands = s.handle(event)  # validates
        assert all(c.stimulus_id == stimulus for c in commands)
        for c in commands:
            if isinstance(c, Load):
                assert c.descriptor.id not in in_flight, "a second load of a segment already loading"
                assert c.projections == s.shapes.get(c.descriptor.id, ())  # always the assigned shape
                assert c.reload == (c.descriptor.id in s.served)  # a served copy is never refetched over
                in_flight[c.descriptor.id] = c.projections
            if isinstance(c, Announce):
                assert c.descriptor.id in s.served and c.descriptor.id in s.assigned
                assert c.projections == s.served_shapes.get(c.descriptor.id, ())
            if isinstance(c, ReportLoadFailure):
                assert s.failed[c.segment].attempts == c.attempts >= 1
            if isinstance(c, ClearLoadFailure):
                assert c.segment not in s.failed
        # A served copy of another shape than assigned is being fetched again, or its reload failed.
        for sid in s.served:
            if s.served_shapes.get(sid, ()) != s.shapes.get(sid, ()):
                assert sid in s.reloading or sid in s.failed
        if kind == "forgotten":  # forgotten unless the record must stay for a pending retry
            assert (d.id in s.failed) == (d.id in s.assigned and d.id not in s.loading and had_failure)
        assert set(in_flight) == s.loading | s.reloading
