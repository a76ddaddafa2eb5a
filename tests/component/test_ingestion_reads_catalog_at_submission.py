"""An INSERT is prepared from the catalog as the coordinator holds it when the statement is
submitted, not from the broker's synced copy: a table defined over REST and loaded at once gets
its projections (and segmentGranularity, clusterKeys, sealed columns) in the task the coordinator
runs, whose spec is what every segment of it is built from (services/ingestion/task_main.py).

Real coordinator and broker in-process; the task runner is stopped so the submitted tasks stay
PENDING with their specs (Spark building segments from a spec is covered by the ingestion tests)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from services.cli.cluster_client import ClusterError
from tests.harness.embedded_cluster import EmbeddedCluster

HOURLY = {"type": "aggregate", "name": "hourly",
          "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
          "groupingColumns": [{"type": "long", "name": "h"}, {"type": "string", "name": "channel"}],
          "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}]}
EXTERN = """TABLE(EXTERN('{"type": "inline", "data": "2015-09-12T00:00:00Z,#en,3\\n"}',
    '{"type": "csv", "columns": ["ts", "channel", "added"]}',
    '[{"name": "ts", "type": "string"}, {"name": "channel", "type": "string"}, {"name": "added", "type": "long"}]'))"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("submitted")), historicals=1)
    c.coordinator.task_runner.stop()  # tasks stay PENDING: their specs are what this test reads
    try:
        yield c
    finally:
        c.stop()


def define(cluster, name: str, sealed: bool = False) -> None:
    spec = {"type": "datasource",
            "properties": {"segmentGranularity": "HOUR", "clusterKeys": [{"column": "channel"}],
                           "projections": [HOURLY], **({"sealed": True} if sealed else {})},
            "columns": [{"name": "channel", "sqlType": "VARCHAR"}, {"name": "added", "sqlType": "BIGINT"}]}
    url = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/coordinator/v1/catalog/tables/druid/{name}"
    request = urllib.request.Request(url, data=json.dumps(spec).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


def submit(cluster, sql: str) -> dict:
    table, _ = cluster.client.sql(sql)
    task = cluster.client.task(table.column("task_id")[0].as_py())
    assert task.state == "PENDING"
    return json.loads(task.spec_json)


def insert(name: str, columns: str = "channel, added") -> str:
    # No PARTITIONED BY, no CLUSTERED BY: the catalog's segmentGranularity and clusterKeys apply.
    return f"INSERT INTO {name} SELECT TIME_PARSE(ts) AS __time, {columns} FROM {EXTERN}"


def test_a_table_defined_and_loaded_at_once_gets_its_projections(cluster, monkeypatch):
    # The broker's copy of the catalog never catches up here: no reload, so only a read from the
    # coordinator at submission can know the table.
    cache = cluster.broker.catalog_cache
    monkeypatch.setattr(cache, "reload", lambda: None)
    define(cluster, "fresh")
    assert cache.spec("druid", "fresh") is None
    spec = submit(cluster, insert("fresh"))
    assert spec["projections"] == [HOURLY]
    assert spec["segmentGranularity"] == "HOUR" and spec["clusterKeys"] == ["channel"]


def test_sealed_at_submission_refuses_undeclared_columns(cluster, monkeypatch):
    monkeypatch.setattr(cluster.broker.catalog_cache, "reload", lambda: None)
    define(cluster, "sealed_now", sealed=True)
    with pytest.raises(ClusterError, match="sealed and does not declare extra"):
        cluster.client.sql(insert("sealed_now", "channel, added, channel AS extra"))
    assert submit(cluster, insert("sealed_now"))["projections"] == [HOURLY]


def test_define_then_insert_at_once_many_times(cluster):
    # The race as users meet it (the broker's copy syncing as usual): every task has the projections.
    for i in range(20):
        name = f"race_{i}"
        define(cluster, name)
        # Half with PARTITIONED BY, as the failing report had it: nothing then asks the catalog for
        # a granularity, and only the projections could go missing.
        spec = submit(cluster, insert(name) + (" PARTITIONED BY HOUR" if i % 2 else ""))
        assert spec["projections"] == [HOURLY], (name, spec)
        assert spec["clusterKeys"] == ["channel"], (name, spec)
