"""Kafka supervisors under faults, end to end: a real Kafka-protocol broker (Tansu), a cluster whose
coordinator runs the supervisor tasks in its warm task drivers (each a process of its own with its
Spark driver JVM, as in a deployment) doing real Spark micro-batches, and queries through the
broker. Each test ends with the row count and a checksum of the rows (every column)
equal to what was produced, exactly:

- taskCount 2 x replicas 2 over three partitions: four tasks, each pair racing to publish the same
  partitions; the compare-and-swap of the offsets lets exactly one publish of each range through;
- two supervisors into two datasources, across a coordinator restart (supervisor state and offsets
  come back from the metadata DB, the HTTP port changes, the gRPC port is kept);
- a task SIGKILLed after its publish committed but before it could report (the kill happens inside
  the coordinator's publish call, after the transaction);
- the Kafka broker restarted while a task reads (Tansu on S3 storage, which keeps the topic).

The task SIGKILLed mid-stream is test_kafka_supervisor.py's."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import requests

from services.coordinator import supervisor_store
from tests.fixtures.kafka_broker import kafka_broker, kafka_broker_on_s3  # noqa: F401
from tests.fixtures.s3_server import s3_server  # noqa: F401
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import FINAL, rows

pytestmark = pytest.mark.integration
DEADLINE_S = 300.0  # a loaded 2-core machine: the first tasks wait for their drivers' JVMs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Four task slots: taskCount 2 x replicas 2 run at once, two of them in the warm drivers and
    # two in processes of their own (four warm drivers starting at once, each with the tiered JIT
    # of a long-lived JVM, starve a loaded 2-core machine). The module's later tasks (a superseded
    # replica's successor, the supervisors' tasks, the task after a kill) find a driver ready.
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("kafka-faults")), historicals=1,
                        coordinator={"max_running_tasks": 4, "warm_task_drivers": 2})
    c.supervisor_url = f"http://127.0.0.1:{c.coordinator.http.port}/druid/indexer/v1/supervisor"
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(autouse=True)
def no_supervisor_left(cluster):
    """A test that failed before terminating its supervisors does not leave their tasks holding
    the module's drivers and task slots for the next test."""
    yield
    for datasource in requests.get(cluster.supervisor_url, timeout=30).json():
        terminate(cluster, datasource)


def events(first: int, n: int) -> list[dict]:
    # NULL pages, fractions next to integers, three days and every hour.
    return [{"ts": f"2024-05-0{1 + i % 3}T{i % 24:02d}:{i % 60:02d}:00Z", "id": i,
             "page": None if i % 7 == 0 else f"p{i % 5}", "added": i / 4 if i % 2 else -float(i)}
            for i in range(first, first + n)]


CHECKSUM_SQL = ("SELECT COUNT(*) AS c, COUNT(DISTINCT id) AS d, SUM(id) AS s, SUM(added) AS a, COUNT(page) AS p, "
                "SUM(CASE WHEN page = 'p3' THEN id ELSE 0 END) AS p3, "
                "SUM(TIMESTAMP_TO_MILLIS(__time) / 60000) AS m FROM {ds}")


def checksum(produced: list[dict]) -> dict:
    """What CHECKSUM_SQL answers for exactly these rows."""
    from datetime import datetime

    def minute(e):
        return int(datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).timestamp()) // 60
    return {"c": len(produced), "d": len({e["id"] for e in produced}), "s": sum(e["id"] for e in produced),
            "a": sum(e["added"] for e in produced), "p": sum(1 for e in produced if e["page"] is not None),
            "p3": sum(e["id"] for e in produced if e["page"] == "p3"), "m": sum(minute(e) for e in produced)}


def wait_exact(c, datasource: str, produced: list[dict]) -> None:
    """Until the datasource holds exactly ``produced`` (count and checksum); more rows than
    produced fails at once: a duplicate never heals."""
    want = checksum(produced)
    deadline = time.monotonic() + DEADLINE_S
    got = None
    while time.monotonic() < deadline:
        try:
            [got] = rows(c, CHECKSUM_SQL.format(ds=datasource))
        except Exception as exc:  # noqa: BLE001 - not served yet
            got = exc
        else:
            if got == want:
                return
            assert got["c"] <= want["c"], f"{datasource}: more rows than produced: {got}, want {want}"
        time.sleep(0.5)
    status = requests.get(f"{c.supervisor_url}/{datasource}/status", timeout=30).json()
    tasks = [(t.id, t.state, t.error[:300]) for t in c.client.tasks(datasource)]
    raise AssertionError(f"{datasource}: wanted {want}, last got {got}; status {status}; tasks {tasks}")


def spec_for(datasource: str, topic: str, bootstrap: str, **io) -> dict:
    return {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": datasource, "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "id"},
                                                         {"type": "double", "name": "added"}]},
                       "granularitySpec": {"segmentGranularity": "DAY"}},
        "ioConfig": {"topic": topic, "consumerProperties": {"bootstrap.servers": bootstrap},
                     "useEarliestOffset": True, "taskDuration": "PT1H", **io},
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 100, "offsetFetchPeriod": "PT1S"}}}


def produce(broker, topic: str, produced: list[dict], partitions: int) -> None:
    broker.produce(topic, [(e["id"] % partitions, json.dumps(e).encode()) for e in produced])


def post(c, spec: dict) -> None:
    response = requests.post(c.supervisor_url, json=spec, timeout=30)
    assert response.status_code == 200, response.text


def terminate(c, datasource: str) -> None:
    assert requests.post(f"{c.supervisor_url}/{datasource}/terminate", timeout=30).status_code == 200
    deadline = time.monotonic() + DEADLINE_S
    while any(t.state not in FINAL for t in c.client.tasks(datasource)):
        assert time.monotonic() < deadline, f"the tasks of {datasource} did not end"
        time.sleep(0.2)


def active_tasks(c, datasource: str) -> list:
    return [t for t in c.client.tasks(datasource) if t.state not in FINAL]


def test_task_groups_with_replicas_publish_each_range_once(cluster, kafka_broker):  # noqa: F811
    kafka_broker.create_topic("groups", 3)
    produced = events(0, 600)
    produce(kafka_broker, "groups", produced, 3)
    post(cluster, spec_for("groups_wiki", "groups", kafka_broker.bootstrap, taskCount=2, replicas=2))
    # Two groups (partitions 0 and 2, and partition 1), two replicas each, all started at once.
    deadline = time.monotonic() + 60
    while len(active_tasks(cluster, "groups_wiki")) < 4:
        assert time.monotonic() < deadline, f"four tasks never ran: {cluster.client.tasks('groups_wiki')}"
        time.sleep(0.2)
    status = requests.get(f"{cluster.supervisor_url}/groups_wiki/status", timeout=30).json()["payload"]
    assert sorted((t["taskGroup"], tuple(t["partitions"])) for t in status["activeTasks"]) == [
        (0, (0, 2)), (0, (0, 2)), (1, (1,)), (1, (1,))]
    wait_exact(cluster, "groups_wiki", produced)
    more = events(600, 300)
    produce(kafka_broker, "groups", more, 3)
    produced += more
    wait_exact(cluster, "groups_wiki", produced)
    committed = requests.get(f"{cluster.supervisor_url}/groups_wiki/status", timeout=30).json()["payload"][
        "committedOffsets"]
    assert sum(committed.values()) == len(produced)
    # The four first tasks all started from nothing committed, so in each group the replica that
    # published second was refused: it ended superseded (SUCCESS, not FAILED) and was replaced.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        tasks = cluster.client.tasks("groups_wiki")
        assert not [t for t in tasks if t.state == "FAILED"], [(t.id, t.error[:300]) for t in tasks]
        reports = {t.id: json.loads(t.report_json or "{}") for t in tasks}
        assert all(reports[t.id].get("superseded") for t in tasks if t.state == "SUCCESS"), reports
        superseded = {json.loads(t.spec_json)["taskGroup"] for t in tasks if reports[t.id].get("superseded")}
        if superseded == {0, 1}:
            break
        assert time.monotonic() < deadline, f"a replica of each group should have lost a race: {reports}"
        time.sleep(0.5)
    wait_exact(cluster, "groups_wiki", produced)
    terminate(cluster, "groups_wiki")
    wait_exact(cluster, "groups_wiki", produced)


def test_two_supervisors_survive_a_coordinator_restart_each_into_its_datasource(cluster, kafka_broker):  # noqa: F811
    kafka_broker.create_topic("left", 2)
    kafka_broker.create_topic("right", 1)
    left, right = events(0, 200), events(10_000, 150)
    produce(kafka_broker, "left", left, 2)
    produce(kafka_broker, "right", right, 1)
    post(cluster, spec_for("left_wiki", "left", kafka_broker.bootstrap))
    post(cluster, spec_for("right_wiki", "right", kafka_broker.bootstrap))
    wait_exact(cluster, "left_wiki", left)
    wait_exact(cluster, "right_wiki", right)

    # The coordinator stops (its tasks are cancelled with it) and comes back on the same gRPC
    # port; events produced meanwhile wait in Kafka.
    port = cluster.coordinator.grpc.port
    cluster.reset_client()
    cluster.coordinator.stop()
    more_left, more_right = events(200, 120), events(10_150, 90)
    produce(kafka_broker, "left", more_left, 2)
    produce(kafka_broker, "right", more_right, 1)
    cluster.start_coordinator(grpc_port=port)
    cluster.supervisor_url = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/indexer/v1/supervisor"
    assert sorted(r["supervisor_id"] for r in rows(cluster, "SELECT supervisor_id FROM sys.supervisors")) == [
        "left_wiki", "right_wiki"]
    left += more_left
    right += more_right
    wait_exact(cluster, "left_wiki", left)
    wait_exact(cluster, "right_wiki", right)
    assert rows(cluster, "SELECT COUNT(*) AS c FROM left_wiki WHERE id >= 10000") == [{"c": 0}]
    terminate(cluster, "left_wiki")
    terminate(cluster, "right_wiki")


def test_task_killed_after_publish_before_it_reports(cluster, kafka_broker, monkeypatch):  # noqa: F811
    kafka_broker.create_topic("reportless", 2)
    produced = events(0, 300)
    produce(kafka_broker, "reportless", produced, 2)
    killed: list[str] = []
    original = supervisor_store.SupervisorStore.publish_with_offsets

    def publish_then_kill(self, records, datasource, topic, start, end, task_id=None):
        new = original(self, records, datasource, topic, start, end, task_id=task_id)
        # Committed: the task process dies before the answer reaches it, so it never reports.
        if datasource == "reportless_wiki" and not killed and records:
            pid = cluster.coordinator.task_runner.pid(task_id)
            assert pid is not None and pid in [d["pid"] for d in cluster.coordinator.task_runner.drivers()]
            os.killpg(pid, signal.SIGKILL)  # the warm driver running the task, its JVM with it
            killed.append(task_id)
        return new

    monkeypatch.setattr(supervisor_store.SupervisorStore, "publish_with_offsets", publish_then_kill)
    post(cluster, spec_for("reportless_wiki", "reportless", kafka_broker.bootstrap))
    deadline = time.monotonic() + DEADLINE_S
    while not killed:
        assert time.monotonic() < deadline, "no publish came"
        time.sleep(0.2)
    # Produced after the kill: the next task (from the committed offsets) loads it with the rest.
    more = events(300, 100)
    produce(kafka_broker, "reportless", more, 2)
    produced += more
    wait_exact(cluster, "reportless_wiki", produced)
    task = cluster.client.task(killed[0])
    assert task.state == "SUCCESS" and "after publishing" in task.error, (task.state, task.error)
    terminate(cluster, "reportless_wiki")


def test_kafka_broker_restart_while_a_task_reads(cluster, kafka_broker_on_s3):  # noqa: F811
    broker = kafka_broker_on_s3
    broker.create_topic("restarted", 2)
    produced = events(0, 200)
    produce(broker, "restarted", produced, 2)
    post(cluster, spec_for("restarted_wiki", "restarted", broker.bootstrap))
    wait_exact(cluster, "restarted_wiki", produced)
    [before] = active_tasks(cluster, "restarted_wiki")
    # Produced while the broker goes down and comes back: the producer retries until it is up.
    more = events(200, 300)
    failures: list = []

    def produce_across() -> None:
        try:
            produce(broker, "restarted", more, 2)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    producer = threading.Thread(target=produce_across)
    broker.stop()
    producer.start()
    broker.start()
    producer.join(timeout=120)
    assert not producer.is_alive() and not failures, f"producing across the restart failed: {failures}"
    produced += more
    wait_exact(cluster, "restarted_wiki", produced)
    later = events(500, 50)
    produce(broker, "restarted", later, 2)
    produced += later
    wait_exact(cluster, "restarted_wiki", produced)
    # The task that read through the restart is either still at it or was replaced (a read error
    # fails it and the next one starts from the committed offsets); either way nothing was lost
    # or doubled, and the supervisor still has a task reading.
    assert before.id in {t.id for t in cluster.client.tasks("restarted_wiki")}
    assert len(active_tasks(cluster, "restarted_wiki")) == 1
    terminate(cluster, "restarted_wiki")
