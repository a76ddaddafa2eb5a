"""A scan of 2,000,000 rows (about 160 MiB as Arrow) through Flight SQL (the ADBC driver) from a
real local cluster (``strata up``: the broker is a process of its own): every row arrives, and
the broker's peak resident memory grows by well under the size of the result, because the broker
streams the historicals' batches instead of holding the result (holding it costs about three
times its size). The bound is on buffers (a few pieces queued, gRPC's flow-control windows), not on
timing, so a loaded machine does not change it."""

from __future__ import annotations

import pytest

from bench.load import broker_pid, reset_peak_rss, rss_bytes, scan_through_flight, start_cluster
from common.demo import table as demo_table

ROWS = 2_000_000
SQL = "SELECT __time, channel, page, \"user\", added, deleted FROM wiki"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    data = demo_table(ROWS)
    cluster, endpoints = start_cluster(str(tmp_path_factory.mktemp("scan-memory")), data)
    try:
        yield cluster, endpoints, sum(data.column("added").to_pylist())
    finally:
        cluster.down()


def test_a_big_scan_streams_through_the_broker_in_bounded_memory(cluster):
    local, endpoints, added = cluster
    pid = broker_pid(local)
    scan_through_flight(endpoints["flight"], SQL + " LIMIT 10")  # the first query's one-off costs
    before, _ = rss_bytes(pid)
    assert reset_peak_rss(pid), "cannot reset the broker's peak RSS mark (/proc/PID/clear_refs)"
    rows, nbytes, _ = scan_through_flight(endpoints["flight"], SQL)
    _, peak = rss_bytes(pid)
    assert rows == ROWS
    assert nbytes > 100 << 20
    growth = peak - before
    assert growth < nbytes / 2, f"the broker grew by {growth >> 20} MiB for a {nbytes >> 20} MiB result"
    # The rows are the data's: the sum of a column through the same streamed path.
    import adbc_driver_flightsql.dbapi as flight_sql

    with flight_sql.connect(endpoints["flight"]) as conn, conn.cursor() as cur:
        cur.execute("SELECT added FROM wiki")
        assert sum(cur.fetch_arrow_table().column(0).to_pylist()) == added
