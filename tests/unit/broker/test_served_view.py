"""ServedView.plan: segments and replicas as announced, with the visible segments of a query's
intervals remembered until the datasource's segments change."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.broker.core.served_view import ServedView, context_tiers

DAY = 86_400_000


def _descriptor(day: int, version: str = "v1", partition: int = 0, partitions: int = 1) -> SegmentDescriptor:
    sid = SegmentId("wiki", Interval(day * DAY, (day + 1) * DAY), version, partition)
    return SegmentDescriptor(sid, 100, 10, f"key-{day}-{version}-{partition}", partitions, "{}")


def _planned(view: ServedView, intervals: list[Interval], **kwargs) -> dict[str, list[SegmentId]]:
    return view.plan("wiki", intervals, **kwargs).by_server


def test_a_repeated_plan_sees_segments_served_and_unserved_since() -> None:
    view = ServedView()
    days = [_descriptor(d) for d in range(3)]
    for d in days[:2]:
        view.served("h1", d)
    everything = [Interval(0, 3 * DAY)]
    assert _planned(view, everything) == {"h1": [days[0].id, days[1].id]}
    view.served("h1", days[2])
    assert _planned(view, everything) == {"h1": [d.id for d in days]}
    assert view.plan("wiki", everything).coverage == (0, 3 * DAY)
    view.unserved("h1", days[0].id)
    assert _planned(view, everything) == {"h1": [days[1].id, days[2].id]}
    assert view.plan("wiki", everything).coverage == (DAY, 3 * DAY)
    assert _planned(view, [Interval(0, DAY)]) == {}


def test_a_newer_version_hides_the_older_once_announced() -> None:
    view = ServedView()
    old, new = _descriptor(0, "v1"), _descriptor(0, "v2")
    view.served("h1", old)
    day = [Interval(0, DAY)]
    assert _planned(view, day) == {"h1": [old.id]}
    view.served("h2", new)
    assert _planned(view, day) == {"h2": [new.id]}
    view.unserved("h2", new.id)
    assert _planned(view, day) == {"h1": [old.id]}


def test_replicas_added_and_lost_count_without_a_segment_change() -> None:
    view = ServedView()
    seg = _descriptor(0)
    view.served("h1", seg)
    day = [Interval(0, DAY)]
    assert _planned(view, day) == {"h1": [seg.id]}
    view.served("h2", seg)  # a second replica: the same visible segments
    chosen = {server for _ in range(4) for server in _planned(view, day)}
    assert chosen == {"h1", "h2"}  # ties rotate over the replicas
    assert _planned(view, day, exclude={seg.id: {"h1"}}) == {"h2": [seg.id]}
    view.unserved("h1", seg.id)
    assert all(_planned(view, day) == {"h2": [seg.id]} for _ in range(3))
    view.unserved("h2", seg.id)
    plan = view.plan("wiki", day)
    assert plan.by_server == {} and plan.unavailable == [] and plan.coverage is None


def test_an_incomplete_partition_set_is_not_used_until_complete() -> None:
    view = ServedView()
    first, second = _descriptor(0, partition=0, partitions=2), _descriptor(0, partition=1, partitions=2)
    view.served("h1", first)
    day = [Interval(0, DAY)]
    assert _planned(view, day) == {}
    view.served("h2", second)
    assert sorted(s for segs in _planned(view, day).values() for s in segs) == sorted([first.id, second.id])


def test_gathered_plans_use_the_fewest_historicals_and_take_turns() -> None:
    view = ServedView()
    days = [_descriptor(d) for d in range(4)]
    for d in days:
        view.served("h1", d)
        view.served("h2", d)
    view.served("h3", days[0])
    everything = [Interval(0, 4 * DAY)]
    chosen = set()
    for _ in range(4):
        by_server = _planned(view, everything, spread=False)
        assert len(by_server) == 1 and list(by_server.values()) == [[d.id for d in days]]
        chosen |= set(by_server)
    assert chosen == {"h1", "h2"}  # h3 holds one segment: never enough to be chosen
    assert len(_planned(view, everything)) == 3  # spread: every holder shares the work
    only_h1 = {d.id: {"h2"} for d in days}
    assert _planned(view, everything, spread=False, exclude=only_h1) == {"h1": [d.id for d in days]}


def test_gathering_covers_segments_no_one_historical_holds_all_of() -> None:
    view = ServedView()
    days = [_descriptor(d) for d in range(5)]
    for d in days[:3]:
        view.served("h1", d)
    for d in days[2:]:
        view.served("h2", d)
    view.served("h3", days[4])
    for _ in range(3):  # whatever the turn: h1 and h2 hold three each, h3 one
        by_server = _planned(view, [Interval(0, 5 * DAY)], spread=False)
        assert len(by_server) == 2 and "h3" not in by_server
        assert sorted(s for segs in by_server.values() for s in segs) == sorted(d.id for d in days)


def test_remembered_plans_equal_plans_worked_out_afresh_as_replicas_come_and_go() -> None:
    import random

    rng = random.Random(7)
    view = ServedView()
    days = [_descriptor(d) for d in range(6)]
    servers = ["h1", "h2", "h3"]
    queries = [[Interval(0, 6 * DAY)], [Interval(DAY, 3 * DAY)], [Interval(2 * DAY, 2 * DAY + 1)]]
    for step in range(300):
        d, server = rng.choice(days), rng.choice(servers)
        if rng.random() < 0.6:
            view.served(server, d)
        else:
            view.unserved(server, d.id)
        for intervals in queries:
            for spread in (True, False):
                got = view.plan("wiki", intervals, spread=spread)
                fresh = view._plan("wiki", intervals, {}, None, spread)  # the same turn, worked out again
                assert (got.by_server, got.unavailable, got.coverage) == \
                       (fresh.by_server, fresh.unavailable, fresh.coverage), step
                got.by_server.clear()  # callers own their copy: the next plan is whole again


def _hot_and_cold_view() -> tuple[ServedView, list, list[Interval]]:
    """Three days on cold1; day 0 also on hot1 and day 1 on hot2; hot preferred, then cold."""
    view = ServedView()
    days = [_descriptor(d) for d in range(3)]
    for d in days:
        view.served("cold1", d)
    view.served("hot1", days[0])
    view.served("hot2", days[1])
    everything = [Interval(0, 3 * DAY)]
    view.set_tiers({"hot1": "hot", "hot2": "hot", "cold1": "cold"})
    view.set_tier_preference(("hot", "cold"))
    return view, days, everything


def test_tier_preference_reads_from_the_preferred_tier_and_falls_back() -> None:
    view, days, everything = _hot_and_cold_view()
    for _ in range(4):  # every rotation: hot replicas first, cold only for what hot lacks
        assert _planned(view, everything) == {"hot1": [days[0].id], "hot2": [days[1].id], "cold1": [days[2].id]}
    # A failed hot replica falls back to the next tier.
    retry = _planned(view, everything, exclude={days[0].id: {"hot1"}}, only={days[0].id})
    assert retry == {"cold1": [days[0].id]}
    # Preferring cold sends everything there; no preference spreads over every replica.
    view.set_tier_preference(("cold",))
    assert _planned(view, everything) == {"cold1": [d.id for d in days]}
    view.set_tier_preference(())
    seen = set()
    for _ in range(4):
        seen |= set(_planned(view, everything))
    assert seen == {"hot1", "hot2", "cold1"}
    # A historical that changes tier changes the plans at once.
    view.set_tier_preference(("hot",))
    view.set_tiers({"hot1": "cold", "hot2": "hot", "cold1": "cold"})
    assert _planned(view, [Interval(0, DAY)]) in ({"hot1": [days[0].id]}, {"cold1": [days[0].id]})


def test_a_query_broker_tier_comes_before_the_brokers_preference() -> None:
    view, days, everything = _hot_and_cold_view()
    cold = context_tiers({"brokerTier": "cold"})
    for _ in range(4):  # the query's tier wins over the broker's; plans without it are unchanged
        assert _planned(view, everything, tiers=cold) == {"cold1": [d.id for d in days]}
        assert _planned(view, everything) == {"hot1": [days[0].id], "hot2": [days[1].id], "cold1": [days[2].id]}
    # A tier holding none of a segment falls back to the broker's order; a failed replica of the
    # query's tier to the others.
    warm_then_hot = context_tiers({"brokerTier": ["warm", "hot"]})
    assert _planned(view, everything, tiers=warm_then_hot) == {"hot1": [days[0].id], "hot2": [days[1].id],
                                                               "cold1": [days[2].id]}
    assert _planned(view, everything, tiers=cold, exclude={days[0].id: {"cold1"}}, only={days[0].id}) == \
        {"hot1": [days[0].id]}


def test_broker_tier_context_values() -> None:
    assert context_tiers(None) == () and context_tiers({}) == () and context_tiers({"brokerTier": ""}) == ()
    assert context_tiers({"brokerTier": " hot , cold,hot"}) == ("hot", "cold")
    assert context_tiers({"brokerTier": ["cold"]}) == ("cold",)
    with pytest.raises(ValidationError, match="query context 'brokerTier' must be a tier name"):
        context_tiers({"brokerTier": 3})
