"""Helpers for tests that ingest through the cluster's SQL: run a statement's task to its end,
and read query rows."""

from __future__ import annotations

import time

FINAL = ("SUCCESS", "FAILED", "CANCELED")


def run(cluster, sql: str, timeout_s: float = 240.0):
    """Submit an INSERT/REPLACE and wait (with a deadline) for its task to end; returns the task."""
    table, _ = cluster.client.sql(sql)
    task_id = table.column("task_id")[0].as_py()
    deadline = time.monotonic() + timeout_s
    while True:
        task = cluster.client.task(task_id)
        if task.state in FINAL:
            return task
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} still {task.state} after {timeout_s}s")
        time.sleep(0.2)


def rows(cluster, sql: str) -> list[dict]:
    return cluster.client.sql(sql)[0].to_pylist()
