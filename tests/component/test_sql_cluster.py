"""SQL through the real cluster's front ends: the broker's Flight SQL endpoint driven by the real
ADBC Flight SQL driver (catalog calls, DataFrames, results far over the 16 MiB message limit,
errors, timeouts, EXPLAIN), a plain ``pyarrow.flight`` client sending SQL as command bytes, and
the ``strata sql`` CLI as a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import adbc_driver_flightsql.dbapi as adbc
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from common.demo import table as demo_table
from services.cli.cluster_client import ClusterError
from tests.harness.embedded_cluster import EmbeddedCluster

ROOT = __file__.rsplit("/tests/", 1)[0]
WIKI_ROWS = 20_000
BIG_ROWS = 40_000
PAYLOAD = 600  # bytes per row of the 'big' datasource: ~25 MB in all
WIKI_COLUMNS = ["__time", "channel", "page", "user", "isRobot", "isAnonymous", "isMinor", "isNew", "isUnpatrolled",
                "namespace", "comment", "cityName", "countryName", "countryIsoCode", "regionName", "metroCode",
                "added", "deleted", "delta"]


def _big_table() -> pa.Table:
    start = 1442016000000  # 2015-09-12
    return pa.table({
        "__time": pa.array([start + i * 1000 for i in range(BIG_ROWS)], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "n": pa.array(range(BIG_ROWS), pa.int64()),
        "payload": pa.array([f"{i:08d}:" + "x" * (PAYLOAD - 9) for i in range(BIG_ROWS)]),
    })


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("sqlcluster")), historicals=2)
    try:
        wiki = demo_table(WIKI_ROWS, days=2)
        c.wiki = wiki
        c.wiki_segments = c.publish(wiki, "wiki", sort_columns=["channel"])
        c.big_segments = c.publish(_big_table(), "big", segment_granularity="hour")
        c.wait_queryable("wiki", len(c.wiki_segments), replicas=2)
        c.wait_queryable("big", len(c.big_segments), replicas=2)
        yield c
    finally:
        c.stop()


def uri(cluster) -> str:
    return f"grpc://127.0.0.1:{cluster.broker.flight.port}"


@pytest.fixture(scope="module")
def conn(cluster):
    # autocommit: strata has no transactions, and the driver warns when asked to turn it off.
    connection = adbc.connect(uri(cluster), autocommit=True)
    yield connection
    connection.close()


def run(conn, sql: str, parameters=None) -> pa.Table:
    with conn.cursor() as cur:
        if parameters is None:
            cur.execute(sql)
        else:
            cur.execute(sql, parameters)
        return cur.fetch_arrow_table()


def error_of(conn, sql: str) -> Exception:
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as info:
            cur.execute(sql)
            cur.fetch_arrow_table()
    return info.value


# ---- ADBC catalog calls ------------------------------------------------------------------------

def test_get_info_names_strata_and_the_driver(conn):
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "strata"
    assert re.match(r"\d+\.\d+", info["vendor_version"])
    assert info["vendor_arrow_version"] == pa.__version__
    assert "Flight SQL" in info["driver_name"]


def test_table_types(conn):
    types = conn.adbc_get_table_types()
    assert {"SYSTEM_TABLE", "TABLE"} <= set(types) and types == sorted(types)


def test_get_objects_lists_datasources_with_columns_and_system_tables(conn):
    objects = conn.adbc_get_objects(depth="all").read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["druid"]
    schemas = {s["db_schema_name"]: s["db_schema_tables"] for s in objects[0]["catalog_db_schemas"]}
    assert {"druid", "sys", "INFORMATION_SCHEMA"} <= set(schemas)
    tables = {t["table_name"]: t for t in schemas["druid"]}
    assert set(tables) == {"wiki", "big"}
    assert tables["wiki"]["table_type"] == "TABLE"
    columns = [(c["column_name"], c["ordinal_position"], c["xdbc_type_name"]) for c in tables["wiki"]["table_columns"]]
    assert [c[0] for c in columns] == WIKI_COLUMNS
    assert [c[1] for c in columns] == list(range(1, len(WIKI_COLUMNS) + 1))
    types = {name: t for name, _, t in columns}
    assert (types["__time"], types["page"], types["added"]) == ("TIMESTAMP", "VARCHAR", "BIGINT")
    assert {t["table_name"]: t["table_type"] for t in schemas["sys"]} == dict.fromkeys(
        ("segments", "servers", "server_segments", "tasks", "projections", "queries", "projection_advice",
         "schema_decisions", "supervisors", "server_properties", "rules"), "SYSTEM_TABLE")
    assert {t["table_name"] for t in schemas["INFORMATION_SCHEMA"]} == {"SCHEMATA", "TABLES", "COLUMNS", "ROUTINES"}
    sys_segments = {t["table_name"]: t for t in schemas["sys"]}["segments"]
    assert {"segment_id", "datasource", "num_rows", "replication"} <= \
        {c["column_name"] for c in sys_segments["table_columns"]}


def test_get_objects_filters_by_pattern(conn):
    objects = conn.adbc_get_objects(depth="columns", db_schema_filter="dru%", table_name_filter="w_ki",
                                    column_name_filter="count%").read_all().to_pylist()
    schemas = objects[0]["catalog_db_schemas"]
    assert [s["db_schema_name"] for s in schemas] == ["druid"]
    (table,) = schemas[0]["db_schema_tables"]
    assert table["table_name"] == "wiki"
    assert [c["column_name"] for c in table["table_columns"]] == ["countryName", "countryIsoCode"]


def test_get_table_schema(conn, cluster):
    schema = conn.adbc_get_table_schema("wiki", db_schema_filter="druid")
    assert schema.names == WIKI_COLUMNS
    assert schema.field("__time").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("added").type == pa.int64()
    assert schema.field("page").metadata[b"ARROW:FLIGHT:SQL:TYPE_NAME"] == b"VARCHAR"
    sys_schema = conn.adbc_get_table_schema("segments", db_schema_filter="sys")
    assert sys_schema.field("num_rows").type == pa.int64()


def test_get_objects_depths_and_table_type_filter(conn):
    catalogs = conn.adbc_get_objects(depth="catalogs").read_all().to_pylist()
    assert [c["catalog_name"] for c in catalogs] == ["druid"]
    assert conn.adbc_get_objects(depth="all", catalog_filter="other").read_all().num_rows == 0
    schemas = conn.adbc_get_objects(depth="db_schemas").read_all().to_pylist()[0]["catalog_db_schemas"]
    assert {"druid", "sys", "INFORMATION_SCHEMA"} <= {s["db_schema_name"] for s in schemas}
    only_tables = conn.adbc_get_objects(depth="tables", table_types_filter=["TABLE"]).read_all().to_pylist()
    listed = {(s["db_schema_name"], t["table_name"], t["table_type"])
              for s in only_tables[0]["catalog_db_schemas"] for t in (s["db_schema_tables"] or [])}
    assert listed == {("druid", "wiki", "TABLE"), ("druid", "big", "TABLE")}


def test_get_table_schema_of_a_missing_table(conn):
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND"):
        conn.adbc_get_table_schema("nope", db_schema_filter="druid")


# ---- results ----------------------------------------------------------------------------------

def test_fetch_df(conn, cluster):
    with conn.cursor() as cur:
        cur.execute("SELECT channel, COUNT(*) AS c, SUM(added) AS a, AVG(added) AS av, MAX(__time) AS t, "
                    "MAX(metroCode) AS m FROM wiki GROUP BY channel ORDER BY c DESC, channel LIMIT 3")
        df = cur.fetch_df()
    assert list(df.columns) == ["channel", "c", "a", "av", "t", "m"]
    counts = pa.compute.value_counts(cluster.wiki.column("channel")).to_pylist()
    top = sorted(counts, key=lambda x: (-x["counts"], x["values"]))[:3]
    assert df["channel"].tolist() == [x["values"] for x in top]
    assert df["c"].tolist() == [x["counts"] for x in top]
    assert str(df["av"].dtype) == "float64" and str(df["t"].dtype).startswith("datetime64")
    assert str(df["t"].dt.tz) == "UTC"


def test_parameters_through_the_driver(conn, cluster):
    got = run(conn, "SELECT COUNT(*) AS c FROM wiki WHERE channel = ? AND added > ?", ("#de.wikipedia", 100))
    want = sum(1 for ch, a in zip(cluster.wiki.column("channel").to_pylist(), cluster.wiki.column("added").to_pylist())
               if ch == "#de.wikipedia" and a > 100)
    assert got.column("c").to_pylist() == [want]


def test_cursor_description_and_fetch_methods(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT __time, channel, added, added / 2.0 AS half, added > 100 AS big FROM wiki "
                    "ORDER BY __time LIMIT 10")
        assert [(d[0], d[1]) for d in cur.description] == [
            ("__time", pa.timestamp("ms", tz="UTC")), ("channel", pa.string()), ("added", pa.int64()),
            ("half", pa.float64()), ("big", pa.bool_())]
        first = cur.fetchone()
        assert len(cur.fetchmany(4)) == 4 and len(cur.fetchall()) == 5
        assert first[0].tzinfo is not None and isinstance(first[4], bool)


def test_several_bound_rows_run_as_one_statement(conn, cluster):
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) AS c FROM wiki WHERE channel = ?",
                    pa.record_batch({"0": ["#en.wikipedia", "#fr.wikipedia", "nope"]}))
        got = [r[0] for r in cur.fetchall()]
    channels = cluster.wiki.column("channel").to_pylist()
    assert got == [channels.count("#en.wikipedia"), channels.count("#fr.wikipedia"), 0]


def test_result_over_16_mib_streams_through_the_driver(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT * FROM big")
        reader = cur.fetch_record_batch()
        batches = list(reader)
    table = pa.Table.from_batches(batches, reader.schema)
    assert table.num_rows == BIG_ROWS
    assert table.nbytes > 16 * 1024 * 1024
    assert len(batches) > 1 and max(b.nbytes for b in batches) < 16 * 1024 * 1024
    assert sorted(table.column("n").to_pylist()) == list(range(BIG_ROWS))
    payload = table.column("payload")
    assert all(len(p) == PAYLOAD for p in payload.slice(0, 100).to_pylist())
    assert pa.compute.sum(pa.compute.utf8_length(payload)).as_py() == BIG_ROWS * PAYLOAD


def test_result_over_16_mib_streams_through_grpc(cluster):
    table, _ = cluster.client.sql("SELECT n, payload FROM big")
    assert table.num_rows == BIG_ROWS and table.nbytes > 16 * 1024 * 1024
    assert pa.compute.sum(table.column("n")).as_py() == BIG_ROWS * (BIG_ROWS - 1) // 2


# ---- errors -----------------------------------------------------------------------------------

def test_syntax_error_reports_line_and_column(conn):
    err = error_of(conn, "SELECT page\nFROM wiki\nWHERE added = = 1")
    assert isinstance(err, adbc_driver_manager.ProgrammingError)
    assert "INVALID_ARGUMENT" in str(err)
    assert re.search(r"SQL syntax error: .* at line 3, column \d+", str(err)), str(err)


def test_unknown_table_names_the_closest(conn):
    err = error_of(conn, "SELECT page FROM wikii")
    assert "unknown table 'wikii'; did you mean 'wiki'" in str(err)
    err = error_of(conn, "SELECT * FROM sys.segmentz")
    assert "did you mean 'sys.segments'" in str(err)


def test_unknown_column_names_the_closest(conn):
    err = error_of(conn, "SELECT pagee FROM wiki")
    assert "unknown column 'pagee'; did you mean 'page'" in str(err)
    err = error_of(conn, "SELECT datasourse FROM sys.segments")
    assert "did you mean 'datasource'" in str(err)


def test_unknown_function_names_the_closest(conn):
    assert "did you mean 'LOWER'" in str(error_of(conn, "SELECT LOWR(page) FROM wiki"))


def test_type_error_names_the_expression(conn):
    err = error_of(conn, "SELECT page + 1 FROM wiki")
    assert isinstance(err, adbc_driver_manager.ProgrammingError)
    assert "cannot apply '+' to VARCHAR expression 'page' in 'page + 1'" in str(err)
    assert "SUM to VARCHAR expression 'channel'" in str(error_of(conn, "SELECT SUM(channel) FROM wiki"))


def test_unsupported_construct_is_named(conn):
    err = error_of(conn, "SELECT page, COUNT(*) OVER (PARTITION BY channel) FROM wiki")
    assert isinstance(err, adbc_driver_manager.NotSupportedError)
    assert "NOT_IMPLEMENTED" in str(err) and "window functions (OVER) are not supported" in str(err)


def test_parameter_count_mismatch(conn):
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match=r"2 '\?' parameter\(s\) but 1 value"):
            cur.execute("SELECT page FROM wiki WHERE added > ? AND deleted < ?", (1,))
            cur.fetch_arrow_table()


BAD_ARGUMENTS = [
    ("SELECT LPAD(page, 'x') FROM wiki", "lpad length must be an integer, got 'x'"),
    ("SELECT ROUND(added, 1.5) FROM wiki", "round scale must be an integer, got 1.5"),
    ("SELECT TIME_FLOOR(__time, 5) FROM wiki", "invalid ISO-8601 period '5'"),
    ("SELECT TIME_EXTRACT(__time, 'FOO') FROM wiki", "unknown TIME_EXTRACT unit 'FOO'"),
    ("SELECT TIME_FORMAT(__time, 'qqq') FROM wiki", "unsupported letter 'q' in time pattern 'qqq'"),
    ("SELECT REGEXP_LIKE(page, '(') FROM wiki", "invalid regular expression '('"),
    ("SELECT TIME_FLOOR(__time, 'P1D', NULL, 'Mars/Phobos') FROM wiki", "unknown time zone 'Mars/Phobos'"),
    ("SELECT COUNT(*) FROM wiki WHERE __time > 'garbage'", "cannot parse 'garbage' as a TIMESTAMP"),
    ("SELECT SUBSTRING(page, 1, 'b') FROM wiki", "SUBSTRING"),
    ("SET timeout = 'abc'; SELECT COUNT(*) FROM wiki", "timeout"),
    ("SELECT MILLIS_TO_TIMESTAMP(100000000000000000) FROM wiki", "MILLIS_TO_TIMESTAMP"),
    ("SELECT TIME_FORMAT(__time, 5) FROM wiki", "TIME_FORMAT"),
]


@pytest.mark.parametrize("sql,message", BAD_ARGUMENTS)
def test_bad_arguments_are_invalid_argument_errors(conn, sql, message):
    err = error_of(conn, sql)
    assert isinstance(err, adbc_driver_manager.ProgrammingError), str(err)
    assert "INVALID_ARGUMENT" in str(err) and message in str(err), str(err)


def test_errors_carry_no_server_traceback(conn):
    message = str(error_of(conn, "SELECT pagee FROM wiki"))
    assert "Traceback" not in message and "flight.py" not in message, message


def test_set_timeout_gives_a_clear_timeout_error(conn):
    slow = ("SET timeout = 1; SELECT page, \"user\", TIME_FLOOR(__time, 'PT1M'), COUNT(*) FROM wiki "
            "GROUP BY 1, 2, 3 ORDER BY 4 DESC")
    err = error_of(conn, slow)
    assert isinstance(err, adbc_driver_manager.OperationalError)
    assert err.status_code == adbc_driver_manager.AdbcStatusCode.TIMEOUT
    assert "timed out" in str(err)
    # the same query without the setting runs
    assert run(conn, slow.split(";", 1)[1]).num_rows > 0


def test_timeout_in_grpc_context(cluster):
    with pytest.raises(ClusterError, match="DEADLINE_EXCEEDED.*timed out"):
        cluster.client.sql("SELECT page, \"user\", COUNT(*) FROM wiki GROUP BY 1, 2", {"timeout": 1})


# ---- EXPLAIN ----------------------------------------------------------------------------------

def test_explain_shows_native_queries(conn):
    table = run(conn, "EXPLAIN PLAN FOR SELECT channel, COUNT(*) AS c FROM wiki "
                      "WHERE __time >= TIMESTAMP '2015-09-12 06:00:00' AND __time < TIMESTAMP '2015-09-13' "
                      "GROUP BY channel")
    assert table.column_names == ["PLAN", "RESOURCES", "ATTRIBUTES"]
    plan = json.loads(table.column("PLAN")[0].as_py())
    (query,) = [p["query"] for p in plan]
    assert query["queryType"] == "groupBy" and query["dataSource"] == "wiki"
    assert query["intervals"] == ["2015-09-12T06:00:00.000Z/2015-09-13T00:00:00.000Z"]
    assert [d["dimension"] for d in query["dimensions"]] == ["channel"]
    assert [a["type"] for a in query["aggregations"]] == ["count"]
    assert json.loads(table.column("RESOURCES")[0].as_py()) == [{"name": "wiki", "type": "DATASOURCE"}]


def test_explain_of_timeseries_and_topn(conn):
    plan = json.loads(run(conn, "EXPLAIN PLAN FOR SELECT TIME_FLOOR(__time, 'PT1H'), SUM(added) FROM wiki GROUP BY 1")
                      .column("PLAN")[0].as_py())
    assert plan[0]["query"]["queryType"] == "timeseries" and plan[0]["query"]["granularity"] in ("hour", "PT1H") \
        or plan[0]["query"]["granularity"].get("period") == "PT1H"
    plan = json.loads(run(conn, "EXPLAIN PLAN FOR SELECT channel, SUM(added) AS s FROM wiki GROUP BY 1 "
                                "ORDER BY s DESC LIMIT 5").column("PLAN")[0].as_py())
    assert plan[0]["query"]["queryType"] == "topN" and plan[0]["query"]["threshold"] == 5


def _run_query_calls(cluster) -> float:
    """RunQuery calls answered by all historicals, whatever their outcome."""
    return sum(s.value for h in cluster.historicals for metric in h.metrics.queries.collect()
               for s in metric.samples if s.name.endswith("_total"))


def test_explain_does_not_run_the_query(cluster, conn):
    # What EXPLAIN means, without a clock: it plans and answers with the plan, and no historical
    # is asked to run anything (a fresh query text, so no earlier run can be mistaken for it).
    sql = "SELECT page, COUNT(*) FROM wiki WHERE added > 4242 GROUP BY 1"
    before = _run_query_calls(cluster)
    table = run(conn, f"EXPLAIN PLAN FOR {sql}")
    assert json.loads(table.column("PLAN")[0].as_py())[0]["query"]["queryType"] == "groupBy"
    assert _run_query_calls(cluster) == before
    # The count does move when the statement runs: the assertion above can fail.
    run(conn, sql)
    deadline = time.monotonic() + 10
    while _run_query_calls(cluster) == before:
        assert time.monotonic() < deadline, "running the statement counted no historical call"
        time.sleep(0.02)


# ---- plain Flight -----------------------------------------------------------------------------

def test_plain_flight_sql_command_bytes(cluster):
    client = flight.connect(uri(cluster))
    try:
        sql = b"SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel ORDER BY c DESC, channel LIMIT 5"
        info = client.get_flight_info(flight.FlightDescriptor.for_command(sql))
        assert info.schema.names == ["channel", "c"]
        got = client.do_get(info.endpoints[0].ticket).read_all()
        assert got.num_rows == 5 and got.schema.equals(info.schema)
        direct = client.do_get(flight.Ticket(sql)).read_all()
        assert direct.equals(got)
        # SET prefixes and the JSON form with context and parameters
        ticket = flight.Ticket(b"SET sqlTimeZone = 'Asia/Tokyo'; SELECT EXTRACT(HOUR FROM MIN(__time)) AS h FROM wiki")
        assert client.do_get(ticket).read_all().column("h").to_pylist() == [9]
        body = {"sql": "SELECT COUNT(*) AS c FROM wiki WHERE channel = ?", "parameters": ["#fr.wikipedia"],
                "context": {"sqlTimeZone": "UTC"}}
        counted = client.do_get(flight.Ticket(json.dumps(body).encode())).read_all().column("c").to_pylist()
        assert counted == [cluster.wiki.column("channel").to_pylist().count("#fr.wikipedia")]
        with pytest.raises((flight.FlightError, pa.ArrowException), match="unknown column 'pagee'; did you mean"):
            client.do_get(flight.Ticket(b"SELECT pagee FROM wiki")).read_all()
    finally:
        client.close()


def _sql_runs(cluster) -> float:
    return cluster.broker.metrics.queries.labels("sql", "sql", "ok")._value.get()


def test_get_flight_info_plans_and_do_get_runs_once(cluster):
    """The front door: GetFlightInfo plans (the schema comes from the plan), DoGet runs the query
    once and streams it; a large result is never run twice."""
    client = flight.connect(uri(cluster))
    try:
        before = _sql_runs(cluster)
        info = client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT __time, n, payload FROM big"))
        assert _sql_runs(cluster) == before and info.total_records == -1
        assert info.schema.names == ["__time", "n", "payload"]
        reader = client.do_get(info.endpoints[0].ticket)
        batches = [chunk.data for chunk in reader]
        assert _sql_runs(cluster) == before + 1
        assert sum(b.num_rows for b in batches) == BIG_ROWS and len(batches) > 1
        assert all(b.schema.equals(info.schema) for b in batches)
    finally:
        client.close()


def test_flight_and_grpc_give_the_same_error(cluster, conn):
    sql = "SELECT pagee FROM wiki"
    flight_err = str(error_of(conn, sql))
    with pytest.raises(ClusterError) as grpc_err:
        cluster.client.sql(sql)
    assert str(grpc_err.value) == "INVALID_ARGUMENT: unknown column 'pagee'; did you mean 'page'?"
    assert "INVALID_ARGUMENT" in flight_err and "unknown column 'pagee'; did you mean 'page'?" in flight_err


def test_ddl_is_done_when_execute_returns(conn):
    """Statements with effects run at GetFlightInfo: drivers fetch the stream in the background,
    so a CREATE TABLE run only at DoGet could still be pending when the next statement starts."""
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE made_now (x VARCHAR) PARTITIONED BY DAY")
        with conn.cursor() as other:
            other.execute("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_NAME = 'made_now'")
            assert other.fetchall() == [("made_now",)]
        assert cur.fetch_arrow_table().column(0).to_pylist() == ["created table druid.made_now"]
        cur.execute("DROP TABLE made_now")
        assert "dropped" in cur.fetch_arrow_table().column(0)[0].as_py()


def test_plain_flight_streams_a_large_result(cluster):
    client = flight.connect(uri(cluster))
    try:
        table = client.do_get(flight.Ticket(b"SELECT __time, payload FROM big")).read_all()
    finally:
        client.close()
    assert table.num_rows == BIG_ROWS and table.nbytes > 16 * 1024 * 1024


# ---- strata sql CLI ---------------------------------------------------------------------------

def cli(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "services.cli.main", "sql",
               "--broker", f"127.0.0.1:{cluster.broker.grpc.port}",
               "--coordinator", f"127.0.0.1:{cluster.coordinator.grpc.port}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT, input=stdin,
                          env={**os.environ, "PYTHONPATH": ROOT})


def test_cli_prints_rows_as_csv(cluster):
    proc = cli(cluster, "SELECT channel, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY c DESC, channel LIMIT 3",
               "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    counts = pa.compute.value_counts(cluster.wiki.column("channel")).to_pylist()
    top = sorted(counts, key=lambda x: (-x["counts"], x["values"]))[:3]
    assert lines == ['"channel","c"'] + [f'"{x["values"]}",{x["counts"]}' for x in top]


def test_cli_json_table_and_stdin(cluster):
    proc = cli(cluster, "SELECT COUNT(*) AS c, MIN(__time) AS t FROM wiki", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["c"] == WIKI_ROWS and row["t"].startswith("2015-09-12")
    proc = cli(cluster, "-", "--format", "table", stdin="SELECT namespace, COUNT(*) AS c FROM wiki GROUP BY 1")
    assert proc.returncode == 0, proc.stderr
    assert "namespace" in proc.stdout and "Main" in proc.stdout and "rows in" in proc.stderr


def test_cli_context_sets_the_time_zone(cluster):
    proc = cli(cluster, "SELECT EXTRACT(HOUR FROM MIN(__time)) AS h FROM wiki", "--format", "csv",
               "--context", "sqlTimeZone=Asia/Tokyo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == ['"h"', "9"]


def test_cli_reports_errors(cluster):
    proc = cli(cluster, "SELECT pagee FROM wiki")
    assert proc.returncode != 0
    assert "unknown column 'pagee'; did you mean 'page'" in proc.stderr
    assert "Traceback" not in proc.stderr
