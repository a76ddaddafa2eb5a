"""STRING codes longer than one block are stored as blocks of rows, each its own compressed part,
with each block's [min, max] code in the spec (``codeBlockRows``/``codeBlocks``/``codeRanges``,
feature ``codeBlocks``): values and filters read back exactly, a few rows' strings decode only
their blocks' codes, an equality filter skips blocks whose code range excludes its value, and a
value absent from the dictionary reads no codes at all."""

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError
from common.query import execute
from common.segment import Segment, SegmentId, build_segment
from common.segment.encoding import StoredColumn
from common.segment.part_cache import PROCESS_CACHE
from common.segment.string_column import StringColumn
from common.types import Interval, parse_instant

T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"
SID = SegmentId("ds", Interval.of(IV), "v1", 0)
B = 500
HOSTILE = ["", "é", "\U0001F600", "x" * 3000, "a\x00b", "%", "_", "\\", "NULL", " "]


def _table(n: int, clustered: bool = False) -> pa.Table:
    rng = np.random.default_rng(4)
    # Over 16 ids (so codes are not bit-packed), hostile strings among them, and null rows.
    pool = np.array(HOSTILE + [f"user{i:04d}" for i in range(300)], dtype=object)
    picks = np.sort(rng.integers(0, len(pool), n)) if clustered else rng.integers(0, len(pool), n)
    values = pool[picks].tolist()
    mask = rng.random(n) < 0.07
    return pa.table({
        "__time": pa.array(T0 + np.arange(n), pa.int64()),
        "s": pa.array(values, pa.string(), mask=mask),
        "k": pa.array(pool[rng.integers(0, len(pool), n)].tolist(), pa.string()),  # no nulls
        "v": pa.array(np.arange(n), pa.int64()),
    })


def _build(tmp_path, table: pa.Table, name: str = "x.sseg", block_rows: int = B) -> Segment:
    path = str(tmp_path / name)
    build_segment(table, path, SID, column_options={"s": {"codeBlockRows": block_rows},
                                                     "k": {"codeBlockRows": block_rows}})
    return Segment.open(path, verify=True)


def _read_parts(seg: Segment, column: str) -> set[str]:
    # White-box: the parts of this open file the process's part cache holds are the ones read.
    token = seg._container._token
    return {key[1] for key in PROCESS_CACHE._entries if key[0] == token and key[1].startswith(f"{column}/")}


@pytest.mark.parametrize("n", [B * 3, B * 3 + 1, B + 1])
def test_code_blocks_round_trip(tmp_path, n):
    table = _table(n)
    seg = _build(tmp_path, table)
    for name in ("s", "k"):
        spec = seg.manifest.column(name).spec.to_json()
        assert spec["codeBlockRows"] == B and spec["codeBlocks"] == -(-n // B)
        assert len(spec["codeRanges"]) == spec["codeBlocks"]
        assert "codes" not in seg.manifest.column(name).parts
        col = seg.column(name)
        assert col.values().cast(pa.string()).to_pylist() == table.column(name).to_pylist()
        rows = np.array([n - 1, 0, B, B - 1, 5, n - 1])
        assert col.take(rows).cast(pa.string()).to_pylist() == [table.column(name)[i].as_py() for i in rows]
    assert "codeBlocks" in seg.manifest.required_features


def test_a_few_rows_decode_only_their_code_blocks(tmp_path):
    table = _table(B * 5)
    seg = _build(tmp_path, table)
    PROCESS_CACHE.clear()
    rows = [B * 3 + 7, 2, B * 3 + 7, 1, B * 3]  # unordered, repeated, two of five blocks
    got = seg.column("s").take(np.array(rows))
    assert got.cast(pa.string()).to_pylist() == [table.column("s")[i].as_py() for i in rows]
    assert {p for p in _read_parts(seg, "s") if "codes" in p} == {"s/codes0", "s/codes3"}
    assert got.type.index_type == seg.column("s").values().type.index_type


@pytest.mark.parametrize("value", HOSTILE + ["user0150"])
def test_equality_on_clustered_codes_reads_only_blocks_that_may_hold_the_value(tmp_path, value):
    table = _table(B * 8, clustered=True)
    seg = _build(tmp_path, table)
    PROCESS_CACHE.clear()
    query = {"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["v"],
             "filter": {"type": "equals", "column": "s", "matchValue": value}}
    got = execute(query, [seg]).table.column("v").to_pylist()
    want = [i for i, s in enumerate(table.column("s").to_pylist()) if s == value]
    assert got == want and want
    ranges = seg.manifest.column("s").spec.to_json()["codeRanges"]
    code = seg.column("s").lookup(value)
    maybe = {f"s/codes{i}" for i, (lo, hi) in enumerate(ranges) if lo <= code <= hi}
    assert len(maybe) < len(ranges)  # the zone map rules some blocks out
    assert {p for p in _read_parts(seg, "s") if "codes" in p} == maybe


@pytest.mark.parametrize("flt,pred", [
    ({"type": "in", "dimension": "s", "values": ["é", "user0001", "user0299", "absent"]},
     lambda s: s in ("é", "user0001", "user0299")),
    ({"type": "range", "column": "s", "matchValueType": "STRING", "lower": "user0100", "upper": "user0120"},
     lambda s: s is not None and "user0100" <= s <= "user0120"),
    ({"type": "null", "column": "s"}, lambda s: s is None),
    ({"type": "not", "field": {"type": "equals", "column": "s", "matchValue": "%"}}, lambda s: s is not None and s != "%"),
    ({"type": "like", "dimension": "s", "pattern": "user01%"}, lambda s: s is not None and s.startswith("user01")),
])
@pytest.mark.parametrize("clustered", [False, True])
def test_filters_over_code_blocks_match_the_rows(tmp_path, flt, pred, clustered):
    table = _table(B * 6 + 17, clustered=clustered)
    seg = _build(tmp_path, table)
    query = {"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["v", "s"], "filter": flt}
    got = execute(query, [seg]).table
    want = [i for i, s in enumerate(table.column("s").to_pylist()) if pred(s)]
    assert got.column("v").to_pylist() == want
    assert got.column("s").to_pylist() == [table.column("s")[i].as_py() for i in want]


def test_a_value_absent_from_the_dictionary_reads_no_codes(tmp_path):
    seg = _build(tmp_path, _table(B * 4))
    PROCESS_CACHE.clear()
    query = {"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["v"],
             "filter": {"type": "equals", "column": "s", "matchValue": "not there"}}
    assert execute(query, [seg]).table.num_rows == 0
    assert not any("codes" in p for p in _read_parts(seg, "s"))


def test_short_columns_packed_codes_and_opt_out_stay_one_part(tmp_path):
    table = _table(B)
    seg = _build(tmp_path, table, name="short.sseg")
    assert "codes" in seg.manifest.column("s").parts
    seg = _build(tmp_path, _table(B * 3), name="off.sseg", block_rows=0)
    assert "codes" in seg.manifest.column("s").parts and "codeBlocks" not in seg.manifest.required_features
    build_segment(_table(70_000), str(tmp_path / "default.sseg"), SID)  # opt-in: the default is one part
    default = Segment.open(str(tmp_path / "default.sseg"))
    assert "codes" in default.manifest.column("s").parts and "codeBlocks" not in default.manifest.required_features
    few = pa.table({"__time": pa.array(T0 + np.arange(B * 3), pa.int64()),
                    "s": pa.array(["a", "b", None][i % 3] for i in range(B * 3))})
    path = str(tmp_path / "packed.sseg")
    build_segment(few, path, SID, column_options={"s": {"codeBlockRows": B}})
    packed = Segment.open(path)
    assert "codes" in packed.manifest.column("s").parts and "codeBits" in packed.manifest.column("s").spec.to_json()
    assert packed.column("s").values().cast(pa.string()).to_pylist() == few.column("s").to_pylist()


@pytest.mark.parametrize("bad", [-1, "8", True, 1.5])
def test_bad_code_block_rows_option_is_refused_by_name(tmp_path, bad):
    with pytest.raises(ValueError, match=r"codeBlockRows must be a non-negative integer"):
        build_segment(_table(B), str(tmp_path / "bad.sseg"), SID, column_options={"s": {"codeBlockRows": bad}})


@pytest.mark.parametrize("change,message", [
    ({"code_blocks": 2}, r"column 's' has codeBlockRows 500 and codeBlocks 2"),
    ({"code_block_rows": 0}, r"column 's' has codeBlockRows 0"),
    ({"code_ranges": [[0, 1]]}, r"column 's' has codeRanges"),
    ({"code_ranges": [[3, 1], [0, 1], [0, 1]]}, r"column 's' has codeRanges"),
    ({"code_ranges": "x"}, r"column 's' has codeRanges"),
    ({"code_bits": 4}, r"column 's' has code blocks with bit-packed codes"),
])
def test_inconsistent_code_block_specs_are_refused(tmp_path, change, message):
    seg = _build(tmp_path, _table(B * 3))
    col = seg.manifest.column("s")
    stored = StoredColumn("s", seg._container, col.parts, B * 3, col.stats, col.type, replace(col.spec, **change))
    with pytest.raises(SegmentCorruptError, match=message):
        StringColumn.open(stored)


def test_older_readers_refuse_code_blocks_by_feature(tmp_path, monkeypatch):
    _build(tmp_path, _table(B * 3))
    import common.segment.encoding as encoding_module
    monkeypatch.setattr(encoding_module, "_SPEC_FEATURES",
                        encoding_module._SPEC_FEATURES - {"codeBlocks"})
    with pytest.raises(SegmentCorruptError, match=r"needs \['codeBlocks'\]"):
        Segment.open(str(tmp_path / "x.sseg"))
