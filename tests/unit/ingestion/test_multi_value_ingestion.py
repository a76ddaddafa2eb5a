"""Multi-value strings from the catalog to segments: a VARCHAR column with ``multiValueHandling``
is declared a multi-value string (validated, typed VARCHAR-but-multi-value by the broker's
overlay, sent to jobs as a column option), JSON arrays and delimited text (``listDelimiter``) are
read into lists, and the build stores them with the multiValue encoding."""

from __future__ import annotations

import io
import os

import pyarrow as pa
import pytest

from common.catalog import TableId, TableSpec, validate_table
from common.types.column_properties import declared_column_type, storage_options
from common.errors import ValidationError
from common.ingest.external_source import ExternalSource
from common.ingest.row_parser import META_ERROR, parse_file
from common.ingest.stream_insert import catalog_job_options
from common.query import execute
from common.segment import Segment
from common.segment.segment_id import SegmentId
from common.types import Interval, parse_instant
from common.types.column_type import MULTI_VALUE_STRING, STRING, TIME_COLUMN
from services.broker.core.catalog_overlay import overlay_schema
from services.deep_storage import LocalDeepStorage
from services.ingestion.build import BuildSpec, PlannedSegment, build_partition
from services.ingestion.partitioning import CHUNK_COLUMN, PART_COLUMN

DS = TableId("druid", "mvd")
T0 = parse_instant("2011-01-12")


def _spec(column: dict) -> dict:
    return {"type": "datasource", "columns": [{"name": "label", "sqlType": "VARCHAR"}, column]}


@pytest.mark.parametrize("mode", ["SORTED_ARRAY", "SORTED_SET", "ARRAY", "sorted_set"])
def test_catalog_declares_a_multi_value_string(mode):
    column = {"name": "tags", "sqlType": "VARCHAR", "properties": {"multiValueHandling": mode}}
    validate_table(DS, TableSpec.from_json(_spec(column)))
    assert declared_column_type(column) == MULTI_VALUE_STRING
    assert storage_options(column) == {"multiValueHandling": mode}
    untyped = {"name": "tags", "properties": {"multiValueHandling": mode}}
    validate_table(DS, TableSpec.from_json(_spec(untyped)))
    schema = overlay_schema(_spec(untyped), {TIME_COLUMN: STRING, "tags": STRING})
    assert schema["tags"] == MULTI_VALUE_STRING and schema["label"] == STRING


@pytest.mark.parametrize("column,words", [
    ({"name": "tags", "sqlType": "BIGINT", "properties": {"multiValueHandling": "ARRAY"}},
     ["column 'tags'", "multiValueHandling", "VARCHAR", "BIGINT"]),
    ({"name": "tags", "properties": {"multiValueHandling": "UNIQUE"}},
     ["column 'tags'", "SORTED_ARRAY, SORTED_SET, ARRAY", "'UNIQUE'"]),
    ({"name": "tags", "properties": {"multiValueHandling": 1}}, ["column 'tags'", "multiValueHandling"]),
])
def test_catalog_refuses_a_bad_declaration(column, words):
    with pytest.raises(ValidationError) as err:
        validate_table(DS, TableSpec.from_json(_spec(column)))
    for w in words:
        assert w in str(err.value), str(err.value)


def test_stream_jobs_get_the_column_option():
    spec = _spec({"name": "tags", "properties": {"multiValueHandling": "SORTED_SET"}})

    class Supervisor:
        schema_discovery = False
        dimensions = ()
        metrics = ()

    out = catalog_job_options(Supervisor(), spec)
    assert out["column_options"] == {"tags": {"multiValueHandling": "SORTED_SET"}}


def _parse(text: str, fmt: dict, signature: list) -> pa.Table:
    source = ExternalSource.of({"type": "inline", "data": "x"}, fmt, signature)
    batches = list(parse_file("f.txt", io.BytesIO(text.encode()), source.input_format, source.signature))
    return pa.Table.from_batches(batches)


def test_csv_list_delimiter_and_json_arrays_read_into_lists():
    sig = [{"name": "t", "type": "string"}, {"name": "tags", "type": "ARRAY<STRING>"}]
    csv = _parse("2011-01-12,t1|t2|t3\n2011-01-14,\n2011-01-15,solo\n", {"type": "csv", "listDelimiter": "|",
                                                                            "columns": ["t", "tags"]}, sig)
    assert csv.column("tags").to_pylist() == [["t1", "t2", "t3"], None, ["solo"]]
    json_lines = _parse('{"t": "2011-01-12", "tags": ["t1", 2, null]}\n{"t": "2011-01-14", "tags": []}\n'
                        '{"t": "2011-01-15", "tags": "solo"}\n', {"type": "json"}, sig)
    assert json_lines.column(META_ERROR).to_pylist() == [None, None, None]
    assert json_lines.column("tags").to_pylist() == [["t1", "2", None], [], ["solo"]]


def test_build_stores_the_declared_column_as_multi_value(tmp_path):
    storage = LocalDeepStorage(str(tmp_path / "deep"))
    iv = Interval(T0, T0 + 86_400_000 * 7)
    spec = BuildSpec({0: PlannedSegment(SegmentId("mvd", iv, "v1", 0), 1)}, "mvd/_ingest/job/",
                     column_options={"tags": {"multiValueHandling": "SORTED_SET"}})
    times = [T0, T0 + 1, T0 + 2]
    batch = pa.RecordBatch.from_pydict({
        "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        "tags": pa.array([["t3", "t1", "t3"], [], None], pa.list_(pa.string())),
        CHUNK_COLUMN: pa.array([T0] * 3, pa.int64()), PART_COLUMN: pa.array([0, 0, 0], pa.int64())})
    [row] = pa.Table.from_batches(list(build_partition(iter([batch]), spec, storage, str(tmp_path / "w")))).to_pylist()
    seg = Segment.open(os.path.join(storage.root, *row["location"].split("/")))
    assert seg.schema["tags"] == MULTI_VALUE_STRING
    got = execute({"queryType": "scan", "dataSource": "mvd", "intervals": ["2011/2012"], "columns": ["tags"],
                   "filter": {"type": "equals", "column": "tags", "matchValue": "t1", "matchValueType": "STRING"}},
                  [seg]).table
    assert got.column("tags").to_pylist() == [["t1", "t3"]]


def test_compaction_rewrites_a_multi_value_column_as_one(tmp_path):
    import pyarrow.parquet as pq

    from common.ingest.statement import parse_ingestion
    from common.segment import build_segment
    from services.ingestion.compaction import compaction_sql, export_rows, multi_value_options

    table = pa.table({"__time": pa.array([T0, T0 + 5], pa.int64()),
                      "tags": pa.array([["b", "a", "b"], []], pa.list_(pa.string()))})
    path = str(tmp_path / "s.sseg")
    iv = Interval(T0, T0 + 86_400_000)
    build_segment(table, path, SegmentId("mvd", iv, "v1", 0), column_types={"tags": MULTI_VALUE_STRING},
                  column_options={"tags": {"multiValueHandling": "SORTED_SET"}})
    seg = Segment.open(path)
    out = str(tmp_path / "rows.parquet")
    schema = export_rows([seg], out)
    assert pq.read_table(out).column("tags").to_pylist() == [["a", "b"], None]
    assert multi_value_options([seg]) == {"tags": {"multiValueHandling": "SORTED_SET"}}
    statement = parse_ingestion(compaction_sql("mvd", [iv], schema, out, "DAY"))
    assert '"tags" VARCHAR ARRAY' in compaction_sql("mvd", [iv], schema, out, "DAY")
    assert statement.mode == "REPLACE"
