"""What the broker does with a segment a replica did not answer for (Druid's missingSegments):
every branch of ``next_step`` with its exact outcome, and the coordinator's load status read as
used / unused / no replicas."""

from __future__ import annotations

import dataclasses

import pytest

from common.errors import ErrorKind
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.broker.core.missing_segment import (
    AskCoordinator,
    Cause,
    Fail,
    InView,
    LeaveOut,
    MissingSegment,
    Retry,
    Used,
    WaitForView,
    next_step,
    used_of,
)

DAY = 86_400_000
SID = SegmentId("wiki", Interval(0, DAY), "v1")
OTHER = SegmentId("wiki", Interval(DAY, 2 * DAY), "v1")


def fact(**changes) -> MissingSegment:
    base = MissingSegment(SID, Cause.NOT_SERVED, "h1", "NOT_FOUND: historical h1 does not serve it",
                          frozenset({"h1"}), frozenset(), InView.VISIBLE)
    return dataclasses.replace(base, **changes)


def test_an_untried_replica_is_asked_whatever_the_cause():
    for cause in Cause:
        assert next_step(fact(cause=cause, untried=frozenset({"h2"}))) == Retry()
    # ...and before the coordinator is asked: a replica in the view is the cheap answer.
    assert next_step(fact(untried=frozenset({"h2"}), used=None)) == Retry()


def test_an_overshadowed_segment_is_left_out_even_with_replicas():
    step = next_step(fact(in_view=InView.OVERSHADOWED, untried=frozenset({"h2"})))
    assert step == LeaveOut("overshadowed", f"segment {SID} is overshadowed by a newer version")


def test_no_replica_left_asks_the_coordinator_first():
    for cause in (Cause.NOT_SERVED, Cause.UNREACHABLE):
        for in_view in (InView.VISIBLE, InView.GONE):
            assert next_step(fact(cause=cause, in_view=in_view, can_wait=True)) == AskCoordinator()


@pytest.mark.parametrize("used,reason,detail", [
    (Used.UNUSED, "unused", f"segment {SID} is no longer used"),
    (Used.NO_REPLICAS, "no_replicas", f"segment {SID} is kept in deep storage only by its load rule"),
])
def test_a_segment_no_longer_meant_to_be_served_is_left_out(used, reason, detail):
    for cause in (Cause.NOT_SERVED, Cause.UNREACHABLE):
        for in_view in (InView.VISIBLE, InView.GONE):
            for can_wait in (True, False):
                step = next_step(fact(cause=cause, in_view=in_view, used=used, can_wait=can_wait))
                assert step == LeaveOut(reason, detail)


def test_without_the_coordinator_the_view_decides():
    # Gone from the view: a query planned now would not read it either.
    assert next_step(fact(used=Used.UNKNOWN, in_view=InView.GONE)) == LeaveOut(
        "unannounced", f"segment {SID} is no longer announced by any historical")
    # Still in the view: wait for it to catch up, then fail.
    assert next_step(fact(used=Used.UNKNOWN, can_wait=True)) == WaitForView()
    step = next_step(fact(used=Used.UNKNOWN, tried=frozenset({"h1", "h2"}), last_server="h2"))
    assert step == Fail(ErrorKind.UNAVAILABLE,
                        f"segment {SID} is not available: no replica answered for it (tried h1, h2; the last, h2, "
                        f"said NOT_FOUND: historical h1 does not serve it) and the coordinator could not be asked "
                        f"whether it is still used; it may be moving between historicals or loading: run the "
                        f"query again")


def test_a_used_segment_not_served_waits_for_the_view_then_fails_unavailable():
    assert next_step(fact(used=Used.USED, can_wait=True)) == WaitForView()
    assert next_step(fact(used=Used.USED, in_view=InView.GONE, can_wait=True)) == WaitForView()
    for in_view in (InView.VISIBLE, InView.GONE):
        step = next_step(fact(used=Used.USED, in_view=in_view))
        assert step == Fail(ErrorKind.UNAVAILABLE,
                            f"segment {SID} is not available: no replica answered for it (tried h1; the last, h1, "
                            f"said NOT_FOUND: historical h1 does not serve it) and the coordinator still lists it as "
                            f"used; it may be moving between historicals or loading: run the query again")


def test_an_unreachable_replica_of_a_used_segment_fails_at_once():
    # Its announcement goes only when its lease expires: no use waiting for the view.
    step = next_step(fact(cause=Cause.UNREACHABLE, last_failure="UNAVAILABLE: connection refused", used=Used.USED,
                          can_wait=True))
    assert isinstance(step, Fail) and step.kind is ErrorKind.UNAVAILABLE
    assert "said UNAVAILABLE: connection refused" in step.message


def test_a_failure_reading_the_segment_fails_with_its_kind_without_asking():
    for kind in (ErrorKind.INTERNAL, ErrorKind.DATA_LOSS):
        step = next_step(fact(cause=Cause.FAILED, failure_kind=kind, last_failure="INTERNAL: boom",
                              tried=frozenset({"h1", "h2"}), last_server="h2", can_wait=True))
        assert step == Fail(kind, f"no replica left for {SID} (tried h1, h2); the last one, on h2, failed with "
                                  f"INTERNAL: boom")


def test_used_of_reads_the_load_status():
    wanted = {SID: 2, OTHER: 0}
    gone = SegmentId("wiki", Interval(2 * DAY, 3 * DAY), "v1")
    assert used_of(wanted, [SID, OTHER, gone]) == {SID: Used.USED, OTHER: Used.NO_REPLICAS, gone: Used.UNUSED}
    assert used_of(wanted, []) == {}
