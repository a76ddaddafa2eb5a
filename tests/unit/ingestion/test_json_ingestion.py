"""JSON columns at ingestion: SELECT expressions of COMPLEX<json> type become nested columns and
run as strata's own JSON functions in Spark (Arrow UDFs over common/json); text formats parse
their COMPLEX<json> columns, so malformed JSON is a parse exception with line and reason; Parquet
structs, lists and maps feed a JSON column as objects and arrays. (Spark itself runs these in
tests/integration/ingestion/test_nested_columns_docs.py.)"""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.errors import UnsupportedError
from common.types.column_type import ColumnType
from services.ingestion import json_udfs
from common.ingest.external_source import ExternalSource
from common.ingest.row_parser import META_ERROR, META_LINE, parse_file
from services.ingestion.spark_sql import to_spark_sql
from common.ingest.statement import parse_ingestion

SRC = ("TABLE(inline(data => 'x', format => 'csv')) "
       "EXTEND (ts VARCHAR, s VARCHAR, product VARCHAR, price DOUBLE, details TYPE('COMPLEX<json>'))")


def statement(select_list: str):
    return parse_ingestion(f"INSERT INTO ds SELECT TIME_PARSE(ts) AS __time, {select_list} FROM {SRC} "
                           "PARTITIONED BY DAY")


def spark_sql(select_list: str) -> str:
    return to_spark_sql(statement(select_list).select, {"__extern0": "view0"}, frozenset({"details"}))


def test_json_producing_expressions_are_json_columns():
    s = statement("details, PARSE_JSON(s) AS parsed, TRY_PARSE_JSON(s) AS maybe, JSON_QUERY(details, '$.a') AS a, "
                  "JSON_OBJECT('p': product, 'd': details) AS obj, JSON_VALUE(details, '$.x') AS x, s")
    assert s.json_columns() == ("details", "parsed", "maybe", "a", "obj")


@pytest.mark.parametrize("druid, spark", [
    ("PARSE_JSON(s)", "STRATA_PARSE_JSON(s)"),
    ("TRY_PARSE_JSON(s)", "STRATA_TRY_PARSE_JSON(s)"),
    ("JSON_QUERY(details, '.a[0]')", "STRATA_JSON_QUERY(details, '$.a[0]')"),
    ("JSON_VALUE(details, '$.a.b')", "STRATA_JSON_VALUE_STRING(details, '$.a.b')"),
    ("JSON_VALUE(details, '$.a.b' RETURNING BIGINT)", "STRATA_JSON_VALUE_BIGINT(details, '$.a.b')"),
    ("JSON_VALUE(details, '$.a.b' RETURNING DECIMAL)", "STRATA_JSON_VALUE_DOUBLE(details, '$.a.b')"),
    ("TO_JSON_STRING(details)", "STRATA_TO_JSON_STRING(details, 'json')"),
    ("TO_JSON_STRING(s)", "STRATA_TO_JSON_STRING(s, 'plain')"),
    ("JSON_OBJECT('p': product, 'd': details, 'q': JSON_QUERY(details, '$.a'))",
     "STRATA_JSON_OBJECT(NAMED_STRUCT('p', product, 'd', details, 'q', STRATA_JSON_QUERY(details, '$.a')), "
     "'[\"d\", \"q\"]')"),
])
def test_json_functions_become_strata_udfs(druid, spark):
    assert spark_sql(f"{druid} AS v").upper() == f"SELECT TRY_CAST(ts AS TIMESTAMP) AS __time, {spark} AS v FROM view0".upper()


def test_wildcards_and_computed_keys_are_refused_clearly():
    with pytest.raises(UnsupportedError, match="wildcard paths"):
        spark_sql("JSON_VALUE(details, '$.a[*]') AS v")
    with pytest.raises(UnsupportedError, match="string literal keys"):
        spark_sql("JSON_OBJECT(KEY s VALUE product) AS v")


def test_udf_bodies_are_the_query_functions():
    texts = pa.array(['{"price": 955.00, "tags": ["a"], "o": {"k": null}}', None, '"hello"'])
    assert json_udfs.parse_json_text(texts).to_pylist() == ['{"price":955.0,"tags":["a"],"o":{"k":null}}', None,
                                                           '"hello"']
    assert json_udfs.try_parse_json_text(pa.array(["{bad", "[1]"])).to_pylist() == [None, "[1]"]
    with pytest.raises(Exception, match=r"PARSE_JSON: '\{bad' is not valid JSON \(Expecting property name.*TRY_PARSE_JSON"):
        json_udfs.parse_json_text(pa.array(["[1]", "{bad", None]))
    path = pa.array(["$.price"] * 3)
    assert json_udfs._json_value("STRING")(texts, path).to_pylist() == ["955.0", None, None]
    assert json_udfs._json_value("LONG")(texts, path).to_pylist() == [955, None, None]
    assert json_udfs.json_query_text(texts, pa.array(["$.o"] * 3)).to_pylist() == ['{"k":null}', None, None]
    members = pa.StructArray.from_arrays([pa.array(["Bike", None]), pa.array(['{"c":1}', None])], names=["p", "d"])
    assert json_udfs.json_object_text(members, pa.array(['["d"]'] * 2)).to_pylist() == \
        ['{"p":"Bike","d":{"c":1}}', '{"p":null,"d":null}']  # null members stay, as in Druid
    assert json_udfs.to_json_string_text(pa.array(['{"x":"y"}']), pa.array(["plain"])).to_pylist() == \
        ['"{\\"x\\":\\"y\\"}"']


def parse(text: str, fmt: dict, sig: list) -> list[dict]:
    source = ExternalSource.of({"type": "inline", "data": "x"}, fmt, sig)
    return pa.Table.from_batches(list(parse_file("f.tsv", io.BytesIO(text.encode()), source.input_format,
                                                 source.signature))).to_pylist()


def test_text_formats_parse_json_columns_and_malformed_text_is_a_parse_exception():
    text = '1\t{"x": 100, "y": [1, 2.5]}\n2\t"hello"\n3\t{"x": oops}\n4\t\n5\t[1, {"a": null}]\n6\n'
    rows = parse(text, {"type": "tsv", "columns": ["n", "j"]}, [{"name": "n", "type": "long"},
                                                             {"name": "j", "type": "COMPLEX<json>"}])
    assert [(r["n"], r["j"]) for r in rows if r[META_ERROR] is None] == \
        [(1, '{"x":100,"y":[1,2.5]}'), (2, '"hello"'), (4, None), (5, '[1,{"a":null}]'), (6, None)]  # 6: short row
    [bad] = [r for r in rows if r[META_ERROR] is not None]
    assert bad[META_LINE] == 3
    assert "column 'j' is COMPLEX<json> but holds invalid JSON (Expecting value at character 7" in bad[META_ERROR]
    assert "TRY_PARSE_JSON" in bad[META_ERROR]


def test_parquet_structs_lists_and_maps_feed_a_json_column():
    table = pa.table({
        "n": [1, 2],
        "s": pa.array([{"a": 1, "b": {"c": [1, 2]}}, None], pa.struct([("a", pa.int64()),
                                                                      ("b", pa.struct([("c", pa.list_(pa.int64()))]))])),
        "l": pa.array([[{"x": "p"}], []], pa.list_(pa.struct([("x", pa.string())]))),
        "m": pa.array([[("k1", 1.5), ("k2", None)], None], pa.map_(pa.string(), pa.float64())),
    })
    buf = io.BytesIO()
    pq.write_table(table, buf)
    source = ExternalSource.of({"type": "inline", "data": "x"}, {"type": "parquet"},
                               [{"name": "n", "type": "long"}] + [{"name": c, "type": "COMPLEX<json>"} for c in "slm"])
    got = pa.Table.from_batches(list(parse_file("f.parquet", io.BytesIO(buf.getvalue()), source.input_format,
                                                source.signature))).to_pylist()
    assert [[None if r[c] is None else json.loads(r[c]) for c in "slm"] for r in got] == [
        [{"a": 1, "b": {"c": [1, 2]}}, [{"x": "p"}], {"k1": 1.5, "k2": None}],
        [None, [], None]]


def test_json_lines_feed_a_json_column_the_text_json_prints():
    """Lines are parsed once (orjson where it reads and prints as json does); a document holding
    what orjson reads or prints differently (huge integers, NaN, tiny doubles, deep nesting) comes
    out exactly as json.dumps prints it (NaN as Jackson prints it), and so do plain ones."""
    deep = 1
    for _ in range(150):  # 300 levels: deeper than orjson prints
        deep = {"d": [deep]}
    docs = [{"a": 1, "b": "one-e-9 e-5 é\n\u2028", "c": [1.5, None, True], "d": {"x": -0.0}},
            {"big": 123456789012345678901234567890, "neg": -9223372036854775809, "ok": 18446744073709551615},
            {"tiny": 1e-7, "small": 0.00001, "huge": 1e20, "mid": 0.0001},
            {"s": "1e-7 0.00001"}, deep, "text", 7, [1, {"k": "v"}]]
    lines = [json.dumps({"n": i, "doc": d}) for i, d in enumerate(docs)]
    lines += ['{"n": 100, "doc": {"v": NaN}}', '[{"n": 101, "doc": {"x": 1}}, {"n": 102, "doc": null}]']
    batches = list(parse_file("x.json", io.BytesIO("\n".join(lines).encode()), {"type": "json"},
                              [("n", ColumnType.parse("BIGINT")), ("doc", ColumnType.parse("COMPLEX<json>"))]))
    got = pa.Table.from_batches(batches)
    assert got.column(META_ERROR).null_count == got.num_rows
    expected = [json.dumps(d, separators=(",", ":"), ensure_ascii=False) for d in docs]
    expected += ['{"v":"NaN"}', '{"x":1}', None]  # NaN as Jackson (Druid) prints it: JSON text
    assert got.column("doc").to_pylist() == expected
    assert got.column("n").to_pylist() == [*range(len(docs)), 100, 101, 102]
