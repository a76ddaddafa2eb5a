"""The duties under retention rules and tiers: feed a snapshot, assert the exact commands."""

from __future__ import annotations

from common.segment.segment_id import SegmentId
from common.types.interval import Interval, parse_instant
from services.coordinator.core.duties import (Balance, Drop, DutyParams, Load, MarkUnused, Noop, SegmentEntry,
                                              ServerView, Unmatched, run_duties)
from services.coordinator.core.rules import rules_from_json

DAY = 86_400_000
NOW = parse_instant("2024-03-15T00:00:00Z")


def sid(days_ago: int, version: str = "v1", partition: int = 0, ds: str = "ds") -> SegmentId:
    start = NOW - (days_ago + 1) * DAY
    return SegmentId(ds, Interval(start, start + DAY), version, partition)


def desc(segment: SegmentId, size: int = 10, num_partitions: int = 1) -> SegmentEntry:
    return SegmentEntry(segment, size, num_partitions)


def server(tier: str = "_default_tier", loaded=(), loading=(), max_bytes: int = 100) -> ServerView:
    return ServerView(max_bytes, frozenset(loaded), frozenset(loading), tier)


def rules(**by_ds) -> dict:
    return {ds: rules_from_json(value) for ds, value in by_ds.items()}


def run(used, servers, rule_map, **kw):
    return run_duties(DutyParams(used=tuple(desc(s) if isinstance(s, SegmentId) else s for s in used),
                                 servers=servers, now_ms=NOW, rules=rule_map, **kw))


HOT_COLD = rules(ds=[{"type": "loadByPeriod", "period": "P7D", "tieredReplicants": {"hot": 1}},
                     {"type": "loadByPeriod", "period": "P30D", "tieredReplicants": {"cold": 1}},
                     {"type": "dropForever"}])
TIERS = {"h1": server("hot"), "c1": server("cold"), "c2": server("cold")}


def test_new_segments_go_hot_old_ones_cold_and_older_ones_are_dropped():
    new, old, ancient = sid(1), sid(10), sid(40)
    got = run([new, old, ancient], TIERS, HOT_COLD)
    assert got == [MarkUnused(ancient), Load("h1", new), Load("c1", old)]


def test_a_dropped_segment_leaves_every_server_and_becomes_unused():
    ancient = sid(40)
    servers = {"h1": server("hot", loaded=[ancient]), "c1": server("cold", loading=[ancient])}
    assert run([ancient], servers, HOT_COLD) == [MarkUnused(ancient), Drop("c1", ancient), Drop("h1", ancient)]


def test_an_aging_segment_moves_tiers_without_a_gap():
    seg = sid(10)  # now in the cold period, still on the hot server
    on_hot = {"h1": server("hot", loaded=[seg]), "c1": server("cold"), "c2": server("cold")}
    assert run([seg], on_hot, HOT_COLD) == [Load("c1", seg)]  # the hot copy stays while cold loads
    loading = {"h1": server("hot", loaded=[seg]), "c1": server("cold", loading=[seg]), "c2": server("cold")}
    assert run([seg], loading, HOT_COLD) == [Noop()]
    loaded = {"h1": server("hot", loaded=[seg]), "c1": server("cold", loaded=[seg]), "c2": server("cold")}
    assert run([seg], loaded, HOT_COLD) == [Drop("h1", seg)]


def test_replicas_are_counted_and_capped_per_tier():
    seg = sid(0)
    two_hot = rules(ds=[{"type": "loadForever", "tieredReplicants": {"hot": 2, "cold": 1}}])
    servers = {"h1": server("hot"), "h2": server("hot"), "h3": server("hot"), "c1": server("cold")}
    assert run([seg], servers, two_hot) == [Load("c1", seg), Load("h1", seg), Load("h2", seg)]
    # Three wanted on a tier of two: two copies, no more.
    three = rules(ds=[{"type": "loadForever", "tieredReplicants": {"cold": 3}}])
    assert run([seg], {"c1": server("cold"), "c2": server("cold")}, three) == [Load("c1", seg), Load("c2", seg)]
    # A surplus in one tier is dropped there; the other tier's copy is left alone.
    held = {"h1": server("hot", loaded=[seg]), "h2": server("hot", loaded=[seg]), "h3": server("hot", loaded=[seg]),
            "c1": server("cold", loaded=[seg])}
    assert run([seg], held, two_hot) == [Drop("h1", seg)]


def test_zero_replicas_keep_the_segment_used_and_unloaded():
    seg = sid(0)
    zero = rules(ds=[{"type": "loadForever", "tieredReplicants": {"hot": 0}}])
    assert run([seg], {"h1": server("hot")}, zero) == [Noop()]
    assert run([seg], {"h1": server("hot", loaded=[seg])}, zero) == [Drop("h1", seg)]  # no MarkUnused
    nothing = rules(ds=[{"type": "loadForever", "useDefaultTierForNull": False}])
    assert run([seg], {"h1": server(loaded=[seg])}, nothing) == [Drop("h1", seg)]


def test_unknown_tier_loads_nothing_and_keeps_what_is_served_elsewhere():
    seg = sid(0)
    warm = rules(ds=[{"type": "loadForever", "tieredReplicants": {"warm": 1}}])
    assert run([seg], {"h1": server("hot")}, warm) == [Noop()]
    # The copy on the hot tier is kept: the wanted tier cannot load it (no servers), so
    # dropping it would leave the segment unavailable for nothing.
    assert run([seg], {"h1": server("hot", loaded=[seg])}, warm) == [Noop()]


def test_segments_no_rule_matches_are_reported_and_left_alone():
    recent, old = sid(1), sid(100)
    only_recent = rules(ds=[{"type": "loadByPeriod", "period": "P7D"}], _default=[])
    servers = {"h1": server(loaded=[old]), "h2": server()}
    got = run([recent, old, sid(200)], servers, only_recent)
    assert got == [Unmatched("ds", 2), Load("h2", recent), Load("h1", recent)]


def test_datasource_rules_come_before_the_cluster_default():
    a, b = sid(40, ds="a"), sid(40, ds="b")
    rule_map = rules(a=[{"type": "dropBeforeByPeriod", "period": "P30D"}],
                     _default=[{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}])
    assert run([a, b], {"h1": server()}, rule_map) == [MarkUnused(a), Load("h1", b)]


def test_without_stored_rules_the_seeded_default_matches_the_old_replication():
    seg = sid(0)
    two = {"h1": server(), "h2": server(), "h3": server()}
    assert run([seg], two, {}) == [Load("h1", seg), Load("h2", seg)]
    assert run([seg], two, {}, replication=3) == [Load("h1", seg), Load("h2", seg), Load("h3", seg)]
    # Historicals in a named tier get nothing from the default rule (as in Druid).
    assert run([seg], {"h1": server("hot")}, {}) == [Noop()]


def test_overshadowed_segments_are_not_loaded_nor_dropped_by_rules():
    old, new = sid(40, "v1"), sid(40, "v2")
    # Both older than the retention: only the visible one is marked unused by the rule; the
    # overshadowed one is left to MarkOvershadowed (it needs the new version served).
    assert run([old, new], {"h1": server("hot")}, HOT_COLD) == [MarkUnused(new)]
    recent_old, recent_new = sid(1, "v1"), sid(1, "v2")
    assert run([recent_old, recent_new], {"h1": server("hot")}, HOT_COLD) == [Load("h1", recent_new)]


def test_broadcast_puts_a_copy_on_every_server_of_every_tier():
    seg = sid(0)
    bc = rules(ds=[{"type": "broadcastForever"}])
    assert run([seg], TIERS, bc) == [Load("c1", seg), Load("c2", seg), Load("h1", seg)]


def test_balance_moves_only_within_a_tier():
    segs = [sid(i) for i in range(4)]
    everything_hot = rules(ds=[{"type": "loadForever", "tieredReplicants": {"hot": 1}}])
    servers = {"h1": server("hot", loaded=segs), "h2": server("hot"), "c1": server("cold")}
    params = DutyParams(used=tuple(desc(s) for s in segs), servers=servers, now_ms=NOW, rules=everything_hot)
    moves = Balance().run(params).commands
    assert moves and all(isinstance(m, Load) and m.server == "h2" for m in moves)
