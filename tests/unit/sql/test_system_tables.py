"""sys.* and INFORMATION_SCHEMA tables: queryable with the full SQL surface, run on the broker."""

from __future__ import annotations

import pyarrow as pa

from common.sql import plan_sql
from tests.unit.sql.fake_catalog import FakeCatalog
from tests.unit.sql.test_golden import golden_catalog


def test_sys_segments_group_and_order(sql_env):
    got = sql_env.sql("SELECT datasource, COUNT(*) AS n, SUM(num_rows) AS rows_ FROM sys.segments "
                      "GROUP BY datasource ORDER BY datasource")
    counts = {}
    for s in sql_env.segments:
        n, r = counts.get(s.id.datasource, (0, 0))
        counts[s.id.datasource] = (n + 1, r + s.num_rows)
    assert got.to_pylist() == [{"datasource": d, "n": n, "rows_": r} for d, (n, r) in sorted(counts.items())]
    assert not sql_env.plan("SELECT * FROM sys.segments").native_queries()


def test_sys_filter_like_and_limit(sql_env):
    got = sql_env.sql("SELECT segment_id FROM sys.segments WHERE datasource LIKE 'wi%' AND num_rows > 0 "
                      "ORDER BY segment_id DESC LIMIT 2")
    ids = sorted((str(s.id) for s in sql_env.segments if s.id.datasource == "wiki"), reverse=True)[:2]
    assert got.column("segment_id").to_pylist() == ids


def test_sys_join(sql_env):
    got = sql_env.sql("SELECT v.server, COUNT(*) AS c FROM sys.segments s JOIN sys.server_segments v "
                      "ON s.segment_id = v.segment_id WHERE s.datasource = 'wiki' GROUP BY v.server ORDER BY v.server")
    n = sum(1 for s in sql_env.segments if s.id.datasource == "wiki")
    assert sum(got.column("c").to_pylist()) == n


def test_join_datasource_with_system_table(sql_env):
    got = sql_env.sql("SELECT s.datasource, MAX(w.added) AS m FROM wiki w JOIN sys.segments s "
                      "ON w.channel = s.datasource GROUP BY 1")
    assert got.num_rows == 0  # no channel is named like a datasource; the join still runs


def test_schemata():
    got = plan_sql("SELECT SCHEMA_NAME FROM INFORMATION_SCHEMA.SCHEMATA ORDER BY 1", golden_catalog()).execute(None)
    assert got.column("SCHEMA_NAME").to_pylist() == ["INFORMATION_SCHEMA", "druid", "ext", "sys"]


def test_tables():
    got = plan_sql("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.tables "
                   "ORDER BY TABLE_SCHEMA, TABLE_NAME", golden_catalog()).execute(None)
    rows = [tuple(r.values()) for r in got.to_pylist()]
    assert ("druid", "wiki", "TABLE") in rows and ("druid", "countries", "TABLE") in rows
    assert ("sys", "segments", "SYSTEM_TABLE") in rows
    assert ("INFORMATION_SCHEMA", "COLUMNS", "SYSTEM_TABLE") in rows
    all_columns = plan_sql("SELECT * FROM INFORMATION_SCHEMA.TABLES", golden_catalog()).execute(None)
    assert all_columns.column_names == ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "IS_JOINABLE",
                                        "IS_BROADCAST", "SEGMENT_GRANULARITY", "TARGET_SEGMENT_ROWS", "CLUSTER_KEYS",
                                        "SEALED", "DESCRIPTION"]
    assert set(all_columns.column("TABLE_CATALOG").to_pylist()) == {"druid"}


def test_columns_of_a_datasource():
    got = plan_sql("SELECT COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, IS_NULLABLE, JDBC_TYPE "
                   "FROM INFORMATION_SCHEMA.COLUMNS "
                   "WHERE TABLE_SCHEMA = 'druid' AND TABLE_NAME = 'countries' ORDER BY ORDINAL_POSITION",
                   golden_catalog()).execute(None)
    assert got.to_pylist() == [
        {"COLUMN_NAME": "__time", "ORDINAL_POSITION": 1, "DATA_TYPE": "TIMESTAMP", "IS_NULLABLE": "NO",
         "JDBC_TYPE": 93},
        {"COLUMN_NAME": "isoCode", "ORDINAL_POSITION": 2, "DATA_TYPE": "VARCHAR", "IS_NULLABLE": "YES",
         "JDBC_TYPE": 12},
        {"COLUMN_NAME": "name", "ORDINAL_POSITION": 3, "DATA_TYPE": "VARCHAR", "IS_NULLABLE": "YES", "JDBC_TYPE": 12},
        {"COLUMN_NAME": "population", "ORDINAL_POSITION": 4, "DATA_TYPE": "BIGINT", "IS_NULLABLE": "YES",
         "JDBC_TYPE": -5},
        {"COLUMN_NAME": "area", "ORDINAL_POSITION": 5, "DATA_TYPE": "DOUBLE", "IS_NULLABLE": "YES", "JDBC_TYPE": 8},
    ]


def test_array_columns_are_data_type_array_with_their_element_type():
    got = plan_sql("SELECT COLUMN_NAME, DATA_TYPE, ELEMENT_TYPE, JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                   "WHERE TABLE_NAME = 'arrays' ORDER BY ORDINAL_POSITION", golden_catalog()).execute(None)
    assert got.to_pylist() == [
        {"COLUMN_NAME": "__time", "DATA_TYPE": "TIMESTAMP", "ELEMENT_TYPE": None, "JDBC_TYPE": 93},
        {"COLUMN_NAME": "s", "DATA_TYPE": "VARCHAR", "ELEMENT_TYPE": None, "JDBC_TYPE": 12},
        {"COLUMN_NAME": "arrayLong", "DATA_TYPE": "ARRAY", "ELEMENT_TYPE": "BIGINT", "JDBC_TYPE": 2003},
        {"COLUMN_NAME": "arrayDouble", "DATA_TYPE": "ARRAY", "ELEMENT_TYPE": "DOUBLE", "JDBC_TYPE": 2003},
        {"COLUMN_NAME": "arrayString", "DATA_TYPE": "ARRAY", "ELEMENT_TYPE": "VARCHAR", "JDBC_TYPE": 2003},
    ]


def test_columns_of_system_tables_and_counts():
    got = plan_sql("SELECT TABLE_SCHEMA, TABLE_NAME, COUNT(*) AS n FROM INFORMATION_SCHEMA.COLUMNS "
                   "GROUP BY 1, 2 ORDER BY 1, 2", golden_catalog()).execute(None)
    rows = {(r["TABLE_SCHEMA"], r["TABLE_NAME"]): r["n"] for r in got.to_pylist()}
    assert rows[("sys", "segments")] == 4
    assert rows[("druid", "wiki")] == 19
    assert rows[("INFORMATION_SCHEMA", "COLUMNS")] == 18


def test_information_schema_is_computed_when_run():
    catalog = FakeCatalog({"a": {}}, {})
    plan = plan_sql("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'", catalog)
    catalog.schemas["b"] = {}
    assert plan.execute(None).column("TABLE_NAME").to_pylist() == ["a", "b"]


def test_system_table_types_come_from_arrow():
    catalog = FakeCatalog({}, {"tasks": pa.table({"task_id": ["t1", "t2"], "duration": pa.array([5, None], pa.int64()),
                                                  "ok": [True, False]})})
    plan = plan_sql("SELECT task_id, duration * 2 AS d, ok FROM sys.tasks WHERE ok ORDER BY task_id", catalog)
    assert plan.output_schema == pa.schema([("task_id", pa.string()), ("d", pa.int64()), ("ok", pa.bool_())])
    assert plan.execute(None).to_pylist() == [{"task_id": "t1", "d": 10, "ok": True}]


def test_sys_table_read_while_planning_serves_the_first_run():
    catalog = FakeCatalog({}, {"tasks": pa.table({"task_id": ["t1"]})})
    plan = plan_sql("SELECT COUNT(*) AS n FROM sys.tasks", catalog)
    calls = catalog.system_calls
    assert plan.execute(None).to_pylist() == [{"n": 1}]
    assert catalog.system_calls == calls
    catalog.system["tasks"] = pa.table({"task_id": ["t1", "t2"]})
    assert plan.execute(None).to_pylist() == [{"n": 2}]  # a second run reads the table again
