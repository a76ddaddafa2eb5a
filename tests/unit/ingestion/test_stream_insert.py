"""The INSERT of a supervisor's micro-batch (common/ingest/stream_insert.py) and the catalog's
options for its jobs."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.ingest.stream_insert import catalog_job_options, micro_batch_sql
from common.ingest.supervisor_spec import parse_supervisor_spec
from common.types.column_type import ColumnType


def spec(**schema):
    return parse_supervisor_spec({"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "d", "timestampSpec": {"column": "t", "format": "millis"}, **schema},
        "ioConfig": {"topic": "x", "consumerProperties": {"bootstrap.servers": "h:1"}}}})


SOURCE = "TABLE(localfiles(files => ARRAY['/tmp/it''s.json'], format => 'json'"


def test_declared_dimensions_without_rollup():
    s = spec(dimensionsSpec={"dimensions": ["a", {"type": "long", "name": "b"}]})
    assert micro_batch_sql(s, "/tmp/it's.json") == (
        f"INSERT INTO \"d\" SELECT \"__time\", \"a\", \"b\" FROM {SOURCE})) "
        "EXTEND (\"__time\" TIMESTAMP, \"a\" VARCHAR, \"b\" BIGINT) PARTITIONED BY HOUR")


def test_declared_dimensions_with_rollup():
    s = spec(dimensionsSpec={"dimensions": ["a"]}, granularitySpec={"queryGranularity": "MINUTE"},
             metricsSpec=[{"type": "count", "name": "n"}, {"type": "longSum", "name": "s", "fieldName": "x"},
                          {"type": "doubleMax", "name": "m", "fieldName": "x"},
                          {"type": "longMin", "name": "lo", "fieldName": "y"}])
    assert micro_batch_sql(s, "/tmp/it's.json") == (
        f"INSERT INTO \"d\" SELECT \"__time\", \"a\", COUNT(*) AS \"n\", SUM(CAST(\"x\" AS BIGINT)) AS \"s\", "
        "MAX(CAST(\"x\" AS DOUBLE)) AS \"m\", MIN(CAST(\"y\" AS BIGINT)) AS \"lo\" "
        f"FROM {SOURCE})) EXTEND (\"__time\" TIMESTAMP, \"a\" VARCHAR, \"x\" DOUBLE, \"y\" BIGINT) "
        "GROUP BY \"__time\", \"a\" PARTITIONED BY HOUR")


def test_discovery_with_rollup_and_exclusions():
    s = spec(dimensionsSpec={"useSchemaDiscovery": True, "dimensions": [{"type": "long", "name": "b"}],
                             "dimensionExclusions": ["secret"]},
             metricsSpec=[{"type": "count", "name": "n"}, {"type": "doubleSum", "name": "v", "fieldName": "v"}],
             granularitySpec={"segmentGranularity": "DAY"})
    assert micro_batch_sql(s, "/tmp/it's.json") == (
        f"INSERT INTO \"d\" SELECT \"__time\", *, COUNT(*) AS \"n\", SUM(CAST(\"v\" AS DOUBLE)) AS \"v\" "
        f"FROM {SOURCE}, exclude => ARRAY['t', 'secret'])) PARTIAL (\"__time\" TIMESTAMP, \"b\" BIGINT, "
        "\"v\" DOUBLE) GROUP BY ALL PARTITIONED BY DAY")


def test_metrics_without_rollup_are_the_rows_values():
    s = spec(dimensionsSpec={"dimensions": ["a"]}, granularitySpec={"rollup": False},
             metricsSpec=[{"type": "count", "name": "n"}, {"type": "floatSum", "name": "s", "fieldName": "x"}])
    assert micro_batch_sql(s, "/p") == (
        "INSERT INTO \"d\" SELECT \"__time\", \"a\", CAST(1 AS BIGINT) AS \"n\", CAST(\"x\" AS DOUBLE) AS \"s\" "
        "FROM TABLE(localfiles(files => ARRAY['/p'], format => 'json')) EXTEND (\"__time\" TIMESTAMP, \"a\" VARCHAR, "
        "\"x\" DOUBLE) PARTITIONED BY HOUR")


def test_catalog_options():
    table = {"type": "datasource", "properties": {"sealed": True, "projections": [{"name": "p"}]},
             "columns": [{"name": "a", "sqlType": "VARCHAR"}, {"name": "j", "sqlType": "TYPE('COMPLEX<json>')",
                                                              "properties": {"maxFields": 5, "other": 1}},
                         {"name": "c"}]}
    discovered = spec()
    assert catalog_job_options(discovered, table) == {
        "projections": ({"name": "p"},), "column_options": {"j": {"maxFields": 5}},
        "declared_types": {"a": ColumnType.parse("STRING"), "j": ColumnType.parse("COMPLEX<json>")},
        "sealed_columns": ("a", "c", "j")}
    declared = spec(dimensionsSpec={"dimensions": ["a"]})
    assert "declared_types" not in catalog_job_options(declared, table)  # the spec's dimension types win
    assert catalog_job_options(discovered, None) == {}


def test_a_sealed_table_refuses_undeclared_spec_columns_before_reading():
    table = {"type": "datasource", "properties": {"sealed": True}, "columns": [{"name": "a"}, {"name": "n"}]}
    ok = spec(dimensionsSpec={"dimensions": ["a"]}, metricsSpec=[{"type": "count", "name": "n"}])
    assert catalog_job_options(ok, table) == {"sealed_columns": ("a", "n")}
    bad = spec(dimensionsSpec={"dimensions": ["a", "b"]}, metricsSpec=[{"type": "count", "name": "m"}])
    with pytest.raises(ValidationError, match="datasource d is sealed and does not declare b, m; add them"):
        catalog_job_options(bad, table)
