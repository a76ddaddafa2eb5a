"""Druid SQL -> Spark SQL for the ingestion SELECT (text only; semantics are checked on Spark in
tests/integration/ingestion/test_spark_sql_functions.py)."""

from __future__ import annotations

import pytest

from common.errors import UnsupportedError, ValidationError
from services.ingestion.spark_sql import check_time_column, to_spark_sql
from common.ingest.statement import parse_ingestion

SRC = "TABLE(inline(data => 'x', format => 'csv')) EXTEND (ts VARCHAR, n BIGINT, s VARCHAR)"


def spark_sql(select_list: str, rest: str = "") -> str:
    s = parse_ingestion(f"INSERT INTO ds SELECT {select_list} FROM {SRC} {rest} PARTITIONED BY DAY")
    return to_spark_sql(s.select, {"__extern0": "view0"})


def test_sources_become_views_and_quotes_become_backticks():
    assert spark_sql('TIME_PARSE(ts) AS __time, "s" AS "the s"') == \
        "SELECT TRY_CAST(ts AS TIMESTAMP) AS __time, `s` AS `the s` FROM view0"


@pytest.mark.parametrize("druid, spark", [
    ("TIME_PARSE(ts, 'd/M/yyyy H:mm:ss')", "TRY_TO_TIMESTAMP(ts, 'd/M/yyyy H:mm:ss')"),
    ("TIME_FLOOR(TIME_PARSE(ts), 'PT1H')", "DATE_TRUNC('HOUR', TRY_CAST(ts AS TIMESTAMP))"),
    ("TIME_FLOOR(TIME_PARSE(ts), 'PT5M')", "TIMESTAMP_MILLIS(CAST(FLOOR(UNIX_MILLIS(TRY_CAST(ts AS TIMESTAMP)) / 300000) * 300000 AS BIGINT))"),
    ("FLOOR(TIME_PARSE(ts) TO DAY)", "DATE_TRUNC('DAY', TRY_CAST(ts AS TIMESTAMP))"),
    ("MILLIS_TO_TIMESTAMP(n)", "TIMESTAMP_MILLIS(CAST(n AS BIGINT))"),
    ("TIMESTAMP_TO_MILLIS(TIME_PARSE(ts))", "UNIX_MILLIS(TRY_CAST(ts AS TIMESTAMP))"),
    ("REGEXP_EXTRACT(s, '[a-z]+')", "REGEXP_EXTRACT(s, '[a-z]+', 0)"),
    ("TEXTCAT(s, ts)", "CONCAT(s, ts)"),
    ("STRLEN(s)", "LENGTH(s)"),
    ("LATEST_BY(s, TIME_PARSE(ts))", "MAX_BY(s, TRY_CAST(ts AS TIMESTAMP))"),
    ("EARLIEST(s)", "MIN_BY(s, __time)"),
    ("APPROX_COUNT_DISTINCT_DS_HLL(s)", "APPROX_COUNT_DISTINCT(s)"),
    ("TIME_EXTRACT(TIME_PARSE(ts), 'HOUR')", "HOUR(TRY_CAST(ts AS TIMESTAMP))"),
    ("TIME_FORMAT(TIME_PARSE(ts))", "DATE_FORMAT(TRY_CAST(ts AS TIMESTAMP), 'yyyy-MM-dd\\'T\\'HH:mm:ss.SSS\\'Z\\'')"),
])
def test_function_rewrites(druid, spark):
    assert spark_sql(f"{druid} AS x") == f"SELECT {spark} AS x FROM view0"


@pytest.mark.parametrize("druid, error, match", [
    ("LOOKUP(s, 'map')", UnsupportedError, "LOOKUP is not supported"),
    ("TIME_FLOOR(TIME_PARSE(ts), 'PT1H', TIMESTAMP '2000-01-01')", UnsupportedError, "with an origin"),
    ("TIME_FLOOR(TIME_PARSE(ts), 'bogus')", ValidationError, "TIME_FLOOR: invalid ISO-8601 period 'bogus'"),
    ("TIME_EXTRACT(TIME_PARSE(ts), 'FORTNIGHT')", ValidationError, "unknown unit 'FORTNIGHT'"),
    ("TIME_PARSE(ts, s)", ValidationError, "pattern must be a string literal"),
    ("TIME_SHIFT(TIME_PARSE(ts), 'PT1H')", ValidationError, "TIME_SHIFT takes"),
])
def test_rewrite_errors(druid, error, match):
    with pytest.raises(error, match=match):
        spark_sql(f"{druid} AS x")


class _T:
    def __init__(self, s):
        self._s = s

    def simpleString(self):
        return self._s


class _F:
    def __init__(self, name, kind):
        self.name, self.dataType = name, _T(kind)


class _Schema:
    def __init__(self, **cols):
        self.fields = [_F(k, v) for k, v in cols.items()]


def test_time_column_checks():
    check_time_column(_Schema(__time="timestamp", x="string"))
    with pytest.raises(ValidationError, match="has no __time column.*TIME_PARSE"):
        check_time_column(_Schema(x="string"))
    with pytest.raises(ValidationError, match="MILLIS_TO_TIMESTAMP"):
        check_time_column(_Schema(__time="bigint"))
    with pytest.raises(ValidationError, match=r"TIME_PARSE\(col\)"):
        check_time_column(_Schema(__time="string"))
