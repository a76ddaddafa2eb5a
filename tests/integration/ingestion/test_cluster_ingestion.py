"""SQL ingestion through the cluster: the broker takes INSERT/REPLACE, the coordinator runs each
task as its own process driving a real Spark job, segments land in deep storage, get published in
one transaction, loaded by historicals and queried through the broker."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import FINAL, rows, run

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))


def updates(mode_clause: str, name: str) -> str:
    return f"""{mode_clause} SELECT TIME_PARSE("timestamp") AS __time, animal, "number"
               FROM TABLE(localfiles(files => ARRAY['{os.path.join(DATA, name)}'], format => 'json'))
                    EXTEND ("timestamp" VARCHAR, animal VARCHAR, "number" BIGINT)
               PARTITIONED BY DAY"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("ingest")), historicals=2,
                        coordinator={"warm_task_drivers": 1})  # one Spark session for the module's tasks
    yield c
    c.stop()


def wait_rows(cluster, sql: str, want: list[dict], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    got = None
    while time.monotonic() < deadline:
        try:
            got = rows(cluster, sql)
            if got == want:
                return
        except Exception as exc:  # noqa: BLE001 - the datasource may not be served yet
            got = exc
        time.sleep(0.2)
    raise AssertionError(f"{sql}: wanted {want}, last got {got}")


def test_insert_then_append_then_replace(cluster):
    task = run(cluster, updates("INSERT INTO animals", "updates-data.json"))
    assert task.state == "SUCCESS", task.error
    report = json.loads(task.report_json)
    assert report["rowsRead"] == 3 and report["rowsWritten"] == 3
    wait_rows(cluster, "SELECT COUNT(*) AS c, SUM(\"number\") AS n FROM animals", [{"c": 3, "n": 100 + 42 + 14124}])

    task = run(cluster, updates("INSERT INTO animals", "updates-data2.json"))  # appends to the same day
    assert task.state == "SUCCESS", task.error
    wait_rows(cluster, "SELECT COUNT(*) AS c FROM animals", [{"c": 6}])
    segments = rows(cluster, "SELECT COUNT(*) AS c, COUNT(DISTINCT version) AS v FROM sys.segments "
                             "WHERE datasource = 'animals' AND is_published = 1")
    assert segments == [{"c": 2, "v": 1}]  # the append reused the version with a new partition

    task = run(cluster, updates("REPLACE INTO animals OVERWRITE ALL", "updates-data4.json"))
    assert task.state == "SUCCESS", task.error
    with open(os.path.join(DATA, "updates-data4.json")) as f:
        want = sorted(({"animal": r["animal"], "number": r["number"]} for r in map(json.loads, f)),
                      key=lambda r: r["animal"])
    wait_rows(cluster, "SELECT animal, \"number\" FROM animals ORDER BY animal", want)
    tasks = rows(cluster, "SELECT status, COUNT(*) AS c FROM sys.tasks WHERE datasource = 'animals' GROUP BY 1")
    assert tasks == [{"status": "SUCCESS", "c": 3}]


def test_bad_rows_over_the_limit_fail_the_task_and_publish_nothing(cluster, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"timestamp":"2018-01-01T01:00:00Z","animal":"ok","number":1}\n'
                   '{"timestamp":"2018-01-01T02:00:00Z","animal":"broken","number":"many"}\n')
    sql = f"""INSERT INTO broken SELECT TIME_PARSE("timestamp") AS __time, animal, "number"
              FROM TABLE(localfiles(files => ARRAY['{bad}'], format => 'json'))
                   EXTEND ("timestamp" VARCHAR, animal VARCHAR, "number" BIGINT) PARTITIONED BY DAY"""
    task = run(cluster, sql)
    assert task.state == "FAILED"
    assert "bad.json" in task.error and "line 2" in task.error
    assert rows(cluster, "SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'broken'") == [{"c": 0}]


def test_statement_errors_come_back_at_once(cluster):
    from services.cli.cluster_client import ClusterError

    with pytest.raises(ClusterError, match="PARTITIONED BY"):
        cluster.client.sql("INSERT INTO x SELECT TIME_PARSE('2020-01-01') AS __time, 1 AS a PARTITIONED BY FORTNIGHT")


def test_a_cancelled_task_publishes_nothing(cluster):
    sql = f"""INSERT INTO wikiticker
              SELECT TIME_PARSE("time") AS __time, channel, page, added
              FROM TABLE(EXTERN('{{"type": "local", "files": ["{os.path.join(DATA, 'wikiticker-2015-09-12-sampled.json.gz')}"]}}',
                   '{{"type": "json"}}', '[{{"name": "time", "type": "string"}}, {{"name": "channel", "type": "string"}},
                   {{"name": "page", "type": "string"}}, {{"name": "added", "type": "long"}}]'))
              PARTITIONED BY HOUR"""
    table, _ = cluster.client.sql(sql)
    task_id = table.column("task_id")[0].as_py()
    deadline = time.monotonic() + 60
    while cluster.client.task(task_id).state == "PENDING" and time.monotonic() < deadline:
        time.sleep(0.1)
    cluster.client.cancel_task(task_id)
    deadline = time.monotonic() + 120
    while cluster.client.task(task_id).state not in FINAL:
        assert time.monotonic() < deadline, "cancel did not finish"
        time.sleep(0.2)
    task = cluster.client.task(task_id)
    assert task.state in ("CANCELED", "SUCCESS")  # a small job may finish before the cancel lands
    if task.state == "CANCELED":
        assert rows(cluster, "SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'wikiticker'") == [{"c": 0}]
        uploads = os.path.join(cluster.deep_storage_url, "wikiticker")
        assert not os.path.exists(uploads) or not any(files for _, _, files in os.walk(uploads))


def test_csv_ingested_with_rollup_matches_duckdb_through_the_broker(cluster):
    import duckdb

    base = os.path.join(DATA, "embedded-tests")
    sql = f"""INSERT INTO wiki_csv
              SELECT TIME_FLOOR(TIME_PARSE("timestamp"), 'PT1H') AS __time, page, language, COUNT(*) AS edits,
                     SUM(added) AS added, SUM(deleted) AS deleted, MAX(delta) AS max_delta
              FROM TABLE(localfiles(baseDir => '{base}', filter => 'wikipedia_index_data*.csv', format => 'csv',
                                    findColumnsFromHeader => true))
                   EXTEND ("timestamp" VARCHAR, page VARCHAR, language VARCHAR, added BIGINT, deleted BIGINT,
                           delta BIGINT)
              GROUP BY 1, 2, 3
              PARTITIONED BY DAY CLUSTERED BY page"""
    task = run(cluster, sql)
    assert task.state == "SUCCESS", task.error
    want = duckdb.sql(f"""
        SELECT page, language, count(*)::BIGINT AS edits, sum(added)::BIGINT AS added, sum(deleted)::BIGINT AS deleted,
               max(delta)::BIGINT AS max_delta
        FROM read_csv('{base}/wikipedia_index_data*.csv', header = true)
        GROUP BY date_trunc('hour', "timestamp"::TIMESTAMPTZ), page, language
        ORDER BY page, language, edits""").fetchall()
    got_sql = ("SELECT page, language, edits, added, deleted, max_delta FROM wiki_csv "
               "ORDER BY page, language, edits")
    wait_rows(cluster, got_sql, [dict(zip(("page", "language", "edits", "added", "deleted", "max_delta"), r))
                                 for r in want])
    # The aggregated columns are recorded as the segments' metrics, with Spark's output types.
    import requests

    url = f"http://127.0.0.1:{cluster.broker.http.port}/druid/v2"
    shape = requests.get(url + "/datasources/wiki_csv", timeout=60).json()
    assert sorted(shape["dimensions"]) == ["language", "page"]
    assert sorted(shape["metrics"]) == ["added", "deleted", "edits", "max_delta"]
    entries = requests.post(url, json={"queryType": "segmentMetadata", "dataSource": "wiki_csv",
                                       "analysisTypes": ["aggregators"]}, timeout=60).json()
    assert entries and all({n: a["type"] for n, a in e["aggregators"].items()} ==
                           {"edits": "count", "added": "longSum", "deleted": "longSum", "max_delta": "longMax"}
                           for e in entries)
    # Compaction rewrites the rows without a GROUP BY; the new version keeps the metrics.
    from services.cli.main import main as strata

    active = ("SELECT version, metrics FROM sys.segments WHERE datasource = 'wiki_csv' AND is_active = 1 "
              "AND is_available = 1")
    old = {r["version"] for r in rows(cluster, active)}
    assert strata(["compact", "wiki_csv", "--coordinator", f"127.0.0.1:{cluster.coordinator.grpc.port}"]) == 0
    deadline = time.monotonic() + 120
    while True:
        served = rows(cluster, active)
        if served and not {r["version"] for r in served} & old:
            break
        assert time.monotonic() < deadline, f"compacted segments not served: {served}"
        time.sleep(0.2)
    assert all(sorted(json.loads(r["metrics"])) == ["added", "deleted", "edits", "max_delta"] for r in served)
    wait_rows(cluster, got_sql, [dict(zip(("page", "language", "edits", "added", "deleted", "max_delta"), r))
                                 for r in want])


def test_ingestion_uses_catalog_defaults_input_tables_and_sealing(cluster):
    from services.cli.cluster_client import ClusterError

    rows(cluster, "CREATE TABLE zoo (animal VARCHAR, \"number\" BIGINT) PARTITIONED BY DAY CLUSTERED BY animal "
                  "WITH (targetSegmentRows = 2, sealed = true)")
    rows(cluster, f"CREATE EXTERNAL TABLE ext.updates (\"timestamp\" VARCHAR, animal VARCHAR, \"number\" BIGINT) "
                  f"WITH (source = 'local', baseDir = '{DATA}', format = 'json')")
    # No PARTITIONED BY / CLUSTERED BY: the catalog supplies DAY, animal and 2 rows per segment.
    task = run(cluster, """INSERT INTO zoo SELECT TIME_PARSE("timestamp") AS __time, animal, "number"
                           FROM TABLE(ext.updates(files => 'updates-data3.json'))""")
    assert task.state == "SUCCESS", task.error
    with open(os.path.join(DATA, "updates-data3.json")) as f:
        want = len(f.read().strip().splitlines())
    wait_rows(cluster, "SELECT COUNT(*) AS c FROM zoo", [{"c": want}])
    segments = rows(cluster, "SELECT MAX(num_rows) AS biggest FROM sys.segments WHERE datasource = 'zoo'")
    assert segments[0]["biggest"] <= 2 + 1  # targetSegmentRows from the catalog (ranges are approximate)
    with pytest.raises(ClusterError, match="sealed and does not declare extra"):
        cluster.client.sql("""INSERT INTO zoo SELECT TIME_PARSE("timestamp") AS __time, animal, 1 AS extra
                              FROM TABLE(ext.updates(files => 'updates-data3.json'))""")
    with pytest.raises(ClusterError, match="missing parameters: files"):
        cluster.client.sql("INSERT INTO zoo SELECT * FROM ext.updates")
    with pytest.raises(ClusterError, match="needs a segment granularity.*PARTITIONED BY.*segmentGranularity"):
        cluster.client.sql("""INSERT INTO nowhere SELECT TIME_PARSE("timestamp") AS __time, animal
                              FROM TABLE(ext.updates(files => 'updates-data3.json'))""")


def test_strata_sql_waits_for_an_insert_and_strata_task_reports_it(cluster):
    import subprocess
    import sys

    addresses = ["--broker", f"127.0.0.1:{cluster.broker.grpc.port}",
                 "--coordinator", f"127.0.0.1:{cluster.coordinator.grpc.port}"]
    sql = updates("INSERT INTO cli_animals", "updates-data.json")
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "sql", *addresses, sql],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and "rowsWritten      3" in done.stdout
    task_id = done.stdout.split("task ", 1)[1].split(":", 1)[0]
    status = subprocess.run([sys.executable, "-m", "services.cli.main", "task", "status", task_id, *addresses[2:]],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and f"task {task_id}: SUCCESS" in status.stdout, status.stdout + status.stderr
    queued = subprocess.run([sys.executable, "-m", "services.cli.main", "sql", *addresses, "--async", "--format", "csv",
                             updates("INSERT INTO cli_animals", "updates-data2.json")],
                            capture_output=True, text=True, timeout=60)
    assert queued.returncode == 0 and "task_id" in queued.stdout and "insert_cli_animals" in queued.stdout
    run_id = queued.stdout.strip().splitlines()[-1].strip('"')
    deadline = time.monotonic() + 240
    while cluster.client.task(run_id).state not in FINAL:
        assert time.monotonic() < deadline
        time.sleep(0.2)
