"""Ingestion tasks that fail for reasons outside the statement, with a real task process and a
real Spark driver: a driver JVM that cannot start (retried, then failed with what the JVM said),
and a task process killed in the middle of its build (FAILED within 5 s with its exit status,
nothing published, every uploaded file deleted by the cleanup duty)."""

from __future__ import annotations

import argparse
import json
import os
import signal

import pytest

from services.cli.sql_command import task_command
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.harness.waiting import wait_until
from tests.integration.ingestion.sql_tasks import FINAL, rows, run

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))
WIKITICKER = os.path.join(DATA, "wikiticker-2015-09-12-sampled.json.gz")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("task-faults")), historicals=1)
    yield c
    c.stop()


def test_a_driver_jvm_that_cannot_start_is_retried_then_fails_with_the_jvm_reason(cluster, monkeypatch, capsys):
    # The task process inherits the coordinator's environment: an impossible heap size makes
    # every start of the driver JVM fail, as a machine out of memory would.
    monkeypatch.setenv("STRATA_SPARK_DRIVER_MEMORY", "12qq")
    task = run(cluster, """INSERT INTO nojvm SELECT TIME_PARSE(t) AS __time, x
                           FROM TABLE(inline(data => ARRAY['2020-01-01T00:00:00Z,a'], format => 'csv'))
                                EXTEND (t VARCHAR, x VARCHAR)
                           PARTITIONED BY DAY""", timeout_s=180)
    assert task.state == "FAILED"
    assert "did not start after 3 attempts" in task.error
    assert "Invalid maximum heap size: -Xmx12qq" in task.error  # the JVM's words, not only pyspark's
    with open(cluster.coordinator.task_runner.log_path(task.id)) as f:
        log = f.read()
    # The JVM's stderr is in the task log (once per attempt whose JVM got to speak: under a full
    # run's load one attempt ended silently, and the error then names what an earlier one said).
    assert 1 <= log.count("Invalid maximum heap size") <= 3
    assert log.count("Spark driver did not start (attempt") == 2
    errors = rows(cluster, f"SELECT error FROM sys.tasks WHERE task_id = '{task.id}'")
    assert "Invalid maximum heap size" in errors[0]["error"]
    task_command(cluster.client, argparse.Namespace(action="report", id=task.id))
    assert "Invalid maximum heap size" in capsys.readouterr().out
    assert rows(cluster, "SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'nojvm'") == [{"c": 0}]


def test_a_task_killed_mid_build_publishes_nothing_and_leaves_no_file(cluster):
    storage = cluster.storage()
    runner = cluster.coordinator.task_runner
    sql = f"""INSERT INTO killed SELECT TIME_PARSE("time") AS __time, channel, page, "user", added
              FROM TABLE(localfiles(files => ARRAY['{WIKITICKER}'], format => 'json'))
                   EXTEND ("time" VARCHAR, channel VARCHAR, page VARCHAR, "user" VARCHAR, added BIGINT)
              PARTITIONED BY HOUR CLUSTERED BY channel"""
    table, _ = cluster.client.sql(sql, context={"rowsPerSegment": 500})  # many segments: a long build
    task_id = table.column("task_id")[0].as_py()
    # Kill the task process (as the kernel's OOM killer would) as soon as its first segment file
    # is in deep storage: the build is under way, the publish has not happened.
    wait_until(lambda: storage.list("killed/_ingest", partial=True), 240, "a first uploaded file", poll_s=0.01)
    pid = runner.pid(task_id)
    assert pid is not None and cluster.client.task(task_id).state == "RUNNING"
    os.kill(pid, signal.SIGKILL)
    # The runner saw its child's exit status (the error quotes it), so no other timeout settled it;
    # how soon is not asserted: on a loaded machine the runner's loop only runs later.
    task = wait_until(lambda: (t := cluster.client.task(task_id)).state in FINAL and t, 60, "FAILED after the kill")
    assert task.state == "FAILED", task.error
    assert "killed by SIGKILL (exit status -9)" in task.error and "nothing was published" in task.error
    # Nothing published, and the cleanup duty deletes every file it uploaded.
    assert rows(cluster, "SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'killed'") == [{"c": 0}]
    wait_until(lambda: not runner.pending_cleanup() and not storage.list("killed/_ingest", partial=True), 60,
          "the cleanup duty deleting the killed task's uploads")
    assert cluster.coordinator.store.list("killed", include_unused=True) == []
    # The last progress the task sent stays as its report: it was killed while building.
    assert json.loads(task.report_json or "{}").get("phase") == "building"
