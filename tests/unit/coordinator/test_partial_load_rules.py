"""Partial load rules (Druid master's loadPartial*): their JSON, validation, which projections a
matcher selects, when the rule applies (onCannotMatch), and the duty's projection-only Loads."""

from __future__ import annotations

import os
import re
from dataclasses import replace

import pyarrow as pa
import pytest

from common.query.projection import ProjectionSpec, projection_rows
from common.segment.builder import build_segment
from common.segment.partial_copy import read_manifest, write_partial_copy
from common.segment.segment_id import SegmentId
from common.types.interval import Interval, parse_instant
from services.coordinator.core.duties import (Balance, Drop, DutyParams, Load, LoadFailure, Noop, RetryLoad, RetrySent,
                                              SegmentEntry, ServerView, run_duties)
from services.coordinator.core.rules import (ExactProjections, GlobProjections, LoadPartialByInterval,
                                             LoadPartialByPeriod, LoadPartialForever, RuleError, check_tiers,
                                             matching_rule, rules_from_json, rules_to_json)
from services.coordinator.core.segment_parts import SegmentParts

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
def server(tier: str, loaded=(), max_bytes: int = 100, shapes=None, served=None, loading=()) -> ServerView:
    """``shapes``: segment -> projections assigned; ``served``: as announced (default: the same)."""
    shapes = dict(shapes or {})
    return ServerView(max_bytes, frozenset(loaded), frozenset(loading), tier, shapes,
                      dict(shapes if served is None else served))


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
    settled = {"h1": server("hot", loaded=[old]), "c2": server("cold"),
               "c1": server("cold", loaded=[old], shapes={old: ("by_page_daily", "by_user_daily")})}
    assert run([old], settled, {old: PROJECTIONS}) == [Drop("h1", old)]


def test_balancing_moves_keep_the_partial_load():
    segments = [seg(30 + i) for i in range(4)]
    rules = {"ds": rules_from_json([{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                                     "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}}])}
    servers = {"c1": server("cold", loaded=segments, shapes={s: ("by_page_daily",) for s in segments}),
               "c2": server("cold")}
    params = DutyParams(used=tuple(SegmentEntry(s, 10) for s in segments), servers=servers, now_ms=NOW, rules=rules,
                        projections={s: PROJECTIONS for s in segments})
    moves = [c for c in Balance().run(params).commands if isinstance(c, Load)]
    assert moves and all(c.server == "c2" and c.projections == ("by_page_daily",) for c in moves)


# ---- a rule that changes: copies reloaded in the new shape where they are -----------------------
DAILY = ("by_page_daily", "by_user_daily")


def partial_rules(matcher: dict) -> dict:
    return {"ds": rules_from_json([{"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                                    "matcher": matcher}])}


def test_changed_projection_names_reload_the_copy_in_place():
    old = seg(30)
    held = {"c1": server("cold", loaded=[old], shapes={old: ("by_page_daily",)}), "c2": server("cold")}
    rules = partial_rules({"type": "globProjection", "patterns": ["*_daily"]})
    # No second copy elsewhere, no drop: the one copy is reloaded on its server and serves meanwhile.
    assert run([old], held, {old: PROJECTIONS}, rules) == [Load("c1", old, DAILY)]
    # Assigned the new shape, still announcing the old one: the reload is under way, nothing to do.
    reloading = {"c1": server("cold", loaded=[old], shapes={old: DAILY}, served={old: ("by_page_daily",)}),
                 "c2": server("cold")}
    assert run([old], reloading, {old: PROJECTIONS}, rules) == [Noop()]


def test_whole_to_partial_and_partial_to_whole():
    old = seg(30)
    whole = {"c1": server("cold", loaded=[old])}
    rules = partial_rules({"type": "exactProjection", "names": ["by_user_daily"]})
    assert run([old], whole, {old: PROJECTIONS}, rules) == [Load("c1", old, ("by_user_daily",))]
    partial = {"c1": server("cold", loaded=[old], shapes={old: ("by_user_daily",)})}
    load_whole = {"ds": rules_from_json([{"type": "loadForever", "tieredReplicants": {"cold": 1}}])}
    assert run([old], partial, {old: PROJECTIONS}, load_whole) == [Load("c1", old)]
    # A copy still loading in the old shape is reassigned too (the historical loads it again when
    # the old shape arrives).
    loading = {"c1": server("cold", loading=[old], shapes={old: ("by_user_daily",)})}
    assert run([old], loading, {old: PROJECTIONS}, load_whole) == [Load("c1", old)]
    # A copy in a tier the rule no longer wants is not reshaped, only dropped once the wanted one serves.
    moved = {"h1": server("hot", loaded=[old], shapes={old: ("by_user_daily",)}), "c1": server("cold", loaded=[old])}
    assert run([old], moved, {old: PROJECTIONS}, load_whole) == [Drop("h1", old)]


def test_a_reload_waits_for_room_for_both_copies():
    old, other = seg(30), seg(31)
    rules = {"ds": rules_from_json([{"type": "loadForever", "tieredReplicants": {"cold": 1}}])}
    tight = {"c1": server("cold", loaded=[old, other], max_bytes=25, shapes={old: ("by_page_daily",)})}
    # Two whole copies (20) and the reload of the other: 30 > 25; the partial one is 10 here since
    # the duty knows no parts for it (a segment's whole size is reserved without them).
    assert run([old, other], tight, {old: PROJECTIONS, other: ()}, rules) == [Noop()]
    roomy = {"c1": server("cold", loaded=[old, other], max_bytes=30, shapes={old: ("by_page_daily",)})}
    assert run([old, other], roomy, {old: PROJECTIONS, other: ()}, rules) == [Load("c1", old)]


def test_a_failed_reload_is_retried_on_the_server_that_still_serves_the_old_copy():
    old = seg(30)
    rules = partial_rules({"type": "globProjection", "patterns": ["*_daily"]})
    servers = {"c1": server("cold", loaded=[old], shapes={old: DAILY}, served={old: ("by_page_daily",)}),
               "c2": server("cold")}
    failure = LoadFailure(attempts=5, failed_ms=NOW - 120_000, reason="deep storage down")
    params = DutyParams(used=(SegmentEntry(old, 10),), servers=servers, now_ms=NOW, rules=rules,
                        projections={old: PROJECTIONS}, load_failures={("c1", old): failure})
    # Even past max_load_attempts it is not moved: that would drop the copy that serves.
    assert run_duties(params) == [RetryLoad("c1", old)]
    answered = replace(params, retries_sent={("c1", old): RetrySent(failure.failed_ms, NOW - 1)})
    assert run_duties(answered) == [Noop()]


# ---- what a partial copy reserves ---------------------------------------------------------------
PARTS = SegmentParts(projections={"by_page_daily": frozenset({"p.page", "p.added", "dict.page"}),
                                  "by_user_daily": frozenset({"u.user", "u.n", "dict.page"}),
                                  "by_page_hourly": frozenset({"h.page", "h.added"})},
                     lengths={"p.page": 10, "p.added": 5, "dict.page": 20, "u.user": 7, "u.n": 3, "h.page": 30,
                              "h.added": 30, "base.time": 400},
                     overhead=4)


def test_copy_size_is_the_union_of_the_projections_parts():
    assert PARTS.copy_size(("by_page_daily",), 509) == 4 + 10 + 5 + 20
    # The shared dictionary counts once.
    assert PARTS.copy_size(DAILY, 509) == 4 + 10 + 5 + 20 + 7 + 3
    assert PARTS.copy_size((), 509) == 509 and PARTS.copy_size(("nope",), 509) == 509
    assert PARTS.copy_size(("by_page_hourly",), 50) == 50  # never more than the whole segment


def test_the_coordinator_reserves_only_the_projection_parts():
    segments = [seg(30 + i) for i in range(3)]
    rules = partial_rules({"type": "exactProjection", "names": ["by_page_daily"]})
    # 3 whole segments (509 each) would not fit in 200 bytes; three 39-byte partial copies do.
    params = DutyParams(used=tuple(SegmentEntry(s, 509) for s in segments), servers={"c1": server("cold", max_bytes=200)},
                        now_ms=NOW, rules=rules, projections={s: PROJECTIONS for s in segments},
                        parts={s: PARTS for s in segments})
    assert run_duties(params) == [Load("c1", s, ("by_page_daily",)) for s in sorted(segments, reverse=True)]
    # Once held, they weigh 39 each: a fourth whole segment of 80 bytes still fits (200 - 117).
    big = seg(1)
    held = DutyParams(used=(*params.used, SegmentEntry(big, 80)),
                      servers={"c1": server("cold", max_bytes=200, loaded=segments,
                                            shapes={s: ("by_page_daily",) for s in segments})},
                      now_ms=NOW, rules={"ds": rules_from_json([
                          {"type": "loadByPeriod", "period": "P7D", "tieredReplicants": {"cold": 1}},
                          {"type": "loadPartialForever", "tieredReplicants": {"cold": 1},
                           "matcher": {"type": "exactProjection", "names": ["by_page_daily"]}}])},
                      projections={s: PROJECTIONS for s in segments}, parts={s: PARTS for s in segments})
    assert run_duties(held) == [Load("c1", big)]
    # Reloading one whole (509) needs its old 39 bytes too until the swap: no room, so it waits.
    to_whole = replace(held, rules={"ds": rules_from_json([{"type": "loadForever", "tieredReplicants": {"cold": 1}}])},
                       used=params.used)
    assert run_duties(to_whole) == [Noop()]


def test_parts_come_from_a_real_manifest(tmp_path):
    n = 500
    rows = pa.table({"__time": pa.array([i * 1000 for i in range(n)], pa.timestamp("ms", tz="UTC")),
                     "page": [f"p{i % 13}" for i in range(n)], "user": [f"u{i % 41}" for i in range(n)],
                     "comment": [f"a long comment {i} " * 8 for i in range(n)],
                     "added": pa.array([i - 250 for i in range(n)], pa.int64())})
    specs = [ProjectionSpec.from_json({"type": "aggregate", "name": "by_page", "groupingColumns": [
                 {"type": "string", "name": "page"}], "aggregators": [{"type": "longSum", "name": "added",
                                                                       "fieldName": "added"}]})]
    path = str(tmp_path / "whole.sseg")
    sid = SegmentId("wiki", Interval(0, DAY), "v1")
    build_segment(rows, path, sid, projections=[projection_rows(s, rows) for s in specs])
    whole = os.path.getsize(path)
    with open(path, "rb") as f:
        def read_at(offset: int, length: int) -> bytes:
            return os.pread(f.fileno(), length, offset)
        manifest = read_manifest(read_at, whole, "whole")
        write_partial_copy(read_at, whole, ["by_page"], str(tmp_path / "part.sseg"), "whole")
    reserved = SegmentParts.from_manifest(manifest, whole).copy_size(("by_page",), whole)
    # At least what the copy takes on disk (its manifest is the whole one's, cut), far below the whole.
    assert os.path.getsize(tmp_path / "part.sseg") <= reserved < whole // 2
