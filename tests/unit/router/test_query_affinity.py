"""Which query a request through the router is about (services/router/core/query_affinity.py), so
that a statement's pages, a cancel and the request that started the query reach the same broker,
and how Upstreams turns that id into one broker among several."""

from __future__ import annotations

import json

import pytest

from services.discovery.keys import node_key
from services.discovery.local_discovery import LocalDiscovery
from services.router.core.query_affinity import query_affinity
from services.router.core.route_table import BROKER
from services.router.upstreams import Upstreams

JSON = {"Content-Type": "application/json"}


def test_statement_paths_and_cancels_name_their_query():
    for method, path, key in (("GET", "/druid/v2/sql/statements/q-1", "q-1"),
                              ("GET", "/druid/v2/sql/statements/q-1/results", "q-1"),
                              ("DELETE", "/druid/v2/sql/statements/a%2Fb", "a/b"),
                              ("DELETE", "/druid/v2/sql/console-7", "console-7"),
                              ("DELETE", "/druid/v2/native-9", "native-9"),
                              ("GET", "/druid/v2/datasources", None),
                              ("GET", "/druid/v2/datasources/wiki", None),
                              ("DELETE", "/druid/v2/sql/statements", None),
                              ("POST", "/druid/v2/sql/task", None)):
        assert query_affinity(method, path, b"", JSON) == (key, b""), (method, path)


@pytest.mark.parametrize("path", ["/druid/v2/sql", "/druid/v2/sql/", "/druid/v2/sql/statements"])
def test_sql_posts_follow_their_query_id_and_get_one_when_missing(path):
    body = json.dumps({"query": "SELECT 1", "context": {"sqlQueryId": "mine", "timeout": 5}}).encode()
    assert query_affinity("POST", path, body, JSON) == ("mine", body)
    # SET sqlQueryId in the SQL wins over the context, as on the broker.
    body = json.dumps({"query": "SET sqlQueryId = 'set-id'; SELECT 1", "context": {"sqlQueryId": "ctx"}}).encode()
    assert query_affinity("POST", path, body, {"content-type": "application/json; charset=utf-8"})[0] == "set-id"
    # None given: the router names the query (Druid's router does too) and hashes on that name.
    key, sent = query_affinity("POST", path, json.dumps({"query": "SELECT 1", "context": {"timeout": 5}}).encode(),
                               JSON)
    assert key.startswith("query-") and json.loads(sent) == {"query": "SELECT 1",
                                                              "context": {"timeout": 5, "sqlQueryId": key}}
    key, sent = query_affinity("POST", path, b'{"query": "SELECT 1"}', JSON)
    assert json.loads(sent)["context"] == {"sqlQueryId": key}


def test_bodies_the_broker_must_judge_pass_untouched():
    for body, headers in ((b"SELECT 1", {"Content-Type": "text/plain"}),
                          (b"{not json", JSON),
                          (b"[1, 2]", JSON),
                          (b'{"query": "SELECT 1", "context": [1]}', JSON)):
        assert query_affinity("POST", "/druid/v2/sql", body, headers) == (None, body)


def test_native_queries_follow_their_query_id():
    body = json.dumps({"queryType": "timeBoundary", "dataSource": "wiki", "context": {"queryId": "n-1"}}).encode()
    assert query_affinity("POST", "/druid/v2", body, JSON) == ("n-1", body)
    assert query_affinity("POST", "/druid/v2/", b'{"queryType": "timeBoundary"}', JSON)[0] is None


@pytest.fixture
def discovery():
    d = LocalDiscovery(reap_interval_s=None)
    yield d
    d.close()


def _announce(discovery, node_id: str, port: int) -> None:
    info = {"id": node_id, "role": "broker", "host": "10.0.0.1", "http_port": port}
    discovery.put(node_key("broker", node_id), json.dumps(info).encode())


def test_one_query_id_reaches_one_broker_and_ids_spread_over_brokers(discovery):
    for i in range(3):
        _announce(discovery, f"b{i}", 9000 + i)
    upstreams = Upstreams(discovery)
    ids = [f"console-{i}" for i in range(60)]
    chosen = {q: upstreams.address(BROKER, q) for q in ids}
    assert all(upstreams.address(BROKER, q) == chosen[q] for q in ids for _ in range(3))
    assert {port for _, port in chosen.values()} == {9000, 9001, 9002}
    # A fourth broker takes some ids; the others stay where they were (their statements are there).
    _announce(discovery, "b3", 9003)
    moved = {q for q in ids if upstreams.address(BROKER, q) != chosen[q]}
    assert moved and all(upstreams.address(BROKER, q)[1] == 9003 for q in moved)
