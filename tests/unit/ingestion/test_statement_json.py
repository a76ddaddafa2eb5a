"""The typed INSERT/REPLACE as it travels from the broker to the ingestion task: plain JSON that
comes back as an equal IngestionStatement, with nothing parsed again; malformed payloads are
refused naming what is wrong."""

from __future__ import annotations

import json

import pytest
from sqlglot import exp

from common.errors import UnsupportedError, ValidationError
from services.ingestion.spark_sql import to_spark_sql
from common.ingest.statement import STATEMENT_FORMAT, IngestionStatement, parse_ingestion
from services.ingestion.task_main import _statement

EXTERN = """TABLE(EXTERN('{"type": "inline", "data": "2020-01-01,a,1\\n"}', '{"type": "csv", "columns": ["ts", "s", "n"]}',
    '[{"name": "ts", "type": "string"}, {"name": "s", "type": "string"}, {"name": "n", "type": "long"}]'))"""
INLINE = ("TABLE(inline(data => ARRAY['2020-01-01,x'], format => 'csv')) "
          "EXTEND (t VARCHAR, tags VARCHAR ARRAY, j COMPLEX<json>)")

STATEMENTS = [
    (f"SET rowsPerSegment = 10; SET mode = 'fast'; SET flag = TRUE; SET none = NULL;\n"
     f"INSERT INTO ds SELECT TIME_PARSE(ts) AS __time, s, n FROM {EXTERN}\n"
     f"PARTITIONED BY TIME_FLOOR(__time, 'PT1H', NULL, 'America/Los_Angeles') CLUSTERED BY s, 3"),
    (f"REPLACE INTO \"my ds\" OVERWRITE WHERE __time >= TIMESTAMP '2020-01-01' AND __time < TIMESTAMP '2020-01-03'\n"
     f"WITH src AS (SELECT * FROM {EXTERN}) SELECT TIME_PARSE(a.ts) AS __time, a.s, SUM(a.n) AS n\n"
     f"FROM src a JOIN {INLINE} b ON a.s = b.t GROUP BY 1, 2 PARTITIONED BY DAY"),
    f"REPLACE INTO ds OVERWRITE ALL SELECT TIME_PARSE(ts) AS __time FROM {EXTERN} PARTITIONED BY ALL TIME",
    f"INSERT INTO ds SELECT TIME_PARSE(ts) AS __time, COALESCE(s, 'x') AS s FROM {EXTERN} WHERE n > 0",
]


def _round_trip(statement: IngestionStatement) -> IngestionStatement:
    return IngestionStatement.from_json(json.loads(json.dumps(statement.to_json())))


@pytest.mark.parametrize("sql", STATEMENTS)
def test_round_trip_is_equal(sql):
    original = parse_ingestion(sql, context={"priority": 3, "rowsPerSegment": 1})
    back = _round_trip(original)
    assert back == original  # every field but the broker-side SQL text
    assert back.sql == ""  # the task gets the parsed statement, not text to parse
    assert back.context == original.context and back.context["priority"] == 3
    assert back.select.sql("druid") == original.select.sql("druid")
    assert back.replace_intervals == original.replace_intervals and back.is_rollup == original.is_rollup
    views = {name: f"view_{i}" for i, name in enumerate(original.sources)}
    assert to_spark_sql(back.select, views) == to_spark_sql(original.select, views)
    # Positions survive, so a message about the SELECT on the task side still points at the user's text.
    column = next(back.select.find_all(exp.Column))
    assert column.this.meta == next(original.select.find_all(exp.Column)).this.meta


def test_payload_is_structured_json():
    payload = parse_ingestion(STATEMENTS[0], context={"rowsPerSegment": 1}).to_json()
    assert payload["format"] == STATEMENT_FORMAT
    assert payload["context"] == {"rowsPerSegment": 10, "mode": "fast", "flag": True, "none": None}  # SET wins
    assert (payload["mode"], payload["datasource"], payload["overwrite"]) == ("INSERT", "ds", None)
    assert payload["partitionedBy"] == {"type": "period", "period": "PT1H", "timeZone": "America/Los_Angeles"}
    assert payload["clusteredBy"] == ["s", "n"]
    [source] = payload["sources"].values()
    assert source["signature"] == [{"name": "ts", "type": "STRING"}, {"name": "s", "type": "STRING"},
                                   {"name": "n", "type": "LONG"}]
    assert isinstance(payload["select"], list)  # sqlglot's serialized tree, not SQL text
    replace = parse_ingestion(STATEMENTS[1]).to_json()
    assert replace["overwrite"] == [[1577836800000, 1578009600000]]
    assert parse_ingestion(STATEMENTS[2]).to_json()["overwrite"] == "ALL"


@pytest.mark.parametrize("edit, match", [
    (lambda p: p.update(format=99), "has format 99; this task reads format 1"),
    (lambda p: p.pop("datasource"), "malformed \\(missing field 'datasource'\\)"),
    (lambda p: p.update(mode="UPSERT"), "malformed .*mode 'UPSERT'"),
    (lambda p: p.update(select=[{"c": "Literal", "k": None}]), "malformed"),
    (lambda p: p.update(overwrite=[[5, 1]]), "malformed .*before its start"),
    (lambda p: p.update(partitionedBy="fortnightly"), "malformed .*unknown granularity"),
])
def test_malformed_payloads_are_refused(edit, match):
    payload = parse_ingestion(STATEMENTS[1]).to_json()
    edit(payload)
    with pytest.raises(ValidationError, match=match):
        IngestionStatement.from_json(payload)


def test_task_reads_the_typed_statement_only():
    payload = parse_ingestion(STATEMENTS[0]).to_json()
    assert _statement({"statement": payload, "context": {}}) == parse_ingestion(STATEMENTS[0])
    with pytest.raises(ValidationError, match="carries no parsed statement"):
        _statement({"context": {}})
    with pytest.raises(ValidationError, match="must be a JSON object"):
        _statement({"statement": "INSERT INTO ds SELECT 1"})


def test_explain_of_an_insert_is_not_an_ingestion():
    with pytest.raises(UnsupportedError, match="EXPLAIN PLAN FOR INSERT is not supported"):
        parse_ingestion(f"EXPLAIN PLAN FOR INSERT INTO ds SELECT * FROM {EXTERN} PARTITIONED BY DAY")
