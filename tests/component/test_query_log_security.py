"""Who sees and ends which queries, and who gets projection advice, with [auth] on: a user sees and
kills only their own queries (sys.queries, KILL QUERY over Flight SQL, the CancelQuery RPC) unless
they are the admin, and learns nothing of others' query ids (answered as ids nobody runs); the
advisor answers only about datasources the user may READ."""

from __future__ import annotations

import threading
import time

import adbc_driver_flightsql.dbapi as adbc
import pytest

from common.demo import table as demo_table
from services.cli.advise_command import advise
from services.cli.cluster_client import ClusterClient, ClusterError
from tests.harness.busy_historical import BusyHistorical
from tests.harness.embedded_cluster import EmbeddedCluster

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
USERS_FILE = """
[[users]]
name = "alice"
password = "alice-pw"
[[users.grants]]
action = "READ"
type = "DATASOURCE"
pattern = "wiki"

[[users]]
name = "bob"
password = "bob-pw"
[[users.grants]]
action = "READ"
type = "DATASOURCE"
pattern = "wiki"

[[users]]
name = "carol"
password = "carol-pw"
[[users.grants]]
action = "READ"
type = "DATASOURCE"
pattern = "sales"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("querylog-auth")
    (directory / "users.toml").write_text(USERS_FILE)
    c = EmbeddedCluster(str(directory / "cluster"), historicals=1,
                        auth={"enabled": True, "admin_user": "admin", "admin_password": PASSWORDS["admin"],
                              "users_file": str(directory / "users.toml")})
    try:
        for name, rows in (("wiki", 3_000), ("sales", 1_000)):
            c.wait_queryable(name, len(c.publish(demo_table(rows, days=1), name)))
        yield c
    finally:
        c.stop()


def connect(cluster, user: str):
    return adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}",
                        db_kwargs={"username": user, "password": PASSWORDS[user]}, autocommit=True)


@pytest.fixture(scope="module")
def conns(cluster):
    opened = {user: connect(cluster, user) for user in PASSWORDS}
    yield opened
    for conn in opened.values():
        conn.close()


def client(cluster, user: str | None) -> ClusterClient:
    credentials = (user, PASSWORDS[user]) if user else None
    return ClusterClient(f"127.0.0.1:{cluster.coordinator.grpc.port}", f"127.0.0.1:{cluster.broker.grpc.port}",
                         credentials=credentials)


def rows(conn, sql: str) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table().to_pylist()


def test_users_see_only_their_own_queries_and_the_admin_sees_all(conns):
    rows(conns["alice"], "SELECT COUNT(*) AS n FROM wiki /* alice's */")
    rows(conns["bob"], "SELECT COUNT(*) AS n FROM wiki /* bob's */")
    alice = rows(conns["alice"], 'SELECT "user", sql FROM sys.queries')
    assert {r["user"] for r in alice} == {"alice"}
    assert any("/* alice's */" in r["sql"] for r in alice) and not any("/* bob's */" in r["sql"] for r in alice)
    everyone = rows(conns["admin"], 'SELECT "user", sql FROM sys.queries')
    assert {"alice", "bob"} <= {r["user"] for r in everyone}
    assert any("/* bob's */" in (r["sql"] or "") for r in everyone)


def held_query(cluster, user: str, query_id: str):
    """Run a query as ``user`` in a thread while the historical is busy; (thread, outcome)."""
    outcome: dict = {}

    def body():
        conn = connect(cluster, user)
        try:
            outcome["rows"] = rows(conn, f"SET sqlQueryId = '{query_id}'; SELECT COUNT(*) AS n FROM wiki")
        except Exception as exc:  # noqa: BLE001 - asserted by the test
            outcome["error"] = exc
        finally:
            conn.close()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    admin = client(cluster, "admin")
    try:
        deadline = time.monotonic() + 30
        while not admin.sql(f"SELECT 1 AS x FROM sys.queries WHERE query_id = '{query_id}' "
                            "AND status = 'running'")[0].num_rows:
            assert time.monotonic() < deadline, f"{query_id} never ran"
            time.sleep(0.05)
    finally:
        admin.close()
    return t, outcome


def error_of(call) -> str:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the answer under test
        return str(exc)
    raise AssertionError("the call did not fail")


def test_only_the_owner_or_the_admin_kills_a_query(cluster, conns):
    with BusyHistorical(cluster.historicals[0]):
        t, outcome = held_query(cluster, "alice", "alices-query")
        # Bob is answered exactly as for an id nobody runs: he cannot tell alice's query is running.
        unknown = error_of(lambda: rows(conns["bob"], "KILL QUERY 'nobodys-query'"))
        assert "no running query 'nobodys-query'" in unknown
        assert error_of(lambda: rows(conns["bob"], "KILL QUERY 'alices-query'")) \
            == unknown.replace("nobodys-query", "alices-query")
        # Choosing alice's running id is answered as any free id: bob's statement runs.
        assert rows(conns["bob"], "SET sqlQueryId = 'alices-query'; SELECT 1 AS one") == [{"one": 1}]
        bob = client(cluster, "bob")
        try:
            unknown = error_of(lambda: bob.cancel_query("nobodys-query"))
            assert "NOT_FOUND" in unknown
            assert error_of(lambda: bob.cancel_query("alices-query")) == unknown.replace("nobodys-query",
                                                                                         "alices-query")
        finally:
            bob.close()
        assert t.is_alive() and not outcome  # alice's query runs on
        anonymous = client(cluster, None)
        try:
            with pytest.raises(ClusterError, match="UNAUTHENTICATED"):
                anonymous.cancel_query("alices-query")
        finally:
            anonymous.close()
        assert rows(conns["alice"], "KILL QUERY 'alices-query'") == [{"result": "query alices-query is being killed"}]
        t.join(30)
        assert "error" in outcome and "cancel" in str(outcome["error"]).lower()

        t, outcome = held_query(cluster, "bob", "bobs-query")
        admin = client(cluster, "admin")
        try:
            assert admin.cancel_query("bobs-query") == "query bobs-query is being killed"
        finally:
            admin.close()
        t.join(30)
        assert "error" in outcome
    status = {r["query_id"]: r for r in rows(conns["admin"], "SELECT query_id, status, error_message FROM sys.queries "
                                                              "WHERE query_id IN ('alices-query', 'bobs-query')")}
    assert status["alices-query"]["error_message"] == "killed by alice (KILL QUERY)"
    assert status["bobs-query"]["error_message"] == "killed by admin (KILL QUERY)"


def test_advice_needs_read_on_the_datasource(cluster, conns):
    for _ in range(3):
        rows(conns["alice"], "SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1")
    assert {r["datasource"] for r in rows(conns["alice"], "SELECT datasource FROM sys.projection_advice")} == {"wiki"}
    assert rows(conns["carol"], "SELECT datasource FROM sys.projection_advice") == []
    carol = client(cluster, "carol")
    try:
        with pytest.raises(ClusterError, match="datasource 'wiki' is unknown, or you may not READ it"):
            advise(carol, "wiki")
    finally:
        carol.close()
