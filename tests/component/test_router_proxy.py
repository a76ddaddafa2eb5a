"""The router (services/router/) over a real in-process cluster with authentication on: the
console's files at /, Druid's API forwarded to the broker and the leading coordinator with the
caller's credentials (grants apply as on the broker itself), streamed SQL results, query cancel
by id through the router, and cross-site writes refused."""

from __future__ import annotations

import threading

import pytest
import requests

from common.demo import table as demo_table
from tests.harness.auth_cluster import ADMIN, READER, auth_cluster
from tests.harness.busy_historical import BusyHistorical
from tests.harness.waiting import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("router")
    c = auth_cluster(directory)
    try:
        c.wiki = demo_table(2_000, days=1)
        c.wait_queryable("wiki", len(c.publish(c.wiki, "wiki")))
        c.wait_queryable("secret", len(c.publish(demo_table(300, days=1), "secret")))
        c.start_router()
        c.url = f"http://127.0.0.1:{c.router.http.port}"
        yield c
    finally:
        c.stop()


def test_console_files_served_with_a_strict_policy(cluster):
    page = requests.get(cluster.url + "/", timeout=30)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert '<script src="console.js"' in page.text
    assert requests.get(cluster.url + "/console.js", timeout=30).headers["Content-Type"].startswith("text/javascript")
    assert requests.get(cluster.url + "/../services/router/main.py", timeout=30).status_code == 404
    assert requests.get(cluster.url + "/status/ready", timeout=30).json()["role"] == "router"
    assert b"process_resident_memory_bytes" in requests.get(cluster.url + "/metrics", timeout=30).content


def test_sql_through_the_router_applies_the_callers_grants(cluster):
    r = requests.post(cluster.url + "/druid/v2/sql", auth=ADMIN, timeout=60,
                      json={"query": "SELECT COUNT(*) AS n FROM wiki"})
    assert r.status_code == 200 and r.json() == [{"n": cluster.wiki.num_rows}]
    assert requests.post(cluster.url + "/druid/v2/sql", timeout=60, json={"query": "SELECT 1"}).status_code == 401
    denied = requests.post(cluster.url + "/druid/v2/sql", auth=READER, timeout=60,
                           json={"query": "SELECT COUNT(*) FROM secret"})
    assert denied.status_code == 403
    # The browser must not pop its own login dialog over the console's.
    console = requests.get(cluster.url + "/druid/v2/datasources", timeout=30, headers={"X-Requested-With": "x"})
    assert console.status_code == 401 and "WWW-Authenticate" not in console.headers
    assert "WWW-Authenticate" in requests.get(cluster.url + "/druid/v2/datasources", timeout=30).headers
    assert requests.get(cluster.url + "/druid/v2/datasources", auth=READER, timeout=30).json() == ["wiki"]
    tables = requests.post(cluster.url + "/druid/v2/sql", auth=READER, timeout=60, json={
        "query": "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'"}).json()
    assert [t["TABLE_NAME"] for t in tables] == ["wiki"]


def test_large_result_streams_through_whole(cluster):
    r = requests.post(cluster.url + "/druid/v2/sql", auth=ADMIN, timeout=60, stream=True,
                      json={"query": "SELECT __time, page, added FROM wiki", "resultFormat": "arrayLines"})
    assert r.status_code == 200 and r.headers.get("Transfer-Encoding") == "chunked"
    lines = [line for line in r.iter_lines() if line]
    assert len(lines) == cluster.wiki.num_rows


def test_coordinator_routes_and_proxy_paths(cluster):
    direct = requests.get(f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/coordinator/v1/datasources",
                          auth=ADMIN, timeout=30).json()
    assert requests.get(cluster.url + "/druid/coordinator/v1/datasources", auth=ADMIN, timeout=30).json() == direct
    assert requests.get(cluster.url + "/proxy/coordinator/druid/coordinator/v1/datasources", auth=READER,
                        timeout=30).json() == ["wiki"]
    simple = requests.get(cluster.url + "/druid/coordinator/v1/datasources?simple", auth=ADMIN, timeout=30).json()
    assert {d["name"] for d in simple} == {"wiki", "secret"}
    rules = requests.get(cluster.url + "/druid/coordinator/v1/rules", auth=ADMIN, timeout=30)
    assert rules.status_code == 200 and "_default" in rules.json()
    tasks = requests.get(cluster.url + "/proxy/overlord/druid/indexer/v1/tasks", auth=ADMIN, timeout=30)
    assert tasks.status_code == 200 and isinstance(tasks.json(), list)
    # Supervisors live on the coordinator, not with the broker's task API: the router sends them there.
    direct = requests.get(f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/indexer/v1/supervisor",
                          auth=ADMIN, timeout=30)
    supervisors = requests.get(cluster.url + "/druid/indexer/v1/supervisor", auth=ADMIN, timeout=30)
    assert direct.status_code == supervisors.status_code == 200 and supervisors.json() == direct.json() == []


def test_cross_site_writes_refused_same_origin_pass(cluster):
    rule = [{"type": "loadForever", "tieredReplicants": {"_default_tier": 1}}]
    evil = requests.post(cluster.url + "/druid/coordinator/v1/rules/wiki", auth=ADMIN, json=rule, timeout=30,
                         headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403 and "evil.example" in evil.json()["error"]
    ok = requests.post(cluster.url + "/druid/coordinator/v1/rules/wiki", auth=ADMIN, json=rule, timeout=30,
                       headers={"Origin": cluster.url, "X-Requested-With": "XMLHttpRequest"})
    assert ok.status_code == 200, ok.text
    [stored] = requests.get(cluster.url + "/druid/coordinator/v1/rules/wiki", auth=ADMIN, timeout=30).json()
    assert (stored["type"], stored["tieredReplicants"]) == ("loadForever", {"_default_tier": 1})


def test_cancel_through_the_router(cluster):
    outcome = {}

    def run():
        outcome["r"] = requests.post(cluster.url + "/druid/v2/sql", auth=ADMIN, timeout=60, json={
            "query": "SELECT page, COUNT(*) AS n FROM wiki GROUP BY 1", "context": {"sqlQueryId": "via-router"}})

    with BusyHistorical(cluster.historicals[0]):
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        wait_until(lambda: requests.delete(cluster.url + "/druid/v2/sql/via-router", auth=ADMIN,
                                           timeout=30).status_code == 202, 30, "the query to be cancelled")
        thread.join(30)
        assert not thread.is_alive()
    assert outcome["r"].status_code == 500 and outcome["r"].json()["error"] == "Query cancelled"


def test_a_statements_pages_and_cancel_reach_its_broker_among_several(cluster):
    """With two brokers behind the router, every request about a statement (its state, its pages,
    its deletion) reaches the broker holding it, by the statement's id; a statement submitted
    without an id is given one by the router. Taken in turn, half of them would be 404s."""
    from services.broker.main import BrokerProcess

    second = BrokerProcess(cluster._config("broker", {"node": {"id": "broker-2"}})).start()
    try:
        direct = f"http://127.0.0.1:{second.http.port}/druid/v2/sql"
        wait_until(lambda: requests.post(direct, auth=ADMIN, timeout=30, json={
            "query": "SELECT COUNT(*) AS n FROM wiki"}).json() == [{"n": cluster.wiki.num_rows}], 60,
            "the second broker to serve wiki")
        brokers = (cluster.broker.druid_http.statements, second.druid_http.statements)
        query = "SELECT channel, COUNT(*) AS n FROM wiki GROUP BY channel ORDER BY channel"
        expected = requests.post(cluster.url + "/druid/v2/sql", auth=ADMIN, timeout=60,
                                 json={"query": query, "resultFormat": "array"}).json()
        ids = []
        for i in range(12):
            context = {"rowsPerPage": 5} if i % 3 == 0 else {"rowsPerPage": 5, "sqlQueryId": f"spread-{i}"}
            r = requests.post(cluster.url + "/druid/v2/sql/statements", auth=ADMIN, timeout=60,
                              json={"query": query, "context": context})
            assert r.status_code == 200, r.text
            ids.append(r.json()["queryId"])
        assert all(any(q in b._statements for b in brokers) for q in ids)
        assert all(any(q in b._statements for q in ids) for b in brokers), "the ids all hashed to one broker"
        for query_id in ids:
            url = f"{cluster.url}/druid/v2/sql/statements/{query_id}"
            done = wait_until(lambda: (s := requests.get(url, auth=ADMIN, timeout=30).json())["state"] != "RUNNING"
                              and s, 60, "the statement")
            assert done["state"] == "SUCCESS", done
            rows = []
            for page in done["result"]["pages"]:
                got = requests.get(url + "/results", auth=ADMIN, timeout=30,
                                   params={"page": page["id"], "resultFormat": "array"})
                assert got.status_code == 200, got.text
                rows += got.json()
            assert rows == expected
            assert requests.delete(url, auth=ADMIN, timeout=30, headers={"X-Requested-With": "x"}).status_code == 200
        assert not any(q in b._statements for b in brokers for q in ids)
    finally:
        second.stop()
