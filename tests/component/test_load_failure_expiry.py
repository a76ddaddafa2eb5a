"""A give-up that expires, on the real path: a historical that failed a segment too often is passed
over for it only ``[coordinator] give_up_expiry_ms``; then the coordinator deletes its failure
record, the historical forgets its count, and when the segment needs a home again (its holder
died) it goes back there. Real servers, real deep storage, a real I/O error (a cache directory
that is a file)."""

from __future__ import annotations

import os

import pytest

from common.demo import table as demo_table
from common.segment.descriptor import SegmentDescriptor
from common.segment.time_partitioner import build_segments
from services.deep_storage import deep_storage_key
from services.historical.core.assignment_state import LoadFailureForgotten
from tests.component.load_failure_records import failures, serving
from tests.harness.embedded_cluster import EmbeddedCluster

DEADLINE_S = 30.0
EXPIRY_MS = 1_500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # One historical at first: the second joins once the first has given up on the segment.
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("cluster")), historicals=1, replication=1,
                        coordinator={"give_up_expiry_ms": EXPIRY_MS})
    yield c
    c.stop()


def test_a_server_that_gave_up_gets_the_segment_again_once_the_give_up_expires(cluster, tmp_path):
    [(path, manifest)] = build_segments(demo_table(500, days=1), "expiring", str(tmp_path), rows_per_segment=10_000)
    d = SegmentDescriptor.of(manifest, deep_storage_key(manifest.segment_id), 1)
    cluster.storage().push(path, d.location)
    first = cluster.historicals[0]
    cache_dir = first.node.cache.cache_dir
    os.rename(cache_dir, cache_dir + ".away")
    with open(cache_dir, "w") as f:
        f.write("not a directory")
    try:
        cluster.client.publish([d])
        # Alone, the first historical keeps failing (retried where it is: there is nowhere else).
        cluster.wait_until(lambda: first.node.server_id in failures(cluster, d.id)
                           and failures(cluster, d.id)[first.node.server_id].attempts >= 3, DEADLINE_S,
                           "three failed loads on the first historical")
        second = cluster.add_historical()
        cluster.wait_until(lambda: serving(cluster, d.id) == [second.node.server_id], DEADLINE_S,
                           "the segment moved to the second historical")
        # The give-up expires: the coordinator deletes the record and the first historical forgets
        # it too (the deletion, not a successful load, cleared it: nothing loaded there).
        cluster.wait_until(lambda: not failures(cluster, d.id) and d.id not in first.node.state.failed, DEADLINE_S,
                           "the expired failure record forgotten everywhere")
        assert any(isinstance(event, LoadFailureForgotten) and event.segment == d.id
                   for _, event in list(first.node.state.stimulus_log))
        assert first.node.segment(d.id) is None
    finally:
        os.remove(cache_dir)
        os.rename(cache_dir + ".away", cache_dir)
    # The holder dies: the first historical, no longer passed over, takes the segment back.
    second.stop()
    cluster.wait_until(lambda: serving(cluster, d.id) == [first.node.server_id], DEADLINE_S,
                       "the segment back on the first historical")
    assert not failures(cluster, d.id) and not first.node.state.failed
    cluster.wait_queryable("expiring", 1)
    got, _ = cluster.client.native({"queryType": "timeseries", "dataSource": "expiring",
                                    "intervals": ["2000-01-01/2100-01-01"], "granularity": "all",
                                    "aggregations": [{"type": "count", "name": "n"}]})
    assert got.column("n").to_pylist() == [500]
