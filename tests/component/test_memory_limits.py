"""Per-query memory limits on a cluster (two historicals, a broker whose own limit is small),
through the real ADBC Flight SQL driver: a groupBy over tens of thousands of groups fails on the
historicals under a low ``maxBytesInMemory``, and on the broker's merge under the broker's
``max_query_bytes``, each with an error naming the limit, the bytes needed and the query id (the
id sys.queries logs); other queries running meanwhile, and afterwards, get their right answers."""

from __future__ import annotations

import re
import threading

import adbc_driver_flightsql.dbapi as adbc
import duckdb
import pytest

from common.demo import table as demo_table
from tests.harness.embedded_cluster import EmbeddedCluster

ROWS = 60_000
BROKER_LIMIT = 2_000_000
MANY_GROUPS = "SELECT page, \"user\", COUNT(*) AS c, SUM(added) AS a FROM wiki GROUP BY 1, 2"
NORMAL = "SELECT channel, COUNT(*) AS c, SUM(added) AS a FROM wiki GROUP BY 1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("memory")), historicals=2,
                        broker={"max_query_bytes": BROKER_LIMIT})
    try:
        data = demo_table(ROWS, days=2)
        segments = c.publish(data, "wiki")
        c.wait_queryable("wiki", len(segments), replicas=2)
        con = duckdb.connect()
        con.register("wiki", data)
        c.expected = sorted(con.sql(NORMAL).fetchall())
        c.groups = con.sql(f"SELECT count(*) FROM ({MANY_GROUPS})").fetchall()[0][0]
        con.close()
        yield c
    finally:
        c.stop()


def connect(cluster):
    return adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)


def run(conn, sql: str):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def normal_answer(conn) -> list:
    return sorted(tuple(r.values()) for r in run(conn, NORMAL).to_pylist())


def refused(conn, sql: str) -> str:
    with pytest.raises(adbc.Error) as err:
        run(conn, sql)
    return str(err.value)


def logged_status(conn, query_id: str) -> str:
    rows = run(conn, f"SELECT status FROM sys.queries WHERE query_id = '{query_id}'").to_pylist()
    return rows[0]["status"] if rows else "not logged"


def _query_id(message: str) -> str:
    match = re.search(r"query (\w+) needs ([\d,]+) bytes in memory", message)
    assert match, message
    return match.group(1)


def test_over_the_limit_on_historicals_while_others_query(cluster):
    assert cluster.groups > 30_000
    failures, answers, stop = [], [], threading.Event()

    def others():
        with connect(cluster) as conn:
            while not stop.is_set():
                try:
                    answers.append(normal_answer(conn))
                except Exception as exc:  # noqa: BLE001 - asserted below
                    failures.append(exc)

    workers = [threading.Thread(target=others) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        with connect(cluster) as conn:
            for _ in range(3):
                message = refused(conn, f"SET maxBytesInMemory = 200000; {MANY_GROUPS}")
                assert "maxBytesInMemory = 200,000 bytes" in message
                assert "on the historical historical-" in message
                needed = int(re.search(r"needs ([\d,]+) bytes", message).group(1).replace(",", ""))
                assert needed > 200_000
                assert "Traceback" not in message
                assert logged_status(conn, _query_id(message)) != "not logged"
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=60)
    assert not failures, failures[:3]
    assert answers and all(a == cluster.expected for a in answers)
    with connect(cluster) as conn:
        assert normal_answer(conn) == cluster.expected


def test_the_broker_refuses_a_merge_over_its_own_limit(cluster):
    with connect(cluster) as conn:
        message = refused(conn, MANY_GROUPS)
        assert "on the broker" in message and f"maxBytesInMemory = {BROKER_LIMIT:,} bytes" in message
        assert "max_query_bytes" in message
        _query_id(message)
        # A query may not raise its limit past the node's: the same refusal.
        message = refused(conn, f"SET maxBytesInMemory = 999999999999; {MANY_GROUPS}")
        assert f"maxBytesInMemory = {BROKER_LIMIT:,} bytes" in message
        assert normal_answer(conn) == cluster.expected
