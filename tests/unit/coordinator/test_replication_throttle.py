"""Druid's replicationThrottleLimit in the duties: per tier, copies of segments already served
elsewhere (replicas a rule change asks for, reloads into another shape) load a bounded number at
a time, counting those in flight from earlier runs; copies that make a segment available never
wait. Feed a snapshot, assert the exact commands."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval, parse_instant
from services.coordinator.core.duties import DutyParams, Load, Noop, SegmentEntry, ServerView, run_duties
from services.coordinator.core.replication_throttle import ReplicationThrottle
from services.coordinator.core.rules import rules_from_json

DAY = 86_400_000
NOW = parse_instant("2024-03-15T00:00:00Z")
DAILY = ("by_page_daily",)
HOT_AND_COLD = {"ds": rules_from_json([{"type": "loadForever", "tieredReplicants": {"hot": 1, "cold": 1}}])}


def seg(days_ago: int) -> SegmentId:
    start = NOW - (days_ago + 1) * DAY
    return SegmentId("ds", Interval(start, start + DAY), "v1")


def server(tier: str, loaded=(), loading=(), shapes=None, served=None, max_bytes: int = 1000) -> ServerView:
    shapes = dict(shapes or {})
    return ServerView(max_bytes, frozenset(loaded), frozenset(loading), tier, shapes,
                      dict(shapes if served is None else served))


def run(used, servers, limit: int, rules=HOT_AND_COLD, projections=None):
    return run_duties(DutyParams(used=tuple(SegmentEntry(s, 10) for s in used), servers=servers, now_ms=NOW,
                                 rules=rules, replication_throttle_limit=limit,
                                 projections=projections or {}))


def test_a_new_tier_fills_a_bounded_number_at_a_time_newest_first():
    segments = [seg(d) for d in range(5)]  # served on hot; the rule now wants a cold copy too
    servers = {"h1": server("hot", loaded=segments), "c1": server("cold")}
    assert run(segments, servers, 2) == [Load("c1", segments[0]), Load("c1", segments[1])]
    # Next run, both still loading: the tier's two are in flight, nothing more starts.
    loading = {"h1": server("hot", loaded=segments), "c1": server("cold", loading=segments[:2])}
    assert run(segments, loading, 2) == [Noop()]
    # One in: one more.
    one_in = {"h1": server("hot", loaded=segments), "c1": server("cold", loaded=segments[:1], loading=segments[1:2])}
    assert run(segments, one_in, 2) == [Load("c1", segments[2])]
    # Unthrottled (the default is Druid's 500): all at once.
    assert run(segments, servers, 500) == [Load("c1", s) for s in segments]


def test_copies_that_make_a_segment_available_never_wait():
    new = [seg(d) for d in range(3)]  # served nowhere: every copy is loaded at once, even with 0
    servers = {"h1": server("hot"), "c1": server("cold")}
    assert run(new, servers, 0) == [Load(tier, s) for s in new for tier in ("c1", "h1")]


def test_the_limit_is_per_tier():
    segments = [seg(d) for d in range(2)]
    warm_only = {"w1": server("warm", loaded=segments), "h1": server("hot"), "c1": server("cold")}
    assert run(segments, warm_only, 1) == [Load("c1", segments[0]), Load("h1", segments[0])]


PARTIAL = {"ds": rules_from_json([{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                                   "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}}])}


def test_reloads_after_a_rule_change_are_throttled_and_counted_in_flight():
    oldest, older, old, recent = seg(3), seg(2), seg(1), seg(0)  # Reshape goes in id (time) order
    segments = [oldest, older, old, recent]
    projections = {s: DAILY for s in segments}
    whole = {"c1": server("cold", loaded=segments)}  # whole copies; the rule now wants the projection only
    assert run(segments, whole, 2, PARTIAL, projections) == [Load("c1", oldest, DAILY), Load("c1", older, DAILY)]
    # The oldest assigned the new shape still serves the old one: a reload in flight, one more starts.
    reloading = {"c1": server("cold", loaded=segments, shapes={oldest: DAILY}, served={oldest: ()})}
    assert run(segments, reloading, 2, PARTIAL, projections) == [Load("c1", older, DAILY)]


def test_reloads_and_replicas_share_the_tiers_budget():
    reshaped, replica = seg(1), seg(0)
    rules = {"ds": rules_from_json([
        {"type": "loadPartialByInterval", "interval": f"{seg(1).interval}", "tieredReplicants": {"cold": 1},
         "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}},
        {"type": "loadForever", "tieredReplicants": {"hot": 1, "cold": 1}}])}
    servers = {"h1": server("hot", loaded=[replica]), "c1": server("cold", loaded=[reshaped])}
    # Reshape runs first and takes the cold tier's one; the replica waits for a later run.
    assert run([reshaped, replica], servers, 1, rules, {reshaped: DAILY}) == [Load("c1", reshaped, DAILY)]
    assert run([reshaped, replica], servers, 2, rules, {reshaped: DAILY}) == [
        Load("c1", reshaped, DAILY), Load("c1", replica)]


def test_the_throttle_counts_per_tier_and_a_negative_limit_is_refused():
    throttle = ReplicationThrottle(2, {"hot": 1, "cold": 2})
    assert [throttle.take("hot"), throttle.take("hot"), throttle.take("cold"), throttle.take("warm"),
            throttle.take("warm"), throttle.take("warm")] == [True, False, False, True, True, False]
    with pytest.raises(ValidationError, match="replication_throttle_limit must be >= 0, got -1"):
        DutyParams(used=(), servers={}, replication_throttle_limit=-1)
