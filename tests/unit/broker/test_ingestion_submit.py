"""Rewriting catalog input tables and staged() calls into EXTERN, and catalog defaults."""

import json

import pytest

from common.errors import ValidationError
from services.broker.ingestion_submit import prepare_ingestion, rewrite_input_tables


class FakeCatalog:
    def __init__(self, datasources=None, inputs=None):
        self.datasources = datasources or {}
        self.inputs = inputs or {}

    def external_table_names(self):
        return list(self.inputs)

    def external_source(self, name, args):
        from services.broker.core.catalog_overlay import external_definition
        from common.ingest.external_source import ExternalSource

        return ExternalSource.of(*external_definition(name, self.inputs[name], args))

    def datasource_spec(self, name):
        return self.datasources.get(name)


def test_staged_becomes_extern():
    sql = ("INSERT INTO dst SELECT * FROM TABLE(staged(source => 'inline', data => 'a,b,1\nc,d,2\n', format => 'csv')) "
           "(x VARCHAR NOT NULL, y VARCHAR NOT NULL, z BIGINT NOT NULL) PARTITIONED BY ALL TIME")
    out = rewrite_input_tables(sql, FakeCatalog())
    assert "staged" not in out and "TABLE(EXTERN(" in out
    _, statement, _ = prepare_ingestion(sql, {}, FakeCatalog())
    source = next(iter(statement.sources.values()))
    assert source.input_source["type"] == "inline" and [n for n, _ in source.signature] == ["x", "y", "z"]


def test_input_table_template_call_and_catalog_defaults():
    catalog = FakeCatalog(
        datasources={"wiki": {"type": "datasource", "properties": {"segmentGranularity": "PT1H", "targetSegmentRows": 5,
                                                                   "clusterKeys": [{"column": "page"}]}}},
        inputs={"w": {"type": "local", "properties": {"baseDir": "/data", "format": "json"},
                      "columns": [{"name": "t", "sqlType": "VARCHAR"}, {"name": "page", "sqlType": "VARCHAR"}]}})
    sql, statement, spec = prepare_ingestion(
        "INSERT INTO wiki SELECT TIME_PARSE(t) AS __time, page FROM TABLE(ext.w(files => 'a.json'))", {}, catalog)
    assert "ext.w" not in sql
    assert spec == {"context": {"targetSegmentRows": 5}, "segmentGranularity": "PT1H", "clusterKeys": ["page"]}
    source = next(iter(statement.sources.values()))
    assert source.input_source == {"type": "local", "files": ["/data/a.json"]}
    assert json.dumps(source.input_format)  # a JSON-ready format


def test_statement_values_win_over_the_catalog():
    catalog = FakeCatalog(datasources={"wiki": {"type": "datasource", "properties": {"segmentGranularity": "PT1H"}}})
    _, statement, spec = prepare_ingestion(
        "SET targetSegmentRows = 9; INSERT INTO wiki SELECT TIME_PARSE(t) AS __time, a "
        "FROM TABLE(inline(data => ARRAY['2020-01-01,1'], format => 'csv')) EXTEND (t VARCHAR, a BIGINT) PARTITIONED BY DAY CLUSTERED BY a", {}, catalog)
    assert "segmentGranularity" not in spec and "clusterKeys" not in spec
    assert statement.clustered_by == ("a",)


def test_no_granularity_anywhere_names_both_fixes():
    with pytest.raises(ValidationError, match="add PARTITIONED BY .*or set segmentGranularity"):
        prepare_ingestion("INSERT INTO x SELECT TIME_PARSE(t) AS __time, a FROM TABLE(inline(data => ARRAY['2020-01-01,1'], format => 'csv')) EXTEND (t VARCHAR, a BIGINT)", {}, FakeCatalog())


def test_context_parameters_are_checked():
    src = "FROM TABLE(inline(data => ARRAY['2020-01-01,1'], format => 'csv')) EXTEND (t VARCHAR, a BIGINT)"
    base = f"INSERT INTO x SELECT TIME_PARSE(t) AS __time, a {src} PARTITIONED BY DAY"
    with pytest.raises(ValidationError, match="finalizeAggregations = false .* not supported"):
        prepare_ingestion("SET finalizeAggregations = false; " + base, {}, FakeCatalog())
    with pytest.raises(ValidationError, match="maxNumTasks must be an integer >= 2"):
        prepare_ingestion("SET maxNumTasks = 1; " + base, {}, FakeCatalog())
    _, _, spec = prepare_ingestion("SET maxNumTasks = 3; " + base, {}, FakeCatalog())
    assert spec["context"]["maxNumTasks"] == 3


def test_input_table_without_columns_is_discovered_and_catalog_types_are_provided():
    from services.broker.overlay_catalog import OverlayCatalog
    from tests.unit.security.test_sql_service_security import Base

    class Specs:
        specs = {("ext", "logs"): {"type": "local", "properties": {"baseDir": "/data", "filePattern": "*.json",
                                                                   "format": "json"}},
                 ("druid", "dst"): {"type": "datasource", "properties": {"segmentGranularity": "DAY", "sealed": True},
                                    "columns": [{"name": "bytes", "sqlType": "DOUBLE"}]}}

        def spec(self, schema, name):
            return self.specs.get((schema, name))

        def names(self, schema):
            return sorted(n for s, n in self.specs if s == schema)

    catalog = OverlayCatalog(Base(), Specs())
    sql, statement, spec = prepare_ingestion("INSERT INTO dst SELECT TIMESTAMP '2000-01-01' AS __time, * FROM ext.logs",
                                             {}, catalog)
    source = next(iter(statement.sources.values()))
    assert source.discover and source.signature == ()
    assert spec["declaredTypes"] == {"bytes": "DOUBLE"} and spec["sealedColumns"] == ["bytes"]
