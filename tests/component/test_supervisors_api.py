"""Druid's supervisor API on a real coordinator's HTTP port, and sys.supervisors through the broker
(in-process cluster; no Kafka broker is needed to create, list and suspend supervisors)."""

from __future__ import annotations

import json

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


def test_strata_supervisor_cli(cluster, capsys, tmp_path):
    from services.cli.main import main

    url = ["--coordinator-http", f"http://127.0.0.1:{cluster.coordinator.http.port}"]
    spec = {"type": "kafka", "spec": {**SPEC["spec"], "dataSchema": {"dataSource": "cli_wiki",
                                                                     "timestampSpec": {"column": "ts"}}}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["supervisor", *url, "create", "--spec", str(path)]) == 0
    assert "supervisor cli_wiki created or updated" in capsys.readouterr().out
    assert main(["supervisor", *url, "list"]) == 0
    assert "cli_wiki" in json.loads(capsys.readouterr().out)
    assert main(["supervisor", *url, "list", "--state"]) == 0
    [listed] = [s for s in json.loads(capsys.readouterr().out) if s["id"] == "cli_wiki"]
    assert listed["healthy"] is True and listed["state"] in ("PENDING", "RUNNING")
    assert main(["supervisor", *url, "get", "cli_wiki"]) == 0
    assert json.loads(capsys.readouterr().out) == spec
    wait_until(lambda: [t.type for t in cluster.client.tasks("cli_wiki")] == ["kafka"], timeout_s=30,
               what="the supervisor's task")
    assert main(["supervisor", *url, "status", "cli_wiki"]) == 0
    payload = json.loads(capsys.readouterr().out)["payload"]
    assert payload["stream"] == "edits" and payload["healthy"] is True and payload["recentErrors"] == []
    assert main(["supervisor", *url, "stats", "cli_wiki"]) == 0
    assert list(json.loads(capsys.readouterr().out)["0"]) == [t.id for t in cluster.client.tasks("cli_wiki")]
    assert main(["supervisor", *url, "health", "cli_wiki"]) == 0
    assert capsys.readouterr().out.strip() == "healthy"
    assert main(["supervisor", *url, "suspend", "cli_wiki"]) == 0
    assert "cli_wiki: suspend done" in capsys.readouterr().out
    assert main(["supervisor", *url, "reset", "cli_wiki", "--offsets", '{"0": 5, "3": 9}']) == 0
    assert main(["supervisor", *url, "status", "cli_wiki"]) == 0
    payload = json.loads(capsys.readouterr().out.split("\n", 1)[1])["payload"]
    assert payload["state"] == "SUSPENDED" and payload["committedOffsets"] == {"0": 5, "3": 9}
    assert main(["supervisor", *url, "reset", "cli_wiki"]) == 0
    assert "committed offsets forgotten" in capsys.readouterr().out
    assert cluster.coordinator.supervisors.offsets("cli_wiki") is None
    assert main(["supervisor", *url, "resume", "cli_wiki"]) == 0
    assert main(["supervisor", *url, "terminate", "cli_wiki"]) == 0
    capsys.readouterr()
    assert main(["supervisor", *url, "list"]) == 0
    assert "cli_wiki" not in json.loads(capsys.readouterr().out)
    # Mistakes: the spec's key is named before the round trip; an unknown id is the server's 404.
    assert main(["supervisor", *url, "create", "--spec", json.dumps(
        {**spec, "spec": {**spec["spec"], "ioConfig": {"topik": "x"}}})]) == 2
    assert "unknown key 'topik' in spec.ioConfig" in capsys.readouterr().err
    assert main(["supervisor", *url, "status", "nope"]) == 2
    assert "HTTP 404: no supervisor 'nope'" in capsys.readouterr().err
    assert main(["supervisor", *url, "reset", "cli_wiki", "--offsets", "[1]"]) == 2
    assert "--offsets must be a JSON object" in capsys.readouterr().err
