"""Warm task drivers: the leader coordinator keeps a long-lived driver process (one JVM and
SparkSession) and hands it ingestion tasks one at a time. Tasks after the first reuse it; a
task's bad input fails only that task; a cancel stops its Spark jobs, ends it CANCELED and
replaces the driver; a driver killed mid-task fails that task (nothing published, uploads
deleted) and a new driver takes the next task."""

from __future__ import annotations

import os
import signal

import pytest

from tests.harness.embedded_cluster import EmbeddedCluster
from tests.harness.waiting import wait_until
from tests.integration.ingestion.sql_tasks import FINAL, rows, run

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))
WIKITICKER = os.path.join(DATA, "wikiticker-2015-09-12-sampled.json.gz")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("warm")), historicals=1,
                        coordinator={"warm_task_drivers": 1})
    yield c
    c.stop()
    assert c.coordinator.task_runner.drivers() == []  # stopping the coordinator stops its drivers


def _one_row(table: str, value: str) -> str:
    return f"""INSERT INTO {table} SELECT TIME_PARSE(t) AS __time, x
               FROM TABLE(inline(data => ARRAY['2020-01-01T00:00:00Z,{value}'], format => 'csv'))
                    EXTEND (t VARCHAR, x VARCHAR)
               PARTITIONED BY DAY"""


def _driver(cluster) -> dict:
    return wait_until(lambda: next(iter(cluster.coordinator.task_runner.drivers()), None), 30, "a warm driver")


def _ran_in(cluster, task_id: str) -> str:
    with open(cluster.coordinator.task_runner.log_path(task_id)) as f:
        return f.read()


def _wiki_insert(table: str) -> str:
    return f"""INSERT INTO {table} SELECT TIME_PARSE("time") AS __time, channel, page, "user", added
               FROM TABLE(localfiles(files => ARRAY['{WIKITICKER}'], format => 'json'))
                    EXTEND ("time" VARCHAR, channel VARCHAR, page VARCHAR, "user" VARCHAR, added BIGINT)
               PARTITIONED BY HOUR CLUSTERED BY channel"""


def test_tasks_reuse_one_warm_driver_and_bad_input_fails_only_its_task(cluster):
    driver = _driver(cluster)
    first = run(cluster, _one_row("warm", "a"), timeout_s=180)
    assert first.state == "SUCCESS", first.error
    assert f"started in warm driver {driver['pid']}" in _ran_in(cluster, first.id)

    bad = run(cluster, """INSERT INTO warm SELECT TIME_PARSE(t) AS __time, x
                          FROM TABLE(inline(data => ARRAY['2020-01-01T00:00:00Z,a,notanumber'], format => 'csv'))
                               EXTEND (t VARCHAR, x VARCHAR, n BIGINT)
                          PARTITIONED BY DAY""", timeout_s=60)
    assert bad.state == "FAILED" and "maxParseExceptions" in bad.error

    second = run(cluster, _one_row("warm", "b"), timeout_s=60)
    assert second.state == "SUCCESS", second.error
    assert f"started in warm driver {driver['pid']}" in _ran_in(cluster, second.id)  # the same process
    assert [d["pid"] for d in cluster.coordinator.task_runner.drivers()] == [driver["pid"]]
    cluster.wait_queryable("warm", 2)
    assert rows(cluster, "SELECT x FROM warm ORDER BY x") == [{"x": "a"}, {"x": "b"}]


def test_cancel_in_a_warm_driver_stops_the_job_and_replaces_the_driver(cluster):
    storage = cluster.storage()
    driver = _driver(cluster)
    table, _ = cluster.client.sql(_wiki_insert("cancelled"), context={"rowsPerSegment": 500})
    task_id = table.column("task_id")[0].as_py()
    wait_until(lambda: storage.list("cancelled/_ingest", partial=True), 180, "a first uploaded file", poll_s=0.01)
    assert cluster.coordinator.task_runner.pid(task_id) == driver["pid"]
    cluster.client.cancel_task(task_id)
    task = wait_until(lambda: (t := cluster.client.task(task_id)).state in FINAL and t, 60, "the task ending")
    assert task.state == "CANCELED", task.error
    assert rows(cluster, "SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'cancelled'") == [{"c": 0}]
    wait_until(lambda: not storage.list("cancelled/_ingest", partial=True), 60, "its uploads deleted")
    # The cancelled driver retires; a new one runs the next task.
    wait_until(lambda: [d for d in cluster.coordinator.task_runner.drivers() if d["pid"] != driver["pid"]], 30,
          "a new warm driver")
    after = run(cluster, _one_row("after_cancel", "c"), timeout_s=180)
    assert after.state == "SUCCESS", after.error
    assert driver["pid"] not in [d["pid"] for d in cluster.coordinator.task_runner.drivers()]


def test_a_warm_driver_killed_mid_task_fails_the_task_and_is_replaced(cluster):
    storage = cluster.storage()
    runner = cluster.coordinator.task_runner
    driver = _driver(cluster)
    table, _ = cluster.client.sql(_wiki_insert("crashed"), context={"rowsPerSegment": 500})
    task_id = table.column("task_id")[0].as_py()
    wait_until(lambda: storage.list("crashed/_ingest", partial=True), 180, "a first uploaded file", poll_s=0.01)
    assert runner.pid(task_id) == driver["pid"]
    os.kill(driver["pid"], signal.SIGKILL)
    task = wait_until(lambda: (t := cluster.client.task(task_id)).state in FINAL and t, 10, "FAILED after the kill")
    assert task.state == "FAILED", task.error
    assert "killed by SIGKILL" in task.error and "nothing was published" in task.error
    assert f"warm driver {driver['name']}" in task.error
    assert rows(cluster, "SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'crashed'") == [{"c": 0}]
    wait_until(lambda: not runner.pending_cleanup() and not storage.list("crashed/_ingest", partial=True), 60,
          "the cleanup duty deleting the killed task's uploads")
    after = run(cluster, _one_row("after_crash", "d"), timeout_s=180)
    assert after.state == "SUCCESS", after.error
    assert driver["pid"] not in [d["pid"] for d in runner.drivers()]
