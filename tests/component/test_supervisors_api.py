"""Druid's supervisor API on a real coordinator's HTTP port, and sys.supervisors through the broker
(in-process cluster; no Kafka broker is needed to create, list and suspend supervisors)."""

from __future__ import annotations

import pytest
import requests

from tests.harness.embedded_cluster import EmbeddedCluster
from tests.harness.waiting import wait_until

SPEC = {"type": "kafka", "spec": {
    "dataSchema": {"dataSource": "stream_wiki", "timestampSpec": {"column": "ts"}},
    "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "127.0.0.1:9"}}}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("supervisors")), historicals=0)
    try:
        c.coordinator.task_runner.max_running = 0
        c.coordinator_url = f"http://127.0.0.1:{c.coordinator.http.port}/druid/indexer/v1/supervisor"
        c.sql_url = f"http://127.0.0.1:{c.broker.http.port}/druid/v2/sql"
        yield c
    finally:
        c.stop()


def sql(cluster, query: str) -> list[dict]:
    response = requests.post(cluster.sql_url, json={"query": query}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_supervisor_lifecycle_over_http_and_sys_supervisors(cluster):
    url = cluster.coordinator_url
    response = requests.post(url, json=SPEC, timeout=30)
    assert response.status_code == 200 and response.json() == {"id": "stream_wiki"}
    assert requests.get(url, timeout=30).json() == ["stream_wiki"]
    # The leader's duty gives the supervisor its task (it stays PENDING here: no task may run).
    wait_until(lambda: [t.type for t in cluster.client.tasks("stream_wiki")] == ["kafka"], timeout_s=30,
               what="the supervisor's task")
    status = requests.get(f"{url}/stream_wiki/status", timeout=30).json()
    assert status["payload"]["stream"] == "edits" and status["payload"]["state"] == "RUNNING"
    assert [t["id"] for t in status["payload"]["activeTasks"]] == [t.id for t in cluster.client.tasks("stream_wiki")]
    got = sql(cluster, "SELECT supervisor_id, state, healthy, type, source, suspended, spec FROM sys.supervisors")
    assert [{k: v for k, v in r.items() if k != "spec"} for r in got] == [
        {"supervisor_id": "stream_wiki", "state": "RUNNING", "healthy": 1, "type": "kafka", "source": "edits",
         "suspended": 0}]
    assert requests.post(f"{url}/stream_wiki/suspend", timeout=30).status_code == 200
    assert sql(cluster, "SELECT state, suspended FROM sys.supervisors") == [{"state": "SUSPENDED", "suspended": 1}]
    wait_until(lambda: [t.state for t in cluster.client.tasks("stream_wiki")] == ["CANCELED"], timeout_s=30,
               what="the suspended supervisor's task cancelled")
    bad = requests.post(url, json={**SPEC, "spec": {**SPEC["spec"], "tuningConfig": {"maxRowz": 1}}}, timeout=30)
    assert bad.status_code == 400 and "unknown key 'maxRowz' in spec.tuningConfig" in bad.json()["error"]
    assert requests.post(f"{url}/stream_wiki/terminate", timeout=30).json() == {"id": "stream_wiki"}
    assert sql(cluster, "SELECT * FROM sys.supervisors") == []
