"""Segment allocation: exact allocations for insert/replace, appends, conflicts."""

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.segment.timeline import TimelineSegment
from common.types.interval import Interval
from services.coordinator.core.allocation import Allocation, allocate

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
