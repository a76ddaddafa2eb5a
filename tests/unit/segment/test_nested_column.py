"""Nested JSON columns in the segment format: fields, global dictionaries, field readers and
indexes, the path guard, and bad documents. Inputs are Druid's own nested test files."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError, ValidationError
from common.segment import nested_native_split
from common.segment.builder import build_segment
from common.segment.nested_column import NestedColumn
from common.segment.nested_fields import NestedOptions, split_documents
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.column_type import JSON, ColumnType
from common.types.interval import Interval

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data")
IV = "2020-01-01/2020-01-02"
T0 = 1577836800000


@pytest.fixture(autouse=True, params=["native", "python"])
def split_mode(request, monkeypatch):
    """Each test builds its columns with the compiled field split and with the pure Python one."""
    monkeypatch.setattr(nested_native_split, "ENABLED", request.param == "native")


def lines(name: str) -> list[dict]:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def build(tmp_path, columns: dict[str, list], name="n.sseg") -> Segment:
    n = len(next(iter(columns.values())))
    table = pa.table({"__time": pa.array([T0 + i for i in range(n)], pa.int64()),
                      **{k: pa.array([None if v is None else json.dumps(v) for v in vals], pa.string())
                         for k, vals in columns.items()}})
    path = str(tmp_path / name)
    build_segment(table, path, SegmentId("ds", Interval.of(IV), "v1", 0), column_types={k: JSON for k in columns})
    return Segment.open(path, verify=True)


def test_example_data_fields_and_types(tmp_path):
    rows = lines("nested-example-data.json")
    seg = build(tmp_path, {"shipTo": [r["shipTo"] for r in rows], "details": [r["details"] for r in rows]})
    details = seg.column("details")
    assert isinstance(details, NestedColumn)
    assert details.paths() == ["$.color", "$.price"]
    assert details.field_types("$.price") == ["DOUBLE"] and details.field_types("$.color") == ["STRING"]
    ship = seg.column("shipTo")
    assert "$.address.city" in ship.paths() and "$.phoneNumbers[1].number" in ship.paths()
    prices = details.field("$.price")
    assert prices.type == ColumnType.parse("DOUBLE")
    assert prices.values().to_pylist() == [r["details"]["price"] for r in rows]
    colors = details.field("$.color")
    assert colors.values().cast(pa.string()).to_pylist() == [r["details"].get("color") for r in rows]
    idx = colors.index()
    assert list(idx.bitmap(idx.lookup("ivory"))) == [0]
    assert list(idx.null_bitmap()) == [i for i, r in enumerate(rows) if "color" not in r["details"]]
    # The column itself reads as compact JSON text.
    assert [json.loads(t) for t in details.values().to_pylist()] == [r["details"] for r in rows]


def test_all_types_keeps_every_type_a_path_had(tmp_path):
    rows = lines("nested-all-types-test-data.json")
    seg = build(tmp_path, {"doc": rows})
    col = seg.column("doc")
    assert col.field_types("$.variant") == ["LONG", "STRING", "DOUBLE"]
    assert col.field_types("$.variantNumeric") == ["LONG", "DOUBLE"]
    assert col.field_types("$.arrayBool") == ["ARRAY<LONG>"]  # booleans are LONG 1/0, as in Druid
    assert col.field_types("$.arrayVariant") == ["ARRAY<STRING>", "ARRAY<DOUBLE>", "ARRAY<LONG>"]
    assert col.field("$.arrayVariant").type == ColumnType.parse("ARRAY<VARCHAR>")
    assert col.field_types("$.cEmptyArray") == ["ARRAY<LONG>"]  # only empty or null: ARRAY<LONG>
    assert "$.complexObj.y[0].l" in col.paths() and "$.arrayObject[1].x" in col.paths()
    # A field of mixed types reads as text: VARCHAR, as Druid answers when a path is ambiguous.
    variant = col.field("$.variant")
    assert variant.type == ColumnType.parse("VARCHAR") and variant.index() is None
    assert variant.values().to_pylist()[:4] == ["1", "b", "3.0", "1"]
    numeric = col.field("$.variantNumeric")
    assert numeric.type == ColumnType.parse("DOUBLE")
    assert col.field("$.arrayLongNulls").values().to_pylist()[0] == [1, None, 3]


def test_the_guard_keeps_the_most_common_paths_and_says_which_it_dropped(tmp_path):
    docs = [{f"k{i}": i, "common": "x"} for i in range(3000)]
    split = split_documents([json.dumps(d) for d in docs], NestedOptions(max_fields=10))
    assert len(split.fields) == 10 and split.fields[0].path == "$.k0"
    assert "$.common" in {f.path for f in split.fields}
    assert len(split.dropped_paths) == 2991
    seg = build(tmp_path, {"doc": docs})
    col = seg.column("doc")
    assert len(col.paths()) == 1000 and col.spec.dropped_count == 2001
    assert seg.manifest.column("doc").stats["guardTriggered"] is True
    assert json.loads(col.values()[2999].as_py()) == docs[2999]  # dropped paths live on in the raw values


def test_deep_and_odd_documents(tmp_path):
    deep = {"a": 1}
    for _ in range(500):
        deep = {"n": deep}
    odd = {"a.b": 1, "it's": "q", "ключ": [1.5, None], "": {"x": "y"}}
    seg = build(tmp_path, {"doc": [deep, odd, None, 7, "text", [1, 2]]})
    col = seg.column("doc")
    assert "$" + ".n" * 500 + ".a" in col.paths()
    assert {"$['a.b']", "$['it\\'s']", "$['ключ']", "$[''].x", "$"} <= set(col.paths())
    assert col.field_types("$") == ["LONG", "STRING", "ARRAY<LONG>"]
    assert list(col.null_rows()) == [2]


def test_malformed_documents_name_the_row():
    with pytest.raises(ValidationError, match="row 1: malformed JSON"):
        split_documents(['{"a": 1}', '{"a": '])
    too_deep = "[" * 5000 + "]" * 5000
    with pytest.raises(ValidationError, match="row 0: the JSON document nests too deeply"):
        split_documents([too_deep])


def test_a_reader_without_the_feature_refuses_the_segment(tmp_path, monkeypatch):
    seg = build(tmp_path, {"doc": [{"a": 1}]})
    # Booleans rebuilt from the fields (no raw part) and fields without bitmaps need the newer reader.
    assert seg.manifest.required_features == ("nestedColumns", "nestedSparseFields")
    import common.segment.manifest as manifest

    monkeypatch.setattr(manifest, "known_features", lambda: frozenset())
    with pytest.raises(SegmentCorruptError, match="needs \\['nestedColumns', 'nestedSparseFields'\\]"):
        Segment.open(seg.path)


def test_documented_limits_hold_for_hostile_documents(tmp_path):
    import time

    wide = {f"k{i}": i for i in range(100_000)}  # 100k distinct paths: the guard keeps 1,000
    big = {"blob": "x" * (10 << 20), "n": 1}  # a 10 MB document
    deep = 7
    for _ in range(500):
        deep = [deep] if len(str(deep)) % 2 else {"d": deep}
    started = time.process_time()  # CPU time: other processes loading the machine do not count
    seg = build(tmp_path, {"doc": [wide, big, deep, {"k5": "five"}]})
    assert time.process_time() - started < 60
    col = seg.column("doc")
    assert len(col.paths()) == 1000 and col.spec.dropped_count == 100_003 - 1000  # + blob, n, the deep path
    assert seg.manifest.column("doc").stats["guardTriggered"] is True
    assert json.loads(col.values()[1].as_py())["n"] == 1
    assert json.loads(col.values()[2].as_py()) == deep


def test_column_options_type_skip_and_drop_raw(tmp_path):
    docs = [{"a": {"b": "12", "c": 1}, "debug": {"x": 1}, "tmp_1": 5}, {"a": {"b": "x", "c": 2}}, None,
            {"a": {"b": 7.9, "c": [1, 2]}, "list": [{"k": "v"}]}]
    table = pa.table({"__time": pa.array([T0 + i for i in range(len(docs))], pa.int64()),
                      "doc": [None if d is None else json.dumps(d) for d in docs]})
    path = str(tmp_path / "o.sseg")
    options = {"typedPaths": {"$.a.b": "BIGINT"}, "skipPaths": ["$.debug.x", "re:^\\$\\.tmp"], "keepRaw": False}
    build_segment(table, path, SegmentId("ds", Interval.of(IV), "v1", 0), column_types={"doc": JSON},
                  column_options={"doc": options})
    col = Segment.open(path).column("doc")
    assert col.field_types("$.a.b") == ["LONG"]
    assert col.field("$.a.b").values().to_pylist() == [12, None, None, 7]
    assert "$.debug.x" not in col.paths() and "$.tmp_1" not in col.paths()
    assert "raw" not in col._parts  # every path is a field, and the raw values were not kept
    rebuilt = [None if t is None else json.loads(t) for t in col.values().to_pylist()]
    assert rebuilt == [{"a": {"b": 12, "c": 1}}, {"a": {"c": 2}}, None, {"a": {"b": 7, "c": [1, 2]}, "list": [{"k": "v"}]}]


@pytest.mark.parametrize("options, message", [
    ({"maxFields": -1}, "maxFields must be a whole number"),
    ({"typedPaths": {"$.a": "DATE"}}, "is not BIGINT, DOUBLE or VARCHAR"),
    ({"skipPaths": ["re:("]}, "regular expression"),
    ({"skipPaths": ["a.b"]}, "must start with"),
    ({"keepRaw": "no"}, "keepRaw must be true or false"),
])
def test_bad_column_options_are_named(options, message):
    with pytest.raises(ValidationError, match=message):
        NestedOptions.from_properties(options, "doc")


def test_the_one_pass_split_matches_walking_each_parsed_document():
    """split_documents parses with orjson and walks cached object shapes; the fields, their values
    and the stored text must be what json.loads plus literal_paths give, also for what orjson reads
    or prints differently (huge integers, NaN, exponent-form doubles, duplicate keys, deep nesting)."""
    from common.json.document_paths import literal_paths
    from common.json.document_text import loads_document

    deep = "x"
    for _ in range(300):
        deep = {"d": deep} if len(str(deep)) % 3 else [deep, 1]
    docs = [{"a": 1, "b": {"c": "x", "d": [1, 2]}}, {"b": {"d": [1, 2.5, True, None]}, "a": "one"},
            {"a": 123456789012345678901234567890, "e": -9223372036854775809, "f": 18446744073709551615},
            {"a": 1e-7, "g": [0.00001, 1e20], "h": -0.0}, [{"k": 1}, {"k": [None]}, [], {}], 7, "text", None, deep,
            {"a.b": {"it's": {'q"k': {"ключ": True}}}}, {"": [["x"], [1, "y"]]}]
    texts = [None if d is None else json.dumps(d, ensure_ascii=False) for d in docs]
    texts += ['{"a": NaN, "b": {"c": Infinity}}', '{"a": 1, "a": {"c": "dup"}}', '  {"a" :  2 }  ']
    split = split_documents(texts)
    expected: dict[str, dict] = {}
    for row, text in enumerate(texts):
        # NaN and Infinity read as the strings Jackson prints for them (common/json/document_text.py).
        doc = None if text is None else loads_document(text)
        want = None if doc is None else json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        assert split.canonical[row] == want
        for path, kind, stored in ([] if doc is None else literal_paths(doc)):
            f = expected.setdefault(path, {"types": [], "rows": {}})
            if kind not in f["types"]:
                f["types"].append(kind)
            f["rows"][row] = stored
    assert [f.path for f in split.fields] == list(expected)
    for f in split.fields:
        assert f.types == expected[f.path]["types"], f.path
        got = dict(zip(f.rows, f.values))
        assert json.dumps(got, sort_keys=True) == json.dumps(expected[f.path]["rows"], sort_keys=True), f.path


REBUILDABLE = [{"a": 1, "b": {"c": "x", "d": [1, 2], "t": True}, "k.e'y": {'q"': "é"}, "n": 5},
               {"a": 2.5, "b": {"c": "y", "d": [], "t": False}, "n": 0.5,
                "arr": [{"x": 1}, {"x": 2, "y": ["s"]}, [3, 4]]},
               {"b": {"d": [1.5, None]}, "z": -0.0}, 7, "text", [1, 2], None, {"a": "one", "big": 9007199254740993}]
NOT_REBUILDABLE = [{"a": None}, {"a": {}}, {}, {"a": [1, 2.5]}, {"a": [True, False]}, {"a": [1, "x"]},
                   {"a": [{"x": 1}, None]}, {"a": 123456789012345678901234567890}, {"a": 1e-7}]


def test_the_raw_values_are_dropped_when_the_fields_rebuild_every_document(tmp_path):
    seg = build(tmp_path, {"doc": REBUILDABLE})
    col = seg.column("doc")
    assert "raw" not in col._parts and col.spec.raw is False
    texts = [None if d is None else json.dumps(d, separators=(",", ":"), ensure_ascii=False) for d in REBUILDABLE]
    assert col.values().to_pylist() == texts
    assert col.take([5, 1, 6, 0]).to_pylist() == [texts[5], texts[1], texts[6], texts[0]]
    assert col.field("$.b.t").values().to_pylist() == [1, 0, None, None, None, None, None, None]
    meta = {f["path"]: f for f in col.spec.fields}
    assert meta["$.b.t"].get("booleans") is True and meta["$.a"].get("booleans") is None


@pytest.mark.parametrize("odd", NOT_REBUILDABLE)
def test_the_raw_values_stay_when_a_document_would_not_come_back_the_same(tmp_path, odd):
    seg = build(tmp_path, {"doc": [REBUILDABLE[0], odd]})
    col = seg.column("doc")
    assert "raw" in col._parts
    assert [json.loads(t) for t in col.values().to_pylist()] == [REBUILDABLE[0], odd]


def test_keys_in_another_order_or_booleans_mixed_with_numbers_keep_the_raw_values(tmp_path):
    for docs in ([{"a": 1, "b": 2}, {"b": 3, "a": 4}], [{"f": True}, {"f": 2}]):
        col = build(tmp_path, {"doc": docs}, name=f"k{len(str(docs))}.sseg").column("doc")
        assert "raw" in col._parts
        assert [json.loads(t) for t in col.values().to_pylist()] == docs


def test_only_parts_a_field_reader_uses_are_stored(tmp_path):
    docs = [{"n": i, "id": f"s{i}", "c": "ab"[i % 2], "m": i if i % 3 else "x", "arr": [i]} for i in range(600)]
    col = build(tmp_path, {"doc": docs}).column("doc")
    meta = {f["path"]: f for f in col.spec.fields}
    has = {p: {r for r in ("codes", "bitmaps", "values") if f"{meta[p]['part']}/{r}" in col._parts} for p in meta}
    assert has == {"$.n": {"values"}, "$.id": {"codes"}, "$.c": {"codes", "bitmaps"}, "$.m": {"codes"},
                   "$.arr": {"codes"}}
    ids = col.field("$.id")
    assert ids.index() is not None and list(ids.index().bitmap(ids.index().lookup("s599"))) == [599]
    assert col.field("$.n").values().to_pylist() == list(range(600))
