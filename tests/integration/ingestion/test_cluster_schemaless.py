"""Schemaless ingestion through the cluster: SQL on the broker, a Spark task, segments served by a
historical; discovered types, the issue's PARTIAL + * + exclude + GROUP BY ALL example against
DuckDB, schemaConflicts, sealed catalog tables, and the query-time columnTypeMergePolicy."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.conftest import duck_connect
from tests.harness.embedded_cluster import EmbeddedCluster
from tests.integration.ingestion.sql_tasks import rows, run
from tests.unit.types.test_type_discovery import DRUID_ALL_TYPES

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))
pytestmark = pytest.mark.skipif(not os.path.isdir(DATA), reason="shared test data not found")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedCluster(str(tmp_path_factory.mktemp("schemaless")), historicals=1,
                        coordinator={"warm_task_drivers": 1})  # one Spark session for the module's tasks
    yield c
    c.stop()


def wait_rows(cluster, sql: str, want, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    got = None
    while time.monotonic() < deadline:
        try:
            got = rows(cluster, sql)
            if got == want:
                return got
        except Exception as exc:  # noqa: BLE001 - not served yet
            got = exc
        time.sleep(0.2)
    raise AssertionError(f"{sql}: wanted {want}, last got {got}")


def duck(sql: str) -> list[tuple]:
    con = duck_connect()
    try:
        return sorted(tuple(r) for r in con.execute(sql).fetchall())
    finally:
        con.close()


def decisions(cluster, datasource: str, scope: str = "task") -> dict[str, str]:
    got = rows(cluster, f"SELECT column_name, type_chosen, scope FROM sys.schema_decisions "
                        f"WHERE datasource = '{datasource}'")
    return {r["column_name"]: r["type_chosen"] for r in got if r["scope"].startswith(scope)}


def test_issue_example_partial_star_exclude_group_by_all(cluster, tmp_path):
    recs = [{"ts": f"2024-01-0{1 + i % 2}T0{i % 3}:00:00Z", "bytes": 10 * i, "host": f"h{i % 4}",
             "status": 200 + (i % 2), "comment": f"free text {i}", "meta": {"dc": f"d{i % 2}"}} for i in range(40)]
    for i in range(4):
        with open(tmp_path / f"log{i}.json", "w") as f:
            f.write("\n".join(json.dumps(r) for r in recs[i::4]) + "\n")
    task = run(cluster, f"""INSERT INTO dst SELECT TIME_PARSE(ts) AS __time, SUM(bytes) AS bytes, *
        FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.json', format => 'json',
                              exclude => ARRAY['comment']))
        PARTIAL (ts VARCHAR, bytes BIGINT) GROUP BY ALL PARTITIONED BY DAY""")
    assert task.state == "SUCCESS", task.error
    want = duck(f"SELECT host, status, json_extract_string(meta, '$.dc'), SUM(bytes) "
                f"FROM read_json_auto('{tmp_path}/*.json') GROUP BY ALL")
    wait_rows(cluster, "SELECT COUNT(*) AS c FROM dst", [{"c": len(duck(
        f"SELECT DISTINCT ts, host, status, meta FROM read_json_auto('{tmp_path}/*.json')"))}])
    got = rows(cluster, "SELECT host, status, JSON_VALUE(meta, '$.dc') AS dc, SUM(bytes) AS b FROM dst "
                        "GROUP BY 1, 2, 3")
    assert sorted((r["host"], r["status"], r["dc"], r["b"]) for r in got) == want
    types = decisions(cluster, "dst")
    assert types["host"] == "STRING" and types["status"] == "LONG" and types["meta"] == "COMPLEX<json>"
    assert "comment" not in types
    cols = {r["COLUMN_NAME"] for r in rows(cluster, "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS "
                                                    "WHERE TABLE_NAME = 'dst'")}
    assert cols == {"__time", "bytes", "host", "status", "meta"}


def test_nested_all_types_without_a_schema_meets_druid(cluster):
    path = os.path.join(DATA, "nested-all-types-test-data.json")
    task = run(cluster, f"""INSERT INTO all_auto SELECT TIME_PARSE("timestamp") AS __time, *
        FROM TABLE(EXTERN('{{"type": "local", "files": ["{path}"]}}', '{{"type": "json"}}')) PARTITIONED BY DAY""")
    assert task.state == "SUCCESS", task.error
    wait_rows(cluster, "SELECT COUNT(*) AS c FROM all_auto", [{"c": 7}])
    assert decisions(cluster, "all_auto") == {**DRUID_ALL_TYPES, "timestamp": "STRING"}
    # a discovered STRING column is a plain dictionary column: its filter uses the index and matches DuckDB
    got = rows(cluster, "SELECT COUNT(*) AS c FROM all_auto WHERE variant = '1'")
    want = duck(f"SELECT COUNT(*) FROM read_json('{path}', columns={{variant: 'VARCHAR'}}) WHERE variant = '1'")
    assert [(r["c"],) for r in got] == want


def test_schema_conflicts_fail_through_the_cluster(cluster, tmp_path):
    (tmp_path / "one.json").write_text('{"t": "2024-01-01", "x": {"k": 1}}\n')
    (tmp_path / "two.json").write_text('{"t": "2024-01-01", "x": "flat"}\n')
    task = run(cluster, f"""SET schemaConflicts = 'fail';
        INSERT INTO conflicted SELECT TIME_PARSE(t) AS __time, x
        FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.json', format => 'json')) PARTITIONED BY DAY""")
    assert task.state == "FAILED"
    assert "column 'x'" in task.error and "COMPLEX<json> at " in task.error and "STRING at " in task.error
    assert "one.json, line 1" in task.error and "two.json, line 1" in task.error and "PARTIAL" in task.error


def test_sealed_catalog_table_rejects_undeclared_discovered_columns(cluster, tmp_path):
    (tmp_path / "s.json").write_text('{"t": "2024-01-01", "a": 1, "b": "x", "c": 2.5}\n')
    cluster.client.sql("CREATE TABLE sealed_ds (a BIGINT) PARTITIONED BY DAY WITH (sealed = TRUE)")
    task = run(cluster, f"""INSERT INTO sealed_ds SELECT TIME_PARSE(t) AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{tmp_path}/s.json'], format => 'json')) PARTITIONED BY DAY""")
    assert task.state == "FAILED"
    assert "sealed" in task.error and "b, c" in task.error
    cluster.client.sql("CREATE TABLE open_ds (a DOUBLE) PARTITIONED BY DAY")
    task = run(cluster, f"""INSERT INTO open_ds SELECT TIME_PARSE(t) AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{tmp_path}/s.json'], format => 'json')) PARTITIONED BY DAY""")
    assert task.state == "SUCCESS", task.error
    types = decisions(cluster, "open_ds")
    assert types["a"] == "DOUBLE" and types["b"] == "STRING" and types["c"] == "DOUBLE"  # declared type is provided


def test_column_type_merge_policies_over_two_replaces(cluster, tmp_path):
    (tmp_path / "d1.json").write_text('{"t": "2024-01-01", "v": 1}\n{"t": "2024-01-01", "v": 2}\n')
    (tmp_path / "d2.json").write_text('{"t": "2024-01-02", "v": "two"}\n')
    for day, end, name in (("2024-01-01", "2024-01-02", "d1"), ("2024-01-02", "2024-01-03", "d2")):
        task = run(cluster, f"""REPLACE INTO mixed OVERWRITE WHERE __time >= TIMESTAMP '{day}' AND
            __time < TIMESTAMP '{end}'
            SELECT TIME_PARSE(t) AS __time, v FROM TABLE(localfiles(files => ARRAY['{tmp_path}/{name}.json'],
            format => 'json')) PARTITIONED BY DAY""")
        assert task.state == "SUCCESS", task.error
    wait_rows(cluster, "SELECT COUNT(*) AS c FROM mixed", [{"c": 3}])
    types = {p: rows(cluster, f"SET columnTypeMergePolicy = '{p}'; SELECT DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                              "WHERE TABLE_NAME = 'mixed' AND COLUMN_NAME = 'v'")
             for p in ("leastRestrictive", "latestInterval")}
    assert types["leastRestrictive"] == [{"DATA_TYPE": "VARCHAR"}]
    assert types["latestInterval"] == [{"DATA_TYPE": "VARCHAR"}]
    got = rows(cluster, "SELECT v FROM mixed ORDER BY __time")
    assert [r["v"] for r in got] == ["1", "2", "two"]
    with pytest.raises(Exception, match=r"column 'v' of datasource mixed has different types.*LONG in segment "
                                         r"mixed_2024-01-01.*STRING in segment mixed_2024-01-02"):
        rows(cluster, "SET columnTypeMergePolicy = 'fail'; SELECT v FROM mixed")
    listed = rows(cluster, "SELECT column_name, scope, type_chosen, rule FROM sys.schema_decisions "
                           "WHERE datasource = 'mixed' AND scope LIKE 'query%'")
    assert listed == [{"column_name": "v", "scope": "query (leastRestrictive)", "type_chosen": "STRING",
                       "rule": "leastRestrictive: number+string -> STRING"}]
    cluster.client.sql("CREATE TABLE mixed (v DOUBLE) PARTITIONED BY DAY")  # a catalog type overrides all policies
    assert rows(cluster, "SET columnTypeMergePolicy = 'fail'; SELECT COUNT(*) AS c FROM mixed") == [{"c": 3}]


def test_explain_of_a_schemaless_insert_shows_dynamic(cluster, tmp_path):
    (tmp_path / "e.json").write_text('{"ts": "2024-01-01", "bytes": 1, "host": "a"}\n')
    table, _ = cluster.client.sql(f"""EXPLAIN PLAN FOR INSERT INTO dst SELECT TIME_PARSE(ts) AS __time,
        SUM(bytes) AS bytes, * FROM TABLE(localfiles(baseDir => '{tmp_path}', filter => '*.json', format => 'json',
        exclude => ARRAY['comment'])) PARTIAL (ts VARCHAR, bytes BIGINT) GROUP BY ALL PARTITIONED BY DAY""")
    plan = json.loads(table.column("PLAN")[0].as_py())
    [source] = plan["sources"].values()
    assert source["columns"][-1] == {"name": "__dynamic", "type": "COMPLEX<json>", "declared": "discovered at run time"}
    assert "SUM(bytes) AS bytes, __dynamic FROM" in plan["select"]
    assert json.loads(table.column("ATTRIBUTES")[0].as_py())["statementType"] == "INSERT"


def test_shared_nested_numeric_file_without_a_schema_matches_duckdb_over_adbc(cluster):
    import adbc_driver_flightsql.dbapi as adbc

    path = os.path.join(DATA, "nested-numeric-test-data.json")
    task = run(cluster, f"""INSERT INTO numeric_auto SELECT TIME_PARSE("timestamp") AS __time, *
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json')) PARTITIONED BY DAY""")
    assert task.state == "SUCCESS", task.error
    want_rows = duck(f"SELECT COUNT(*) FROM read_json_auto('{path}')")[0][0]
    wait_rows(cluster, "SELECT COUNT(*) AS c FROM numeric_auto", [{"c": want_rows}])
    assert decisions(cluster, "numeric_auto") == {"timestamp": "STRING", "nest": "COMPLEX<json>"}
    conn = adbc.connect(f"grpc://127.0.0.1:{cluster.broker.flight.port}", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT __time, JSON_VALUE(nest, '$.long' RETURNING BIGINT) AS l, "
                        "JSON_VALUE(nest, '$.double' RETURNING DOUBLE) AS d, JSON_VALUE(nest, '$.mixed') AS m, "
                        "JSON_VALUE(nest, '$.sparse_long' RETURNING BIGINT) AS sl FROM numeric_auto")
            got = sorted(((int(t.timestamp() * 1000), l, d, m, sl) for t, l, d, m, sl in cur.fetchall()), key=repr)
            cur.execute("SELECT SUM(JSON_VALUE(nest, '$.long' RETURNING BIGINT)) AS s, COUNT(*) AS c "
                        "FROM numeric_auto GROUP BY __time")
            sums = sorted(tuple(r) for r in cur.fetchall())
    finally:
        conn.close()
    src = f"read_json('{path}', columns={{\"timestamp\": 'VARCHAR', nest: 'JSON'}})"
    con = duck_connect()
    try:
        want = sorted(con.execute(f"""SELECT epoch_ms(CAST("timestamp" AS TIMESTAMP)), CAST(nest->>'$.long' AS BIGINT),
            CAST(nest->>'$.double' AS DOUBLE), nest->>'$.mixed', CAST(nest->>'$.sparse_long' AS BIGINT)
            FROM {src}""").fetchall(), key=repr)
    finally:
        con.close()
    assert got == want
    assert sums == duck(f"""SELECT SUM(CAST(nest->>'$.long' AS BIGINT)), COUNT(*) FROM {src} GROUP BY "timestamp" """)
