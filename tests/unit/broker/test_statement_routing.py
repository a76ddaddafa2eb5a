"""SqlService routes each request by the one classifier (comments, case, SET prefixes and EXPLAIN
cannot mislead it) and hands an INSERT/REPLACE to the coordinator as the typed statement it
parsed, which the task reads back unchanged."""

from __future__ import annotations

import pytest

from common.errors import UnsupportedError
from services.broker.ingestion_submit import prepare_ingestion
from services.broker.overlay_catalog import OverlayCatalog
from services.broker.sql_service import SqlService
from common.ingest.statement import IngestionStatement
from tests.unit.security.test_sql_service_security import EXT_INSERT, INLINE_INSERT, Base, Cache


@pytest.fixture
def service():
    base = Base()
    return SqlService(OverlayCatalog(base, Cache()), executor=None, default_timeout_s=5), base


def test_the_task_gets_the_statement_parsed_on_the_broker(service):
    sql, base = service
    text = "/* load */ set rowsPerSegment = 7;\n" + EXT_INSERT.format(name="files").replace(" PARTITIONED BY DAY", "").lower()
    assert sql.execute(text).column("task_id").to_pylist() == ["task-1"]
    datasource, mode, stored_text, spec = base.coordinator.submitted[0]
    assert (datasource, mode) == ("wiki", "insert")
    _, expected, _ = prepare_ingestion(text, {}, sql.catalog)
    typed = IngestionStatement.from_json(spec["statement"])
    assert typed == expected and typed.context["rowsPerSegment"] == 7
    assert spec["segmentGranularity"] == "DAY"  # the catalog's default travels beside it
    assert "EXTERN(" in stored_text  # the text kept for people says what was read


def test_routing_is_by_tokens(service):
    sql, base = service
    explained = sql.execute("EXPLAIN PLAN FOR " + INLINE_INSERT)  # a plan, not a task
    assert explained.column_names == ["PLAN", "RESOURCES", "ATTRIBUTES"]
    assert '"statementType": "INSERT"' in explained.column("ATTRIBUTES")[0].as_py()
    with pytest.raises(UnsupportedError, match="change the catalog"):  # DDL, even after a SET and a comment
        sql.execute("SET a = 1; -- new table\n create table t (a varchar)")
    assert sql.execute("SELECT 'INSERT INTO wiki' AS s").to_pylist() == [{"s": "INSERT INTO wiki"}]
    assert base.coordinator.submitted == []


def test_describe_counts_parameters_from_tokens(service):
    sql, _ = service
    info = sql.describe("SELECT page FROM wiki WHERE page = ? /* ? */ AND '?' <> page -- ?")
    assert info.parameter_count == 1
    assert sql.describe(INLINE_INSERT).dataset_schema.names == ["task_id"]
