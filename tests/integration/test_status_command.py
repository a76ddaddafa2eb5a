"""`strata status` on a local cluster of real processes (`strata up`): the nodes, then the view
`strata top` shows, from the same sources (the broker's query log, the coordinator's tasks)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from services.cli.cluster_client import ClusterClient
from services.cli.local_cluster import LocalCluster

ROOT = __file__.rsplit("/tests/", 1)[0]


def strata(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("status")))
    c.up(historicals=1, lease_ttl_s=2, duty_period_ms=200, ports="auto")
    endpoints = c.endpoints()
    client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
    try:
        data = os.path.join(c.dir, "wiki.parquet")
        for args in (("demo-data", "--rows", "3000", "--days", "1", "--out", data),
                     ("publish", data, "--datasource", "wiki", "--dir", c.dir, "--wait", "--timeout", "60")):
            proc = strata(*args)
            assert proc.returncode == 0, proc.stderr
        c.client = client
        yield c
    finally:
        client.close()
        c.down()


def test_status_shows_nodes_and_the_query_log(cluster):
    deadline = time.monotonic() + 60
    while True:  # the broker sees the segments a moment after the coordinator reports them loaded; every
        try:       # try carries the marker, so whichever the view lists as slowest shows it
            cluster.client.sql("SELECT COUNT(*) AS n FROM wiki /* counted by status */")
            break
        except Exception:  # noqa: BLE001 - retried until the deadline
            assert time.monotonic() < deadline, "the broker never served wiki"
            time.sleep(0.1)
    proc = strata("status", "--dir", cluster.dir)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "coordinator" in out and "broker" in out and "historical" in out and "healthy" in out
    assert "queries/s over 60s" in out and "projection hit ratio 0%" in out
    assert "counted by status" in out and "no tasks running" in out
