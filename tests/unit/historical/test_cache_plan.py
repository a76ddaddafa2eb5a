"""CachePlan: LRU eviction among unserved, unpinned segments, with exact victims and byte counts."""

import pytest

from common.errors import ValidationError
from services.historical.core.cache_plan import CacheEntry, CacheFullError, CachePlan


def plan_with(max_bytes, *entries):
    """entries: (segment, size, served) admitted in order (so the first is least recently used)."""
    plan = CachePlan(max_bytes)
    for seg, size, served in entries:
        plan.admit(seg, size, served=served)
    return plan


def test_fits_without_eviction():
    plan = plan_with(100, ("a", 30, False), ("b", 30, False))
    assert plan.plan_admit("c", 40) == []
    plan.admit("c", 40)
    assert plan.used_bytes() == 100
    assert plan.free_bytes() == 0
    assert plan.segments() == ["a", "b", "c"]


def test_evicts_least_recently_used_first_and_only_as_many_as_needed():
    plan = plan_with(100, ("a", 30, False), ("b", 30, False), ("c", 30, False))
    assert plan.plan_admit("d", 40) == ["a"]
    assert plan.plan_admit("d", 41) == ["a", "b"]
    assert plan.plan_admit("d", 70) == ["a", "b"]
    assert plan.plan_admit("d", 100) == ["a", "b", "c"]
    # Planning changes nothing.
    assert plan.used_bytes() == 90 and plan.segments() == ["a", "b", "c"]


def test_touch_changes_the_order():
    plan = plan_with(100, ("a", 30, False), ("b", 30, False), ("c", 30, False))
    plan.touch("a")
    assert plan.plan_admit("d", 40) == ["b"]
    assert plan.segments() == ["b", "c", "a"]
    plan.touch("b")
    assert plan.plan_admit("d", 70) == ["c", "a"]


def test_ticks_increase_with_every_use():
    plan = plan_with(100, ("a", 10, False), ("b", 10, True))
    assert plan.entry("a") == CacheEntry(size=10, last_used=1, served=False, pins=0)
    assert plan.entry("b") == CacheEntry(size=10, last_used=2, served=True, pins=0)
    plan.touch("a")
    assert plan.entry("a").last_used == 3
    assert plan.entry("missing") is None


def test_served_segments_are_never_evicted():
    plan = plan_with(100, ("a", 30, True), ("b", 30, False), ("c", 30, True))
    assert plan.plan_admit("d", 40) == ["b"]
    with pytest.raises(CacheFullError) as err:
        plan.plan_admit("d", 41)
    msg = str(err.value)
    assert msg.startswith("cannot cache segment d (41 bytes): max_cache_bytes is 100 and 2 served or loading "
                          "segments hold 60 bytes that cannot be evicted")
    assert "raise [historical] max_cache_bytes" in msg


def test_mark_unserved_makes_evictable_and_served_protects_again():
    plan = plan_with(100, ("a", 50, True), ("b", 50, True))
    with pytest.raises(CacheFullError):
        plan.plan_admit("c", 10)
    plan.mark_unserved("b")
    assert plan.plan_admit("c", 10) == ["b"]
    plan.mark_unserved("a")
    assert plan.plan_admit("c", 10) == ["a"]  # a is older than b
    plan.mark_served("a")
    assert plan.plan_admit("c", 10) == ["b"]


def test_pinned_segments_are_not_evicted_even_when_unserved():
    plan = plan_with(100, ("a", 50, False), ("b", 50, False))
    plan.pin("a")
    assert plan.plan_admit("c", 10) == ["b"]
    plan.pin("a")
    plan.unpin("a")
    with pytest.raises(CacheFullError):
        plan.plan_admit("c", 60)
    plan.unpin("a")
    assert plan.plan_admit("c", 60) == ["a", "b"]
    with pytest.raises(ValidationError, match="segment a is not pinned"):
        plan.unpin("a")


def test_too_big_for_an_empty_cache():
    plan = CachePlan(100)
    assert plan.plan_admit("x", 100) == []
    with pytest.raises(CacheFullError, match=r"cannot cache segment x \(101 bytes\): max_cache_bytes is 100 and 0"):
        plan.plan_admit("x", 101)


def test_readmitting_replaces_the_size_and_never_evicts_itself():
    plan = plan_with(100, ("a", 40, False), ("b", 40, False))
    assert plan.plan_admit("a", 60) == []  # 40 of a's bytes are already counted
    assert plan.plan_admit("a", 70) == ["b"]
    plan.remove("b")
    plan.admit("a", 70, served=True)
    assert plan.used_bytes() == 70
    assert plan.entry("a").served and plan.segments() == ["a"]


def test_admit_refuses_to_overfill():
    plan = plan_with(100, ("a", 60, False))
    with pytest.raises(CacheFullError, match="evict the segments plan_admit returns first"):
        plan.admit("b", 50)
    assert plan.used_bytes() == 60 and "b" not in plan


def test_remove_returns_bytes_and_is_idempotent():
    plan = plan_with(100, ("a", 60, False), ("b", 10, True))
    assert plan.remove("a") == 60
    assert plan.remove("a") == 0
    assert plan.used_bytes() == 10 and len(plan) == 1 and "a" not in plan and "b" in plan
    assert plan.served() == ["b"]


def test_unknown_segments_and_bad_sizes():
    plan = CachePlan(100)
    for op in (plan.touch, plan.mark_served, plan.mark_unserved, plan.pin, plan.unpin):
        with pytest.raises(KeyError, match="segment nope is not in the cache plan"):
            op("nope")
    with pytest.raises(ValidationError, match="size must be >= 0"):
        plan.plan_admit("x", -1)
    with pytest.raises(ValidationError, match="max_cache_bytes must be positive"):
        CachePlan(0)


def test_zero_sized_segments_fit_a_full_cache():
    plan = plan_with(10, ("a", 10, True))
    assert plan.plan_admit("empty", 0) == []
    plan.admit("empty", 0)
    assert plan.used_bytes() == 10


# ---- the volume holding less than max_bytes ----------------------------------------------------
def test_volume_with_room_evicts_nothing():
    plan = plan_with(1000, ("a", 30, False), ("b", 30, True))
    assert plan.plan_volume("c", 40, volume_free=40) == []
    assert plan.plan_volume("c", 40, volume_free=100, in_flight=60) == []


def test_volume_short_of_room_evicts_unserved_least_recently_used_first():
    plan = plan_with(1000, ("a", 30, False), ("s", 500, True), ("b", 30, False), ("c", 30, False))
    plan.touch("a")  # a is now the most recently used unserved segment
    assert plan.plan_volume("d", 40, volume_free=20) == ["b"]
    assert plan.plan_volume("d", 40, volume_free=0) == ["b", "c"]
    # Downloads under way count against the free bytes.
    assert plan.plan_volume("d", 40, volume_free=40, in_flight=31) == ["b", "c"]


def test_volume_refuses_before_writing_when_only_served_or_pinned_segments_are_left():
    plan = plan_with(1000, ("a", 30, False), ("s", 500, True))
    plan.pin("a")
    with pytest.raises(CacheFullError) as err:
        plan.plan_volume("d", 40, volume_free=39, in_flight=0, volume="the cache volume of /c")
    assert str(err.value) == (
        "cannot cache segment d (40 bytes): the cache volume of /c has 39 bytes free and no unserved segment is "
        "left to evict; [historical] max_cache_bytes (1000) is more than the volume holds: lower it or give the "
        "cache more room. The coordinator assigns the segment to another historical")
    with pytest.raises(CacheFullError, match="has 100 bytes free, 80 of them promised to downloads under way,"):
        plan.plan_volume("d", 40, volume_free=100, in_flight=80)


def test_volume_never_plans_to_evict_the_segment_itself():
    plan = plan_with(1000, ("d", 30, False))
    with pytest.raises(CacheFullError):
        plan.plan_volume("d", 40, volume_free=10)


def test_volume_counts_the_overhead_written_beside_the_segment():
    plan = plan_with(1000, ("a", 30, False))
    assert plan.plan_volume("d", 40, volume_free=44, overhead=4) == []
    assert plan.plan_volume("d", 40, volume_free=44, overhead=5) == ["a"]


@pytest.mark.parametrize("args", [(-1, 0, 0), (1, -1, 0), (1, 0, -1)])
def test_volume_rejects_negative_numbers(args):
    with pytest.raises(ValidationError, match="must be >= 0"):
        CachePlan(10).plan_volume("x", *args)
    with pytest.raises(ValidationError, match="overhead"):
        CachePlan(10).plan_volume("x", 1, 1, overhead=-1)
