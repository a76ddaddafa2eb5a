"""The rewritten Druid functions give Druid's answers when Spark runs them."""

from __future__ import annotations

import pytest

from common.types.interval import parse_instant
from services.ingestion.spark_sql import to_spark_sql
from common.ingest.statement import parse_ingestion
from tests.fixtures.spark_session import spark  # noqa: F401

CASES = [
    ("TIME_PARSE('2015-09-12T00:46:58.771Z')", "2015-09-12T00:46:58.771Z"),
    ("TIME_PARSE('2022-6-14T10:32:08Z')", "2022-06-14T10:32:08Z"),
    ("TIME_PARSE('2023-01-01')", "2023-01-01T00:00:00Z"),
    ("TIME_PARSE('2015-09-12T02:00:00+02:00')", "2015-09-12T00:00:00Z"),
    ("TIME_PARSE('1/1/2024 1:02:00', 'd/M/yyyy H:mm:ss')", "2024-01-01T01:02:00Z"),
    ("TIME_PARSE('2024-01-01 01:00:00', NULL, 'America/New_York')", "2024-01-01T06:00:00Z"),
    ("TIME_FLOOR(TIME_PARSE('2015-09-12T10:47:00Z'), 'PT15M')", "2015-09-12T10:45:00Z"),
    ("TIME_FLOOR(TIME_PARSE('2015-09-12T10:47:00Z'), 'P1W')", "2015-09-07T00:00:00Z"),
    ("TIME_FLOOR(TIME_PARSE('2015-09-12T10:47:00Z'), 'P3M')", "2015-07-01T00:00:00Z"),
    ("TIME_FLOOR(TIME_PARSE('2015-09-12T10:47:00Z'), 'P6M')", "2015-07-01T00:00:00Z"),
    ("TIME_FLOOR(TIME_PARSE('2015-09-12T03:00:00Z'), 'P1D', NULL, 'America/Los_Angeles')", "2015-09-11T07:00:00Z"),
    ("TIME_CEIL(TIME_PARSE('2015-09-12T10:47:00Z'), 'PT1H')", "2015-09-12T11:00:00Z"),
    ("TIME_CEIL(TIME_PARSE('2015-09-12T10:00:00Z'), 'PT1H')", "2015-09-12T10:00:00Z"),
    ("TIME_SHIFT(TIME_PARSE('2015-01-31T00:00:00Z'), 'P1M', 1)", "2015-02-28T00:00:00Z"),
    ("TIME_SHIFT(TIME_PARSE('2015-01-01T00:00:00Z'), 'PT90M', -2)", "2014-12-31T21:00:00Z"),
    ("FLOOR(TIME_PARSE('2015-09-12T10:47:00Z') TO MONTH)", "2015-09-01T00:00:00Z"),
    ("CEIL(TIME_PARSE('2015-09-12T10:47:00Z') TO DAY)", "2015-09-13T00:00:00Z"),
    ("MILLIS_TO_TIMESTAMP(1442016000000)", "2015-09-12T00:00:00Z"),
]
VALUES = [
    ("TIME_FORMAT(TIME_PARSE('2015-09-12T10:47:00Z'))", "2015-09-12T10:47:00.000Z"),
    ("TIME_FORMAT(TIME_PARSE('2015-09-12T10:47:00Z'), 'yyyy-MM-dd HH', 'Asia/Tokyo')", "2015-09-12 19"),
    ("TIME_EXTRACT(TIME_PARSE('2015-09-13T10:47:00Z'), 'DOW')", 7),
    ("TIME_EXTRACT(TIME_PARSE('2015-09-12T10:47:00.123Z'), 'MILLISECOND')", 123),
    ("TIMESTAMP_TO_MILLIS(TIME_PARSE('2015-09-12T00:00:00Z'))", 1442016000000),
    ("REGEXP_EXTRACT('abc123', '[0-9]+')", "123"),
    ("PARSE_LONG('ff', 16)", 255),
    ("TIME_PARSE('not a time') IS NULL", True),
    ("TIMESTAMPDIFF(DAY, TIME_PARSE('2015-09-01'), TIME_PARSE('2015-09-12'))", 11),
]


def _run(spark, expr):  # noqa: F811
    stmt = parse_ingestion(f"INSERT INTO x SELECT {expr} AS v FROM TABLE(inline(data => 'a', format => 'csv')) "
                           "EXTEND (a VARCHAR) PARTITIONED BY DAY")
    spark.createDataFrame([("a",)], "a STRING").createOrReplaceTempView("one_row")
    return spark.sql(to_spark_sql(stmt.select, {"__extern0": "one_row"})).collect()[0]["v"]


@pytest.mark.parametrize("expr, want", CASES)
def test_time_functions(spark, expr, want):  # noqa: F811
    got = _run(spark, expr)
    assert int(round(got.timestamp() * 1000)) == parse_instant(want)


@pytest.mark.parametrize("expr, want", VALUES)
def test_values(spark, expr, want):  # noqa: F811
    assert _run(spark, expr) == want
