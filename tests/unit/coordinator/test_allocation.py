"""Segment allocation: exact allocations for insert/replace, appends, conflicts."""

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.segment.timeline import TimelineSegment
from common.types.interval import Interval
from services.coordinator.core.allocation import UNKNOWN_PARTITIONS, Allocation, PartitionLedger, allocate

DAY = 86_400_000


def day(n: int) -> Interval:
    return Interval(n * DAY, (n + 1) * DAY)


def seg(n: int, version: str, partition: int = 0, core: int = 1) -> TimelineSegment:
    return TimelineSegment(SegmentId("wiki", day(n), version, partition), core)


def test_replace_and_new_chunks_get_the_new_version():
    existing = [seg(0, "v1")]
    assert allocate(existing, [day(0), day(1)], "replace", "v9") == [Allocation(day(0), "v9", 0, 0),
                                                                       Allocation(day(1), "v9", 0, 0)]
    assert allocate(existing, [day(1)], "insert", "v9") == [Allocation(day(1), "v9", 0, 0)]


def test_insert_appends_after_the_highest_partition():
    existing = [seg(0, "v1", 0, 2), seg(0, "v1", 1, 2), seg(0, "v1", 2, 2)]
    assert allocate(existing, [day(0)], "insert", "v9") == [Allocation(day(0), "v1", 3, 2)]


def test_concurrent_appenders_get_distinct_partitions():
    existing = [seg(0, "v1")]
    handed = {}
    first = allocate(existing, [day(0)], "insert", "v9", handed)[0]
    handed[(day(0), "v1")] = first.first_partition + 4  # the first task builds 4 partitions
    second = allocate(existing, [day(0)], "insert", "v9", handed)[0]
    assert (first.first_partition, second.first_partition) == (1, 5)


def test_insert_with_another_granularity_is_refused():
    existing = [TimelineSegment(SegmentId("wiki", Interval(0, 30 * DAY), "v1"), 1)]
    with pytest.raises(ValidationError, match="cannot INSERT into .*partitioned as .*REPLACE"):
        allocate(existing, [day(3)], "insert", "v9")


# ---- the ledger the coordinator keeps: allocate, then reserve what each appender builds ----------
def test_appenders_that_say_their_counts_get_back_to_back_partitions():
    ledger = PartitionLedger()
    existing = [seg(0, "v1", 0, 1)]
    a = ledger.allocate(existing, [day(0)], "insert", "v8", {day(0): 3})
    b = ledger.allocate(existing, [day(0)], "insert", "v9", {day(0): 2})
    c = ledger.allocate(existing, [day(0)], "insert", "v10", {day(0): 1})
    assert (a, b, c) == ([Allocation(day(0), "v1", 1, 1)], [Allocation(day(0), "v1", 4, 1)],
                         [Allocation(day(0), "v1", 6, 1)])
    assert ledger.handed_out == {(day(0), "v1"): 7}


def test_an_appender_that_does_not_say_gets_a_generous_block():
    ledger = PartitionLedger()
    existing = [seg(0, "v1")]
    first = ledger.allocate(existing, [day(0)], "insert", "v8")[0]
    second = ledger.allocate(existing, [day(0)], "insert", "v9", {day(0): 2})[0]
    assert (first.first_partition, second.first_partition) == (1, 1 + UNKNOWN_PARTITIONS)


def test_new_sets_and_replaces_reserve_nothing():
    ledger = PartitionLedger()
    existing = [seg(0, "v1")]
    assert ledger.allocate(existing, [day(0), day(1)], "replace", "v8", {day(0): 5, day(1): 5}) == [
        Allocation(day(0), "v8", 0, 0), Allocation(day(1), "v8", 0, 0)]
    assert ledger.allocate(existing, [day(2)], "insert", "v9", {day(2): 5}) == [Allocation(day(2), "v9", 0, 0)]
    assert ledger.handed_out == {}


def test_published_partitions_and_reservations_both_count():
    ledger = PartitionLedger()
    ledger.allocate([seg(0, "v1")], [day(0)], "insert", "v8", {day(0): 2})  # reserves 1, 2
    # Another task published partitions 1..5 meanwhile (e.g. before this coordinator started).
    published = [seg(0, "v1", p) for p in range(6)]
    assert ledger.allocate(published, [day(0)], "insert", "v9", {day(0): 1}) == [Allocation(day(0), "v1", 6, 1)]


def test_one_allocation_covers_several_chunks_with_their_own_counts():
    ledger = PartitionLedger()
    existing = [seg(0, "v1", 0, 2), seg(0, "v1", 1, 2), seg(1, "v2")]
    got = ledger.allocate(existing, [day(1), day(0), day(2)], "insert", "v9", {day(0): 4, day(1): 1, day(2): 3})
    assert got == [Allocation(day(0), "v1", 2, 2), Allocation(day(1), "v2", 1, 1), Allocation(day(2), "v9", 0, 0)]
    assert ledger.handed_out == {(day(0), "v1"): 6, (day(1), "v2"): 2}


def test_a_refused_allocation_reserves_nothing():
    ledger = PartitionLedger()
    existing = [TimelineSegment(SegmentId("wiki", Interval(0, 30 * DAY), "v1"), 1), seg(40, "v1")]
    with pytest.raises(ValidationError, match="cannot INSERT into"):
        ledger.allocate(existing, [day(40), day(3)], "insert", "v9", {day(40): 1, day(3): 1})
    assert ledger.handed_out == {}
