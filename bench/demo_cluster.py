"""demo_cluster: a local cluster (``strata up``: coordinator, broker, historicals as processes)
serving the demo datasource ``wiki``, for the benches that time the cluster's front doors.

The broker learns of loaded segments a moment after the coordinator reports them loaded, so the
context manager also waits until a native query over ``wiki`` sees a segment: a bench that timed
its first queries before that would time an empty answer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from common.demo import table as demo_table
from services.cli.cluster_client import ClusterClient
from services.cli.local_cluster import LocalCluster
from services.deep_storage import deep_storage_from_url

WIKI_COUNT = {"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
              "intervals": ["1000-01-01/3000-01-01"], "aggregations": [{"type": "count", "name": "n"}]}


@contextmanager
def demo_cluster(rows: int, *, historicals: int = 1, prefix: str = "strata-bench-",
                 deadline_s: float = 600) -> Iterator[tuple[LocalCluster, dict]]:
    """Yield ``(cluster, endpoints)`` with ``rows`` demo rows published as ``wiki`` and served;
    the cluster is stopped and its directory removed on exit."""
    work = tempfile.mkdtemp(prefix=prefix)
    cluster = LocalCluster(os.path.join(work, "cluster"))
    try:
        cluster.up(historicals=historicals, ports="auto")
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        try:
            storage = deep_storage_from_url(os.path.join(cluster.dir, "deep-storage"))
            descriptors = client.build_and_publish(demo_table(rows), "wiki", storage)
            client.wait_loaded("wiki", len(descriptors), deadline_s)
            deadline = time.monotonic() + 60
            while client.native(WIKI_COUNT)[1].segments < 1:
                if time.monotonic() > deadline:
                    raise TimeoutError("the broker did not see a loaded 'wiki' segment within 60 s")
                time.sleep(0.05)
        finally:
            client.close()
        yield cluster, endpoints
    finally:
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
