"""RuleStore on a SQLite file and on a real PostgreSQL server: lists replace, audit history."""

from __future__ import annotations

import pytest

from common.types.interval import Interval
from services.coordinator.core.rules import LoadForever, RuleError, rules_from_json, rules_to_json
from services.coordinator.rule_store import RuleStore
from services.coordinator.store import SegmentStore
from tests.fixtures.manual_clock import ManualClock
from tests.fixtures.metadata_store_url import metadata_store_url  # noqa: F401
from tests.fixtures.postgres_server import postgres_url  # noqa: F401

HOT = [{"type": "loadByPeriod", "period": "P7D", "tieredReplicants": {"hot": 2}}, {"type": "dropForever"}]


def test_rules_replace_and_are_audited(metadata_store_url):
    clock = ManualClock(1_700_000_000_000)
    with SegmentStore(metadata_store_url) as store:
        rules = RuleStore(store, replication=3, clock=clock)
        # Nothing stored: the default is the seeded one, from [coordinator] replication.
        assert rules.stored() == {}
        assert rules.all() == {"_default": (LoadForever(tiered_replicants=(("_default_tier", 3),)),)}
        assert rules.get("wiki") == ()
        rules.set("wiki", rules_from_json(HOT), author="ann", comment="keep a week hot", ip="10.0.0.1")
        clock.now += 1000
        rules.set("wiki", rules_from_json([{"type": "loadForever"}]), author="bob", comment="")
        clock.now += 1000
        rules.set("_default", rules_from_json([{"type": "loadForever", "tieredReplicants": {"cold": 1}}]))
        assert rules_to_json(rules.get("wiki")) == [
            {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}, "useDefaultTierForNull": True}]
        assert rules.all()["_default"][0].replicants == {"cold": 1}

        wiki = rules.history("wiki")
        assert [(e.author, e.comment, e.created_ms) for e in wiki] == [
            ("bob", "", clock.now - 1000), ("ann", "keep a week hot", clock.now - 2000)]
        assert wiki[1].to_json()["auditInfo"] == {"author": "ann", "comment": "keep a week hot", "ip": "10.0.0.1"}
        assert rules_from_json(__import__("json").loads(wiki[1].payload)) == rules_from_json(HOT)
        assert [e.key for e in rules.history()] == ["_default", "wiki", "wiki"]
        assert [e.author for e in rules.history("wiki", count=1)] == ["bob"]
        only_first = Interval(clock.now - 2000, clock.now - 1000)
        assert [e.author for e in rules.history("wiki", interval=only_first)] == ["ann"]
        clock.now += 8 * 86_400_000  # the default window is the last week
        assert rules.history("wiki") == []
        assert len(rules.history("wiki", count=10)) == 2
        with pytest.raises(RuleError, match="count must be a positive"):
            rules.history("wiki", count=0)
    with SegmentStore(metadata_store_url) as store:  # survives a restart
        assert RuleStore(store).stored()["wiki"] == rules_from_json([{"type": "loadForever"}])
