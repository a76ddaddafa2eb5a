"""The query log through a real cluster: SQL over Flight SQL (the ADBC driver) and gRPC, native
queries over gRPC and plain Flight, each in sys.queries and the JSON-lines file with what it cost;
query ids in responses; KILL QUERY and the CancelQuery RPC ending a query that is really running
(the historical's query threads are held busy, so it cannot finish first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import adbc_driver_flightsql.dbapi as adbc
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from common.demo import table as demo_table
from services.broker.query_log_file import read_lines
from services.cli.cluster_client import ClusterError
from tests.harness.background_call import start_in_background
from tests.harness.busy_historical import BusyHistorical
from tests.harness.embedded_cluster import EmbeddedCluster

ROWS = 6_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("querylog"))
    c = EmbeddedCluster(directory, historicals=1,
                        broker={"query_log_file": os.path.join(directory, "logs", "queries.jsonl")})
    try:
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


def run(conn, sql: str) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def logged(cluster, where: str) -> list[dict]:
    return cluster.client.sql(f"SELECT * FROM sys.queries WHERE {where}")[0].to_pylist()


def test_a_flight_sql_query_is_logged_with_what_it_cost(cluster, conn):
    sql = "SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1 /* cost */"
    result = run(conn, sql)
    [row] = logged(cluster, "sql LIKE '%/* cost */'")
    assert (row["status"], row["kind"], row["protocol"], row["native_type"], row["datasources"]) == \
        ("ok", "sql", "flight", "groupBy", "wiki")
    assert row["remote_address"].startswith("ipv4:127.0.0.1:") and row["user"] is None
    assert row["result_rows"] == result.num_rows == len(set(cluster.wiki.column("channel").to_pylist()))
    assert (row["segments"], row["rows_scanned"]) == (len(cluster.segments), ROWS)  # no filter: every row
    assert row["bytes_read"] > 0 and row["duration_ms"] >= row["planning_ms"] >= 0
    assert json.loads(row["tables"]) == [{"datasource": "wiki", "projection": "base", "rejected": {},
                                          "segments": len(cluster.segments)}]
    assert row["error_class"] is None and row["start_time"].endswith("Z")


def test_filtered_rows_scanned_and_a_client_chosen_id(cluster, conn):
    run(conn, "SET sqlQueryId = 'chosen-1'; SELECT COUNT(*) AS n FROM wiki WHERE channel = '#en.wikipedia'")
    [row] = logged(cluster, "query_id = 'chosen-1'")
    expected = cluster.wiki.column("channel").to_pylist().count("#en.wikipedia")
    assert row["rows_scanned"] == expected and row["native_type"] == "timeseries"


def test_errors_are_logged_with_their_class(cluster, conn):
    with pytest.raises(Exception, match="pag"):
        run(conn, "SELECT pag FROM wiki /* typo */")
    [row] = logged(cluster, "sql LIKE '%/* typo */'")
    assert (row["status"], row["error_class"]) == ("error", "ValidationError")
    assert "page" in row["error_message"]  # the hint the user saw


def test_grpc_responses_carry_the_query_id(cluster):
    table, _, header = cluster.client.run_with_id(sql="SELECT COUNT(*) AS n FROM wiki /* grpc id */")
    assert table.num_rows == 1 and len(header) == 32
    assert logged(cluster, f"query_id = '{header}'")[0]["sql"].endswith("/* grpc id */")
    assert cluster.client.run_with_id(sql="SELECT 1 AS one", query_id="grpc-chosen")[2] == "grpc-chosen"


def test_flight_responses_carry_the_query_id(cluster):
    seen = []

    class Headers(flight.ClientMiddleware):
        def received_headers(self, headers):
            seen.extend(headers.get("x-strata-query-id", []))

    class Factory(flight.ClientMiddlewareFactory):
        def start_call(self, info):
            return Headers()

    client = flight.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", middleware=[Factory()])
    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT COUNT(*) AS n FROM wiki /* fl */"))
        client.do_get(info.endpoints[0].ticket).read_all()
    finally:
        client.close()
    assert seen, "no x-strata-query-id header"
    assert logged(cluster, f"query_id = '{seen[0]}'")[0]["sql"].endswith("/* fl */")


def test_native_queries_are_logged(cluster):
    query = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-14"],
             "granularity": "day", "aggregations": [{"type": "count", "name": "n"}],
             "context": {"queryId": "native-1"}}
    table, stats = cluster.client.native(query)
    [row] = logged(cluster, "query_id = 'native-1'")
    assert (row["kind"], row["sql"], row["native_type"], row["protocol"]) == ("native", None, "timeseries", "grpc")
    assert (row["rows_scanned"], row["result_rows"]) == (stats.rows_scanned, table.num_rows)


def test_the_log_file_has_a_line_per_query(cluster, conn):
    run(conn, "SELECT COUNT(*) AS n FROM wiki /* to the file */")
    [row] = logged(cluster, "sql LIKE '%/* to the file */'")
    path = cluster.broker.queries.log_file.path
    deadline = time.monotonic() + 10
    while True:
        lines = {r.query_id: r for r in read_lines(path)}
        if row["query_id"] in lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    line = lines[row["query_id"]]
    assert (line.status, line.rows_scanned, line.sql) == ("ok", row["rows_scanned"], row["sql"])


# ---- ending a running query -------------------------------------------------------------------------------
def wait_running(cluster, query_id: str) -> None:
    deadline = time.monotonic() + 30
    while not logged(cluster, f"query_id = '{query_id}' AND status = 'running'"):
        assert time.monotonic() < deadline, f"query {query_id} never showed as running"
        time.sleep(0.05)


def test_kill_query_ends_a_running_sql_query(cluster, conn):
    with BusyHistorical(cluster.historicals[0]):
        t, outcome = start_in_background(lambda: cluster.client.sql(
            "SET sqlQueryId = 'to-kill'; SELECT page, COUNT(*) AS n FROM wiki GROUP BY 1", timeout_s=120))
        wait_running(cluster, "to-kill")
        assert run(conn, "KILL QUERY 'to-kill'").to_pylist() == [{"result": "query to-kill is being killed"}]
        t.join(30)
        assert not t.is_alive(), "the killed query is still running"
    assert isinstance(outcome.get("error"), ClusterError) and "CANCELLED" in str(outcome["error"])
    [row] = logged(cluster, "query_id = 'to-kill'")
    assert (row["status"], row["error_message"]) == ("cancelled", "killed by an anonymous user (KILL QUERY)")


@pytest.mark.parametrize("protocol", ["flight", "grpc"])
def test_kill_query_ends_a_statement_still_planning(cluster, conn, monkeypatch, protocol):
    """Flight SQL plans in GetFlightInfo, gRPC inside the run: either way the statement is
    registered before planning starts, and a KILL stops the planner at its next check."""
    sql_service = cluster.broker.sql
    real_plan = sql_service._plan
    planning, release = threading.Event(), threading.Event()

    def slow_plan(sql, *args, **kwargs):  # planning that takes until released, checking as the planner does
        if "/* slow plan */" in sql:
            planning_deadline = args[3] if len(args) > 3 else kwargs["deadline"]  # the statement's own
            planning.set()
            deadline = time.monotonic() + 60
            while not release.wait(0.01) and time.monotonic() < deadline:
                planning_deadline.check()
        return real_plan(sql, *args, **kwargs)

    monkeypatch.setattr(sql_service, "_plan", slow_plan)
    query_id = f"kill-while-planning-{protocol}"
    sql = f"SET sqlQueryId = '{query_id}'; SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1 /* slow plan */"
    if protocol == "flight":
        def call():
            other = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
            try:
                return run(other, sql)
            finally:
                other.close()
    else:
        def call():
            return cluster.client.sql(sql, timeout_s=120)
    t, outcome = start_in_background(call)
    try:
        assert planning.wait(30), "the statement never started planning"
        wait_running(cluster, query_id)
        assert run(conn, f"KILL QUERY '{query_id}'").to_pylist() == [{"result": f"query {query_id} is being killed"}]
        t.join(30)
        assert not t.is_alive(), "the killed statement is still planning"
    finally:
        release.set()
        t.join(30)
    assert "error" in outcome and "cancel" in str(outcome["error"]).lower(), outcome
    [row] = logged(cluster, f"query_id = '{query_id}'")
    assert (row["status"], row["error_message"]) == ("cancelled", "killed by an anonymous user (KILL QUERY)")


def test_kill_query_stops_a_statement_planned_and_not_yet_run(cluster, conn):
    """Flight SQL: GetFlightInfo plans the statement under its id, DoGet runs it later. A KILL
    between the two finds the pending statement, and DoGet fails as cancelled instead of running."""
    from google.protobuf import any_pb2

    from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql

    query_id = "kill-pending"
    command = any_pb2.Any()
    command.Pack(fsql.CommandStatementQuery(
        query=f"SET sqlQueryId = '{query_id}'; SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1 /* pending */"))
    client = flight.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}")
    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(command.SerializeToString()))
        assert run(conn, f"KILL QUERY '{query_id}'").to_pylist() == [{"result": f"query {query_id} is being killed"}]
        with pytest.raises(flight.FlightError, match="(?i)cancel") as raised:
            client.do_get(info.endpoints[0].ticket).read_all()
        assert "killed" in str(raised.value) and "Traceback" not in str(raised.value)
    finally:
        client.close()
    [row] = logged(cluster, f"query_id = '{query_id}'")
    assert (row["status"], row["error_message"]) == ("cancelled", "killed by an anonymous user (KILL QUERY)")
    # The kill is spent: the id names nothing now.
    with pytest.raises(Exception, match=f"no running query '{query_id}'"):
        run(conn, f"KILL QUERY '{query_id}'")


def test_the_cancel_rpc_ends_a_running_native_query(cluster):
    query = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-14"],
             "granularity": "all", "aggregations": [{"type": "count", "name": "n"}]}
    with BusyHistorical(cluster.historicals[0]):
        t, outcome = start_in_background(lambda: cluster.client.run_with_id(native=query, query_id="native-to-cancel",
                                                                            timeout_s=120))
        wait_running(cluster, "native-to-cancel")
        assert cluster.client.cancel_query("native-to-cancel") == "query native-to-cancel is being killed"
        t.join(30)
        assert not t.is_alive(), "the cancelled query is still running"
    assert isinstance(outcome.get("error"), ClusterError) and str(outcome["error"]).startswith("CANCELLED")
    assert logged(cluster, "query_id = 'native-to-cancel'")[0]["status"] == "cancelled"


def test_killing_what_is_not_running(cluster, conn):
    with pytest.raises(Exception, match="no running query 'nothing-here'"):
        run(conn, "KILL QUERY 'nothing-here'")
    with pytest.raises(ClusterError, match="NOT_FOUND: no running query 'nothing-here'"):
        cluster.client.cancel_query("nothing-here")
    # logged once, as the statement that failed (preparing a KILL is not a failure)
    failed = logged(cluster, "sql = 'KILL QUERY ''nothing-here'''")
    assert [r["error_class"] for r in failed] == ["ValidationError"]


# ---- the command line: strata top, strata advise, strata kill ------------------------------------------
ROOT = __file__.rsplit("/tests/", 1)[0]


def strata(cluster, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "services.cli.main", *args, "--broker", f"127.0.0.1:{cluster.broker.grpc.port}",
               "--coordinator", f"127.0.0.1:{cluster.coordinator.grpc.port}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})


def test_strata_top_once_shows_running_queries(cluster, conn):
    run(conn, "SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1")
    with BusyHistorical(cluster.historicals[0]):
        t, outcome = start_in_background(lambda: cluster.client.sql(
            "SET sqlQueryId = 'top-sees-me'; SELECT COUNT(*) AS n FROM wiki /* held for top */", timeout_s=120))
        wait_running(cluster, "top-sees-me")
        proc = strata(cluster, "top", "--once", "--width", "220")
    t.join(30)
    assert proc.returncode == 0, proc.stderr
    assert "queries/s over 60s" in proc.stdout and "1 running" in proc.stdout
    assert "projection hit ratio 0%" in proc.stdout  # wiki has no projections
    assert "top-sees-me" in proc.stdout and "no tasks running" in proc.stdout
    assert "strata top */" not in proc.stdout  # its own query is not reported
    assert outcome["result"][0].to_pylist() == [{"n": ROWS}]


def test_strata_advise_proposes_a_projection_for_the_workload(cluster, conn):
    for _ in range(3):
        run(conn, "SELECT channel, SUM(added) AS a FROM wiki GROUP BY 1")
    proc = strata(cluster, "advise", "wiki", "--sql")
    assert proc.returncode == 0, proc.stderr
    statements = proc.stdout.strip().splitlines()
    by_channel = [s for s in statements if 'AS SELECT "channel", ' in s]
    assert by_channel and 'SUM("added")' in by_channel[0] and by_channel[0].endswith("GROUP BY 1;"), statements
    assert all(s.startswith('ALTER TABLE "wiki" ADD PROJECTION ') and s.endswith(";") for s in statements)
    proc = strata(cluster, "advise", "wiki")
    assert proc.returncode == 0 and "projection advice for wiki" in proc.stdout and "hll" in proc.stdout
    proc = strata(cluster, "advise", "no_such_table")
    assert proc.returncode != 0 and "unknown, or you may not READ it" in proc.stderr


def test_strata_kill_names_what_is_not_running(cluster):
    proc = strata(cluster, "kill", "no-such-query")
    assert proc.returncode != 0 and "no running query 'no-such-query'" in proc.stderr


def test_the_examples_in_the_operations_doc_run(cluster, conn):
    with open(os.path.join(ROOT, "docs", "operations.md"), encoding="utf-8") as f:
        text = f.read()
    block = text.split("```sql\n", 1)[1].split("```", 1)[0]
    statements = [s.strip() for s in block.split(";") if s.strip()]
    assert len(statements) == 2
    run(conn, "SELECT COUNT(*) AS n FROM wiki")
    for sql in statements:
        sql = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
        run(conn, sql)  # plans and runs
    slow = run(conn, "SELECT query_id FROM sys.queries WHERE status = 'ok' AND projection_segments < segments")
    assert slow.num_rows > 0  # wiki has no projections: every query reading it read base rows
