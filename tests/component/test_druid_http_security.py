"""Druid's HTTP API with authentication on: the users and grants Flight SQL has (Basic auth, 401
without credentials, 403 in Druid's JSON for what a user may not read), listings filtered by
grants, and a user who cannot cancel another user's query (404, as for an unknown id)."""

from __future__ import annotations

import threading

import pytest
import requests
from pydruid.db import connect

from common.demo import table as demo_table
from tests.harness.auth_cluster import ADMIN, READER, auth_cluster
from tests.harness.busy_historical import BusyHistorical
from tests.harness.waiting import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("druidhttp-auth")
    c = auth_cluster(directory)
    try:
        wiki = demo_table(1_000, days=1)
        c.wait_queryable("wiki", len(c.publish(wiki, "wiki")))
        c.wait_queryable("secret", len(c.publish(demo_table(500, days=1), "secret")))
        c.url = f"http://127.0.0.1:{c.broker.http.port}"
        yield c
    finally:
        c.stop()


def post(cluster, query: str, auth=None, **extra) -> requests.Response:
    return requests.post(cluster.url + "/druid/v2/sql", json={"query": query, **extra}, auth=auth, timeout=60)


def test_without_credentials_401(cluster):
    for r in (post(cluster, "SELECT 1"), requests.get(cluster.url + "/status", timeout=60),
              requests.post(cluster.url + "/druid/v2", json={"queryType": "scan"}, timeout=60)):
        assert r.status_code == 401 and isinstance(r.json()["error"], str)
        assert r.headers["WWW-Authenticate"].startswith("Basic")
    assert post(cluster, "SELECT 1", auth=("reader", "wrong")).status_code == 401


def test_a_reader_reads_what_it_may_and_gets_403_otherwise(cluster):
    cur = connect(host="127.0.0.1", port=cluster.broker.http.port, path="/druid/v2/sql/", user=READER[0],
                  password=READER[1]).cursor()
    cur.execute("SELECT COUNT(*) AS n FROM wiki")
    assert [tuple(r) for r in cur.fetchall()] == [(1_000,)]
    denied = post(cluster, "SELECT COUNT(*) AS n FROM secret", auth=READER)
    assert denied.status_code == 403
    body = denied.json()
    assert (body["error"], body["category"], body["errorCode"]) == ("druidException", "FORBIDDEN", "forbidden")
    assert "secret" in body["errorMessage"]
    native = requests.post(cluster.url + "/druid/v2", auth=READER, timeout=60, json={
        "queryType": "timeseries", "dataSource": "secret", "intervals": ["2015-09-12/2015-09-13"],
        "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]})
    assert native.status_code == 403 and native.json()["category"] == "FORBIDDEN"
    assert requests.get(cluster.url + "/druid/v2/datasources", auth=READER, timeout=60).json() == ["wiki"]
    assert requests.get(cluster.url + "/druid/v2/datasources", auth=ADMIN, timeout=60).json() == ["secret", "wiki"]
    assert requests.get(cluster.url + "/druid/v2/datasources/secret", auth=READER, timeout=60).status_code == 404


def _running(cluster, query_id: str) -> bool:
    r = post(cluster, f"SELECT status FROM sys.queries WHERE query_id = '{query_id}'", auth=ADMIN)
    return any(row["status"] == "running" for row in r.json())


def test_only_the_owner_or_the_admin_cancels(cluster):
    outcome = {}

    def run():
        outcome["r"] = post(cluster, "SELECT page, COUNT(*) AS n FROM wiki GROUP BY 1", auth=ADMIN,
                            context={"sqlQueryId": "admins-query"})

    with BusyHistorical(cluster.historicals[0]):
        t = threading.Thread(target=run, daemon=True)
        t.start()
        wait_until(lambda: _running(cluster, "admins-query"), 30, "the admin's query to run")
        wrong = requests.delete(cluster.url + "/druid/v2/sql/admins-query", auth=("reader", "wrong"), timeout=60)
        assert wrong.status_code == 401
        other = requests.delete(cluster.url + "/druid/v2/sql/admins-query", auth=READER, timeout=60)
        unknown = requests.delete(cluster.url + "/druid/v2/sql/no-such-query", auth=READER, timeout=60)
        assert other.status_code == unknown.status_code == 404  # the same answer: ids cannot be probed
        assert _running(cluster, "admins-query")
        own = requests.delete(cluster.url + "/druid/v2/sql/admins-query", auth=ADMIN, timeout=60)
        assert own.status_code == 202
        t.join(30)
        assert not t.is_alive()
    assert outcome["r"].status_code == 500 and outcome["r"].json()["error"] == "Query cancelled"
    assert requests.delete(cluster.url + "/druid/v2/sql/admins-query", auth=ADMIN, timeout=60).status_code == 404


def test_coordinator_listings_follow_grants(cluster):
    base = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/coordinator/v1"
    assert requests.get(base + "/datasources", auth=READER, timeout=60).json() == ["wiki"]
    assert requests.get(base + "/metadata/datasources", auth=ADMIN, timeout=60).json() == ["secret", "wiki"]
    assert requests.get(base + "/datasources/secret", auth=READER, timeout=60).status_code == 404
    assert requests.get(base + "/datasources", timeout=60).status_code == 401
