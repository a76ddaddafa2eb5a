"""`strata status` on a local cluster of real processes (`strata up`): the nodes, then the view
`strata top` shows, from the same sources (the broker's query log, the coordinator's tasks)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from common.demo import table as demo_table
from services.cli.cluster_client import ClusterClient
from services.cli.local_cluster import LocalCluster
from services.historical.storage import deep_storage_from_url

ROOT = __file__.rsplit("/tests/", 1)[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("status")))
    c.up(historicals=1, lease_ttl_s=2, duty_period_ms=200)
    endpoints = c.endpoints()
    client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
    try:
        storage = deep_storage_from_url(os.path.join(c.dir, "deep-storage"))
        descriptors = client.build_and_publish(demo_table(3_000, days=1), "wiki", storage)
        client.wait_loaded("wiki", len(descriptors), 60)
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
    proc = subprocess.run([sys.executable, "-m", "services.cli.main", "status", "--dir", cluster.dir],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT,
                                                                                       "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "coordinator" in out and "broker" in out and "historical" in out and "healthy" in out
    assert "queries/s over 60s" in out and "projection hit ratio 0%" in out
    assert "counted by status" in out and "no tasks running" in out
