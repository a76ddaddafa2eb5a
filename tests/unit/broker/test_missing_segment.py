"""What the broker does with a segment a replica did not answer for (Druid's missingSegments):
every branch of ``next_step`` with its exact outcome, the coordinator's load status read as used /
unused / no replicas, and the scatter's shell (``QueryExecutor._replan``) carrying it out on a real
ServedView: where it asks again, what it leaves out, what it raises."""

from __future__ import annotations

import dataclasses
import time

import grpc
import pytest

from common.errors import ErrorKind, StrataError
from common.query.model import query_from_json
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.broker import query_executor
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
from services.broker.core.served_view import ServedView
from services.broker.query_executor import QueryExecutor
from services.historical.client import missing_segments_metadata
from services.metrics import Metrics

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


# ---- the scatter's shell around it (QueryExecutor._replan), on a real ServedView ------------------
QUERY = query_from_json({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["1970-01-01/1970-01-03"],
                         "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]})


class CallError(grpc.RpcError):
    """A historical call's failure as gRPC raises it: code, details, trailing metadata."""

    def __init__(self, code: grpc.StatusCode, details: str, metadata=()) -> None:
        self._code, self._details, self._metadata = code, details, tuple(metadata)

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._metadata


def descriptor(sid: SegmentId) -> SegmentDescriptor:
    return SegmentDescriptor(sid, 100, 10, f"key-{sid.interval.start}", 1, "{}")


def not_served(*missing: SegmentId) -> CallError:
    return CallError(grpc.StatusCode.NOT_FOUND, f"historical h1 does not serve {', '.join(map(str, missing))}",
                     missing_segments_metadata(missing))


def left_out(ex: QueryExecutor, reason: str) -> float:
    return ex.metrics.segments_left_out.labels(reason)._value.get()


def shell(used_states) -> QueryExecutor:
    view = ServedView()
    view.served("h1", descriptor(SID))
    view.served("h1", descriptor(OTHER))
    return QueryExecutor(view, historical_client=None, metrics=Metrics("test"), threads=1, used_states=used_states)


def replan(ex: QueryExecutor, exc: Exception, exclude=None) -> dict:
    return ex._replan(QUERY, "q1", "h1", [SID, OTHER], exc, exclude if exclude is not None else {},
                      time.monotonic() + 30)


def test_an_unused_segment_is_left_out_and_the_rest_asked_again_where_it_was():
    asked = []

    def used_states(datasource, segments, timeout_s):
        asked.append((datasource, list(segments)))
        return {sid: Used.UNUSED for sid in segments}

    ex = shell(used_states)
    exclude: dict = {}
    # h1 still serves OTHER: it is asked again for it alone; SID is no longer used.
    assert replan(ex, not_served(SID), exclude) == {"h1": [OTHER]}
    assert asked == [("wiki", [SID])] and exclude == {SID: {"h1"}}
    assert left_out(ex, "unused") == 1 and ex.metrics.replica_retries._value.get() == 1


def test_a_moved_segment_is_asked_of_its_new_replica():
    ex = shell(None)

    def used_states(datasource, segments, timeout_s):
        ex.view.served("h2", descriptor(SID))  # the move's new replica reaches the view meanwhile
        return {sid: Used.USED for sid in segments}

    ex.used_states = used_states
    assert replan(ex, not_served(SID)) == {"h1": [OTHER], "h2": [SID]}
    assert left_out(ex, "unused") == 0


def test_a_used_segment_nobody_serves_fails_unavailable_naming_it(monkeypatch):
    monkeypatch.setattr(query_executor, "VIEW_CATCH_UP_S", 0.05)
    ex = shell(lambda datasource, segments, timeout_s: {sid: Used.USED for sid in segments})
    with pytest.raises(StrataError) as caught:
        replan(ex, not_served(SID))
    assert caught.value.kind is ErrorKind.UNAVAILABLE
    assert str(caught.value).startswith(f"segment {SID} is not available: no replica answered for it (tried h1; ")
    assert "the coordinator still lists it as used" in str(caught.value)


def test_the_view_catching_up_ends_the_wait():
    ex = shell(lambda datasource, segments, timeout_s: {sid: Used.UNKNOWN for sid in segments})
    ex.view.unserved("h1", SID)  # the unannouncement arrived: gone from the view, the coordinator mute
    assert replan(ex, not_served(SID)) == {"h1": [OTHER]}
    assert left_out(ex, "unannounced") == 1


def test_without_the_list_every_segment_of_the_call_counts_as_missing():
    ex = shell(lambda datasource, segments, timeout_s: {sid: Used.NO_REPLICAS for sid in segments})
    bare = CallError(grpc.StatusCode.NOT_FOUND, "historical h1 does not serve it")
    assert replan(ex, bare) == {}
    assert left_out(ex, "no_replicas") == 2


def test_an_internal_failure_is_not_waited_on_nor_asked_about():
    def used_states(datasource, segments, timeout_s):
        raise AssertionError("the coordinator is asked only about segments not served")

    ex = shell(used_states)
    with pytest.raises(StrataError) as caught:
        replan(ex, CallError(grpc.StatusCode.INTERNAL, "boom"))
    assert caught.value.kind is ErrorKind.INTERNAL
    assert str(caught.value) == (f"no replica left for {SID} (tried h1); the last one, on h1, failed with "
                                 f"INTERNAL: boom (1 more segments alike)")
