"""A leader change between two coordinators on a real etcd while an ingestion task runs, with real
processes (``strata up`` on etcd plus a second coordinator, a real task process and Spark driver):
the leader is killed in the middle of the task's build, the other coordinator takes over, and the
task either published exactly once (it finished first) or fails cleanly, publishing nothing, and a
retry publishes. The leader is killed (SIGKILL) under the first attempt and the next leader
stopped (SIGSTOP, then resumed: it must step down, and the task process still talking to it must
not publish) under the retry. No row is lost or counted twice; each failed attempt's process ends
and its uploads are deleted."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from services.cli.cluster_client import ClusterClient, ClusterError
from services.cli.local_cluster import LocalCluster, _alive
from services.deep_storage import deep_storage_from_url
from services.deep_storage.upload_folder import task_key_prefix
from tests.fixtures.etcd_server import start_etcd
from tests.harness.extra_coordinator import add_coordinator, coordinator_health, grpc_target
from tests.harness.waiting import wait_until

FINAL = ("SUCCESS", "FAILED", "CANCELED")
ROWS = 2_400
HOURS = 24


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("leader-change")
    etcd = start_etcd(str(base / "etcd"))
    c = LocalCluster(str(base / "cluster"))
    try:
        c.up(historicals=1, etcd=etcd.url, lease_ttl_s=2, duty_period_ms=200, ports="auto")
        c.coordinators = [c.node("coordinator"), add_coordinator(c, "coordinator-2")]
        c.storage = deep_storage_from_url(os.path.join(c.dir, "deep-storage"))
        yield c
    finally:
        try:
            if c.state() is not None:
                c.down()
        finally:
            etcd.stop()


def _leader(c, among: list[dict]) -> dict | None:
    """The one coordinator of ``among`` that says it leads, if exactly one does."""
    leading = [rec for rec in among if (coordinator_health(rec) or {}).get("leader")]
    return leading[0] if len(leading) == 1 else None


def _input(path) -> tuple[int, int]:
    """JSON lines over HOURS hours; returns (rows, sum of added)."""
    total = 0
    with open(path, "w") as f:
        for i in range(ROWS):
            added = (i * 37) % 1000 - 100
            total += added
            hour, minute = (i % HOURS), (i // HOURS) % 60
            f.write(json.dumps({"time": f"2016-05-01T{hour:02d}:{minute:02d}:{i % 60:02d}Z",
                                "channel": f"#c{i % 11}", "added": added}) + "\n")
    return ROWS, total


def _sql(path, datasource: str) -> str:
    return f"""INSERT INTO {datasource} SELECT TIME_PARSE("time") AS __time, channel, added
               FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
                    EXTEND ("time" VARCHAR, channel VARCHAR, added BIGINT)
               PARTITIONED BY HOUR"""


def _submit(client: ClusterClient, sql: str, timeout_s: float = 60.0) -> str:
    """Submit through the broker, which forwards to a live coordinator; a dead one's announcement
    can linger for one lease TTL, so UNAVAILABLE is retried until the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            table, _ = client.sql(sql, context={"rowsPerSegment": 100}, timeout_s=60)
            return table.column("task_id")[0].as_py()
        except ClusterError as exc:
            if not str(exc).startswith("UNAVAILABLE") or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _pid_of(c, coordinator: dict, task_id: str) -> int | None:
    """The task's process, from the pid file its coordinator keeps in its state directory."""
    try:
        with open(os.path.join(c.dir, coordinator["name"], "tasks", f"{task_id}.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _final(client: ClusterClient, task_id: str, timeout_s: float):
    return wait_until(lambda: (t := client.task(task_id)).state in FINAL and t, timeout_s, f"task {task_id} ending", 0.2)


def _count(client: ClusterClient, datasource: str) -> tuple[int, int] | None:
    try:
        table, _ = client.sql(f"SELECT COUNT(*) AS c, SUM(added) AS a FROM {datasource}", timeout_s=30)
    except ClusterError:
        return None
    row = table.to_pylist()[0]
    return row["c"], row["a"]


def _kill(c, leader: dict, other: dict, task_id: str, survivor: ClusterClient):
    """SIGKILL the leader; the other takes over and settles the task. The killed one comes back
    as a follower."""
    c.kill(leader["name"], signal.SIGKILL)
    wait_until(lambda: (coordinator_health(other) or {}).get("leader"), 30, f"{other['name']} taking over")
    task = _final(survivor, task_id, 240)
    c.restart(leader["name"])
    c.coordinators = [c.node(rec["name"]) for rec in c.coordinators]
    return task


def _stop(c, leader: dict, other: dict, task_id: str, survivor: ClusterClient):
    """SIGSTOP the leader (alive, connections open, no answer): its lease lapses and the other
    takes over and settles the task. Resumed, it must step down, and the task process still
    talking to it must not get a publish through."""
    os.kill(leader["pid"], signal.SIGSTOP)
    try:
        wait_until(lambda: (coordinator_health(other) or {}).get("leader"), 30, f"{other['name']} taking over")
        task = _final(survivor, task_id, 240)
    finally:
        os.kill(leader["pid"], signal.SIGCONT)
    wait_until(lambda: (h := coordinator_health(leader)) is not None and not h.get("leader"), 30,
          f"{leader['name']} stepping down after it resumed")
    return task


def _ingest_through_leader_changes(c, tmp_path, datasource: str, faults: list) -> list:
    """INSERT into ``datasource``, taking the leader away (the next of ``faults``) while each
    attempt builds, and submitting again after each attempt that failed, until one succeeds.
    Checks that no failed attempt published anything, that every row is there exactly once, and
    that each failed attempt's process ended and its uploads were deleted. Returns the faults not
    used (an attempt finished before its fault landed)."""
    path = tmp_path / f"{datasource}.json"
    expected = _input(path)
    sql = _sql(path, datasource)
    broker = c.endpoints()["broker"]
    failed: list[tuple[str, int | None]] = []
    while True:
        leader = wait_until(lambda: _leader(c, c.coordinators), 30, "one leading coordinator")
        other = next(rec for rec in c.coordinators if rec["name"] != leader["name"])
        client, survivor = ClusterClient(grpc_target(leader), broker), ClusterClient(grpc_target(other), broker)
        try:
            task_id = _submit(client, sql)
            if not faults:
                task = _final(client, task_id, 240)
                assert task.state == "SUCCESS", task.error
                break
            # The leader goes once the task is building (its first file is in deep storage) and
            # before it published: the task process loses the coordinator it reports to.
            prefix = task_key_prefix(datasource, task_id)
            wait_until(lambda: [k for k in c.storage.list(f"{datasource}/_ingest", partial=True) if k.startswith(prefix)],
                  240, f"a first file uploaded by {task_id}", poll_s=0.01)
            pid = _pid_of(c, leader, task_id)
            task = faults.pop(0)(c, leader, other, task_id, survivor)
            if task.state == "SUCCESS":
                break  # it published before the fault landed: exactly once all the same
            assert task.state == "FAILED", task
            assert "coordinator" in task.error, task.error
            assert [s for s in survivor.list_segments(datasource) if s.used] == [], \
                f"the failed attempt {task_id} left segments published"
            failed.append((task_id, pid))
        finally:
            client.close()
            survivor.close()
    leader = wait_until(lambda: _leader(c, c.coordinators), 30, "one leading coordinator")
    client = ClusterClient(grpc_target(leader), broker)
    try:
        published = [s for s in client.list_segments(datasource) if s.used]
        assert published
        client.wait_loaded(datasource, len(published), 120)
        # Every row once: none lost with a failed attempt, none published by two attempts.
        wait_until(lambda: _count(client, datasource) == expected, 60, f"{datasource} answering {expected}", poll_s=0.2)
        for task_id, pid in failed:
            # The failed attempt's process ends (it cannot publish: its coordinator is gone, or
            # the store refuses a FAILED task) and what it uploaded is deleted, by itself or by
            # the new leader's cleanup duty, so nothing it left can be published later.
            if pid is not None:
                wait_until(lambda: not _alive(pid), 120, f"{task_id}'s process {pid} exiting", poll_s=0.2)
            prefix = task_key_prefix(datasource, task_id)
            wait_until(lambda: not [k for k in c.storage.list(f"{datasource}/_ingest", partial=True)
                               if k.startswith(prefix)], 60, f"the uploads of {task_id} deleted", poll_s=0.2)
        assert [s for s in client.list_segments(datasource) if s.used] == published
        assert _count(client, datasource) == expected
    finally:
        client.close()
    return faults


def test_leader_killed_then_leader_stopped_mid_task_every_row_published_once(cluster, tmp_path):
    # One datasource, three attempts: the first loses its leader to SIGKILL, the retry loses the
    # new leader to SIGSTOP, the third publishes.
    left = _ingest_through_leader_changes(cluster, tmp_path, "lc", [_kill, _stop])
    if left:  # an attempt beat its fault: try the remaining fault on a fresh datasource
        assert _ingest_through_leader_changes(cluster, tmp_path, "lc_again", left) == []
