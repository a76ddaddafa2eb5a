"""Druid's HTTP API on a real cluster's broker, through the clients Druid users bring: pydruid's
DB-API cursor, its SQLAlchemy dialect (what Superset uses), PyDruid's native client with its
pandas export, and the request shapes Grafana's Druid data source sends. Results are checked
against DuckDB over the rows that were published; errors by status and Druid's JSON; a running
query is cancelled by id; a timeout answers 504."""

from __future__ import annotations

import http.client
import time

import duckdb
import orjson
import pyarrow as pa
import pytest
import requests
import sqlalchemy as sa
from pydruid.client import PyDruid
from pydruid.db import connect
from pydruid.utils.aggregators import count, longsum

from common.demo import table as demo_table
from common.errors import ValidationError
from services.broker.druid_http.native_resource import DruidNativeResource, druid_shape
from services.broker.druid_http.result_format import ResultWriter
from services.http_endpoint import HttpEndpoint
from services.metrics import Metrics
from services.query_errors import TIMEOUT, ClientError, QueryFailed
from tests.harness.background_call import start_in_background
from tests.harness.busy_historical import BusyHistorical
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.harness.waiting import wait_until

ROWS = 4_000
INTERVAL = "2015-09-12/2015-09-14"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("druidhttp")), historicals=1)
    try:
        c.coordinator.task_runner.max_running = 0  # submitted INSERT tasks stay PENDING: no Spark here
        c.wiki = demo_table(ROWS, days=2)
        c.segments = c.publish(c.wiki, "wiki")
        c.wait_queryable("wiki", len(c.segments))
        c.url = f"http://127.0.0.1:{c.broker.http.port}"
        yield c
    finally:
        c.stop()


def oracle(cluster, sql: str) -> list[tuple]:
    wiki = cluster.wiki  # noqa: F841 - read by DuckDB
    return duckdb.sql(sql).fetchall()


def sql(cluster, body: dict | str, content_type: str = "application/json") -> requests.Response:
    data = orjson.dumps(body) if isinstance(body, dict) else body
    return requests.post(cluster.url + "/druid/v2/sql", data=data, headers={"Content-Type": content_type},
                         timeout=60)


# ---- pydruid: DB-API, SQLAlchemy, native -----------------------------------------------------------------
def test_pydruid_dbapi_cursor(cluster):
    conn = connect(host="127.0.0.1", port=cluster.broker.http.port, path="/druid/v2/sql/", scheme="http")
    cur = conn.cursor()
    cur.execute("SELECT channel, COUNT(*) AS n, SUM(added) AS added FROM wiki GROUP BY channel ORDER BY channel")
    rows = [tuple(r) for r in cur.fetchall()]
    assert [d[0] for d in cur.description] == ["channel", "n", "added"]
    assert rows == oracle(cluster, "SELECT channel, COUNT(*), SUM(added) FROM wiki GROUP BY 1 ORDER BY 1")
    cur.execute("SELECT __time, page FROM wiki ORDER BY __time LIMIT 1")
    first = cluster.wiki.sort_by("__time").slice(0, 1).to_pylist()[0]
    [row] = cur.fetchall()
    assert row[0] == first["__time"].strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{first['__time'].microsecond // 1000:03d}Z" and row.page == first["page"]
    with pytest.raises(Exception, match=r"druidException \(INVALID_INPUT\): unknown column 'pag'"):
        cur.execute("SELECT pag FROM wiki")


def test_pydruid_header_cursor(cluster):
    conn = connect(host="127.0.0.1", port=cluster.broker.http.port, path="/druid/v2/sql/", header=True)
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) AS n FROM wiki")
    assert [d[0] for d in cur.description] == ["n"] and [tuple(r) for r in cur.fetchall()] == [(ROWS,)]


def test_sqlalchemy_dialect_inspects_and_runs_superset_time_grains(cluster):
    engine = sa.create_engine(f"druid://127.0.0.1:{cluster.broker.http.port}/druid/v2/sql/")
    inspector = sa.inspect(engine)
    assert "druid" in inspector.get_schema_names()
    assert "wiki" in inspector.get_table_names(schema="druid")
    columns = {c["name"]: c for c in inspector.get_columns("wiki", schema="druid")}
    assert set(columns) == set(cluster.wiki.column_names)
    assert isinstance(columns["__time"]["type"], sa.types.TIMESTAMP)
    assert isinstance(columns["added"]["type"], sa.types.BigInteger)
    assert isinstance(columns["channel"]["type"], sa.types.String)
    with engine.connect() as conn:
        weeks = conn.execute(sa.text("SELECT TIME_FLOOR(CAST(__time AS TIMESTAMP), 'P1W') AS w, COUNT(*) AS n "
                                     "FROM wiki GROUP BY 1 ORDER BY 1")).fetchall()
        assert sum(n for _, n in weeks) == ROWS and all(w.endswith("T00:00:00.000Z") for w, _ in weeks)
        sunday_weeks = conn.execute(sa.text(
            "SELECT TIME_SHIFT(TIME_FLOOR(TIME_SHIFT(CAST(__time AS TIMESTAMP), 'P1D', 1), 'P1W'), 'P1D', -1) AS w, "
            "COUNT(*) AS n FROM wiki GROUP BY 1")).fetchall()
        assert sum(n for _, n in sunday_weeks) == ROWS and {w for w, _ in sunday_weeks} == {"2015-09-06T00:00:00.000Z",
                                                                                           "2015-09-13T00:00:00.000Z"}
        [(stamp,)] = conn.execute(sa.text("SELECT MILLIS_TO_TIMESTAMP(1442016000 * 1000) AS t")).fetchall()
        assert stamp == "2015-09-12T00:00:00.000Z"


def test_pydruid_native_client_with_pandas(cluster):
    client = PyDruid(cluster.url, "druid/v2")
    ts = client.timeseries(datasource="wiki", granularity="day", intervals=INTERVAL,
                           aggregations={"n": count("count"), "added": longsum("added")})
    expected = oracle(cluster, "SELECT date_trunc('day', __time) AS d, COUNT(*), SUM(added) FROM wiki GROUP BY 1 "
                               "ORDER BY 1")
    assert [(r["result"]["n"], r["result"]["added"]) for r in ts.result] == [(n, a) for _, n, a in expected]
    frame = client.export_pandas()
    assert list(frame["n"]) == [n for _, n, _ in expected] and "timestamp" in frame.columns
    top = client.topn(datasource="wiki", granularity="all", intervals=INTERVAL, dimension="channel",
                      metric="n", threshold=3, aggregations={"n": count("count")})
    assert [(r["channel"], r["n"]) for r in top.result[0]["result"]] == \
        oracle(cluster, "SELECT channel, COUNT(*) n FROM wiki GROUP BY 1 ORDER BY n DESC, channel LIMIT 3")
    grouped = client.groupby(datasource="wiki", granularity="all", intervals=INTERVAL, dimensions=["namespace"],
                             aggregations={"n": count("count")})
    assert sorted((r["event"]["namespace"], r["event"]["n"]) for r in grouped.result) == \
        sorted(oracle(cluster, "SELECT namespace, COUNT(*) FROM wiki GROUP BY 1"))
    assert all(r["version"] == "v1" and r["timestamp"] == "2015-09-12T00:00:00.000Z" for r in grouped.result)
    assert len(client.export_pandas()) == len(grouped.result)


def test_native_scan_shapes_and_errors(cluster):
    query = {"queryType": "scan", "dataSource": "wiki", "intervals": [INTERVAL], "columns": ["__time", "channel"],
             "limit": 3, "order": "ascending"}
    r = requests.post(cluster.url + "/druid/v2", json=query, timeout=60)
    [batch] = r.json()
    assert batch["columns"] == ["__time", "channel"] and len(batch["events"]) == 3
    assert isinstance(batch["events"][0]["__time"], int) and r.headers["X-Druid-Query-Id"]
    compact = requests.post(cluster.url + "/druid/v2", json={**query, "resultFormat": "compactedList",
                                                             "context": {"queryId": "scan-1"}}, timeout=60)
    assert compact.json()[0]["events"] == [[e["__time"], e["channel"]] for e in batch["events"]]
    assert compact.headers["X-Druid-Query-Id"] == "scan-1"
    arrays = requests.post(cluster.url + "/druid/v2", json={
        "queryType": "groupBy", "dataSource": "wiki", "intervals": [INTERVAL], "granularity": "day",
        "dimensions": ["namespace"], "aggregations": [{"type": "count", "name": "n"}],
        "context": {"resultAsArray": True}}, timeout=60).json()
    assert sum(row[2] for row in arrays) == ROWS and all(isinstance(row[0], int) for row in arrays)
    bad = requests.post(cluster.url + "/druid/v2", data=b"{nope", timeout=60)
    assert bad.status_code == 400 and bad.json()["error"] == "Json parse failed"
    unknown = requests.post(cluster.url + "/druid/v2", json={"queryType": "search", "dataSource": "wiki"}, timeout=60)
    assert unknown.status_code == 400 and "unknown queryType 'search'" in unknown.json()["errorMessage"]


def _native(cluster, query: dict) -> requests.Response:
    return requests.post(cluster.url + "/druid/v2", json=query, timeout=60)


def _iso_ms(value) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def test_time_boundary_datasource_and_segment_metadata(cluster):
    times = cluster.wiki.column("__time")
    low, high = _iso_ms(pa.compute.min(times).as_py()), _iso_ms(pa.compute.max(times).as_py())
    assert _native(cluster, {"queryType": "timeBoundary", "dataSource": "wiki"}).json() == \
        [{"timestamp": low, "result": {"minTime": low, "maxTime": high}}]
    assert _native(cluster, {"queryType": "timeBoundary", "dataSource": "wiki", "bound": "maxTime"}).json() == \
        [{"timestamp": high, "result": {"maxTime": high}}]
    assert _native(cluster, {"queryType": "dataSourceMetadata", "dataSource": "wiki"}).json() == \
        [{"timestamp": high, "result": {"maxIngestedEventTime": high}}]
    segments = _native(cluster, {"queryType": "segmentMetadata", "dataSource": "wiki"}).json()
    assert sorted(s["id"] for s in segments) == sorted(str(d.id) for d in cluster.segments)
    assert sum(s["numRows"] for s in segments) == ROWS
    assert segments[0]["columns"]["added"]["type"] == "LONG" and segments[0]["columns"]["page"]["type"] == "STRING"
    [merged] = _native(cluster, {"queryType": "segmentMetadata", "dataSource": "wiki", "merge": True}).json()
    assert merged["numRows"] == ROWS and set(merged["columns"]) == set(cluster.wiki.column_names)


def test_cancel_a_running_native_query(cluster):
    query = {"queryType": "timeseries", "dataSource": "wiki", "intervals": [INTERVAL], "granularity": "all",
             "aggregations": [{"type": "count", "name": "n"}], "context": {"queryId": "native-http-cancel"}}
    with BusyHistorical(cluster.historicals[0]):
        t, outcome = start_in_background(lambda: _native(cluster, query))
        wait_until(lambda: _running(cluster, "native-http-cancel"), 30, "the native query to run")
        assert requests.delete(cluster.url + "/druid/v2/native-http-cancel", timeout=60).status_code == 202
        t.join(30)
        assert not t.is_alive()
    assert outcome["result"].status_code == 500 and outcome["result"].json()["error"] == "Query cancelled"
    assert requests.delete(cluster.url + "/druid/v2/native-http-cancel", timeout=60).status_code == 404


# ---- the SQL endpoint as scripts and Grafana use it -----------------------------------------------------
def test_grafana_request_shapes(cluster):
    status = requests.get(cluster.url + "/status", timeout=60)
    assert status.status_code == 200 and "version" in status.json() and "memory" in status.json()
    health = requests.get(cluster.url + "/status/health", timeout=60)  # Druid's bare true, as every Druid process
    assert (health.status_code, health.headers["Content-Type"], health.content) == (200, "application/json", b"true")
    assert requests.get(cluster.url + "/status/ready", timeout=60).json()["healthy"] is True
    r = sql(cluster, {"query": "SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 2",
                      "resultFormat": "array", "header": True, "context": {"sqlTimeZone": "Etc/UTC"}})
    assert r.status_code == 200 and r.headers["X-Druid-SQL-Header-Included"] == "yes"
    body = r.json()
    assert body[0] == ["channel", "n"] and [tuple(x) for x in body[1:]] == \
        oracle(cluster, "SELECT channel, COUNT(*) n FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 2")
    lines = sql(cluster, {"query": "SELECT COUNT(*) AS n FROM wiki", "resultFormat": "objectLines"})
    assert lines.headers["Content-Type"] == "text/plain" and lines.text == f'{{"n":{ROWS}}}\n\n'


def test_every_format_of_a_streamed_scan_matches_the_rows(cluster):
    query = "SELECT __time, channel, added FROM wiki WHERE added > 100"
    expected = oracle(cluster, "SELECT strftime(__time, '%Y-%m-%dT%H:%M:%S.%gZ'), channel, added FROM wiki "
                               "WHERE added > 100")
    got = {}
    for fmt in ("object", "array", "objectLines", "arrayLines", "csv"):
        r = sql(cluster, {"query": query, "resultFormat": fmt})
        assert r.status_code == 200, r.text
        text = r.text
        if fmt == "object":
            rows = [tuple(x.values()) for x in orjson.loads(text)]
        elif fmt == "array":
            rows = [tuple(x) for x in orjson.loads(text)]
        elif fmt == "csv":
            assert text.endswith("\n\n")
            rows = [(t, c, int(a)) for t, c, a in (line.rsplit(",", 2) for line in text[:-2].split("\n"))]
        else:
            assert text.endswith("\n\n")
            rows = [tuple(x.values()) if fmt == "objectLines" else tuple(x)
                    for x in map(orjson.loads, text[:-2].split("\n"))]
        got[fmt] = sorted(rows)
    assert all(rows == sorted(expected) for rows in got.values())


def test_text_and_form_bodies_query_ids_and_parameters(cluster):
    plain = sql(cluster, "SELECT 1 + 1 AS two", "text/plain")
    assert plain.json() == [{"two": 2}] and plain.headers["X-Druid-SQL-Query-Id"]
    form = sql(cluster, "SELECT%20%31%20AS%20one", "application/x-www-form-urlencoded")
    assert form.json() == [{"one": 1}]
    chosen = sql(cluster, {"query": "SELECT COUNT(*) AS n FROM wiki WHERE channel = ? AND added > ?",
                           "parameters": [{"type": "VARCHAR", "value": "#en.wikipedia"},
                                          {"type": "BIGINT", "value": 10}],
                           "context": {"sqlQueryId": "http-chosen-id"}})
    assert chosen.headers["X-Druid-SQL-Query-Id"] == "http-chosen-id"
    assert chosen.json() == [{"n": oracle(cluster, "SELECT COUNT(*) FROM wiki WHERE channel = '#en.wikipedia' "
                                                   "AND added > 10")[0][0]}]
    typed = sql(cluster, {"query": "SELECT COUNT(*) AS n FROM wiki WHERE __time >= ? AND added * ? > 10",
                          "parameters": [{"type": "TIMESTAMP", "value": "2015-09-13 00:00:00"},
                                         {"type": "DOUBLE", "value": 1.5}]})
    assert typed.json() == [{"n": oracle(cluster, "SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ "
                                                  "'2015-09-13 00:00:00+00' AND added * 1.5 > 10")[0][0]}]
    logged = cluster.client.sql("SELECT protocol, status FROM sys.queries WHERE query_id = 'http-chosen-id'")[0]
    assert logged.to_pylist() == [{"protocol": "http", "status": "ok"}]


def test_errors_by_category(cluster):
    bad_column = sql(cluster, {"query": "SELECT pag FROM wiki"})
    assert bad_column.status_code == 400
    assert bad_column.json() == {"error": "druidException", "errorCode": "invalidInput", "persona": "USER",
                                 "category": "INVALID_INPUT", "context": {},
                                 "errorMessage": "unknown column 'pag'; did you mean 'page'?"}
    assert sql(cluster, "SELECT 1", "application/xml").status_code == 415
    for body in (b"{oops", b'{"query": ""}', b'{"query": "SELECT 1", "resultFormat": "xml"}'):
        r = sql(cluster, body)
        assert r.status_code == 400 and isinstance(r.json()["error"], str), body
    unsupported = sql(cluster, {"query": "SELECT * FROM wiki FOR UPDATE"})
    assert unsupported.status_code in (400, 501) and isinstance(unsupported.json()["error"], str)
    missing = requests.delete(cluster.url + "/druid/v2/sql/not-running", timeout=60)
    assert missing.status_code == 404 and missing.json()["category"] == "NOT_FOUND"
    assert requests.get(cluster.url + "/druid/v2/nothing/here", timeout=60).status_code == 404


def _running(cluster, query_id: str) -> bool:
    table = cluster.client.sql(f"SELECT status FROM sys.queries WHERE query_id = '{query_id}'")[0]
    return "running" in table.column("status").to_pylist()


def test_cancel_a_running_query_by_id(cluster):
    with BusyHistorical(cluster.historicals[0]):
        t, outcome = start_in_background(lambda: sql(cluster, {
            "query": "SELECT page, COUNT(*) AS n FROM wiki GROUP BY 1", "context": {"sqlQueryId": "http-cancel-me"}}))
        wait_until(lambda: _running(cluster, "http-cancel-me"), 30, "the query to show as running")
        r = requests.delete(cluster.url + "/druid/v2/sql/http-cancel-me", timeout=60)
        assert r.status_code == 202 and r.content == b""
        t.join(30)
        assert not t.is_alive(), "the cancelled query is still running"
    answer = outcome["result"]
    assert answer.status_code == 500 and answer.json()["error"] == "Query cancelled"
    assert answer.json()["errorClass"] == "org.apache.druid.query.QueryInterruptedException"


def test_a_timeout_answers_504(cluster):
    with BusyHistorical(cluster.historicals[0]):
        r = sql(cluster, {"query": "SELECT COUNT(*) AS n FROM wiki", "context": {"timeout": 200}})
    assert r.status_code == 504 and r.json()["error"] == "Query timeout"
    assert r.json()["errorClass"] == "org.apache.druid.query.QueryTimeoutException"


def test_datasource_metadata(cluster):
    assert "wiki" in requests.get(cluster.url + "/druid/v2/datasources", timeout=60).json()
    shape = requests.get(cluster.url + "/druid/v2/datasources/wiki", timeout=60).json()
    assert set(shape["dimensions"]) == set(cluster.wiki.column_names) - {"__time"}
    assert requests.get(cluster.url + "/druid/v2/datasources/nope", timeout=60).status_code == 404
    assert requests.get(cluster.url + "/status/selfDiscovered/status", timeout=60).json() == {"selfDiscovered": True}


# ---- truncation: an error after the first rows leaves a body a client can tell is cut short ----------------
@pytest.mark.parametrize("fmt", ["object", "array", "objectLines", "arrayLines", "csv"])
def test_a_mid_stream_error_truncates_the_body(fmt):
    table = pa.table({"n": list(range(10))})

    def failing():
        yield table.to_batches()[0]
        raise QueryFailed(ClientError(TIMEOUT, "query timed out"))

    def handler(method, path, query, body, headers):
        writer = ResultWriter(fmt, table.schema, header=True)
        return 200, writer.content_type, writer.write_all(failing()), {"X-Druid-SQL-Query-Id": "x"}

    endpoint = HttpEndpoint("127.0.0.1", 0, Metrics("test"), lambda: {"healthy": True})
    endpoint.route("/druid/v2/sql", handler)
    endpoint.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
        conn.request("POST", "/druid/v2/sql", body=b"{}")
        response = conn.getresponse()
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
        partial = cut.value.partial
        assert partial and b"9" in partial  # the rows sent before the failure arrived
        if fmt in ("object", "array"):
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(partial)
        else:
            assert not partial.endswith(b"\n\n")
        conn.close()
    finally:
        endpoint.stop()


def test_native_scan_streams_past_a_small_memory_budget(cluster):
    """A scan larger than the broker's memory budget (its max_query_bytes): held whole (the
    executor's run) it is refused; through POST /druid/v2 it streams, chunked, and every row
    arrives as Druid writes it."""
    budget = 200_000  # less than the whole result, held on the broker
    query = {"queryType": "scan", "dataSource": "wiki", "intervals": [INTERVAL]}
    executor = cluster.broker.executor
    configured, executor.max_query_bytes = executor.max_query_bytes, budget
    try:
        with pytest.raises(ValidationError, match="on the broker .* over its limit maxBytesInMemory"):
            executor.execute(query, 60)
        with requests.post(cluster.url + "/druid/v2", json=query, stream=True, timeout=60) as r:
            assert r.status_code == 200 and r.headers.get("Transfer-Encoding") == "chunked", r.content[:600]
            assert r.headers["X-Druid-Query-Id"]
            body = b"".join(r.iter_content(chunk_size=None))
    finally:
        executor.max_query_bytes = configured
    assert len(body) > budget
    assert body == orjson.dumps(orjson.loads(body))  # Druid's compact JSON, nothing extra
    [answer] = orjson.loads(body)
    expected = druid_shape(query, cluster.wiki)[0]
    assert answer["segmentId"] == "wiki" and set(answer["columns"]) == set(expected["columns"])
    assert sorted(map(orjson.dumps, answer["events"]), key=bytes) == \
        sorted((orjson.dumps({c: e[c] for c in answer["columns"]}) for e in expected["events"]), key=bytes)
    compact = dict(query, resultFormat="compactedList", columns=["__time", "channel", "added"], limit=5,
                   order="ascending")
    [rows] = requests.post(cluster.url + "/druid/v2", json=compact, timeout=60).json()
    first = cluster.wiki.sort_by("__time").slice(0, 5)
    assert rows["columns"] == ["__time", "channel", "added"]
    assert [r[0] for r in rows["events"]] == [int(t.timestamp() * 1000) for t in first.column("__time").to_pylist()]
    empty = dict(query, intervals=["2001-01-01/2001-01-02"])
    assert requests.post(cluster.url + "/druid/v2", json=empty, timeout=60).content == b"[]"


@pytest.mark.parametrize("fmt", ["list", "compactedList"])
def test_a_mid_stream_error_truncates_a_native_scan(fmt):
    table = pa.table({"__time": pa.array([0, 1000], pa.timestamp("ms", tz="UTC")), "n": [7, 9]})

    class FailingFrontDoor:  # the rows of a scan, then a failure (a historical lost part way)
        def stream(self, request, expected_schema=None, is_active=lambda: True, native=False):
            assert native and request.native["queryType"] == "scan"

            def batches():
                yield table.to_batches()[0]
                raise QueryFailed(ClientError(TIMEOUT, "query timed out"))
            return batches()

    resource = DruidNativeResource(FailingFrontDoor())
    endpoint = HttpEndpoint("127.0.0.1", 0, Metrics("test"), lambda: {"healthy": True})
    endpoint.route("/druid/v2", lambda method, path, query, body, headers: resource.post(body, headers, query))
    endpoint.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
        conn.request("POST", "/druid/v2", body=orjson.dumps({"queryType": "scan", "dataSource": "t",
                                                             "intervals": [INTERVAL], "resultFormat": fmt}))
        response = conn.getresponse()
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
        partial = cut.value.partial
        assert b"1000" in partial and b"9" in partial  # the rows sent before the failure arrived
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(partial)
        assert orjson.loads(partial + b"]}]")[0]["events"]  # only the ending is missing
        conn.close()
    finally:
        endpoint.stop()


def test_many_rows_stream_in_chunks(cluster):
    started = time.monotonic()
    body = {"query": "SELECT * FROM wiki", "resultFormat": "arrayLines"}
    with requests.post(cluster.url + "/druid/v2/sql", json=body, stream=True, timeout=60) as r:
        assert r.headers.get("Transfer-Encoding") == "chunked"
        lines = sum(chunk.count(b"\n") for chunk in r.iter_content(chunk_size=None))
    assert lines == ROWS + 1  # one per row, then the blank line
    assert time.monotonic() - started < 60


# ---- SQL ingestion: tasks ---------------------------------------------------------------------------------
EXTERN = """TABLE(EXTERN('{"type": "inline", "data": "2015-09-12T00:00:00Z,a\\n"}',
    '{"type": "csv", "columns": ["ts", "s"]}',
    '[{"name": "ts", "type": "string"}, {"name": "s", "type": "string"}]'))"""
INSERT = f"INSERT INTO fresh SELECT TIME_PARSE(ts) AS __time, s FROM {EXTERN} PARTITIONED BY DAY"


def test_sql_task_submits_ingestion_and_the_task_api_follows_it(cluster):
    submitted = sql(cluster, {"query": INSERT})
    assert submitted.status_code == 200, submitted.text
    task_id = submitted.json()["taskId"]
    assert submitted.json() == {"taskId": task_id, "state": "RUNNING"}
    status = requests.get(f"{cluster.url}/druid/indexer/v1/task/{task_id}/status", timeout=60).json()
    assert status["task"] == task_id
    assert (status["status"]["statusCode"], status["status"]["runnerStatusCode"], status["status"]["dataSource"]) == \
        ("RUNNING", "PENDING", "fresh")
    replace = f"REPLACE INTO fresh OVERWRITE ALL SELECT TIME_PARSE(ts) AS __time, s FROM {EXTERN} PARTITIONED BY DAY"
    via_task = requests.post(cluster.url + "/druid/v2/sql/task", json={"query": replace}, timeout=60)
    assert via_task.status_code == 200, via_task.text
    pending = requests.get(cluster.url + "/druid/indexer/v1/tasks?state=pending", timeout=60).json()
    assert {task_id, via_task.json()["taskId"]} <= {t["id"] for t in pending}
    assert requests.get(cluster.url + "/druid/indexer/v1/tasks?state=complete", timeout=60).json() == []
    report = requests.get(f"{cluster.url}/druid/indexer/v1/task/{task_id}/reports", timeout=60).json()
    assert report["ingestionStatsAndErrors"]["taskId"] == task_id
    assert requests.get(f"{cluster.url}/druid/indexer/v1/task/no-such-task/status", timeout=60).status_code == 404
    [row] = sql(cluster, {"query": f"SELECT group_id, runner_status, status, error_msg FROM sys.tasks "
                                   f"WHERE task_id = '{task_id}'"}).json()
    assert row == {"group_id": task_id, "runner_status": "PENDING", "status": "PENDING", "error_msg": None}
    select = requests.post(cluster.url + "/druid/v2/sql/task", json={"query": "SELECT 1"}, timeout=60)
    assert select.status_code == 400 and "INSERT and REPLACE" in select.json()["errorMessage"]
    bad = sql(cluster, {"query": INSERT.replace(" PARTITIONED BY DAY", "")})
    assert bad.status_code == 400 and "PARTITIONED BY" in bad.json()["errorMessage"], bad.text


# ---- asynchronous statements ---------------------------------------------------------------------------
def _statement(cluster, query_id: str) -> dict:
    return requests.get(f"{cluster.url}/druid/v2/sql/statements/{query_id}", timeout=60).json()


def test_statements_run_poll_and_page(cluster, monkeypatch):
    monkeypatch.setattr(cluster.broker.druid_http.statements, "page_rows", 1_000)
    query = "SELECT __time, channel, added FROM wiki ORDER BY __time"
    r = requests.post(cluster.url + "/druid/v2/sql/statements", json={"query": query}, timeout=60)
    assert r.status_code == 200, r.text
    submitted = r.json()
    query_id = submitted["queryId"]
    assert submitted["state"] == "RUNNING" and submitted["durationMs"] == -1
    assert submitted["schema"] == [{"name": "__time", "type": "TIMESTAMP", "nativeType": "LONG"},
                                   {"name": "channel", "type": "VARCHAR", "nativeType": "STRING"},
                                   {"name": "added", "type": "BIGINT", "nativeType": "LONG"}]
    done = wait_until(lambda: (s := _statement(cluster, query_id))["state"] != "RUNNING" and s, 60, "the statement")
    assert done["state"] == "SUCCESS" and done["result"]["numTotalRows"] == ROWS
    assert [p["numRows"] for p in done["result"]["pages"]] == [1_000] * (ROWS // 1_000)
    expected = oracle(cluster, "SELECT strftime(__time, '%Y-%m-%dT%H:%M:%S.%gZ'), channel, added FROM wiki "
                               "ORDER BY __time")
    pages = []
    for page in done["result"]["pages"]:
        got = requests.get(f"{cluster.url}/druid/v2/sql/statements/{query_id}/results",
                           params={"page": page["id"], "resultFormat": "array"}, timeout=60)
        pages += [tuple(row) for row in got.json()]
    assert sorted(pages) == sorted(expected)
    everything = requests.get(f"{cluster.url}/druid/v2/sql/statements/{query_id}/results", timeout=60).json()
    assert len(everything) == ROWS and set(everything[0]) == {"__time", "channel", "added"}
    beyond = requests.get(f"{cluster.url}/druid/v2/sql/statements/{query_id}/results", params={"page": 99}, timeout=60)
    assert beyond.status_code == 400 and "page 99 does not exist" in beyond.json()["errorMessage"]
    assert requests.delete(f"{cluster.url}/druid/v2/sql/statements/{query_id}", timeout=60).status_code == 200
    assert requests.get(f"{cluster.url}/druid/v2/sql/statements/{query_id}", timeout=60).status_code == 404


def test_statements_pages_hold_rows_per_page(cluster):
    """Druid's rowsPerPage context key sizes the pages (the web console asks for a screenful);
    SET rowsPerPage in the SQL wins over the context, and a bad value is refused naming the key."""
    query = "SELECT channel, COUNT(*) AS n FROM wiki GROUP BY channel ORDER BY channel"
    expected = oracle(cluster, "SELECT channel, COUNT(*) FROM wiki GROUP BY channel ORDER BY channel")
    assert len(expected) > 3
    for body, size in (({"query": query, "context": {"rowsPerPage": 3}}, 3),
                       ({"query": "SET rowsPerPage = 2; " + query, "context": {"rowsPerPage": 3}}, 2)):
        r = requests.post(cluster.url + "/druid/v2/sql/statements", json=body, timeout=60)
        assert r.status_code == 200, r.text
        query_id = r.json()["queryId"]
        done = wait_until(lambda: (s := _statement(cluster, query_id))["state"] != "RUNNING" and s, 60,
                          "the statement")
        counts = [p["numRows"] for p in done["result"]["pages"]]
        assert counts == [size] * (len(expected) // size) + ([len(expected) % size] if len(expected) % size else [])
        got = []
        for page in done["result"]["pages"]:
            rows = requests.get(f"{cluster.url}/druid/v2/sql/statements/{query_id}/results",
                                params={"page": page["id"], "resultFormat": "array"}, timeout=60).json()
            assert len(rows) == page["numRows"]
            got += [tuple(row) for row in rows]
        assert got == expected  # in order: page N holds rows N*size .. N*size+size-1
        requests.delete(f"{cluster.url}/druid/v2/sql/statements/{query_id}", timeout=60)
    for bad in (0, -5, "ten", 2.5, True):
        r = requests.post(cluster.url + "/druid/v2/sql/statements", timeout=60,
                          json={"query": query, "context": {"rowsPerPage": bad}})
        assert r.status_code == 400 and "rowsPerPage" in r.json()["errorMessage"], (bad, r.text)


def test_statements_refused_cancelled_and_ingestion(cluster):
    bad = requests.post(cluster.url + "/druid/v2/sql/statements", json={"query": "SELECT nope FROM wiki"}, timeout=60)
    assert bad.status_code == 400 and bad.json()["category"] == "INVALID_INPUT"
    with BusyHistorical(cluster.historicals[0]):
        r = requests.post(cluster.url + "/druid/v2/sql/statements", timeout=60, json={
            "query": "SELECT page, COUNT(*) AS n FROM wiki GROUP BY 1", "context": {"sqlQueryId": "async-cancel"}})
        assert r.json()["queryId"] == "async-cancel"
        wait_until(lambda: _running(cluster, "async-cancel"), 30, "the statement to run")
        early = requests.get(f"{cluster.url}/druid/v2/sql/statements/async-cancel/results", timeout=60)
        assert early.status_code == 400 and "is RUNNING" in early.json()["errorMessage"]
        assert requests.delete(f"{cluster.url}/druid/v2/sql/statements/async-cancel", timeout=60).status_code == 202
        state = wait_until(lambda: (s := _statement(cluster, "async-cancel"))["state"] != "RUNNING" and s, 30,
                           "the cancelled statement to end")
    assert state["state"] == "CANCELED" and state["errorDetails"]["error"] == "Query cancelled"
    ingest = requests.post(cluster.url + "/druid/v2/sql/statements", json={"query": INSERT}, timeout=60).json()
    assert ingest["state"] == "ACCEPTED"
    assert _statement(cluster, ingest["queryId"])["state"] == "ACCEPTED"  # the task waits: no Spark here


# ---- Druid's documented sample, on the Wikipedia quickstart data ------------------------------------------
WIKITICKER = "/work/shared/data/wikiticker-2015-09-12-sampled.json.gz"
# The SQL API reference's sample response for user BlueMoon2662 (header, typesHeader, sqlTypesHeader),
# columns in its order. The reference was written in Druid's old default-value null mode, where the
# row's missing city, country and region print as ""; with SQL-compatible nulls (Druid's default
# since 28, and strata's) they are null, as here.
DOCUMENTED = [
    ("__time", "LONG", "TIMESTAMP", "2015-09-12T00:47:53.259Z"), ("channel", "STRING", "VARCHAR", "#ja.wikipedia"),
    ("cityName", "STRING", "VARCHAR", None), ("comment", "STRING", "VARCHAR", "/* 対戦通算成績と得失点 */"),
    ("countryIsoCode", "STRING", "VARCHAR", None), ("countryName", "STRING", "VARCHAR", None),
    ("isAnonymous", "LONG", "BIGINT", 0), ("isMinor", "LONG", "BIGINT", 1), ("isNew", "LONG", "BIGINT", 0),
    ("isRobot", "LONG", "BIGINT", 0), ("isUnpatrolled", "LONG", "BIGINT", 0), ("metroCode", "LONG", "BIGINT", None),
    ("namespace", "STRING", "VARCHAR", "Main"), ("page", "STRING", "VARCHAR", "アルビレックス新潟の年度別成績一覧"),
    ("regionIsoCode", "STRING", "VARCHAR", None), ("regionName", "STRING", "VARCHAR", None),
    ("user", "STRING", "VARCHAR", "BlueMoon2662"), ("delta", "LONG", "BIGINT", 14), ("added", "LONG", "BIGINT", 14),
    ("deleted", "LONG", "BIGINT", 0)]


def _wikiticker() -> pa.Table:
    """The quickstart sample as type-aware discovery ingests it: booleans as LONG 1/0."""
    import gzip

    import pyarrow.json as pa_json

    with gzip.open(WIKITICKER, "rb") as f:
        raw = pa_json.read_json(f)
    columns = {"__time": pa.compute.cast(raw.column("time"), pa.timestamp("ms", tz="UTC"))}
    for name in raw.column_names:
        if name == "time":
            continue
        column = raw.column(name)
        columns[name] = column.cast(pa.int64()) if pa.types.is_boolean(column.type) else column
    return pa.table(columns)


def test_the_sql_api_references_sample_response(cluster):
    cluster.wait_queryable("wikipedia", len(cluster.publish(_wikiticker(), "wikipedia")), timeout_s=120)
    names = ", ".join(f'"{c}"' for c, *_ in DOCUMENTED)
    r = requests.post(cluster.url + "/druid/v2/sql", timeout=60, json={
        "query": f"SELECT {names} FROM wikipedia WHERE \"user\"='BlueMoon2662'", "context": {"sqlQueryId": "request01"},
        "header": True, "typesHeader": True, "sqlTypesHeader": True})
    assert r.status_code == 200 and r.headers["X-Druid-SQL-Query-Id"] == "request01"
    header = {c: {"type": t, "sqlType": s} for c, t, s, _ in DOCUMENTED}
    row = {c: v for c, _, _, v in DOCUMENTED}
    assert r.content == orjson.dumps([header, row]) + b"\n"  # byte for byte, in Druid's compact JSON


def test_druid_columns_of_the_sys_tables_and_routines(cluster):
    def rows(query: str) -> list[dict]:
        r = sql(cluster, {"query": query})
        assert r.status_code == 200, r.text
        return r.json()

    segments = rows("SELECT segment_id, num_replicas, is_active, is_published, is_available, is_realtime, "
                    "is_overshadowed, shard_spec, dimensions, metrics, replication_factor FROM sys.segments "
                    "WHERE datasource = 'wiki'")
    assert sorted(s["segment_id"] for s in segments) == sorted(str(d.id) for d in cluster.segments)
    for s in segments:
        assert (s["num_replicas"], s["is_active"], s["is_published"], s["is_available"], s["is_realtime"],
                s["is_overshadowed"], s["replication_factor"]) == (1, 1, 1, 1, 0, 0, 1)  # one historical
        assert orjson.loads(s["shard_spec"])["type"] == "numbered"
        assert set(orjson.loads(s["dimensions"])) == set(cluster.wiki.column_names) - {"__time"}
    servers = rows("SELECT server, server_type, plaintext_port, tls_port, tier FROM sys.servers")
    historical = next(s for s in servers if s["server_type"] == "historical")
    assert historical["plaintext_port"] == cluster.historicals[0].http.port and historical["tier"] == "_default_tier"
    broker = next(s for s in servers if s["server_type"] == "broker")
    assert broker["plaintext_port"] == cluster.broker.http.port and broker["tls_port"] == -1
    assert rows("SELECT * FROM sys.supervisors") == []
    properties = rows("SELECT property, \"value\" FROM sys.server_properties WHERE service_name = 'strata/broker'")
    assert {"property": "druid.plaintextPort", "value": str(cluster.broker.http.port)} in properties
    routines = {r["ROUTINE_NAME"]: r["IS_AGGREGATOR"] for r in rows(
        "SELECT ROUTINE_NAME, IS_AGGREGATOR FROM INFORMATION_SCHEMA.ROUTINES")}
    assert routines["COUNT"] == "YES" and routines["TIME_FLOOR"] == "NO" and routines["APPROX_COUNT_DISTINCT"] == "YES"
    columns = rows("SELECT COLUMN_NAME, IS_NULLABLE, JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                   "WHERE TABLE_NAME = 'wiki' AND COLUMN_NAME IN ('__time', 'added')")
    assert sorted((c["COLUMN_NAME"], c["IS_NULLABLE"], c["JDBC_TYPE"]) for c in columns) == \
        [("__time", "NO", 93), ("added", "YES", -5)]


def test_coordinator_datasource_listings(cluster):
    base = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/coordinator/v1"
    assert "wiki" in requests.get(base + "/datasources", timeout=60).json()
    listing = requests.get(base + "/datasources/wiki", timeout=60).json()
    summary = listing["segments"]
    assert summary["count"] == len(cluster.segments) and summary["minTime"] == "2015-09-12T00:00:00.000Z"
    size = sum(d.size for d in cluster.segments)
    assert listing["tiers"] == {"_default_tier": {"segmentCount": len(cluster.segments), "size": size,
                                                  "replicatedSize": size}}
    simple = {d["name"]: d for d in requests.get(base + "/datasources?simple", timeout=60).json()}
    assert simple["wiki"]["properties"]["segments"]["count"] == len(cluster.segments)
    assert "wiki" in requests.get(base + "/metadata/datasources", timeout=60).json()
    full = requests.get(base + "/metadata/datasources/wiki", timeout=60).json()
    assert sorted(s["identifier"] for s in full["segments"]) == sorted(str(d.id) for d in cluster.segments)
    assert sum(s["numRows"] for s in full["segments"]) == ROWS
    assert requests.get(base + "/datasources/nope", timeout=60).status_code == 404


def test_the_first_content_type_wins(cluster):
    conn = http.client.HTTPConnection("127.0.0.1", cluster.broker.http.port, timeout=60)
    body = b"SELECT 'first wins' AS x"
    conn.putrequest("POST", "/druid/v2/sql")
    conn.putheader("Content-Type", "text/plain")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    assert response.status == 200 and orjson.loads(response.read()) == [{"x": "first wins"}]
    conn.close()


def test_compact_task_submitted_as_druid_shapes_it(cluster):
    """Druid's compact task on the broker's task API becomes strata's compaction of the interval
    (PENDING here: no Spark), followed like any task; what strata's compaction cannot honour is
    refused naming the key, before a task exists."""
    url = cluster.url + "/druid/indexer/v1/task"
    io = {"type": "compact", "inputSpec": {"type": "interval", "interval": "2015-09-12T00:00:00Z/2015-09-13"}}
    submitted = requests.post(url, json={"type": "compact", "dataSource": "wiki", "ioConfig": io}, timeout=60)
    assert submitted.status_code == 200, submitted.text
    task = cluster.client.task(submitted.json()["task"])
    assert (task.type, task.datasource, task.state) == ("compact", "wiki", "PENDING")
    assert orjson.loads(task.spec_json) == {"interval": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"}
    status = requests.get(f"{cluster.url}/druid/indexer/v1/task/{task.id}/status", timeout=60).json()["status"]
    assert (status["type"], status["dataSource"], status["runnerStatusCode"]) == ("compact", "wiki", "PENDING")
    legacy = requests.post(url, json={"type": "compact", "dataSource": "wiki", "interval": "2015-09-13/2015-09-14"},
                           timeout=60)
    assert orjson.loads(cluster.client.task(legacy.json()["task"]).spec_json) == {
        "interval": "2015-09-13T00:00:00.000Z/2015-09-14T00:00:00.000Z"}
    everything = requests.post(url, json={"type": "compact", "dataSource": "wiki"}, timeout=60)
    assert orjson.loads(cluster.client.task(everything.json()["task"]).spec_json or "{}") == {}
    for body, status_code, wanted in (
            ({"type": "compact", "dataSource": "wiki", "granularitySpec": {"segmentGranularity": "DAY"}}, 501,
             "'granularitySpec' not supported"),
            ({"type": "compact", "dataSource": "wiki", "interval": "yesterday"}, 400, "interval 'yesterday'"),
            ({"type": "compact", "dataSource": "wiki", "ioConfig": {"type": "compact", "inputSpec": {
                "type": "segments", "segments": []}}}, 400, "strata compacts by interval only"),
            ({"type": "compact", "ioConfig": io}, 400, "compact task: 'dataSource' is required")):
        refused = requests.post(url, json=body, timeout=60)
        assert refused.status_code == status_code and wanted in refused.json()["errorMessage"], refused.text
    for t in (task.id, legacy.json()["task"], everything.json()["task"]):
        cluster.client.cancel_task(t)


def test_task_log_on_the_coordinator(cluster):
    """Druid's task log is the file the task runner gave the task's process, read on the
    coordinator's HTTP port: whole, from an offset, or its tail; a task that has not started or
    that is unknown says so."""
    coordinator = f"http://127.0.0.1:{cluster.coordinator.http.port}/druid/indexer/v1/task"
    task = cluster.client.submit_task("wiki", "compact", "COMPACT wiki", {})  # PENDING: no Spark here
    try:
        pending = requests.get(f"{coordinator}/{task.id}/log", timeout=60)
        assert pending.status_code == 200 and pending.text == f"task {task.id} has not started yet: no log\n"
        text = "2026-01-01 task started\nSpark: stage 1 done\nno parse exceptions\n"
        with open(cluster.coordinator.task_runner.log_path(task.id), "w") as f:
            f.write(text)
        whole = requests.get(f"{coordinator}/{task.id}/log", timeout=60)
        assert (whole.status_code, whole.text) == (200, text)
        assert whole.headers["Content-Type"].startswith("text/plain")
        assert requests.get(f"{coordinator}/{task.id}/log?offset=-20", timeout=60).text == text[-20:]
        assert requests.get(f"{coordinator}/{task.id}/log?offset=24", timeout=60).text == text[24:]
        bad = requests.get(f"{coordinator}/{task.id}/log?offset=end", timeout=60)
        assert bad.status_code == 400 and "offset 'end' is not an integer" in bad.json()["error"]
        unknown = requests.get(f"{coordinator}/no-such-task/log", timeout=60)
        assert unknown.status_code == 404 and unknown.json() == {"error": "no task 'no-such-task'"}
        # The rest of the task API stays the broker's: the coordinator's handler passes it on.
        assert requests.get(f"{coordinator}/{task.id}/status", timeout=60).status_code == 404
    finally:
        cluster.client.cancel_task(task.id)
