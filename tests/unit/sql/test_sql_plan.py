"""The SqlPlan API: result schemas, names and types, parameters, SET and context, EXPLAIN, time
zones, and the order native queries run in."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from common.sql import plan_sql

SCHEMA_QUERIES = [
    "SELECT * FROM wiki LIMIT 3",
    "SELECT __time, page, added > deleted AS grew, added / 2.0 AS half, CAST(added AS FLOAT) AS f FROM wiki LIMIT 3",
    "SELECT page FROM wiki WHERE 1 = 0",
    "SELECT COUNT(*), SUM(added), AVG(added), MIN(__time), APPROX_COUNT_DISTINCT(page) FROM wiki WHERE 1 = 0",
    "SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) FROM wiki WHERE __time > TIMESTAMP '2030-01-01' GROUP BY 1",
    "SELECT channel, COUNT(*) FROM wiki WHERE channel = 'nope' GROUP BY channel",
    "SELECT channel, SUM(added) AS s FROM wiki GROUP BY 1 ORDER BY s DESC LIMIT 3",
    "SELECT s, n IS NULL, NULL AS nothing FROM nulls",
    "SELECT SUM(score), MIN(score), EARLIEST(score) FROM events",
    "SELECT * FROM sys.segments",
    "SELECT 1, 2.5, 'x', TRUE, TIMESTAMP '2020-01-01 00:00:00'",
    "SELECT g FROM nulls UNION ALL SELECT 'z'",
    "EXPLAIN PLAN FOR SELECT COUNT(*) FROM wiki",
]


@pytest.mark.parametrize("sql", SCHEMA_QUERIES)
def test_output_schema_is_what_execute_returns(sql_env, sql):
    plan = sql_env.plan(sql)
    assert plan.execute(sql_env.run_native).schema == plan.output_schema


def test_result_types_and_default_names(sql_env):
    plan = sql_env.plan("SELECT __time, channel, added, added * 1.5, added > 1 AS big, score, UPPER(channel) "
                        "FROM events LIMIT 1")
    assert plan.output_schema == pa.schema([
        ("__time", pa.timestamp("ms", tz="UTC")), ("channel", pa.string()), ("added", pa.int64()),
        ("EXPR$3", pa.float64()), ("big", pa.bool_()), ("score", pa.float32()), ("EXPR$6", pa.string())])


def test_duplicate_names_are_made_distinct(sql_env):
    table = sql_env.sql("SELECT a.s, b.s, a.s AS s FROM nulls a JOIN nulls b ON a.n = b.n WHERE a.n = 1")
    assert table.column_names == ["s", "s0", "s1"]
    assert table.to_pylist() == [{"s": "a", "s0": "a", "s1": "a"}]


def test_booleans_are_booleans_with_sql_nulls(sql_env):
    got = sql_env.sql("SELECT n > 3 AS big, s = 'a' OR n > 5 AS either FROM nulls ORDER BY __time")
    assert got.column("big").to_pylist() == [False, None, False, True, None, True, True, True, False, False]
    assert got.column("either").to_pylist() == [True, None, None, False, True, True, True, True, True, False]


def test_empty_aggregates(sql_env):
    got = sql_env.sql("SELECT COUNT(*) AS c, SUM(added) AS s, AVG(added) AS a, COUNT(DISTINCT page) AS d "
                      "FROM wiki WHERE channel = 'nope'")
    assert got.to_pylist() == [{"c": 0, "s": None, "a": None, "d": 0}]


@pytest.mark.parametrize("value", ["#de.wikipedia", 5, 2.5, True, dt.datetime(2015, 9, 12, 12, tzinfo=dt.timezone.utc),
                                   None])
def test_parameter_types(sql_env, value):
    got = sql_env.sql("SELECT ? AS v", [value])
    assert got.column("v").to_pylist() == [value]


def test_parameters_in_filters_and_limit(sql_env):
    got = sql_env.sql("SELECT page FROM wiki WHERE channel = ? AND added > ? AND __time >= ? ORDER BY __time LIMIT ?",
                      ["#en.wikipedia", 1000, dt.datetime(2015, 9, 13), 4])
    want = sql_env.duck.execute("SELECT page FROM wiki WHERE channel = '#en.wikipedia' AND added > 1000 AND "
                                "__time >= TIMESTAMP '2015-09-13' ORDER BY __time LIMIT 4").fetchall()
    assert got.column("page").to_pylist() == [r[0] for r in want]
    plan = sql_env.plan("SELECT page FROM wiki WHERE channel = ? AND page LIKE '?%'", ["x"])
    assert plan.parameter_count == 1


def test_set_statements_merge_into_context(sql_env):
    plan = sql_env.plan("SET timeout = 100; SET useCache = false;\nSET sqlTimeZone = 'Asia/Tokyo';\n"
                        "SELECT COUNT(*) FROM wiki", context={"priority": 5, "timeout": 1})
    assert plan.context["timeout"] == 100 and plan.context["useCache"] is False
    assert plan.context["priority"] == 5 and plan.context["sqlTimeZone"] == "Asia/Tokyo"
    query = plan.native_queries()[0]
    assert query["context"] == {"priority": 5, "timeout": 100, "useCache": False}  # SQL-only keys stay behind


def test_explain(sql_env):
    plan = sql_env.plan("EXPLAIN PLAN FOR SELECT w.channel, COUNT(*) FROM wiki w JOIN "
                        "(SELECT s FROM nulls) n ON w.channel = n.s GROUP BY 1")
    assert plan.kind == "explain"
    row = plan.execute(sql_env.run_native).to_pylist()[0]
    entries = json.loads(row["PLAN"])
    assert [e.get("query", {}).get("queryType") or e.get("brokerOperation") for e in entries] == \
        ["scan", "scan", "hashJoin", "groupBy"]
    assert entries[-1]["runsOn"] == "broker"
    assert entries[0]["columnMappings"][0] == {"queryColumn": "channel", "outputColumn": "channel"}
    assert json.loads(row["RESOURCES"]) == [{"name": "wiki", "type": "DATASOURCE"},
                                            {"name": "nulls", "type": "DATASOURCE"}]
    assert json.loads(row["ATTRIBUTES"]) == {"statementType": "SELECT"}
    assert [q["dataSource"] for q in plan.native_queries()] == ["wiki", "nulls"]


def test_native_queries_are_the_ones_that_run(sql_env):
    sql_env.native_calls.clear()
    plan = sql_env.plan("SELECT x, COUNT(*) FROM (SELECT channel AS x FROM wiki WHERE added > 3000 "
                        "UNION ALL SELECT s FROM nulls) GROUP BY x")
    plan.execute(sql_env.run_native)
    assert [q.to_json() for q in sql_env.native_calls] == plan.native_queries()


def test_session_time_zone(sql_env):
    ctx = {"sqlTimeZone": "America/Los_Angeles"}
    got = sql_env.sql("SELECT TIME_FLOOR(__time, 'P1D') AS d, COUNT(*) AS c FROM nulls GROUP BY 1", context=ctx)
    # nulls runs 2015-09-12 00:00Z..09:00Z: LA days start at 07:00Z
    assert got.to_pylist() == [
        {"d": dt.datetime(2015, 9, 11, 7, tzinfo=dt.timezone.utc), "c": 7},
        {"d": dt.datetime(2015, 9, 12, 7, tzinfo=dt.timezone.utc), "c": 3}]
    got = sql_env.sql("SELECT COUNT(*) AS c FROM nulls WHERE __time >= TIMESTAMP '2015-09-12 00:00:00'", context=ctx)
    assert got.column("c").to_pylist() == [3]
    got = sql_env.sql("SELECT EXTRACT(HOUR FROM __time) AS h, TIME_FORMAT(__time, 'HH:mm') AS t FROM nulls "
                      "ORDER BY __time LIMIT 1", context=ctx)
    assert got.to_pylist() == [{"h": 17, "t": "17:00"}]


def test_current_timestamp_comes_from_the_context(sql_env):
    got = sql_env.sql("SELECT CURRENT_TIMESTAMP AS now, CURRENT_DATE AS today",
                      context={"sqlCurrentTimestamp": "2020-05-06T07:08:09Z"})
    assert got.to_pylist() == [{"now": dt.datetime(2020, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc),
                                "today": dt.datetime(2020, 5, 6, tzinfo=dt.timezone.utc)}]


def test_topn_is_exact(sql_env):
    top = sql_env.sql("SELECT page, SUM(added) AS s FROM wiki GROUP BY page ORDER BY s DESC, page LIMIT 25")
    assert sql_env.plan("SELECT page, SUM(added) AS s FROM wiki GROUP BY page ORDER BY s DESC LIMIT 25") \
        .native_queries()[0]["queryType"] == "topN"
    topn = sql_env.sql("SELECT page, SUM(added) AS s FROM wiki GROUP BY page ORDER BY s DESC LIMIT 25")
    assert topn.column("s").to_pylist() == top.column("s").to_pylist()


def test_nulls_sort_first_ascending_last_descending(sql_env):
    assert sql_env.sql("SELECT s FROM nulls ORDER BY s LIMIT 2").column("s").to_pylist() == [None, None]
    assert sql_env.sql("SELECT s FROM nulls ORDER BY s DESC").column("s").to_pylist()[-2:] == [None, None]
    assert sql_env.sql("SELECT s FROM nulls ORDER BY s NULLS LAST").column("s").to_pylist()[-2:] == [None, None]


def test_plan_without_a_catalog_hit_does_not_run_anything(sql_env):
    catalog_calls = sql_env.catalog.system_calls
    plan = plan_sql("SELECT 1 + 1 AS two", sql_env.catalog)
    assert plan.native_queries() == []
    assert plan.execute(lambda q: pytest.fail("nothing to push")).to_pylist() == [{"two": 2}]
    assert sql_env.catalog.system_calls == catalog_calls
