"""The cluster on its production backends: etcd discovery, PostgreSQL metadata, S3 deep storage
(moto's S3 server), all real servers on loopback; plus coordinator leader election on etcd."""

from __future__ import annotations

import pytest

from common.demo import table as demo_table
from services.coordinator.main import CoordinatorProcess
from tests.fixtures.etcd_server import etcd_server  # noqa: F401
from tests.fixtures.postgres_server import postgres_url  # noqa: F401
from tests.fixtures.s3_server import s3_server  # noqa: F401
from tests.harness.embedded_cluster import EmbeddedCluster

IV = ["2015-09-12/2015-09-19"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, etcd_server, postgres_url, s3_server):  # noqa: F811
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("backends")), historicals=2, etcd=etcd_server,
                        metadata_url=postgres_url, deep_storage=s3_server.url,
                        deep_storage_endpoint=s3_server.endpoint)
    c.data = demo_table(40_000)
    c.descriptors = c.publish(c.data, "wiki")
    c.wait_queryable("wiki", len(c.descriptors), replicas=2)
    yield c
    c.stop()


def test_segments_live_in_s3_and_postgres(cluster, s3_server):  # noqa: F811
    fs = s3_server.filesystem()
    for d in cluster.descriptors:
        info = fs.get_file_info(f"{s3_server.bucket}/{s3_server.prefix}/{d.location}".replace("//", "/"))
        assert info.size == d.size
    records = cluster.coordinator.store.list("wiki")
    assert sorted(str(r.id) for r in records) == sorted(str(d.id) for d in cluster.descriptors)


def test_queries_over_etcd_discovery(cluster):
    table, stats = cluster.client.native({"queryType": "timeseries", "dataSource": "wiki", "intervals": IV,
                                          "granularity": "all", "aggregations": [
                                              {"type": "count", "name": "c"},
                                              {"type": "longSum", "name": "added", "fieldName": "added"}]})
    assert table.to_pylist()[0]["c"] == 40_000
    assert table.to_pylist()[0]["added"] == sum(cluster.data.column("added").to_pylist())
    assert stats.segments == len(cluster.descriptors)


def test_only_one_coordinator_leads_and_a_standby_takes_over(cluster):
    first = cluster.coordinator
    cluster.wait_until(lambda: first.runner.is_leader, what="first coordinator leading")
    standby = CoordinatorProcess(cluster._config("coordinator", {"node": {"id": "coordinator-2"}})).start()
    try:
        cluster.wait_until(lambda: standby.election is not None and standby.election.leader() == first.id,
                           what="standby seeing the leader")
        assert not standby.runner.is_leader
        first.stop()
        cluster.wait_until(lambda: standby.runner.is_leader, timeout_s=30, what="standby taking over")
        # The new leader runs duties: a new datasource gets assigned and loaded.
        cluster.coordinator = standby
        cluster.reset_client()
        more = cluster.publish(demo_table(3_000, start="2016-01-01", days=1), "after_failover")
        cluster.client.wait_loaded("after_failover", len(more), 30, replicas=2)
    finally:
        if cluster.coordinator is not standby:
            standby.stop()
