"""Replication status per datasource, the numbers behind the under-replication and unavailable
segment gauges and alerts."""

from __future__ import annotations

from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.core.replication_status import ReplicationStatus, replication_status


def _sid(ds: str, day: int, partition: int = 0) -> SegmentId:
    start = 1_442_016_000_000 + day * 86_400_000
    return SegmentId(ds, Interval(start, start + 86_400_000), "v1", partition)


def test_counts_unavailable_and_under_replicated_per_datasource():
    a0, a1, a2, b0 = _sid("a", 0), _sid("a", 1), _sid("a", 2), _sid("b", 0)
    served = {"h1": [a0, a1, b0], "h2": [a0]}
    got = replication_status([a0, a1, a2, b0], served, wanted=2)
    # a0 on two historicals; a1 on one; a2 on none (unavailable, so under-replicated too).
    assert got == {"a": ReplicationStatus(unavailable=1, under_replicated=2, segments=3),
                   "b": ReplicationStatus(unavailable=0, under_replicated=1, segments=1)}


def test_fully_replicated_and_unused_segments():
    a0 = _sid("a", 0)
    stray = _sid("gone", 0)  # served but no longer used: not this datasource's problem
    got = replication_status([a0], {"h1": [a0, stray], "h2": [a0]}, wanted=2)
    assert got == {"a": ReplicationStatus(0, 0, 1)}
    assert replication_status([], {"h1": [stray]}, wanted=1) == {}


def test_a_segment_announced_twice_by_one_historical_is_one_replica():
    a0 = _sid("a", 0)
    assert replication_status([a0], {"h1": [a0, a0]}, wanted=2) == {"a": ReplicationStatus(0, 1, 1)}


def test_wanted_per_segment_and_zero_wanted_is_not_unavailable():
    a0, a1 = _sid("a", 0), _sid("a", 1)
    wanted = {a0: 0, a1: 3}
    got = replication_status([a0, a1], {"h1": [a1], "h2": [a1]}, wanted=wanted.__getitem__)
    assert got == {"a": ReplicationStatus(unavailable=0, under_replicated=1, segments=2)}
