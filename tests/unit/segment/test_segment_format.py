"""The segment file: what goes in comes back (every type, nulls kept as nulls), rows are sorted,
string columns are dictionary + codes + bitmaps that agree with the rows, the manifest describes
the contents, reads are zero-copy views of the mapped file, and writes are atomic."""

import json
import math
import os

import numpy as np
import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query import execute
from common.segment import Segment, SegmentId, build_segment
from common.segment.manifest import SegmentManifest
from common.segment.part_cache import PROCESS_CACHE
from common.segment.string_column import StringColumn
from common.types import (
    DOUBLE,
    DOUBLE_ARRAY,
    FLOAT,
    JSON,
    LONG,
    LONG_ARRAY,
    STRING,
    STRING_ARRAY,
    TIMESTAMP,
    Interval,
    parse_instant,
)

T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"

# Rows deliberately out of time order, with ties on __time so the sort column decides.
TIMES = [T0 + 5000, T0 + 1000, T0 + 5000, T0, T0 + 86_399_999, T0 + 5000, T0 + 1000, T0 + 3000]
STRINGS = ["b", None, "", "é", "a", None, "\U0001F600", "Z"]
LONGS = [1, None, -(2**62), 2**62, 0, None, 7, -7]
DOUBLES = [1.5, None, float("nan"), -0.0, 1e300, None, -2.25, 3.0]
FLOATS = [0.5, None, 1.25, -3.0, None, 2.0, 0.0, 8.5]
STRING_ARRAYS = [["x", "y"], None, [], ["", None], ["é"], None, ["z"], ["x"]]
LONG_ARRAYS = [[1, 2], [], None, [None, 3], [4], [5, 6, 7], None, [0]]
DOUBLE_ARRAYS = [[1.5], None, [], [None, 2.5], [float("inf")], [0.0], [3.0, 4.0], None]
JSONS = ['{"a": 1}', None, "[]", '"x"', "null", "{}", '{"b": [1, 2]}', "1"]


def mixed_table() -> pa.Table:
    return pa.table({
        "__time": pa.array(TIMES, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "s": pa.array(STRINGS, pa.string()),
        "l": pa.array(LONGS, pa.int64()),
        "d": pa.array(DOUBLES, pa.float64()),
        "f": pa.array(FLOATS, pa.float32()),
        "sa": pa.array(STRING_ARRAYS, pa.list_(pa.string())),
        "la": pa.array(LONG_ARRAYS, pa.list_(pa.int64())),
        "da": pa.array(DOUBLE_ARRAYS, pa.list_(pa.float64())),
        "j": pa.array(JSONS, pa.string()),
    })


def expected_order(sort_by_s: bool) -> list[int]:
    """Input row ids in segment order: __time, then s with nulls first (UTF-8 byte order)."""
    def key(i):
        s = STRINGS[i]
        return (TIMES[i], (0, b"") if s is None else (1, s.encode())) if sort_by_s else (TIMES[i],)
    return sorted(range(len(TIMES)), key=key)  # stable, like the builder's sort


def same(a, b) -> bool:
    """Equality that treats NaN as equal to NaN and keeps -0.0 distinct from 0.0."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b and type(a) is type(b)


def read_column(seg: Segment, name: str) -> list:
    col = seg.column(name)
    if isinstance(col, StringColumn):
        return col.to_arrow().cast(pa.string()).to_pylist()
    values = col.values()
    if pa.types.is_timestamp(values.type):
        values = values.cast(pa.int64())
    return values.to_pylist()


@pytest.fixture
def mixed(make_segment):
    seg, path = make_segment(mixed_table(), IV, sort_columns=["s"], column_types={"j": JSON})
    return seg, path


def test_schema_types(mixed):
    seg, _ = mixed
    assert seg.schema == {"__time": TIMESTAMP, "s": STRING, "l": LONG, "d": DOUBLE, "f": FLOAT, "sa": STRING_ARRAY,
                          "la": LONG_ARRAY, "da": DOUBLE_ARRAY, "j": JSON}


@pytest.mark.parametrize("name,values", [
    ("__time", TIMES), ("s", STRINGS), ("l", LONGS), ("d", DOUBLES), ("f", FLOATS), ("sa", STRING_ARRAYS),
    ("la", LONG_ARRAYS), ("da", DOUBLE_ARRAYS),
    # JSON reads back as compact JSON text; a JSON null document is a null row.
    ("j", [None if j in (None, "null") else json.dumps(json.loads(j), separators=(",", ":")) for j in JSONS]),
])
def test_round_trip_every_type_in_sorted_order(mixed, name, values):
    seg, _ = mixed
    want = [values[i] for i in expected_order(sort_by_s=True)]
    got = read_column(seg, name)
    assert same(got, want), (got, want)


def test_arrow_types_after_round_trip(mixed):
    seg, _ = mixed
    assert seg.column("__time").values().type == pa.timestamp("ms", tz="UTC")
    s_type = seg.column("s").to_arrow().type
    assert pa.types.is_dictionary(s_type) and s_type.value_type == pa.string()
    assert seg.column("f").values().type == pa.float32()
    assert seg.column("la").values().type == pa.list_(pa.int64())


def test_scan_returns_the_rows(mixed):
    seg, _ = mixed
    result = execute({"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["s", "l", "sa"]}, [seg])
    order = expected_order(sort_by_s=True)
    assert result.table.to_pylist() == [{"s": STRINGS[i], "l": LONGS[i], "sa": STRING_ARRAYS[i]} for i in order]


def test_without_sort_columns_ties_keep_input_order(make_segment):
    seg, _ = make_segment(mixed_table().select(["__time", "s"]), IV)
    assert read_column(seg, "s") == [STRINGS[i] for i in expected_order(sort_by_s=False)]
    assert seg.manifest.ordering == ("__time",)


def test_sort_by_several_columns(make_segment):
    table = pa.table({
        "__time": pa.array([T0] * 6, pa.int64()),
        "a": ["y", "x", None, "x", "y", "x"],
        "b": pa.array([2, None, 1, 1, 1, 3], pa.int64()),
    })
    seg, _ = make_segment(table, IV, sort_columns=["__time", "a", "b"])
    assert seg.manifest.ordering == ("__time", "a", "b")  # __time is implied and not repeated
    assert list(zip(read_column(seg, "a"), read_column(seg, "b"))) == [
        (None, 1), ("x", None), ("x", 1), ("x", 3), ("y", 1), ("y", 2)]


def test_dictionary_is_sorted_and_codes_and_bitmaps_agree(mixed):
    seg, _ = mixed
    col = seg.column("s")
    rows = read_column(seg, "s")
    distinct = sorted({v for v in STRINGS if v is not None}, key=lambda v: v.encode())
    assert col.dictionary.to_pylist() == distinct == ["", "Z", "a", "b", "é", "\U0001F600"]
    assert col.cardinality == len(distinct)
    codes = col.codes()
    assert codes.dtype == np.int8  # the narrowest signed type that holds every id and -1
    assert codes.tolist() == [-1 if v is None else distinct.index(v) for v in rows]
    for code, value in enumerate(distinct):
        assert list(col.bitmap(code)) == [i for i, v in enumerate(rows) if v == value], value
    assert list(col.null_bitmap()) == [i for i, v in enumerate(rows) if v is None]
    assert col.lookup("a") == 2 and col.lookup("c") is None
    assert col.code_range("Z", "b", False, True) == (1, 3)  # ['Z', 'b')
    assert col.prefix_range("") == (0, 6)


def test_manifest_stats_and_layout(mixed):
    seg, _ = mixed
    m = seg.manifest
    assert m.num_rows == 8
    assert (m.min_time, m.max_time) == (T0, T0 + 86_399_999)
    assert m.ordering == ("__time", "s")
    # The JSON column is a nested column, which older readers must refuse.
    # Its STRING column has no stored bitmaps (the default) and bit-packed codes (7 ids with
    # null), which older readers must refuse too; so must they the JSON column's sparse fields.
    assert m.format_version == 1
    assert {"bitPackedCodes", "nestedColumns", "stringIndexFromCodes"} <= set(m.required_features)
    assert list(m.required_features) == sorted(m.required_features)
    stats = {c.name: c.stats for c in m.columns}
    assert stats["__time"] == {"nullCount": 0, "min": T0, "max": T0 + 86_399_999, "cardinality": 5}
    assert stats["s"] == {"nullCount": 2, "cardinality": 6, "min": "", "max": "\U0001F600"}
    assert stats["l"] == {"nullCount": 2, "min": -(2**62), "max": 2**62, "cardinality": 6}
    # NaN is a value (not a null) and does not poison min/max.
    assert stats["d"]["nullCount"] == 2 and stats["d"]["min"] == -2.25 and stats["d"]["max"] == 1e300
    assert stats["f"] == {"nullCount": 2, "min": -3.0, "max": 8.5, "cardinality": 6}
    assert stats["sa"] == {"nullCount": 2}
    assert {c.name: c.encoding for c in m.columns} == {
        "__time": "plain", "s": "dictionary", "l": "plain", "d": "plain", "f": "plain", "sa": "plain",
        "la": "plain", "da": "plain", "j": "nested"}
    assert m.column("s").parts == {"dictionary": "s/dictionary", "codes": "s/codes"}
    # Parts start on 64-byte boundaries, do not overlap, and every column's parts are listed.
    spans = sorted((e.offset, e.offset + e.length) for e in m.files.values())
    assert all(start % 64 == 0 for start, _ in spans)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert {p for c in m.columns for p in c.parts.values()} == set(m.files)


def test_manifest_json_round_trip(mixed):
    seg, _ = mixed
    m = seg.manifest
    again = SegmentManifest.from_json(json.loads(m.to_bytes()), "x")
    assert again == m


def test_segment_id_format():
    sid = SegmentId("wikipedia", Interval.parse("2015-09-12/2015-09-13"), "2024-05-01T10:00:00.000Z", 3)
    assert str(sid) == ("wikipedia_2015-09-12T00:00:00.000Z_2015-09-13T00:00:00.000Z_"
                        "2024-05-01T10:00:00.000Z_3")
    assert sid.to_json() == {"dataSource": "wikipedia",
                             "interval": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
                             "version": "2024-05-01T10:00:00.000Z", "partition": 3}
    assert SegmentId.from_json(sid.to_json()) == sid
    assert str(SegmentId("ds", Interval.parse(IV), "v1")).endswith("_v1_0")
    with pytest.raises(ValidationError, match="datasource must not be empty"):
        SegmentId("", Interval.parse(IV), "v1")
    with pytest.raises(ValidationError, match="partition must be >= 0, got -1"):
        SegmentId("ds", Interval.parse(IV), "v1", -1)


def test_segment_properties(make_segment):
    seg, path = make_segment(mixed_table(), IV, datasource="wiki", version="v7", partition=2)
    assert str(seg.id) == "wiki_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z_v7_2"
    assert seg.interval == Interval.parse(IV)
    assert seg.num_rows == 8
    assert seg.size == os.path.getsize(path)
    assert seg.has_column("s") and not seg.has_column("nope")
    with pytest.raises(ValidationError, match="unknown column 'ss'; did you mean 's'"):
        seg.column("ss")


@pytest.mark.parametrize("time_array", [
    pa.array(TIMES, pa.int64()),
    pa.array([t * 1000 for t in TIMES], pa.int64()).cast(pa.timestamp("us")),
    # Same instants seen from another zone: the zone must not shift them.
    pa.array(TIMES, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("ms", tz="America/New_York")),
    pa.chunked_array([pa.array(TIMES[:3], pa.int64()), pa.array(TIMES[3:], pa.int64())]),
], ids=["int64-millis", "timestamp-us", "timestamp-zoned", "chunked"])
def test_time_inputs_normalize_to_millis(make_segment, time_array):
    seg, _ = make_segment(pa.table({"__time": time_array, "v": pa.array(range(8), pa.int64())}), IV)
    assert read_column(seg, "__time") == sorted(TIMES)
    assert seg.column("__time").values().type == pa.timestamp("ms", tz="UTC")


def test_date_time_column(make_segment):
    table = pa.table({"__time": pa.array([18262, 18262], pa.date32()), "v": [1, 2]})  # 2020-01-01
    seg, _ = make_segment(table, IV)
    assert read_column(seg, "__time") == [T0, T0]


def test_dictionary_and_chunked_string_inputs(make_segment):
    s = pa.chunked_array([pa.array(["b", None]).dictionary_encode(), pa.array(["a", "b"]).dictionary_encode()])
    seg, _ = make_segment(pa.table({"__time": pa.array([T0, T0 + 1, T0 + 2, T0 + 3], pa.int64()), "s": s}), IV)
    assert read_column(seg, "s") == ["b", None, "a", "b"]
    assert seg.column("s").dictionary.to_pylist() == ["a", "b"]


def test_declared_types_cast_inputs(make_segment):
    table = pa.table({"__time": pa.array([T0, T0 + 1], pa.int64()), "n": pa.array([1, 2], pa.int32()),
                      "x": ["1.5", "2"]})
    seg, _ = make_segment(table, IV, column_types={"x": DOUBLE})
    assert seg.schema["n"] == LONG and seg.schema["x"] == DOUBLE
    assert read_column(seg, "x") == [1.5, 2.0]


# ---- reading parts ------------------------------------------------------------------------------
def _cached_parts(seg: Segment) -> set[str]:
    # White-box: the names of this segment's parts held in the process's part cache.
    token = seg._container._token
    return {key[1] for key in PROCESS_CACHE._entries if key[0] == token}


def test_parts_are_read_into_aligned_memory_once_then_served_from_the_cache(mixed):
    seg, _ = mixed
    first = seg.column("l").numpy()
    assert first.ctypes.data % 8 == 0  # aligned for its type, though the bytes came from a file read
    before = PROCESS_CACHE.stats()
    again = seg.column("l").numpy()
    after = PROCESS_CACHE.stats()
    assert again.ctypes.data == first.ctypes.data and after.misses == before.misses and after.hits > before.hits


def test_columns_load_lazily_and_are_cached(mixed):
    seg, _ = mixed
    assert _cached_parts(seg) == set()  # nothing read on open but the manifest
    first = seg.column("l")
    first.values()
    assert _cached_parts(seg) == {"l/values"}
    assert seg.column("l") is first
    seg.close()
    assert _cached_parts(seg) == set()  # closing gives the budget back


# ---- atomic writes and build-time validation ---------------------------------------------------
def _only(dirpath) -> list[str]:
    return sorted(os.listdir(dirpath))


def test_row_outside_interval_fails_and_leaves_nothing(tmp_path):
    table = pa.table({"__time": pa.array([T0, T0 + 1, T0 + 86_400_000, T0 + 2], pa.int64()), "v": [1, 2, 3, 4]})
    target = tmp_path / "seg.sseg"
    sid = SegmentId("ds", Interval.parse(IV), "v1")
    with pytest.raises(ValidationError) as err:
        build_segment(table, str(target), sid)
    assert str(err.value) == (f"segment {sid}: row 2 has __time 2020-01-02T00:00:00.000Z outside the segment "
                              "interval 2020-01-01T00:00:00.000Z/2020-01-02T00:00:00.000Z")
    assert _only(tmp_path) == []


def test_row_before_interval_and_null_time(tmp_path):
    sid = SegmentId("ds", Interval.parse(IV), "v1")
    with pytest.raises(ValidationError, match=r"row 0 has __time 2019-12-31T23:59:59.999Z outside"):
        build_segment(pa.table({"__time": pa.array([T0 - 1], pa.int64())}), str(tmp_path / "a"), sid)
    with pytest.raises(ValidationError, match="row 1 has a null __time"):
        build_segment(pa.table({"__time": pa.array([T0, None], pa.int64())}), str(tmp_path / "b"), sid)
    assert _only(tmp_path) == []


def test_failure_while_writing_removes_the_temp_file_and_keeps_the_old_segment(tmp_path, monkeypatch):
    target = tmp_path / "seg.sseg"
    sid = SegmentId("ds", Interval.parse(IV), "v1")
    build_segment(pa.table({"__time": pa.array([T0], pa.int64()), "v": [1]}), str(target), sid)
    before = target.read_bytes()

    def boom(self):
        raise RuntimeError("disk full")

    # Fails after every part has been written to the temp file, just before the manifest.
    monkeypatch.setattr(SegmentManifest, "to_bytes", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        build_segment(mixed_table(), str(target), sid)
    assert _only(tmp_path) == ["seg.sseg"]
    assert target.read_bytes() == before
    monkeypatch.undo()
    assert Segment.open(str(target)).num_rows == 1


def test_failure_on_a_fresh_target_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(SegmentManifest, "to_bytes", lambda self: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        build_segment(mixed_table(), str(tmp_path / "new.sseg"), SegmentId("ds", Interval.parse(IV), "v1"))
    assert _only(tmp_path) == []


@pytest.mark.parametrize("table,kwargs,match", [
    (pa.table({"v": [1]}), {}, r"input has no '__time' column \(columns: v\)"),
    (pa.table({"__time": pa.array([T0], pa.int64()), "v": ["a"]}), {"sort_columns": ["w"]},
     r"sort column 'w' is not in the input \(__time, v\)"),
    (pa.table([pa.array([T0], pa.int64()), pa.array([1]), pa.array([2])], names=["__time", "v", "v"]), {},
     r"duplicate column names \['v'\]"),
    (pa.table({"__time": pa.array([T0], pa.int64()), "other": pa.array([T0], pa.timestamp("ms"))}), {},
     "column 'other': only __time may be a TIMESTAMP"),
    (pa.table({"__time": pa.array([T0], pa.int64()), "x": ["abc"]}), {"column_types": {"x": LONG}},
     "column 'x': cannot store string as BIGINT"),
    (pa.table({"__time": ["2020-01-01"]}), {}, "column '__time' must be a timestamp or epoch milliseconds"),
])
def test_build_validation_errors(tmp_path, table, kwargs, match):
    with pytest.raises(ValidationError, match=match):
        build_segment(table, str(tmp_path / "x.sseg"), SegmentId("ds", Interval.parse(IV), "v1"), **kwargs)
    assert _only(tmp_path) == []


def test_segment_builder_batches(tmp_path):
    from common.segment import SegmentBuilder

    b = SegmentBuilder(SegmentId("ds", Interval.parse(IV), "v1"), sort_columns=["s"])
    with pytest.raises(ValidationError, match="no rows to build from"):
        b.build(str(tmp_path / "empty.sseg"))
    t = mixed_table().select(["__time", "s", "l"])
    b.add(t.slice(0, 3))
    b.add(t.slice(3).to_batches()[0])
    manifest = b.build(str(tmp_path / "b.sseg"))
    seg = Segment.open(str(tmp_path / "b.sseg"))
    assert manifest == seg.manifest
    assert read_column(seg, "s") == [STRINGS[i] for i in expected_order(sort_by_s=True)]


def test_empty_string_column_and_all_null_column(make_segment):
    table = pa.table({"__time": pa.array([T0, T0 + 1], pa.int64()), "allnull": pa.array([None, None], pa.string()),
                      "nulltype": pa.nulls(2), "n": pa.array([None, None], pa.int64())})
    seg, _ = make_segment(table, IV)
    col = seg.column("allnull")
    assert col.dictionary.to_pylist() == [] and col.codes().tolist() == [-1, -1]
    assert list(col.null_bitmap()) == [0, 1]
    assert seg.schema["nulltype"] == STRING
    assert {c.name: c.stats for c in seg.manifest.columns}["n"] == {"nullCount": 2}
    assert read_column(seg, "n") == [None, None]
