"""Automatic compaction: with [coordinator] auto_compaction on, adding a projection to the catalog
makes the leader compact the datasource's time chunks until every segment has it; dropping it
compacts them again without it."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import rows

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("autocompact")), historicals=1,
                        coordinator={"auto_compaction": True, "max_compaction_tasks": 1,
                                     "warm_task_drivers": 1})  # one Spark session for the compactions
    yield c
    c.stop()


def wait_for(what, predicate, timeout_s=240.0):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as exc:  # noqa: BLE001 - not ready yet
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"{what}: last saw {last!r}")


def test_adding_and_dropping_a_projection_recompacts(cluster):
    path = os.path.join(DATA, "wikipedia-sampled.json")
    cluster.client.sql("CREATE TABLE auto PARTITIONED BY DAY")
    table, _ = cluster.client.sql(f"""INSERT INTO auto
        SELECT TIME_PARSE("timestamp") AS __time, channel, added
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
             EXTEND ("timestamp" VARCHAR, channel VARCHAR, added BIGINT)
        PARTITIONED BY DAY""")
    task_id = table.column("task_id")[0].as_py()
    wait_for("the insert", lambda: cluster.client.task(task_id).state == "SUCCESS")
    expected = wait_for("rows served", lambda: rows(cluster, "SELECT COUNT(*) AS c FROM auto")[0]["c"] > 0 and
                        rows(cluster, "SELECT channel, COUNT(*) AS n FROM auto GROUP BY 1 ORDER BY 1"))
    cluster.client.sql("ALTER TABLE auto ADD PROJECTION by_channel AS SELECT channel, COUNT(*) AS n FROM auto "
                       "GROUP BY 1")

    def compacted():
        got = rows(cluster, "SELECT segments_with, segments_total FROM sys.projections WHERE datasource = 'auto'")
        return got and got[0]["segments_with"] == got[0]["segments_total"] > 0

    wait_for("segments compacted with the projection", compacted)
    # The task publishes its segments before it reports its own end: its SUCCESS may come a moment
    # after the compacted segments are served.
    wait_for("the compact task's success", lambda: {"type": "compact", "status": "SUCCESS"} in
             rows(cluster, "SELECT type, status FROM sys.tasks WHERE datasource = 'auto'"))
    assert rows(cluster, "SET useProjection = 'by_channel'; SELECT channel, COUNT(*) AS n FROM auto GROUP BY 1 "
                         "ORDER BY 1") == expected
    cluster.client.sql("ALTER TABLE auto DROP PROJECTION by_channel")
    wait_for("segments compacted without it",
             lambda: rows(cluster, "SELECT COUNT(*) AS c FROM sys.projections WHERE datasource = 'auto'") == [{"c": 0}])
    assert rows(cluster, "SELECT channel, COUNT(*) AS n FROM auto GROUP BY 1 ORDER BY 1") == expected
    assert json.dumps(expected)  # the answer never changed
