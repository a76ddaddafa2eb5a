"""Automatic kill: which unused segments one run deletes."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.coordinator.core.kill_plan import segments_to_kill

DAY = 86_400_000


def sid(day: int) -> SegmentId:
    return SegmentId("wiki", Interval(day * DAY, (day + 1) * DAY), "v1")


def test_only_segments_unused_long_enough_oldest_first_bounded():
    now = 100 * DAY
    unused = [(sid(0), now - 10 * DAY), (sid(1), now - 30 * DAY), (sid(2), now - 7 * DAY), (sid(3), now - DAY + 1)]
    assert segments_to_kill(unused, now, 7 * DAY, 10) == [sid(1), sid(0), sid(2)]  # 7 days exactly is due
    assert segments_to_kill(unused, now, 7 * DAY, 2) == [sid(1), sid(0)]
    assert segments_to_kill(unused, now, 7 * DAY, 0) == []
    assert segments_to_kill(unused, now, 31 * DAY, 10) == []
    same_time = [(sid(5), 0), (sid(4), 0)]
    assert segments_to_kill(same_time, now, 1, 1) == [sid(4)]  # ties by id: the same choice every run


def test_bad_settings_are_named():
    with pytest.raises(ValidationError, match="kill_unused_after_ms"):
        segments_to_kill([], 0, -1, 1)
