"""Fixed-width columns longer than one block are stored as blocks of rows, each its own
compressed part (spec ``blockRows``/``blocks``, feature ``valueBlocks``): values read back
exactly, and reading a few rows decodes only their blocks."""

import numpy as np
import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError
from common.segment import Segment, SegmentId, build_segment
from common.types import Interval, parse_instant
from common.segment.part_cache import PROCESS_CACHE

T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"
SID = SegmentId("ds", Interval.of(IV), "v1", 0)
B = 1000


def _build(tmp_path, n: int, name: str = "x.sseg", block_rows: int = B) -> tuple[Segment, pa.Table]:
    rng = np.random.default_rng(2)
    hostile = np.array([-0.0, np.nan, np.inf, -np.inf, 1e-310, 2.5])
    table = pa.table({
        "__time": pa.array(T0 + np.arange(n), pa.int64()),
        "l": pa.array(rng.integers(-(2**62), 2**62, n), mask=rng.random(n) < 0.1),
        "d": pa.array(np.where(rng.random(n) < 0.1, hostile[rng.integers(0, 6, n)], rng.random(n))),
    })
    opts = {c: {"blockRows": block_rows} for c in ("__time", "l", "d")}
    path = str(tmp_path / name)
    build_segment(table, path, SID, column_options=opts)
    return Segment.open(path), table


def _bits(arr) -> list:
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if pa.types.is_floating(arr.type):
        raw = np.frombuffer(arr.buffers()[1], np.uint64, count=len(arr) + arr.offset)[arr.offset:]
        return [int(x) if ok else None for x, ok in zip(raw, arr.is_valid().to_pylist())]
    return arr.to_pylist()


@pytest.mark.parametrize("n", [B * 3, B * 3 + 1, B + 1])
def test_blocks_round_trip(tmp_path, n):
    seg, table = _build(tmp_path, n)
    for name in ("l", "d"):
        col = seg.manifest.column(name)
        assert col.spec.to_json() == {"blockRows": B, "blocks": -(-n // B)}
        assert "valueBlocks" in seg.manifest.required_features
        assert _bits(seg.column(name).values()) == _bits(table.column(name))
        rows = np.array([n - 1, 0, B, B - 1, 5, n - 1])
        assert _bits(seg.column(name).take(rows)) == [_bits(table.column(name))[i] for i in rows]
    assert seg.column("__time").values().cast(pa.int64()).to_pylist() == table.column("__time").to_pylist()


def test_a_few_rows_decode_only_their_blocks(tmp_path):
    _, table = _build(tmp_path, B * 5)
    seg = Segment.open(str(tmp_path / "x.sseg"))
    rows = [B * 3 + 7, 2, B * 3 + 7, 1, B * 3]  # unordered, repeated, two of five blocks
    got = seg.column("l").take(np.array(rows))
    assert got.to_pylist() == [table.column("l")[i].as_py() for i in rows]
    # White-box: the parts of this open file the process's part cache holds are the ones read.
    token = seg._container._token
    read = {key[1] for key in PROCESS_CACHE._entries if key[0] == token and key[1].startswith("l/")}
    assert read == {"l/block0", "l/block3"}


def test_short_columns_and_opt_out_stay_one_part(tmp_path):
    seg, _ = _build(tmp_path, B, name="short.sseg")
    assert seg.manifest.column("l").parts == {"values": "l/values"}
    seg, table = _build(tmp_path, B * 2, name="off.sseg", block_rows=0)
    assert seg.manifest.column("l").parts == {"values": "l/values"}
    assert "valueBlocks" not in seg.manifest.required_features


def test_block_counts_that_do_not_cover_the_rows_are_refused(tmp_path, monkeypatch):
    seg, _ = _build(tmp_path, B * 3)
    from dataclasses import replace

    from common.segment.encoding import StoredColumn
    from common.segment.value_column import ValueColumn

    col = seg.manifest.column("l")
    stored = StoredColumn("l", seg._container, col.parts, B * 3, col.stats, col.type, replace(col.spec, blocks=2))
    with pytest.raises(SegmentCorruptError, match=r"column 'l' has blockRows 1000 and blocks 2"):
        ValueColumn.open(stored)
    import common.segment.encoding as encoding_module
    monkeypatch.setattr(encoding_module, "_SPEC_FEATURES", {"stringIndexFromCodes", "bitPackedCodes"})
    with pytest.raises(SegmentCorruptError, match=r"needs \['valueBlocks'\]"):
        Segment.open(str(tmp_path / "x.sseg"))
