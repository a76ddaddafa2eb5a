"""Partial load rules (Druid master's loadPartial*): their JSON, validation, which projections a
matcher selects, when the rule applies (onCannotMatch), and the duty's projection-only Loads."""

from __future__ import annotations

import re

import pytest

from common.segment.segment_id import SegmentId
from common.types.interval import Interval, parse_instant
from services.coordinator.core.duties import Balance, Drop, DutyParams, Load, SegmentEntry, ServerView, run_duties
from services.coordinator.core.rules import (ExactProjections, GlobProjections, LoadPartialByInterval,
                                             LoadPartialByPeriod, LoadPartialForever, RuleError, check_tiers,
                                             matching_rule, rules_from_json, rules_to_json)

DAY = 86_400_000
NOW = parse_instant("2024-03-15T00:00:00Z")
PROJECTIONS = ("by_page_daily", "by_user_daily", "by_page_hourly")


def seg(days_ago: int, ds: str = "ds") -> SegmentId:
    start = NOW - (days_ago + 1) * DAY
    return SegmentId(ds, Interval(start, start + DAY), "v1")


def test_json_round_trip_with_defaults():
    [rule] = rules_from_json([{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                               "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}}])
    assert rule == LoadPartialForever(tiered_replicants=(("cold", 1),), matcher=ExactProjections(("by_page_daily",)))
    assert rules_to_json([rule]) == [{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                                      "useDefaultTierForNull": True,
                                      "matcher": {"type": "exactProjection", "names": ["by_page_daily"]},
                                      "onCannotMatch": "fullLoad"}]
    every = [{"type": "loadPartialByPeriod", "period": "P30D", "includeFuture": False,
              "tieredReplicants": {"cold": 2}, "useDefaultTierForNull": True,
              "matcher": {"type": "globProjection", "patterns": ["*_daily"], "excludes": ["by_user_daily"]},
              "onCannotMatch": "fallThrough"},
             {"type": "loadPartialByInterval", "interval": "2024-01-01T00:00:00.000Z/2024-02-01T00:00:00.000Z",
              "tieredReplicants": {"cold": 1}, "useDefaultTierForNull": True,
              "matcher": {"type": "exactProjection", "names": ["a", "b"]}, "onCannotMatch": "fullLoad"}]
    parsed = rules_from_json(every)
    assert rules_to_json(parsed) == every and rules_from_json(rules_to_json(parsed)) == parsed
    assert isinstance(parsed[0], LoadPartialByPeriod) and isinstance(parsed[1], LoadPartialByInterval)
    # Tiers are checked as for any load rule.
    assert check_tiers(parsed, ["hot"]) == [
        "rule 0 (loadPartialByPeriod): tier 'cold' has no historicals; known tiers: hot",
        "rule 1 (loadPartialByInterval): tier 'cold' has no historicals; known tiers: hot"]


@pytest.mark.parametrize("rule, message", [
    ({"type": "loadPartialForever"}, "rule 0 (loadPartialForever): field 'matcher' is required"),
    ({"type": "loadPartialForever", "matcher": {"type": "clusterGroup"}},
     "field 'matcher.type' must be 'exactProjection' or 'globProjection', got 'clusterGroup'"),
    ({"type": "loadPartialForever", "matcher": {"type": "exactProjection", "names": []}},
     "field 'matcher.names' must be a non-empty list"),
    ({"type": "loadPartialForever", "matcher": {"type": "exactProjection", "names": ["a", ""]}},
     "field 'matcher.names' must be a non-empty list"),
    ({"type": "loadPartialForever", "matcher": {"type": "exactProjection", "names": ["a"], "patterns": ["*"]}},
     "unknown field 'matcher.patterns'"),
    ({"type": "loadPartialForever", "matcher": {"type": "globProjection"}},
     "field 'matcher.patterns' must be a non-empty list"),
    ({"type": "loadPartialForever", "matcher": {"type": "globProjection", "patterns": ["*"], "excludes": "a"}},
     "field 'matcher.excludes' must be a list"),
    ({"type": "loadPartialForever", "matcher": {"type": "exactProjection", "names": ["a"]},
      "onCannotMatch": "loadOnDemand"}, "'loadOnDemand' needs Druid's virtual storage"),
    ({"type": "loadPartialForever", "matcher": {"type": "exactProjection", "names": ["a"]},
      "onCannotMatch": "sometimes"}, "field 'onCannotMatch' must be 'fullLoad' or 'fallThrough'"),
    ({"type": "loadPartialByPeriod", "matcher": {"type": "exactProjection", "names": ["a"]}},
     "rule 0 (loadPartialByPeriod): field 'period' is required"),
    ({"type": "loadPartialByInterval", "interval": "2020/2021", "tieredReplicants": {"cold": -1},
      "matcher": {"type": "exactProjection", "names": ["a"]}}, "field 'tieredReplicants.cold' is -1"),
    ({"type": "loadForever", "matcher": {"type": "exactProjection", "names": ["a"]}},
     "rule 0 (loadForever): unknown field 'matcher'"),
])
def test_validation_names_rule_and_field(rule, message):
    with pytest.raises(RuleError, match=re.escape(message)):
        rules_from_json([rule])


def test_matchers_select_sorted_names_the_segment_has():
    assert ExactProjections(("by_user_daily", "nope", "by_page_daily")).select(PROJECTIONS) == (
        "by_page_daily", "by_user_daily")
    assert ExactProjections(("nope",)).select(PROJECTIONS) == ()
    assert GlobProjections(("*_daily",)).select(PROJECTIONS) == ("by_page_daily", "by_user_daily")
    assert GlobProjections(("*_daily",), ("by_user_daily",)).select(PROJECTIONS) == ("by_page_daily",)
    assert GlobProjections(("by_????_hourly",)).select(PROJECTIONS) == ("by_page_hourly",)
    # Only * and ? are special: a regex or fnmatch character is literal.
    assert GlobProjections(("by_[pu]*",)).select(PROJECTIONS) == ()
    assert GlobProjections(("by.page*",)).select(PROJECTIONS) == ()
    assert GlobProjections(("by_[pu]*",)).select(("by_[pu]x",)) == ("by_[pu]x",)
    assert GlobProjections(("*",)).select(()) == ()


def test_on_cannot_match_decides_whether_the_rule_applies():
    fall = rules_from_json([{"type": "loadPartialForever", "tieredReplicants": {"cold": 1}, "onCannotMatch": "fallThrough",
                             "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}},
                            {"type": "loadForever", "tieredReplicants": {"hot": 1}}])
    interval = seg(3).interval
    assert matching_rule(fall, interval, NOW, PROJECTIONS) is fall[0]
    assert matching_rule(fall, interval, NOW, ("other",)) is fall[1]  # no projection selected: next rule
    assert matching_rule(fall, interval, NOW) is fall[1]  # a segment without projections
    full = rules_from_json([{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                             "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}}])
    assert matching_rule(full, interval, NOW, ("other",)) is full[0]  # fullLoad: applies, loads it whole
    assert full[0].projections_to_load(("other",)) is None
    assert full[0].projections_to_load(PROJECTIONS) == ("by_page_daily",)
    # The time predicates are the load rules' own.
    period = rules_from_json([{"type": "loadPartialByPeriod", "period": "P7D", "includeFuture": False,
                               "matcher": {"type": "globProjection", "patterns": ["*"]}}])[0]
    assert period.applies_to(seg(3).interval, NOW) and not period.applies_to(seg(10).interval, NOW)
    future = SegmentId("ds", Interval(NOW + DAY, NOW + 2 * DAY), "v1").interval
    assert not period.applies_to(future, NOW)


# ---- the duty ---------------------------------------------------------------------------------
def server(tier: str, loaded=(), max_bytes: int = 100) -> ServerView:
    return ServerView(max_bytes, frozenset(loaded), frozenset(), tier)


HOT_RECENT_COLD_DAILY = {"ds": rules_from_json([
    {"type": "loadByPeriod", "period": "P7D", "tieredReplicants": {"hot": 1}},
    {"type": "loadPartialByPeriod", "period": "P365D", "tieredReplicants": {"cold": 1},
     "matcher": {"type": "globProjection", "patterns": ["*_daily"]}, "onCannotMatch": "fallThrough"},
    {"type": "loadByPeriod", "period": "P365D", "tieredReplicants": {"cold": 1}},
    {"type": "dropForever"}])}


def run(used, servers, projections, rules=HOT_RECENT_COLD_DAILY):
    return run_duties(DutyParams(used=tuple(SegmentEntry(s, 10) for s in used), servers=servers, now_ms=NOW,
                                 rules=rules, projections=projections))


def test_the_cold_tier_gets_projection_only_loads():
    recent, old, old_plain = seg(1), seg(30), seg(31)
    servers = {"h1": server("hot"), "c1": server("cold")}
    got = run([recent, old, old_plain], servers, {recent: PROJECTIONS, old: PROJECTIONS, old_plain: ()})
    # Recent: whole, hot. Old with daily projections: only those, cold. Old without any: the
    # partial rule falls through to the whole-segment cold rule.
    assert got == [Load("h1", recent), Load("c1", old, ("by_page_daily", "by_user_daily")), Load("c1", old_plain)]


def test_a_partial_copy_counts_as_the_tiers_replica_and_moves_between_tiers_without_a_gap():
    old = seg(30)
    on_hot = {"h1": server("hot", loaded=[old]), "c1": server("cold"), "c2": server("cold")}
    assert run([old], on_hot, {old: PROJECTIONS}) == [Load("c1", old, ("by_page_daily", "by_user_daily"))]
    settled = {"h1": server("hot", loaded=[old]), "c1": server("cold", loaded=[old]), "c2": server("cold")}
    assert run([old], settled, {old: PROJECTIONS}) == [Drop("h1", old)]


def test_balancing_moves_keep_the_partial_load():
    segments = [seg(30 + i) for i in range(4)]
    rules = {"ds": rules_from_json([{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                                     "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}}])}
    servers = {"c1": server("cold", loaded=segments), "c2": server("cold")}
    params = DutyParams(used=tuple(SegmentEntry(s, 10) for s in segments), servers=servers, now_ms=NOW, rules=rules,
                        projections={s: PROJECTIONS for s in segments})
    moves = [c for c in Balance().run(params).commands if isinstance(c, Load)]
    assert moves and all(c.server == "c2" and c.projections == ("by_page_daily",) for c in moves)
