"""Rule predicates at fixed instants (period edges, includeFuture), JSON and validation."""

from __future__ import annotations

import pytest

from common.types.granularity import Period
from common.types.interval import Interval, parse_instant
from services.coordinator.core.rules import (DEFAULT_TIER, BroadcastByInterval, BroadcastByPeriod, BroadcastForever,
                                             DropBeforeByPeriod, DropByInterval, DropByPeriod, DropForever,
                                             LoadByInterval, LoadByPeriod, LoadForever, RuleError, check_tiers,
                                             default_rules, matching_rule, minus_period, rule_from_json, rules_for,
                                             rules_from_json, rules_to_json, wanted_replicas)

NOW = parse_instant("2024-03-15T00:00:00Z")
P1M = Period.parse("P1M")  # at NOW: [2024-02-15, 2024-03-15)


def iv(text: str) -> Interval:
    return Interval.parse(text)


# ---- period arithmetic ----

@pytest.mark.parametrize("now, period, expected", [
    ("2024-03-31T00:00:00Z", "P1M", "2024-02-29T00:00:00Z"),  # day clamped, leap year
    ("2023-03-31T00:00:00Z", "P1M", "2023-02-28T00:00:00Z"),
    ("2024-02-29T12:00:00Z", "P1Y1M", "2023-01-28T12:00:00Z"),  # years first, then months (Joda)
    ("2024-03-15T00:00:00Z", "P1W", "2024-03-08T00:00:00Z"),
    ("2024-03-15T00:00:00Z", "P1DT1H", "2024-03-13T23:00:00Z"),
    ("2024-03-31T10:00:00Z", "P1M1D", "2024-02-28T10:00:00Z"),  # month clamp, then the day
    ("2024-03-15T00:00:00Z", "PT0.5S", "2024-03-14T23:59:59.500Z"),
])
def test_minus_period(now, period, expected):
    assert minus_period(parse_instant(now), Period.parse(period)) == parse_instant(expected)


# ---- load / broadcast by period: P overlaps the segment, or with includeFuture it ends after P's start ----

@pytest.mark.parametrize("segment, past_only, with_future", [
    ("2024-02-14/2024-02-15", False, False),  # ends exactly where P starts: no overlap
    ("2024-02-14T23:00:00Z/2024-02-15T00:00:00.001Z", True, True),  # 1 ms inside P
    ("2024-02-15/2024-02-16", True, True),
    ("2024-03-14/2024-03-15", True, True),  # last day of P
    ("2024-03-14/2024-03-16", True, True),  # straddles now
    ("2024-03-15/2024-03-16", False, True),  # starts at now: only with includeFuture
    ("2030-01-01/2030-01-02", False, True),  # far future
    ("2000-01-01/2030-01-01", True, True),  # covers all of P
    ("1900-01-01/1900-01-02", False, False),
])
def test_load_by_period(segment, past_only, with_future):
    for rule_type in (LoadByPeriod, BroadcastByPeriod):
        assert rule_type(period=P1M, include_future=False).applies_to(iv(segment), NOW) is past_only
        assert rule_type(period=P1M, include_future=True).applies_to(iv(segment), NOW) is with_future
    assert LoadByPeriod(period=P1M).include_future is True  # Druid's default


# ---- drop by period: P contains the segment, or with includeFuture it starts at or after P's start ----

@pytest.mark.parametrize("segment, past_only, with_future", [
    ("2024-02-15/2024-02-16", True, True),  # starts exactly at P's start
    ("2024-02-14T23:59:59.999Z/2024-02-16", False, False),  # 1 ms before P
    ("2024-03-14/2024-03-15", True, True),  # ends exactly at now
    ("2024-03-14/2024-03-15T00:00:00.001Z", False, True),  # 1 ms past now
    ("2024-03-15/2024-03-16", False, True),  # future
    ("2099-01-01/2099-01-02", False, True),
    ("2024-01-01/2024-01-02", False, False),  # older than P
])
def test_drop_by_period(segment, past_only, with_future):
    assert DropByPeriod(P1M, include_future=False).applies_to(iv(segment), NOW) is past_only
    assert DropByPeriod(P1M, include_future=True).applies_to(iv(segment), NOW) is with_future
    assert DropByPeriod(P1M).include_future is True


@pytest.mark.parametrize("segment, expected", [
    ("2024-02-14/2024-02-15", True),  # ends exactly at now - P1M
    ("2024-02-14/2024-02-15T00:00:00.001Z", False),
    ("2024-02-15/2024-02-16", False),
    ("1970-01-01/1970-01-02", True),
    ("2030-01-01/2030-01-02", False),
])
def test_drop_before_by_period(segment, expected):
    assert DropBeforeByPeriod(P1M).applies_to(iv(segment), NOW) is expected


def test_drop_before_by_period_month_clamp():
    now = parse_instant("2024-03-31T00:00:00Z")  # now - P1M = 2024-02-29
    rule = DropBeforeByPeriod(P1M)
    assert rule.applies_to(iv("2024-02-28/2024-02-29"), now)
    assert not rule.applies_to(iv("2024-02-29/2024-03-01"), now)


@pytest.mark.parametrize("segment, overlaps, contained", [
    ("2012-01-01/2012-01-02", True, True),
    ("2012-12-31/2013-01-01", True, True),  # last day, ends at the rule's end
    ("2012-12-31/2013-01-02", True, False),  # sticks out at the end
    ("2011-12-31/2012-01-02", True, False),  # sticks out at the start
    ("2013-01-01/2013-01-02", False, False),  # touches the end
    ("2011-12-31/2012-01-01", False, False),  # touches the start
    ("2000-01-01/2020-01-01", True, False),  # covers the rule's interval
])
def test_interval_rules(segment, overlaps, contained):
    rule_interval = iv("2012-01-01/2013-01-01")
    # The rules ignore now: any reference time gives the same answer.
    for now in (0, NOW, parse_instant("2099-01-01")):
        assert LoadByInterval(interval=rule_interval).applies_to(iv(segment), now) is overlaps
        assert BroadcastByInterval(rule_interval).applies_to(iv(segment), now) is overlaps
        assert DropByInterval(rule_interval).applies_to(iv(segment), now) is contained


def test_forever_rules_apply_to_everything():
    for segment in ("1000-01-01/1000-01-02", "2024-03-14/2024-03-15", "9999-01-01/9999-01-02"):
        for rule in (LoadForever(), DropForever(), BroadcastForever()):
            assert rule.applies_to(iv(segment), NOW)


# ---- first match wins, datasource rules before the default ----

def test_first_matching_rule_wins_and_default_follows():
    hot = LoadByPeriod(period=P1M, tiered_replicants=(("hot", 2),))
    cold = LoadByPeriod(period=Period.parse("P1Y"), tiered_replicants=(("cold", 1),))
    drop = DropForever()
    rules = {"wiki": [hot, cold, drop], "_default": [LoadForever()]}
    chain = rules_for("wiki", rules)
    assert chain == [hot, cold, drop, LoadForever()]
    assert matching_rule(chain, iv("2024-03-01/2024-03-02"), NOW) is hot
    assert matching_rule(chain, iv("2023-06-01/2023-06-02"), NOW) is cold
    assert matching_rule(chain, iv("2020-01-01/2020-01-02"), NOW) is drop
    # A datasource without rules gets the cluster default; without a stored default, the seed.
    assert rules_for("other", rules) == [LoadForever()]
    assert rules_for("other", {}, default_rules(3)) == [LoadForever(tiered_replicants=((DEFAULT_TIER, 3),))]
    assert rules_for("other", {}, default_rules(0)) == [LoadForever(tiered_replicants=((DEFAULT_TIER, 2),))]
    # A datasource whose only rule does not match, and no default: no rule.
    assert matching_rule(rules_for("x", {"x": [hot], "_default": []}), iv("2020-01-01/2020-01-02"), NOW) is None


def test_wanted_replicas():
    tiers = {"hot": 2, "cold": 3}
    assert wanted_replicas(LoadForever(tiered_replicants=(("hot", 1), ("cold", 0))), tiers) == {"hot": 1, "cold": 0}
    assert wanted_replicas(BroadcastForever(), tiers) == tiers
    assert wanted_replicas(DropForever(), tiers) == {}
    assert wanted_replicas(None, tiers) == {}


# ---- JSON ----

def test_json_round_trip_and_defaults():
    posted = [
        {"type": "loadByPeriod", "period": "P1M", "includeFuture": False, "tieredReplicants": {"hot": 2, "cold": 0}},
        {"type": "loadByInterval", "interval": "2012-01-01/2013-01-01"},
        {"type": "loadForever", "useDefaultTierForNull": False},
        {"type": "dropByPeriod", "period": "P2Y"},
        {"type": "dropBeforeByPeriod", "period": "P1Y"},
        {"type": "dropByInterval", "interval": "2000-01-01/2001-01-01"},
        {"type": "broadcastByPeriod", "period": "PT6H", "includeFuture": False},
        {"type": "broadcastByInterval", "interval": "2000-01-01/2001-01-01"},
        {"type": "broadcastForever"},
        {"type": "dropForever"},
    ]
    rules = rules_from_json(posted)
    out = rules_to_json(rules)
    assert out[0] == {"type": "loadByPeriod", "period": "P1M", "includeFuture": False,
                      "tieredReplicants": {"cold": 0, "hot": 2}, "useDefaultTierForNull": True}
    assert out[1] == {"type": "loadByInterval", "interval": "2012-01-01T00:00:00.000Z/2013-01-01T00:00:00.000Z",
                      "tieredReplicants": {"_default_tier": 2}, "useDefaultTierForNull": True}
    assert out[2] == {"type": "loadForever", "tieredReplicants": {}, "useDefaultTierForNull": False}
    assert out[3] == {"type": "dropByPeriod", "period": "P2Y", "includeFuture": True}
    assert out[4] == {"type": "dropBeforeByPeriod", "period": "P1Y"}
    assert out[6] == {"type": "broadcastByPeriod", "period": "PT6H", "includeFuture": False}
    assert out[8] == {"type": "broadcastForever"} and out[9] == {"type": "dropForever"}
    assert rules_from_json(out) == rules  # what GET returns can be POSTed back


@pytest.mark.parametrize("body, message", [
    ({"type": "loadByPeriod", "period": "P1M"}, None),
    ("nope", "rules must be a JSON array"),
    (["x"], "rule 0 must be a JSON object"),
    ([{"type": "keepForever"}], "rule 0: unknown type 'keepForever'"),
    ([{"type": "dropForever"}, {"type": "loadByPeriod"}], "rule 1 (loadByPeriod): field 'period' is required"),
    ([{"type": "loadByPeriod", "period": "1M"}], "rule 0 (loadByPeriod): field 'period': invalid ISO-8601 period"),
    ([{"type": "dropByInterval", "interval": "2012"}], "rule 0 (dropByInterval): field 'interval'"),
    ([{"type": "dropByInterval", "interval": "2013-01-01/2012-01-01"}], "field 'interval': interval end"),
    ([{"type": "loadForever", "tieredReplicants": {"hot": -1}}],
     "rule 0 (loadForever): field 'tieredReplicants.hot' is -1; replicas must be 0 or more"),
    ([{"type": "loadForever", "tieredReplicants": {"hot": 1.5}}], "field 'tieredReplicants.hot' must be a whole"),
    ([{"type": "loadForever", "tieredReplicants": {"hot": True}}], "field 'tieredReplicants.hot' must be a whole"),
    ([{"type": "loadForever", "tieredReplicants": [1]}], "field 'tieredReplicants' must be an object"),
    ([{"type": "loadForever", "tieredReplicants": {" ": 1}}], "empty tier name"),
    ([{"type": "dropByPeriod", "period": "P1D", "includeFuture": "yes"}], "field 'includeFuture' must be true or false"),
    ([{"type": "dropForever", "period": "P1D"}], "rule 0 (dropForever): unknown field 'period'"),
    ([{"type": "dropByPeriod", "period": "P1D", "includFuture": True}], "unknown field 'includFuture'"),
])
def test_validation_names_rule_and_field(body, message):
    if message is None:
        with pytest.raises(RuleError, match="must be a JSON array"):
            rules_from_json(body)
        rule_from_json(body)  # a single object is fine for rule_from_json
        return
    with pytest.raises(RuleError) as err:
        rules_from_json(body)
    assert message in str(err.value)


def test_zero_replicas_allowed_and_unknown_tier_is_a_warning():
    rules = rules_from_json([{"type": "loadForever", "tieredReplicants": {"hot": 1, "cold": 0, "warm": 2}}])
    assert rules[0].replicants == {"hot": 1, "cold": 0, "warm": 2}
    warnings = check_tiers(rules, ["hot", "cold"])
    assert warnings == ["rule 0 (loadForever): tier 'warm' has no historicals; known tiers: cold, hot"]
