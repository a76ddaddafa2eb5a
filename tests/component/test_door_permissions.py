"""Permissions on the task doors that test_security.py and test_query_log_security.py leave open:
a task (a compaction the admin submitted) is seen, followed and cancelled only by users with the
right grant on its datasource, over the coordinator's gRPC API and through sys.tasks on the broker;
a user cannot read another datasource's task by its id, cancel it, or see it listed. Tasks stay
PENDING here ([coordinator] max_running_tasks = 0), so nothing runs."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import pytest

from common.demo import table as demo_table
from services.cli.cluster_client import ClusterClient, ClusterError
from tests.harness.embedded_cluster import EmbeddedCluster

PASSWORDS = {"admin": "admin-pw", "writer": "writer-pw", "reader": "reader-pw", "outsider": "outsider-pw"}
USERS_FILE = """
[[users]]
name = "writer"
password = "writer-pw"
[[users.grants]]
action = "READ"
type = "DATASOURCE"
pattern = "wiki"
[[users.grants]]
action = "WRITE"
type = "DATASOURCE"
pattern = "wiki"

[[users]]
name = "reader"
password = "reader-pw"
[[users.grants]]
action = "READ"
type = "DATASOURCE"
pattern = "wiki"

[[users]]
name = "outsider"
password = "outsider-pw"
[[users.grants]]
action = "READ"
type = "DATASOURCE"
pattern = "sales"
[[users.grants]]
action = "WRITE"
type = "DATASOURCE"
pattern = "sales"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("doors")
    (directory / "users.toml").write_text(USERS_FILE)
    c = EmbeddedCluster(str(directory / "cluster"), historicals=1, coordinator={"max_running_tasks": 0},
                        auth={"enabled": True, "admin_user": "admin", "admin_password": PASSWORDS["admin"],
                              "users_file": str(directory / "users.toml")})
    try:
        c.wait_queryable("wiki", len(c.publish(demo_table(300, days=1), "wiki")))
        yield c
    finally:
        c.stop()


def coordinator_as(cluster, user: str) -> ClusterClient:
    return ClusterClient(f"127.0.0.1:{cluster.coordinator.grpc.port}", credentials=(user, PASSWORDS[user]))


def sql_as(cluster, user: str, sql: str) -> list[dict]:
    with adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}",
                      db_kwargs={"username": user, "password": PASSWORDS[user]}, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table().to_pylist()


@pytest.fixture()
def admins_task(cluster):
    admin = coordinator_as(cluster, "admin")
    try:
        task = admin.submit_task("wiki", "compact", "COMPACT wiki")
        yield task
        if admin.task(task.id).state == "PENDING":
            admin.cancel_task(task.id)
    finally:
        admin.close()


def test_outsider_neither_sees_nor_cancels_another_datasources_task(cluster, admins_task):
    outsider = coordinator_as(cluster, "outsider")
    try:
        with pytest.raises(ClusterError, match="PERMISSION_DENIED: user 'outsider' may not READ( or WRITE)? datasource 'wiki'"):
            outsider.task(admins_task.id)
        with pytest.raises(ClusterError, match="PERMISSION_DENIED: user 'outsider' may not WRITE datasource 'wiki'"):
            outsider.cancel_task(admins_task.id)
        assert admins_task.id not in {t.id for t in outsider.tasks()}
    finally:
        outsider.close()
    assert sql_as(cluster, "outsider", f"SELECT task_id FROM sys.tasks WHERE task_id = '{admins_task.id}'") == []
    admin = coordinator_as(cluster, "admin")
    try:
        assert admin.task(admins_task.id).state == "PENDING"
    finally:
        admin.close()


def test_reader_follows_but_cannot_cancel(cluster, admins_task):
    reader = coordinator_as(cluster, "reader")
    try:
        assert reader.task(admins_task.id).state == "PENDING"
        assert admins_task.id in {t.id for t in reader.tasks()}
        with pytest.raises(ClusterError, match="PERMISSION_DENIED: user 'reader' may not WRITE datasource 'wiki'"):
            reader.cancel_task(admins_task.id)
    finally:
        reader.close()
    assert [r["task_id"] for r in sql_as(cluster, "reader", "SELECT task_id FROM sys.tasks "
                                         f"WHERE task_id = '{admins_task.id}'")] == [admins_task.id]


def test_writer_cancels(cluster, admins_task):
    writer = coordinator_as(cluster, "writer")
    try:
        assert writer.cancel_task(admins_task.id).state == "CANCELED"
    finally:
        writer.close()


def test_unknown_task_ids_are_not_found_for_everyone(cluster):
    for user in PASSWORDS:
        client = coordinator_as(cluster, user)
        try:
            with pytest.raises(ClusterError, match="NOT_FOUND"):
                client.task("compact_wiki_no_such_task")
        finally:
            client.close()
