"""Ingestion and compaction tasks (real task processes, real Spark) in a cluster with [auth] and
[tls] on: the task process reaches the coordinator over TLS with the internal credential its
coordinator handed it (GetTask, allocation, publish, task updates, the catalog), and a user with
WRITE on the datasource compacts it."""

from __future__ import annotations

import time

import pytest

from services.cli.cluster_client import ClusterClient, ClusterError
from services.transport_security import TransportSecurity
from tests.fixtures.certificates import make_certificates
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import FINAL

ADMIN_PASSWORD = "tasks-admin-pw"
USERS_FILE = """
[[users]]
name = "writer"
password = "writer-pw"
[[users.grants]]
action = "WRITE"
type = "DATASOURCE"
pattern = "secured"
"""
ROWS = "\\n".join(f"2015-09-12T{h:02d}:00:00Z,c{h % 3},{h}" for h in range(24))
INSERT = f"""INSERT INTO secured SELECT TIME_PARSE(ts) AS __time, channel, CAST(added AS BIGINT) AS added
FROM TABLE(EXTERN('{{"type": "inline", "data": "{ROWS}"}}', '{{"type": "csv", "columns": ["ts", "channel", "added"]}}',
  '[{{"name": "ts", "type": "string"}}, {{"name": "channel", "type": "string"}}, {{"name": "added", "type": "string"}}]'))
PARTITIONED BY DAY"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secure-tasks")
    (directory / "users.toml").write_text(USERS_FILE)
    certs = make_certificates()
    c = EmbeddedCluster(str(directory / "cluster"), historicals=1,
                        auth={"enabled": True, "admin_password": ADMIN_PASSWORD,
                              "users_file": str(directory / "users.toml")},
                        tls={name: data.decode() for name, data in certs.items()})
    c.ca = certs["ca"]
    yield c
    c.stop()


def client_as(cluster, user: str, password: str) -> ClusterClient:
    return ClusterClient(f"127.0.0.1:{cluster.coordinator.grpc.port}", f"127.0.0.1:{cluster.broker.grpc.port}",
                         credentials=(user, password), security=TransportSecurity(ca=cluster.ca))


def wait_task(client: ClusterClient, task_id: str, timeout_s: float = 300.0):
    deadline = time.monotonic() + timeout_s
    while True:
        task = client.task(task_id)
        if task.state in FINAL:
            return task
        assert time.monotonic() < deadline, f"task {task_id} still {task.state} after {timeout_s}s"
        time.sleep(0.3)


def used_versions(client: ClusterClient) -> set[str]:
    return {s.id.version for s in client.list_segments("secured", include_unused=False)}


def count(client: ClusterClient) -> int:
    return client.sql("SELECT COUNT(*) AS n, SUM(added) AS added FROM secured")[0].to_pylist()[0]


def queryable_rows(client: ClusterClient) -> int:
    """The rows the broker serves so far: a published segment becomes queryable once a historical
    has loaded it and the broker has seen the announcement (Druid's handoff), so until the first
    one the table is unknown to it."""
    try:
        return count(client)["n"]
    except ClusterError as exc:
        if "unknown table 'secured'" not in str(exc):
            raise
        return 0


def test_insert_then_compaction_by_a_writer(cluster):
    admin = client_as(cluster, "admin", ADMIN_PASSWORD)
    writer = client_as(cluster, "writer", "writer-pw")
    try:
        table, _ = admin.sql(INSERT)
        task = wait_task(admin, table.column("task_id")[0].as_py())
        assert task.state == "SUCCESS", task.error
        deadline = time.monotonic() + 60
        while queryable_rows(admin) != 24:
            assert time.monotonic() < deadline, "inserted rows never became queryable"
            time.sleep(0.3)
        before = used_versions(admin)
        compact = writer.submit_task("secured", "compact", "COMPACT secured")
        task = wait_task(writer, compact.id)
        assert task.state == "SUCCESS", task.error
        assert count(admin) == {"n": 24, "added": sum(range(24))}
        assert used_versions(admin) != before  # rewritten as a new version
    finally:
        admin.close()
        writer.close()
