"""The rules REST API's handler over a real RuleStore (SQLite file), without sockets."""

from __future__ import annotations

import json

import pytest

from services.coordinator.rule_store import RuleStore
from services.coordinator.rules_http import BASE, RulesHttp
from services.coordinator.store import SegmentStore
from services.security.authorizer import ALLOW_ALL
from tests.fixtures.manual_clock import ManualClock
from tests.unit.coordinator.only_wiki_authorizer import OnlyWiki

HOT = [{"type": "loadByPeriod", "period": "P7D", "tieredReplicants": {"hot": 1}}, {"type": "dropForever"}]


@pytest.fixture
def api(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'm.db'}")
    clock = ManualClock(1_700_000_000_000)
    rules = RuleStore(store, replication=0, clock=clock)

    def call(method, path, body=None, headers=None, query=None, authorizer=ALLOW_ALL):
        handler = RulesHttp(rules, authorizer, lambda: {"hot", "cold"})
        status, _, out = handler(method, BASE + path, query or {}, json.dumps(body).encode() if body is not None
                                 else b"", headers or {})
        return status, json.loads(out)

    call.clock = clock
    yield call
    store.close()


def test_post_get_full_and_history(api):
    assert api("GET", "") == (200, {"_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2},
                                                  "useDefaultTierForNull": True}]})
    assert api("GET", "/wiki") == (200, [])
    status, out = api("POST", "/wiki", HOT, {"X-Druid-Author": "ann", "X-Druid-Comment": "a week hot"})
    assert (status, out) == (200, {})
    status, got = api("GET", "/wiki")
    assert got[0] == {"type": "loadByPeriod", "period": "P7D", "includeFuture": True,
                      "tieredReplicants": {"hot": 1}, "useDefaultTierForNull": True}
    assert got[1] == {"type": "dropForever"}
    status, full = api("GET", "/wiki", query={"full": [""]})
    assert [r["type"] for r in full] == ["loadByPeriod", "dropForever", "loadForever"]
    status, all_rules = api("GET", "")
    assert set(all_rules) == {"_default", "wiki"}
    api.clock.now += 1000
    api("POST", "/wiki", [{"type": "loadForever"}], {"x-druid-author": "bob"})
    status, history = api("GET", "/wiki/history")
    assert status == 200 and [h["auditInfo"]["author"] for h in history] == ["bob", "ann"]
    assert history[1]["auditInfo"]["comment"] == "a week hot" and history[1]["key"] == "wiki"
    assert json.loads(history[1]["payload"])[1] == {"type": "dropForever"}
    assert [h["auditInfo"]["author"] for h in api("GET", "/wiki/history", query={"count": ["1"]})[1]] == ["bob"]
    first_only = "2023-11-14T22:13:20.000Z_2023-11-14T22:13:20.500Z"  # Druid's '_' for '/'
    assert [h["auditInfo"]["author"] for h in api("GET", "/history", query={"interval": [first_only]})[1]] == ["ann"]


def test_bad_rules_name_the_rule_and_field_and_store_nothing(api):
    status, out = api("POST", "/wiki", [{"type": "dropForever"}, {"type": "loadForever",
                                                                  "tieredReplicants": {"hot": -2}}])
    assert status == 400 and "rule 1 (loadForever): field 'tieredReplicants.hot' is -2" in out["error"]
    status, out = api("POST", "/wiki", [{"type": "dropByPeriod", "period": "30 days"}])
    assert status == 400 and "rule 0 (dropByPeriod): field 'period'" in out["error"]
    assert api("GET", "/wiki") == (200, [])
    assert api("GET", "/wiki/history") == (200, [])
    assert api("POST", "/wiki")[0] == 400
    assert api("GET", "/wiki/history", query={"count": ["x"]})[0] == 400
    assert api("GET", "/wiki/history", query={"count": ["1"], "interval": ["2020/2021"]})[0] == 400
    assert api("DELETE", "/wiki")[0] == 405
    assert api("GET", "/wiki/a/b")[0] == 404


def test_unknown_tier_is_accepted_with_a_warning(api):
    status, out = api("POST", "/wiki", [{"type": "loadForever", "tieredReplicants": {"warm": 1, "hot": 1}}])
    assert status == 200
    assert out == {"warnings": ["rule 0 (loadForever): tier 'warm' has no historicals; known tiers: cold, hot"]}


def test_permissions(api):
    auth = OnlyWiki()
    ann, eve, admin = ({"x-strata-user": u} for u in ("ann", "eve", "admin"))
    assert api("POST", "/wiki", HOT, ann, authorizer=auth)[0] == 200
    assert api("POST", "/other", HOT, ann, authorizer=auth)[0] == 403
    assert api("POST", "/_default", HOT, ann, authorizer=auth)[0] == 403
    assert api("POST", "/_default", [{"type": "loadForever"}], admin, authorizer=auth)[0] == 200
    assert api("POST", "/other", HOT, admin, authorizer=auth)[0] == 200
    assert set(api("GET", "", headers=ann, authorizer=auth)[1]) == {"_default", "wiki"}
    assert set(api("GET", "", headers=eve, authorizer=auth)[1]) == {"_default"}
    assert api("GET", "/wiki", headers=eve, authorizer=auth)[0] == 403
    assert {h["key"] for h in api("GET", "/history", headers=ann, authorizer=auth)[1]} == {"wiki", "_default"}

