"""Multi-value strings through Spark ingestion: the catalog's multiValueHandling reaches the job as a
column option, delimited text (``listDelimiter``) and JSON arrays arrive as lists, and the segments
store the column as a multi-value string kept as the option says; Druid's multi-value dimensions
example, inserted as its page inserts it (ARRAY_TO_MV over an ARRAY<STRING> input), groups per
value."""

from __future__ import annotations

import json
import os

from common.ingest.statement import parse_ingestion
from common.query import execute
from common.segment import Segment
from common.sql import execute_sql
from common.query.engine import union_schema
from common.types.column_type import MULTI_VALUE_STRING
from services.ingestion.spark_job import IngestionJob, run_ingestion
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.test_spark_job import FakePublisher, deep  # noqa: F401
from tests.unit.sql.fake_catalog import FakeCatalog


def _ingest(spark, deep, sql: str, handling: str) -> list[Segment]:  # noqa: F811
    job = IngestionJob("mv-job", parse_ingestion(sql), column_options={"tags": {"multiValueHandling": handling}})
    report = run_ingestion(spark, job, deep.root, "", FakePublisher())
    assert report.status == "SUCCESS"
    return [Segment.open(os.path.join(deep.root, *s.location.split("/"))) for s in report.segments]


def test_csv_list_delimiter_into_a_sorted_set(spark, deep, tmp_path):  # noqa: F811
    path = tmp_path / "tags.csv"
    path.write_text("2020-01-01T00:00:00Z,b|a|b,1\n2020-01-01T01:00:00Z,c,2\n2020-01-01T02:00:00Z,,3\n")
    segments = _ingest(spark, deep, f"""
        INSERT INTO tagged SELECT TIME_PARSE(ts) AS __time, tags, n
        FROM TABLE(EXTERN('{{"type": "local", "files": ["{path}"]}}',
                          '{{"type": "csv", "columns": ["ts", "tags", "n"], "listDelimiter": "|"}}',
                          '[{{"name": "ts", "type": "string"}}, {{"name": "tags", "type": "ARRAY<STRING>"}},
                            {{"name": "n", "type": "long"}}]'))
        PARTITIONED BY DAY""", "SORTED_SET")
    assert {s.schema["tags"] for s in segments} == {MULTI_VALUE_STRING}
    got = execute({"queryType": "scan", "dataSource": "tagged", "intervals": ["2020/2021"], "columns": ["n", "tags"]},
                  segments).table.to_pylist()
    assert sorted((r["n"], r["tags"]) for r in got) == [(1, ["a", "b"]), (2, ["c"]), (3, None)]


def test_druid_docs_example_inserted_as_the_page_inserts_it(spark, deep):  # noqa: F811
    rows = [{"timestamp": "2011-01-12T00:00:00.000Z", "label": "row1", "tags": ["t1", "t2", "t3"]},
            {"timestamp": "2011-01-13T00:00:00.000Z", "label": "row2", "tags": ["t3", "t4", "t5"]},
            {"timestamp": "2011-01-14T00:00:00.000Z", "label": "row3", "tags": ["t5", "t6", "t7"]},
            {"timestamp": "2011-01-14T00:00:00.000Z", "label": "row4", "tags": []}]
    data = "\\n".join(json.dumps(r).replace('"', '\\"') for r in rows)
    segments = _ingest(spark, deep, f"""
        INSERT INTO mvd_example
        SELECT TIME_PARSE("timestamp") AS "__time", "label", ARRAY_TO_MV("tags") AS "tags"
        FROM TABLE(EXTERN('{{"type":"inline","data":"{data}"}}', '{{"type":"json"}}',
          '[{{"name":"timestamp", "type":"STRING"}},{{"name":"label", "type":"STRING"}},{{"name":"tags", "type":"ARRAY<STRING>"}}]'))
        PARTITIONED BY DAY""", "SORTED_ARRAY")
    catalog = FakeCatalog({"mvd_example": union_schema(segments)})
    got = execute_sql("SELECT label, tags FROM mvd_example GROUP BY 1, 2", catalog,
                      lambda q: execute(q, segments).table).to_pylist()
    assert got == [{"label": "row1", "tags": "t1"}, {"label": "row1", "tags": "t2"}, {"label": "row1", "tags": "t3"},
                   {"label": "row2", "tags": "t3"}, {"label": "row2", "tags": "t4"}, {"label": "row2", "tags": "t5"},
                   {"label": "row3", "tags": "t5"}, {"label": "row3", "tags": "t6"}, {"label": "row3", "tags": "t7"},
                   {"label": "row4", "tags": None}]


def test_compaction_keeps_the_column_multi_value(spark, deep, tmp_path):  # noqa: F811
    from services.ingestion.compaction import compaction_sql, export_rows, multi_value_options
    from common.types.interval import Interval

    path = tmp_path / "tags.csv"
    path.write_text("2020-01-01T00:00:00Z,b|a|b,1\n2020-01-01T01:00:00Z,,2\n")
    segments = _ingest(spark, deep, f"""
        INSERT INTO tagged SELECT TIME_PARSE(ts) AS __time, tags, n
        FROM TABLE(EXTERN('{{"type": "local", "files": ["{path}"]}}',
                          '{{"type": "csv", "columns": ["ts", "tags", "n"], "listDelimiter": "|"}}',
                          '[{{"name": "ts", "type": "string"}}, {{"name": "tags", "type": "ARRAY<STRING>"}},
                            {{"name": "n", "type": "long"}}]'))
        PARTITIONED BY DAY""", "ARRAY")
    rows = str(tmp_path / "rows.parquet")
    schema = export_rows(segments, rows)
    options = multi_value_options(segments)
    assert options == {"tags": {"multiValueHandling": "ARRAY"}}
    sql = compaction_sql("tagged", [Interval.parse("2020-01-01/2020-01-02")], schema, rows, "DAY")
    job = IngestionJob("compact-job", parse_ingestion(sql), column_options=options)
    report = run_ingestion(spark, job, deep.root, "", FakePublisher())
    assert report.status == "SUCCESS"
    compacted = [Segment.open(os.path.join(deep.root, *s.location.split("/"))) for s in report.segments]
    assert {s.schema["tags"] for s in compacted} == {MULTI_VALUE_STRING}
    got = execute({"queryType": "scan", "dataSource": "tagged", "intervals": ["2020/2021"], "columns": ["n", "tags"]},
                  compacted).table.to_pylist()
    assert sorted((r["n"], r["tags"]) for r in got) == [(1, ["b", "a", "b"]), (2, None)]
