"""One input file into typed Arrow rows: real line numbers, Druid's value conversions, and parse
exceptions (not nulls) for values that do not fit."""

from __future__ import annotations

import gzip
import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.types.column_type import ColumnType
from common.ingest.external_source import ExternalSource
from common.ingest.row_parser import META_ERROR, META_LINE, META_RAW, parse_file

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))


def parse(text: bytes | str, fmt: dict, sig: list, name: str = "f.txt", batch_rows: int = 8192) -> pa.Table:
    source = ExternalSource.of({"type": "inline", "data": "x"}, fmt, sig)
    data = text.encode() if isinstance(text, str) else text
    batches = list(parse_file(name, io.BytesIO(data), source.input_format, source.signature, batch_rows))
    return pa.Table.from_batches(batches) if batches else None


def sig(**cols):
    return [{"name": k, "type": v} for k, v in cols.items()]


def test_csv_lines_types_and_errors():
    text = "h1,h2,h3\n2020-01-01,1,1.5\n\n2020-01-02,x,2\n\"multi\nline\",3,4\n2020-01-03,,\n2020-01-04,1,2,3\n"
    t = parse(text, {"type": "csv", "skipHeaderRows": 1}, sig(a="string", b="long", c="double"))
    rows = t.to_pylist()
    good = [(r["a"], r["b"], r["c"], r[META_LINE]) for r in rows if r[META_ERROR] is None]
    assert good == [("2020-01-01", 1, 1.5, 2), ("multi\nline", 3, 4.0, 5), ("2020-01-03", None, None, 7)]
    bad = [(r[META_LINE], r[META_RAW], r[META_ERROR]) for r in rows if r[META_ERROR] is not None]
    assert bad == [(4, "2020-01-02,x,2", "column 'b': cannot parse 'x' as a LONG"),
                   (8, "2020-01-04,1,2,3", "the row has 4 values but there are 3 columns (a, b, c)")]


def test_csv_header_and_list_delimiter():
    text = "x,tags,n\n1,a|b,7\n2,,8\n"
    t = parse(text, {"type": "csv", "findColumnsFromHeader": True, "listDelimiter": "|"},
              sig(n="long", tags="ARRAY<STRING>"))
    assert [(r["n"], r["tags"], r[META_LINE]) for r in t.to_pylist()] == [(7, ["a", "b"], 2), (8, None, 3)]
    t = parse(text, {"type": "csv", "findColumnsFromHeader": True}, sig(missing="string"))
    [row] = t.to_pylist()
    assert row[META_LINE] == 1 and "the header has no column(s) missing" in row[META_ERROR]


def test_tsv_custom_delimiter():
    t = parse("a|b\n1|2\n", {"type": "tsv", "delimiter": "|", "skipHeaderRows": 1}, sig(a="long", b="string"))
    assert [(r["a"], r["b"], r[META_LINE]) for r in t.to_pylist()] == [(1, "2", 2)]


def test_json_conversions_like_druid():
    lines = ['{"s": 1, "l": true, "d": "2.5", "arr": "x", "j": {"k": [1]}, "t": "2020-01-01T00:00:00Z"}',
             '{"s": false, "l": 3.9, "d": null, "arr": [1, "y"], "t": 1577836800000}',
             "not json", "[1, 2]", '{"s": [1]}', '{"l": "abc"}', "", '{"t": "yesterday"}']
    t = parse("\n".join(lines), {"type": "json"},
              sig(s="string", l="long", d="double", arr="ARRAY<STRING>", j="COMPLEX<json>", t="TIMESTAMP"))
    rows = t.to_pylist()
    assert rows[0]["s"] == "1" and rows[0]["l"] == 1 and rows[0]["d"] == 2.5 and rows[0]["arr"] == ["x"]
    assert rows[0]["j"] == '{"k":[1]}' and rows[0]["t"].year == 2020
    assert rows[1]["s"] == "false" and rows[1]["l"] == 3 and rows[1]["arr"] == ["1", "y"]
    errors = [(r[META_LINE], r[META_ERROR]) for r in rows if r[META_ERROR]]
    assert [e[0] for e in errors] == [3, 4, 5, 6, 8]
    assert errors[0][1].startswith("invalid JSON") and "expected a JSON object" in errors[1][1]
    assert "declare it ARRAY<VARCHAR>" in errors[2][1] and "cannot parse 'abc' as a LONG" in errors[3][1]
    assert "as a time" in errors[4][1]


def test_gzip_by_extension_and_real_wikiticker_lines():
    path = os.path.join(DATA, "wikiticker-2015-09-12-sampled.json.gz")
    if not os.path.exists(path):
        pytest.skip("shared data not found")
    with open(path, "rb") as f:
        t = parse(f.read(), {"type": "json"}, sig(time="string", added="long"), name=path, batch_rows=10_000)
    assert t.num_rows == 39244 and t.column(META_ERROR).null_count == 39244
    assert t.column(META_LINE).to_pylist()[-1] == 39244
    assert sum(t.column("added").to_pylist()) == 9385573


def test_truncated_gzip_is_one_parse_exception():
    data = gzip.compress(b'{"a": 1}\n' * 1000)[:-30]
    t = parse(data, {"type": "json"}, sig(a="long"), name="x.json.gz")
    errors = [r for r in t.to_pylist() if r[META_ERROR]]
    assert len(errors) == 1 and "cannot read the file" in errors[0][META_ERROR]


def test_invalid_utf8_is_a_parse_exception():
    t = parse(b'{"a": "ok"}\n{"a": "\xff"}\n', {"type": "json"}, sig(a="string"))
    assert [(r[META_LINE], r[META_ERROR]) for r in t.to_pylist()] == [(1, None), (2, "the line is not valid UTF-8")]


def test_parquet_casts_and_row_errors(tmp_path):
    table = pa.table({"a": ["1", "2", "x"], "b": pa.array([1.5, 2.5, None])})
    pq.write_table(table, tmp_path / "p.parquet")
    t = parse((tmp_path / "p.parquet").read_bytes(), {"type": "parquet"}, sig(a="long", b="double", c="string"))
    rows = t.to_pylist()
    assert [(r["a"], r["b"], r["c"], r[META_LINE]) for r in rows[:2]] == [(1, 1.5, None, 1), (2, 2.5, None, 2)]
    assert rows[2][META_LINE] == 3 and "cannot parse 'x' as a LONG" in rows[2][META_ERROR]
    t = parse(b"not parquet", {"type": "parquet"}, sig(a="long"))
    assert "not a readable Parquet file" in t.to_pylist()[0][META_ERROR]


def test_type_of_each_signature_column():
    t = parse('{"a": 1}', {"type": "json"}, sig(a="float", b="ARRAY<LONG>"))
    assert t.schema.field("a").type == pa.float32()
    assert t.schema.field("b").type == pa.list_(pa.field("element", pa.int64()))
    assert ColumnType.parse("ARRAY<LONG>").to_arrow().value_type == pa.int64()


def test_parquet_times_survive_a_batch_that_goes_row_by_row(tmp_path):
    import datetime

    table = pa.table({"ts": pa.array([0, 1, -1], pa.timestamp("ms", tz="UTC")), "naive": pa.array([5, 6, 7], pa.timestamp("us")),
                      "day": pa.array([datetime.date(2020, 1, 2)] * 3), "n": ["1", "x", "3"]})
    pq.write_table(table, tmp_path / "p.parquet")
    t = parse((tmp_path / "p.parquet").read_bytes(), {"type": "parquet"},
              sig(ts="TIMESTAMP", naive="TIMESTAMP", day="TIMESTAMP", n="long"))
    rows = t.to_pylist()
    assert [r[META_ERROR] for r in rows][0] is None and "cannot parse 'x'" in rows[1][META_ERROR]
    good = [r for r in rows if r[META_ERROR] is None]
    assert [r["ts"] for r in good] == [table.column("ts")[i].as_py() for i in (0, 2)]
    assert [r["naive"].timestamp() for r in good] == [5e-6, 7e-6]
    assert good[0]["day"] == datetime.datetime(2020, 1, 2, tzinfo=datetime.timezone.utc)
