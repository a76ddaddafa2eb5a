"""Failed segment loads on the real path: a historical reports the failure in discovery, the
coordinator retries it after a backoff, or after repeated failures assigns the segment to another
historical. Real servers, real deep storage; the failures are real I/O errors (a segment file not
yet in deep storage, a historical whose cache directory is unusable)."""

from __future__ import annotations

import os

import pytest

from common.demo import table as demo_table
from common.segment.descriptor import SegmentDescriptor
from common.segment.time_partitioner import build_segments
from services.coordinator.client import CoordinatorClient
from services.deep_storage import deep_storage_key
from services.discovery.keys import assignment_key, assignments_prefix
from tests.component.load_failure_records import failures, serving
from tests.harness.embedded_cluster import EmbeddedCluster

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("cluster")), historicals=2, replication=1)
    for h in c.historicals:
        h.node.state.validate = True  # every event the historicals handle is followed by validate_state()
    yield c
    c.stop()


def build_one(cluster, datasource: str, tmp_path) -> tuple[str, SegmentDescriptor]:
    [(path, manifest)] = build_segments(demo_table(500, days=1), datasource, str(tmp_path), rows_per_segment=10_000)
    return path, SegmentDescriptor.of(manifest, deep_storage_key(manifest.segment_id), 1)


def publish_without_pushing(cluster, descriptor: SegmentDescriptor) -> None:
    client = CoordinatorClient(f"127.0.0.1:{cluster.coordinator.grpc.port}")
    try:
        assert client.publish([descriptor]) == 1
    finally:
        client.close()


def test_a_load_that_fails_is_reported_and_retried_after_a_backoff(cluster, tmp_path):
    path, d = build_one(cluster, "retried", tmp_path)
    publish_without_pushing(cluster, d)  # the file is not in deep storage yet: the first load fails
    cluster.wait_until(lambda: failures(cluster, d.id), DEADLINE_S, "a load-failure report")
    [(server, report)] = failures(cluster, d.id).items()
    assert report.attempts >= 1 and "/retried/" in report.reason and "does not exist" in report.reason
    cluster.storage().push(path, d.location)
    cluster.wait_until(lambda: serving(cluster, d.id), DEADLINE_S, "the retried load to succeed")
    if serving(cluster, d.id) != [server]:
        # Only if this machine was so slow that all three attempts failed before the push: then
        # the segment moved, and the report that made it move stays.
        assert failures(cluster, d.id)[server].attempts == 3
    else:  # retried where it failed, and the report is withdrawn
        cluster.wait_until(lambda: not failures(cluster, d.id), DEADLINE_S, "the failure report to be cleared")
        historical = next(h for h in cluster.historicals if h.node.server_id == server)
        assert d.id not in historical.node.state.failed
    cluster.wait_queryable("retried", 1)
    got, _ = cluster.client.native({"queryType": "timeseries", "dataSource": "retried", "intervals": ["2000-01-01/2100-01-01"],
                                    "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]})
    assert got.column("n").to_pylist() == [500]


def test_a_segment_a_historical_keeps_failing_is_assigned_to_another(cluster, tmp_path):
    path, d = build_one(cluster, "moved", tmp_path)
    cluster.storage().push(path, d.location)
    # Both historicals' cache directories become unusable (a file where the directory was), so
    # whichever gets the segment fails; the other is repaired once the first has failed twice.
    broken = {}
    for h in cluster.historicals:
        cache_dir = h.node.cache.cache_dir
        os.rename(cache_dir, cache_dir + ".away")
        with open(cache_dir, "w") as f:
            f.write("not a directory")
        broken[h.node.server_id] = cache_dir

    def repair(server_id: str) -> None:
        cache_dir = broken.pop(server_id)
        os.remove(cache_dir)
        os.rename(cache_dir + ".away", cache_dir)

    try:
        publish_without_pushing(cluster, d)
        cluster.wait_until(lambda: any(r.attempts >= 2 for r in failures(cluster, d.id).values()), DEADLINE_S,
                           "two failed loads on one historical")
        [first] = failures(cluster, d.id)
        other = next(s for s in broken if s != first)
        repair(other)
        cluster.wait_until(lambda: serving(cluster, d.id) == [other], DEADLINE_S, f"the segment served by {other}")
        # The first historical failed max_load_attempts (3) times, was unassigned, and keeps its
        # report so the coordinator does not hand it the segment again (until the give-up expires,
        # 5 minutes by default: tests/component/test_load_failure_expiry.py).
        assert failures(cluster, d.id)[first].attempts == 3
        assert assignment_key(first, d.id) not in cluster.coordinator.discovery.get_prefix(assignments_prefix(first))
    finally:
        for server_id in list(broken):
            repair(server_id)
    cluster.wait_queryable("moved", 1)
    got, _ = cluster.client.native({"queryType": "timeseries", "dataSource": "moved", "intervals": ["2000-01-01/2100-01-01"],
                                    "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]})
    assert got.column("n").to_pylist() == [500]
