"""Result prefetch through a real cluster: Flight SQL's GetFlightInfo starts a read query, DoGet
collects it. Through the ADBC driver and a plain Flight client: the same results and errors as
without prefetch, the query really running before DoGet (the historical's query threads are held
busy, so it cannot finish first), a query killed by id while prefetched, a ticket never fetched
whose query is cancelled and whose slot is freed, and the fallback to running in DoGet when the
prefetch pool or the caller's stream slots are full."""

from __future__ import annotations

import threading
import time

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from common.demo import table as demo_table
from services.broker.core.result_prefetch import Prefetcher
from services.broker.flight_limits import StreamSlots
from tests.harness.busy_historical import BusyHistorical
from tests.harness.embedded_cluster import EmbeddedCluster

ROWS = 6_000
GROUPED = "SELECT channel, COUNT(*) AS n, SUM(added) AS added FROM wiki GROUP BY 1 ORDER BY 1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("prefetch")), historicals=1)
    try:
        c.broker.flight.prefetcher = Prefetcher(8)  # off by default ([broker] prefetch_results)
        c.wiki = demo_table(ROWS, days=2)
        c.segments = c.publish(c.wiki, "wiki")
        c.wait_queryable("wiki", len(c.segments))
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def conn(cluster):
    connection = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    yield connection
    connection.close()


@pytest.fixture
def client(cluster):
    c = flight.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}")
    yield c
    c.close()


@pytest.fixture
def prefetch_off(cluster):
    """The broker's Flight server without prefetch, for the same test (put back afterwards)."""
    server = cluster.broker.flight
    saved = server.prefetcher
    server.prefetcher = Prefetcher(0)
    yield
    server.prefetcher = saved


def run(conn, sql: str, parameters=None) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(sql, parameters)
        return cur.fetch_arrow_table()


def logged(cluster, where: str) -> list[dict]:
    return cluster.client.sql(f"SELECT * FROM sys.queries WHERE {where}")[0].to_pylist()


def wait_logged(cluster, where: str, what: str) -> list[dict]:
    deadline = time.monotonic() + 30
    while not (rows := logged(cluster, where)):
        assert time.monotonic() < deadline, f"{what}: no sys.queries row where {where}"
        time.sleep(0.05)
    return rows


def info_for(client, sql: str) -> flight.FlightInfo:
    return client.get_flight_info(flight.FlightDescriptor.for_command(sql.encode()))


def test_results_are_those_without_prefetch(cluster, conn):
    flight_server = cluster.broker.flight
    started = flight_server.prefetcher.refused, len(logged(cluster, "protocol = 'flight'"))
    statements = [GROUPED, "SELECT COUNT(*) AS n FROM wiki WHERE channel = '#en.wikipedia'",
                  "SELECT page, SUM(added) AS a FROM wiki GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5"]
    with_prefetch = [run(conn, sql) for sql in statements]
    prepared = run(conn, "SELECT COUNT(*) AS n FROM wiki WHERE channel = ?", ("#en.wikipedia",))
    flight_server.prefetcher, saved = Prefetcher(0), flight_server.prefetcher
    try:
        without = [run(conn, sql) for sql in statements]
    finally:
        flight_server.prefetcher = saved
    for a, b in zip(with_prefetch, without):
        assert a.equals(b)
    assert prepared.to_pylist() == with_prefetch[1].to_pylist()
    expected = cluster.wiki.column("channel").to_pylist().count("#en.wikipedia")
    assert with_prefetch[1].to_pylist() == [{"n": expected}]
    assert flight_server.prefetcher.refused == started[0]  # all of them were prefetched
    assert flight_server.streams.open_count() == 0 and flight_server.prefetcher.running() == 0


def test_the_query_runs_before_do_get_and_keeps_its_announced_id(cluster, client):
    seen = []

    class Headers(flight.ClientMiddleware):
        def received_headers(self, headers):
            seen.extend(headers.get("x-strata-query-id", []))

    class Factory(flight.ClientMiddlewareFactory):
        def start_call(self, info):
            return Headers()

    c = flight.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", middleware=[Factory()])
    try:
        with BusyHistorical(cluster.historicals[0]):
            info = info_for(c, f"{GROUPED} /* ahead */")
            [row] = wait_logged(cluster, "sql LIKE '%/* ahead */' AND status = 'running'", "prefetch")
        table = c.do_get(info.endpoints[0].ticket).read_all()
    finally:
        c.close()
    assert table.num_rows == len(set(cluster.wiki.column("channel").to_pylist()))
    assert seen[0] == row["query_id"] and set(seen) == {row["query_id"]}  # announced by GetFlightInfo
    [done] = logged(cluster, f"query_id = '{row['query_id']}'")
    assert (done["status"], done["protocol"], done["result_rows"]) == ("ok", "flight", table.num_rows)
    assert done["remote_address"].startswith("ipv4:127.0.0.1:")


def test_a_user_error_is_raised_at_fetch_as_without_prefetch(cluster, client, prefetch_off):
    def failure() -> str:
        # A timeout is the user's setting: the query plans fine and fails while it runs.
        with BusyHistorical(cluster.historicals[0]):
            info = info_for(client, f"SET sqlQueryId = 'pf-timeout'; SET timeout = 300; {GROUPED}")  # GetFlightInfo succeeds
            with pytest.raises(flight.FlightError) as caught:
                client.do_get(info.endpoints[0].ticket).read_all()
        return caught.value

    old = failure()
    cluster.broker.flight.prefetcher = Prefetcher(8)  # the fixture puts the off one back
    new = failure()
    assert type(new) is type(old) and isinstance(new, flight.FlightTimedOutError)
    message = str(new).split(". Detail")[0]
    assert message == str(old).split(". Detail")[0] == "query pf-timeout timed out"
    assert "Traceback" not in str(new)
    assert cluster.broker.flight.streams.open_count() == 0


def test_a_query_killed_while_prefetched_fails_its_fetch(cluster, client):
    with BusyHistorical(cluster.historicals[0]):
        info = info_for(client, f"SET sqlQueryId = 'pf-kill'; {GROUPED}")
        wait_logged(cluster, "query_id = 'pf-kill' AND status = 'running'", "prefetched query")
        assert cluster.client.cancel_query("pf-kill") == "query pf-kill is being killed"
        with pytest.raises(flight.FlightCancelledError, match="pf-kill|cancel|kill"):
            client.do_get(info.endpoints[0].ticket).read_all()
    [row] = logged(cluster, "query_id = 'pf-kill'")
    assert (row["status"], row["error_message"]) == ("cancelled", "killed by an anonymous user (KILL QUERY)")
    assert cluster.broker.flight.streams.open_count() == 0


def test_a_ticket_never_fetched_cancels_its_query_and_frees_its_slot(cluster, client):
    server = cluster.broker.flight
    saved_ttl = server.tickets.ttl_s
    server.tickets.ttl_s = 1.0
    try:
        with BusyHistorical(cluster.historicals[0]):
            info_for(client, f"SET sqlQueryId = 'pf-unfetched'; {GROUPED}")
            wait_logged(cluster, "query_id = 'pf-unfetched' AND status = 'running'", "prefetched query")
            assert server.streams.open_count() == 1  # the prefetch holds the caller's slot
            # Tickets expire when the server next looks at them: any Flight call after the TTL.
            cluster.wait_until(lambda: info_for(client, "SELECT 1 AS one") and server.tickets.expire() >= 0
                               and bool(logged(cluster, "query_id = 'pf-unfetched' AND status = 'cancelled'")),
                               timeout_s=30, what="the unfetched ticket's query cancelled")
        cluster.wait_until(lambda: server.prefetcher.running() == 0 and server.tickets.expire() >= 0
                           and server.streams.open_count() == 0, timeout_s=30, what="the prefetch released")
    finally:
        server.tickets.ttl_s = saved_ttl
        server.tickets.clear()


def test_full_pool_or_slots_fall_back_to_running_in_do_get(cluster, client):
    server = cluster.broker.flight
    saved_pool, saved_slots = server.prefetcher, server.streams
    server.prefetcher = Prefetcher(1)
    try:
        with BusyHistorical(cluster.historicals[0]) as busy:
            first = info_for(client, f"SET sqlQueryId = 'pf-first'; {GROUPED}")
            second = info_for(client, f"SET sqlQueryId = 'pf-second'; {GROUPED}")
            wait_logged(cluster, "query_id = 'pf-first' AND status = 'running'", "the prefetched query")
            assert server.prefetcher.refused == 1  # the second waits for its DoGet
            assert not logged(cluster, "query_id = 'pf-second'")
            busy.__exit__()
            a = client.do_get(first.endpoints[0].ticket).read_all()
            b = client.do_get(second.endpoints[0].ticket).read_all()
        assert a.equals(b) and a.num_rows > 0
        assert logged(cluster, "query_id = 'pf-second'")[0]["status"] == "ok"
        # The caller's stream slots: a prefetch takes one, and a caller at its limit is not prefetched.
        server.prefetcher, server.streams = Prefetcher(4), StreamSlots(per_caller=1)
        held = info_for(client, GROUPED)
        over = info_for(client, f"{GROUPED} /* over */")
        assert server.prefetcher.refused == 0 and server.streams.open_count() == 1
        assert client.do_get(held.endpoints[0].ticket).read_all().equals(a)
        assert client.do_get(over.endpoints[0].ticket).read_all().equals(a)  # ran in DoGet
        assert server.streams.open_count() == 0
    finally:
        server.prefetcher, server.streams = saved_pool, saved_slots


def test_two_tickets_with_one_chosen_id_both_fetch(cluster, client):
    """Without prefetch two tickets planned under one client-chosen id each run at their DoGet; the
    second is not prefetched while the first runs under that id, so both still answer."""
    server = cluster.broker.flight
    refused = server.prefetcher.refused
    with BusyHistorical(cluster.historicals[0]) as busy:
        first = info_for(client, f"SET sqlQueryId = 'pf-twice'; {GROUPED}")
        second = info_for(client, f"SET sqlQueryId = 'pf-twice'; {GROUPED}")
        wait_logged(cluster, "query_id = 'pf-twice' AND status = 'running'", "the first ticket's query")
        busy.__exit__()
        a = client.do_get(first.endpoints[0].ticket).read_all()
    b = client.do_get(second.endpoints[0].ticket).read_all()
    assert a.equals(b) and a.num_rows > 0 and server.prefetcher.refused == refused
    assert [r["status"] for r in logged(cluster, "query_id = 'pf-twice'")] == ["ok", "ok"]
