"""Segment leases on a real historical with real files (issue 24).

An evicted segment's file is unlinked; its descriptor must be closed (and its disk blocks freed)
as soon as the queries reading it finish, even though the historical still keeps a prepared
query over it, and a query running at eviction time still reads it to the end."""

from __future__ import annotations

import os

import pytest

from common.demo import table as demo_table
from tests.harness.embedded_cluster import EmbeddedCluster

QUERY = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-14"],
         "granularity": "all", "aggregations": [{"type": "count", "name": "c"}]}


@pytest.fixture()
def cluster(tmp_path):
    c = EmbeddedCluster(str(tmp_path), historicals=1)
    try:
        segments = c.publish(demo_table(3_000, days=2), "wiki")
        c.wait_queryable("wiki", len(segments))
        yield c
    finally:
        c.stop()


def _open_paths() -> list[str]:
    """What this process's descriptors open (an unlinked file reads '<path> (deleted)')."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
    return out


def test_an_evicted_segment_is_closed_while_its_prepared_query_is_cached(cluster):
    historical = cluster.historicals[0]
    table, _ = cluster.client.native(QUERY)
    assert table.column("c")[0].as_py() == 3_000
    cache = historical.cache
    victim = cache.served()[0]
    path = cache.path(victim)
    segment = cache.get(victim)
    assert any(p.startswith(path) for p in _open_paths())
    prepared = historical.servicer.prepared
    assert any(victim in p.segment_ids for _, p in prepared.items())  # the query is prepared over it

    with cache.acquire(victim) as reading:  # a query still running when the segment goes
        assert cache.drop(victim) and cache.evict(victim)
        assert not os.path.exists(path)
        assert any(p == path + " (deleted)" for p in _open_paths())  # still readable by it
        assert reading.lease.holders == 1 and not reading.lease.closed

    # Its last lease released: the descriptor is closed and the unlinked file's blocks are free,
    # though the segment object is still referenced (here, and until now by the prepared query).
    assert segment.lease.closed and segment._container._fd == -1
    assert not any(p.startswith(path) for p in _open_paths())
    assert not any(victim in p.segment_ids for _, p in prepared.items())  # dropped with its segment
