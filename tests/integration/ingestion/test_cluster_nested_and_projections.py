"""Nested JSON columns and projections end to end: declared through SQL, ingested by Spark tasks
through the cluster, stored in segments, queried through the broker."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import rows, run

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("nested")), historicals=1,
                        coordinator={"warm_task_drivers": 1})  # one Spark session for the module's tasks
    yield c
    c.stop()


def wait_count(cluster, datasource: str, want: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    got = None
    while time.monotonic() < deadline:
        try:
            got = rows(cluster, f"SELECT COUNT(*) AS c FROM {datasource}")
            if got == [{"c": want}]:
                return
        except Exception as exc:  # noqa: BLE001 - not served yet
            got = exc
        time.sleep(0.2)
    raise AssertionError(f"{datasource}: wanted {want} rows, last got {got}")


def test_nested_example_data_through_spark(cluster):
    path = os.path.join(DATA, "nested-example-data.json")
    task = run(cluster, f"""INSERT INTO nested_data_example
        SELECT TIME_PARSE("time") AS __time, product, department, shipTo, details
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
             EXTEND ("time" VARCHAR, product VARCHAR, department VARCHAR, shipTo TYPE('COMPLEX<json>'),
                     details TYPE('COMPLEX<json>'))
        PARTITIONED BY ALL""")
    assert task.state == "SUCCESS", task.error
    wait_count(cluster, "nested_data_example", 5)
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    got = rows(cluster, "SELECT product, JSON_VALUE(details, '$.price' RETURNING DOUBLE) AS price, "
                        "JSON_VALUE(shipTo, '$.address.country') AS country FROM nested_data_example ORDER BY __time")
    by_time = sorted(docs, key=lambda d: d["time"].replace("2022-6-14", "2022-06-14"))
    assert got == [{"product": d["product"], "price": float(d["details"]["price"]),
                    "country": d["shipTo"]["address"]["country"]} for d in by_time]
    assert rows(cluster, "SELECT COUNT(*) AS c FROM nested_data_example "
                         "WHERE JSON_VALUE(details, '$.color') = 'ivory'") == [{"c": 1}]


def test_projection_defined_in_sql_is_built_and_used(cluster):
    cluster.client.sql("CREATE TABLE edits (channel VARCHAR, page VARCHAR, added BIGINT) PARTITIONED BY DAY")
    cluster.client.sql("ALTER TABLE edits ADD PROJECTION hourly AS SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, "
                       "COUNT(*) AS n, SUM(added) AS added FROM edits GROUP BY 1, 2")
    path = os.path.join(DATA, "wikipedia-sampled.json")
    task = run(cluster, f"""INSERT INTO edits
        SELECT TIME_PARSE("timestamp") AS __time, channel, page, added
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
             EXTEND ("timestamp" VARCHAR, channel VARCHAR, page VARCHAR, added BIGINT)
        PARTITIONED BY DAY""")
    assert task.state == "SUCCESS", task.error
    total = json.loads(task.report_json)["rowsWritten"]
    wait_count(cluster, "edits", total)
    sql = "SELECT channel, COUNT(*) AS n, SUM(added) AS a FROM edits GROUP BY 1 ORDER BY 1"
    base = rows(cluster, "SET noProjections = TRUE; " + sql)
    used = rows(cluster, "SET useProjection = 'hourly'; " + sql)
    assert used == base and sum(r["n"] for r in used) == total
    with pytest.raises(Exception, match="useProjection 'hourly' cannot serve"):
        rows(cluster, "SET useProjection = 'hourly'; SELECT page, COUNT(*) AS n FROM edits GROUP BY 1")


def test_system_tables_show_projections_and_json_columns(cluster):
    got = rows(cluster, "SELECT name, defined_in_catalog, segments_with, segments_total, projection_rows, base_rows "
                        "FROM sys.projections WHERE datasource = 'edits'")
    assert len(got) == 1 and got[0]["name"] == "hourly" and got[0]["defined_in_catalog"] == 1
    assert got[0]["segments_with"] == got[0]["segments_total"] > 0
    assert 0 < got[0]["projection_rows"] < got[0]["base_rows"]
    seg = rows(cluster, "SELECT projections, json_columns FROM sys.segments WHERE datasource = 'nested_data_example'")
    facts = json.loads(seg[0]["json_columns"])
    assert facts["details"] == {"fields": 2, "guardTriggered": False} and facts["shipTo"]["fields"] >= 10
    assert json.loads(seg[0]["projections"]) == []


def test_historical_metrics_say_which_table_served_and_why_not(cluster):
    import urllib.request

    rows(cluster, "SELECT channel, COUNT(*) AS n FROM edits GROUP BY 1")  # the projection serves it
    rows(cluster, "SELECT page, COUNT(*) AS n FROM edits GROUP BY 1")  # page is not in the projection
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.historicals[0].http.port}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert 'strata_segments_queried_total{datasource="edits",projection="hourly"}' in text
    assert 'strata_segments_queried_total{datasource="edits",projection="base"}' in text
    assert 'strata_rows_scanned_total{datasource="edits",projection="hourly"}' in text
    assert 'strata_projection_misses_total{datasource="edits",projection="hourly",reason="missing_column"}' in text


def test_explain_shows_the_projection_each_segment_group_reads(cluster):
    got = rows(cluster, "EXPLAIN PLAN FOR SELECT channel, COUNT(*) AS n FROM edits GROUP BY 1")
    attributes = json.loads(got[0]["ATTRIBUTES"])
    (entry,) = attributes["projections"]
    assert entry["datasource"] == "edits" and entry["segmentGroups"][0]["projection"] == "hourly"
    got = rows(cluster, "EXPLAIN PLAN FOR SELECT page, COUNT(*) AS n FROM edits GROUP BY 1")
    group = json.loads(got[0]["ATTRIBUTES"])["projections"][0]["segmentGroups"][0]
    assert group["projection"] == "base" and "not a grouping column" in group["rejected"]["hourly"]


def test_compaction_adds_a_projection_while_queries_keep_answering(cluster):
    import threading

    from services.cli.main import main as strata

    path = os.path.join(DATA, "wikipedia-sampled.json")
    cluster.client.sql("CREATE TABLE comp PARTITIONED BY DAY")
    task = run(cluster, f"""INSERT INTO comp
        SELECT TIME_PARSE("timestamp") AS __time, channel, page, added
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
             EXTEND ("timestamp" VARCHAR, channel VARCHAR, page VARCHAR, added BIGINT)
        PARTITIONED BY DAY""")
    assert task.state == "SUCCESS", task.error
    wait_count(cluster, "comp", json.loads(task.report_json)["rowsWritten"])
    sql = "SELECT channel, COUNT(*) AS n, SUM(added) AS a FROM comp GROUP BY 1 ORDER BY 1"
    expected = rows(cluster, sql)
    cluster.client.sql("ALTER TABLE comp ADD PROJECTION by_channel AS SELECT channel, COUNT(*) AS n, "
                       "SUM(added) AS a FROM comp GROUP BY 1")
    failures, runs, stop = [], [0], threading.Event()

    def loop():
        deadline = time.monotonic() + 240
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                got = rows(cluster, sql)
                if got != expected:
                    failures.append(("different", got))
            except Exception as exc:  # noqa: BLE001 - every failure is recorded and fails the test
                failures.append(("error", repr(exc)))
            runs[0] += 1

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    try:
        assert strata(["compact", "comp", "--coordinator", f"127.0.0.1:{cluster.coordinator.grpc.port}"]) == 0
        deadline = time.monotonic() + 120
        while True:
            got = rows(cluster, "SELECT segments_with, segments_total FROM sys.projections "
                                "WHERE datasource = 'comp' AND name = 'by_channel'")
            if got and got[0]["segments_with"] == got[0]["segments_total"] > 0:
                break
            assert time.monotonic() < deadline, f"compacted segments not served: {got}"
            time.sleep(0.2)
        assert rows(cluster, "SET useProjection = 'by_channel'; " + sql) == expected
    finally:
        stop.set()
        worker.join(timeout=30)
    assert failures == [] and runs[0] > 3


def test_json_through_flight_sql(cluster):
    import adbc_driver_flightsql.dbapi as adbc

    conn = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT product, details, JSON_QUERY(shipTo, '$.address') AS address "
                        "FROM nested_data_example ORDER BY __time LIMIT 2")
            table = cur.fetch_arrow_table()
            cur.execute("SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                        "WHERE TABLE_NAME = 'nested_data_example' AND COLUMN_NAME IN ('details', 'shipTo')")
            types = {r["COLUMN_NAME"]: r["DATA_TYPE"] for r in cur.fetch_arrow_table().to_pylist()}
    finally:
        conn.close()
    # JSON text whose field carries Arrow's canonical JSON extension type, which pyarrow recognizes.
    for name in ("details", "address"):
        assert table.schema.field(name).type.extension_name == "arrow.json"
        assert table.schema.field(name).type.storage_type == "string"
    details = table.column("details").cast(table.schema.field("details").type.storage_type)
    with open(os.path.join(DATA, "nested-example-data.json"), encoding="utf-8") as f:
        first = min((json.loads(line) for line in f if line.strip()), key=lambda d: d["time"])
    assert json.loads(details[0].as_py()) == {k: float(v) if k == "price" else v for k, v in first["details"].items()}
    assert types == {"details": "COMPLEX<json>", "shipTo": "COMPLEX<json>"}
