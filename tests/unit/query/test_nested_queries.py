"""Queries on nested JSON columns through ``nested-field`` virtual columns: filters, group keys and
aggregates read the field columns (never the raw documents) and answer exactly what parsing the
JSON answers, checked against the same rows as JSON text and against DuckDB's JSON functions."""

from __future__ import annotations

import json
import os
import random

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.query.engine import execute_on_table
from common.query.model import query_from_json
from common.query.nested_field import parse_path
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.column_type import JSON
from common.types.interval import Interval
from tests.conftest import duck_connect

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data")
IV = "2020-01-01/2020-01-02"
T0 = 1577836800000


def random_docs(n: int, seed: int = 3) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.05:
            out.append(None)
            continue
        doc = {"user": {"name": rng.choice(["ann", "bob", "cé", "", "dan"]), "age": rng.choice([20, 31, 47, None])},
               "score": rng.choice([1.5, -0.0, 2.25, 10, None]), "tags": rng.sample(["a", "b", "c"], rng.randint(0, 3))}
        if rng.random() < 0.3:
            doc["mixed"] = rng.choice([1, "one", 2.5])
        if rng.random() < 0.2:
            del doc["user"]["name"]
        out.append(doc)
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    docs = random_docs(400)
    texts = [None if d is None else json.dumps(d) for d in docs]
    table = pa.table({"__time": pa.array([T0 + i * 1000 for i in range(len(docs))], pa.int64()),
                      "j": pa.array(texts, pa.string())})
    path = str(tmp_path_factory.mktemp("nested") / "n.sseg")
    build_segment(table, path, SegmentId("ds", Interval.of(IV), "v1", 0), column_types={"j": JSON})
    seg = Segment.open(path)
    text_table = table.set_column(0, "__time", table.column("__time").cast(pa.timestamp("ms", tz="UTC")))
    yield docs, seg, text_table
    seg.close()


def vc(name, path, kind=None):
    out = {"type": "nested-field", "columnName": "j", "path": path, "outputName": name}
    if kind:
        out["expectedType"] = kind
    return out


QUERIES = [
    {"queryType": "groupBy", "granularity": "all", "virtualColumns": [vc("name", "$.user.name")],
     "dimensions": ["name"], "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "groupBy", "granularity": "all", "virtualColumns": [vc("age", "$.user.age", "LONG")],
     "dimensions": [{"type": "default", "dimension": "age", "outputName": "age", "outputType": "LONG"}],
     "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "timeseries", "granularity": "all", "virtualColumns": [vc("score", "$.score", "DOUBLE")],
     "aggregations": [{"type": "doubleSum", "name": "s", "fieldName": "score"},
                      {"type": "doubleMax", "name": "m", "fieldName": "score"}]},
    {"queryType": "timeseries", "granularity": "all", "virtualColumns": [vc("name", "$.user.name")],
     "filter": {"type": "equals", "column": "name", "matchValue": "bob"},
     "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "timeseries", "granularity": "all", "virtualColumns": [vc("name", "$.user.name")],
     "filter": {"type": "like", "dimension": "name", "pattern": "c%"}, "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "timeseries", "granularity": "all", "virtualColumns": [vc("name", "$.user.name")],
     "filter": {"type": "null", "column": "name"}, "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "timeseries", "granularity": "all", "virtualColumns": [vc("age", "$.user.age", "LONG")],
     "filter": {"type": "range", "column": "age", "lower": 30, "matchValueType": "LONG"},
     "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "groupBy", "granularity": "all", "virtualColumns": [vc("mixed", "$.mixed")],
     "dimensions": ["mixed"], "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "groupBy", "granularity": "all", "virtualColumns": [vc("missing", "$.nope.x")],
     "dimensions": ["missing"], "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "scan", "columns": ["t0", "n"], "limit": 50,
     "virtualColumns": [vc("t0", "$.tags[0]"), vc("n", "$.user.name")]},
    {"queryType": "topN", "granularity": "all", "virtualColumns": [vc("name", "$.user.name")], "dimension": "name",
     "metric": "c", "threshold": 2, "aggregations": [{"type": "count", "name": "c"}]},
]


@pytest.mark.parametrize("query", QUERIES, ids=[f"q{i}" for i in range(len(QUERIES))])
def test_fields_answer_like_parsing_the_documents(data, query):
    _, seg, text_table = data
    q = {"dataSource": "ds", "intervals": [IV], **query}
    got = execute(q, [seg]).table
    want = execute_on_table(query_from_json(q), text_table).table
    assert got.to_pylist() == want.to_pylist()


def test_filters_on_a_string_field_use_its_index_and_read_no_raw_bytes(data):
    _, seg, _ = data
    q = {"queryType": "timeseries", "dataSource": "ds", "intervals": [IV], "granularity": "all",
         "virtualColumns": [vc("name", "$.user.name")], "filter": {"type": "equals", "column": "name", "matchValue": "bob"},
         "aggregations": [{"type": "count", "name": "c"}]}
    result = execute(q, [seg])
    count = result.table.column("c")[0].as_py()
    assert result.stats.rows_after_prefilter == count > 0  # answered from the field's bitmaps
    raw = seg.column("j").part_bytes(("raw",))
    q["queryType"] = "groupBy"
    q["dimensions"] = ["name"]
    q.pop("filter")
    grouped = execute(q, [seg])
    assert 0 < grouped.stats.bytes_read < raw  # group keys from the field's codes, not the documents


def test_against_duckdb(data):
    docs, seg, _ = data
    con = duck_connect()
    con.execute("CREATE TABLE t (j JSON)")
    con.executemany("INSERT INTO t VALUES (?)", [[None if d is None else json.dumps(d)] for d in docs])
    want = dict(con.execute("SELECT json_extract_string(j, '$.user.name') AS n, count(*) FROM t GROUP BY 1").fetchall())
    got = execute({"queryType": "groupBy", "dataSource": "ds", "intervals": [IV], "granularity": "all",
                   "virtualColumns": [vc("n", "$.user.name")], "dimensions": ["n"],
                   "aggregations": [{"type": "count", "name": "c"}]}, [seg]).table.to_pylist()
    assert {r["n"]: r["c"] for r in got} == want
    s = con.execute("SELECT sum(CAST(json_extract(j, '$.score') AS DOUBLE)) FROM t").fetchone()[0]
    got_sum = execute({"queryType": "timeseries", "dataSource": "ds", "intervals": [IV], "granularity": "all",
                       "virtualColumns": [vc("s", "$.score", "DOUBLE")],
                       "aggregations": [{"type": "doubleSum", "name": "s", "fieldName": "s"}]}, [seg]).table
    assert got_sum.column("s")[0].as_py() == pytest.approx(s)
    con.close()


def test_example_data_documented_results(tmp_path):
    """nested-example-data.json, as in Druid's nested columns docs (the product names by price)."""
    with open(os.path.join(DATA, "nested-example-data.json"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    table = pa.table({"__time": pa.array([T0 + i for i in range(len(rows))], pa.int64()),
                      "product": [r["product"] for r in rows],
                      "shipTo": [json.dumps(r["shipTo"]) for r in rows],
                      "details": [json.dumps(r["details"]) for r in rows]})
    path = str(tmp_path / "ex.sseg")
    build_segment(table, path, SegmentId("ex", Interval.of(IV), "v1", 0), column_types={"shipTo": JSON, "details": JSON})
    seg = Segment.open(path)
    got = execute({"queryType": "scan", "dataSource": "ex", "intervals": [IV], "columns": ["product", "price", "city"],
                   "virtualColumns": [{"type": "nested-field", "columnName": "details", "path": "$.price",
                                       "expectedType": "DOUBLE", "outputName": "price"},
                                      {"type": "nested-field", "columnName": "shipTo", "path": "$.address.city",
                                       "outputName": "city"}]}, [seg]).table.to_pylist()
    assert got == [{"product": r["product"], "price": float(r["details"]["price"]),
                    "city": r["shipTo"]["address"]["city"]} for r in rows]


@pytest.mark.parametrize("path, message", [
    ("a.b", "must start with '\\$'"),
    ("$.a..", "position 6: '..' needs a key name"),
    ("$.a[x]", "position 5: '\\[' takes an index"),
])
def test_invalid_paths_point_at_the_problem(path, message):
    with pytest.raises(ValidationError, match=message):
        parse_path(path)
