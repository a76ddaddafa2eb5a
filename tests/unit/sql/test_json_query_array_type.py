"""JSON_QUERY_ARRAY outside UNNEST is Druid's ARRAY<COMPLEX<json>>: its native virtual column says
so, its result column is a list of JSON documents (each element marked as JSON, as a COMPLEX<json>
column is), and over Druid's HTTP API the documents are JSON inside the array, with the type
headers Druid sends. Values are Druid's published ones (CalciteNestedDataQueryTest
testJsonQueryArrays over nested-array-test-data, which prints each row's array as its text)."""

from __future__ import annotations

import json
import os
from collections import Counter

import orjson
import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import union_schema
from common.sql import execute_sql, plan_sql
from common.sql.sql_plan import JSON_FIELD_METADATA
from services.broker.druid_http.result_format import column_types, json_values
from tests.unit.sql.druid_test_files import DATA, discovered_table, segment_of
from tests.unit.sql.fake_catalog import FakeCatalog

FILE = "nested-array-test-data.json"
pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(DATA, FILE)), reason="shared test data not found")

PUBLISHED = ['[{"x":1000},{"y":2000}]', '[{"x":1},{"x":2}]', '[{"x":null},{"x":2}]', '[{"a":1},{"b":2}]',
             '[{"x":1},{"x":2}]', '[null,{"x":2}]', '[{"x":3},{"x":4}]'] * 2


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    table, json_types = discovered_table(FILE)
    segments = [segment_of(table, json_types, "arrays", "2023-01-01/2023-01-03",
                           str(tmp_path_factory.mktemp("jqa") / "a.sseg"))]
    catalog = FakeCatalog({"arrays": union_schema(segments)})
    return catalog, lambda sql: execute_sql(sql, catalog, lambda q: execute(q, segments).table)


def test_values_are_druids_published_ones(arrays):
    _, run = arrays
    got = run("SELECT JSON_QUERY_ARRAY(arrayObject, '$') FROM druid.arrays").column(0).to_pylist()
    as_json = [None if row is None else [None if e is None else json.loads(e) for e in row] for row in got]
    assert Counter(json.dumps(v) for v in as_json) == Counter(json.dumps(json.loads(t)) for t in PUBLISHED)


def test_type_is_array_of_complex_json(arrays):
    catalog, run = arrays
    sql = "SELECT JSON_QUERY_ARRAY(arrayObject, '$') AS objs FROM druid.arrays"
    field = run(sql).schema.field("objs")
    assert pa.types.is_list(field.type) and field.type.value_type == pa.string()
    assert field.type.value_field.metadata == JSON_FIELD_METADATA
    plan = plan_sql(sql, catalog, (), {})
    assert plan.logical.fields[0].type.name == "ARRAY<COMPLEX<json>>"
    [vc] = plan.native_queries()[0]["virtualColumns"]
    assert vc["outputType"] == "ARRAY<COMPLEX<json>>"


def test_elements_read_as_documents(arrays):
    _, run = arrays
    got = run("SELECT ARRAY_LENGTH(JSON_QUERY_ARRAY(arrayObject, '$')) AS n, "
              "JSON_VALUE(ARRAY_OFFSET(JSON_QUERY_ARRAY(arrayObject, '$'), 1), '$.x' RETURNING BIGINT) AS x "
              "FROM druid.arrays").to_pylist()
    # every row holds two objects; the second one's x, from the published arrays
    want = [json.loads(t)[1].get("x") for t in PUBLISHED]
    assert Counter((r["n"], r["x"]) for r in got) == Counter((2, x) for x in want)


def test_unnest_still_gives_one_document_per_row(arrays):
    _, run = arrays
    got = run("SELECT objects FROM druid.arrays, UNNEST(JSON_QUERY_ARRAY(arrayObject, '$')) AS u(objects)")
    assert got.schema.field("objects").metadata == JSON_FIELD_METADATA
    assert len(got) == 28


def test_http_writes_the_documents_inside_the_array(arrays):
    _, run = arrays
    table = run("SELECT JSON_QUERY_ARRAY(arrayObject, '$') AS objs FROM druid.arrays")
    field = table.schema.field("objs")
    assert column_types(field) == ("ARRAY<COMPLEX<json>>", "ARRAY")
    text = [orjson.dumps(v).decode() for v in json_values(table.column("objs"), field, "UTC")]
    assert Counter(text) == Counter(PUBLISHED)
    csv = json_values(table.column("objs"), field, "UTC", raw_json=True)
    assert Counter(orjson.dumps(v).decode() for v in csv) == Counter(PUBLISHED)
