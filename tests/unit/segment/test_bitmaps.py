"""Per-value Roaring bitmaps and code widths of string columns.

The builder writes Roaring's portable format itself (bitmap_serializer), so these tests pin it
to pyroaring's own bytes across container kinds: arrays (<= 4096 values in a 65536-row chunk),
bitsets (> 4096), empty bitmaps, and rows spread over several chunks.
"""

import array

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap

from common.segment.bitmap_serializer import serialize_grouped
from common.types import parse_instant

T0 = parse_instant("2020-01-01")


def reference_bytes(rows) -> bytes:
    # optimize=False: pyroaring would otherwise convert runs to run containers, which the
    # builder's serializer never writes (readers accept both).
    return BitMap(array.array("I", rows), optimize=False).serialize()


CASES = {
    "empty-everything": [[], [], []],
    "one-row": [[5]],
    "array-max-4096": [list(range(0, 8192, 2))],
    "bitset-4097": [list(range(0, 8194, 2))],
    "dense-chunk": [list(range(65536))],
    "across-chunks": [[0, 65535, 65536, 131071, 131072, 1 << 20, (1 << 32) - 1]],
    "mixed-ids": [list(range(3, 70000, 3)), [], list(range(70000, 80000)), [1, 2], list(range(200_000, 205_000))],
}


@pytest.mark.parametrize("groups", list(CASES.values()), ids=list(CASES))
def test_serialize_grouped_matches_pyroaring(groups):
    rows = np.array([r for g in groups for r in g], dtype=np.uint64).astype(np.uint32)
    ids = np.array([i for i, g in enumerate(groups) for _ in g], dtype=np.int64)
    data, offsets = serialize_grouped(rows, ids, len(groups))
    data = bytes(np.asarray(data, dtype=np.uint8))
    offsets = np.asarray(offsets).tolist()
    assert len(offsets) == len(groups) + 1 and offsets[0] == 0 and offsets[-1] == len(data)
    for i, g in enumerate(groups):
        blob = data[offsets[i]:offsets[i + 1]]
        assert blob == reference_bytes(g), i
        assert list(BitMap.deserialize(blob)) == g


def test_segment_bitmaps_with_bitset_and_array_containers(make_segment):
    n = 200_000
    i = np.arange(n)
    # 'dense' fills most of every chunk (bitset containers), 'sparse' a few rows (arrays),
    # 'tail' only the last chunk, and nulls are scattered.
    values = np.where(i % 1000 == 0, "sparse", np.where(i % 7 == 0, None, np.where(i >= 196_608, "tail", "dense")))
    table = pa.table({"__time": pa.array(np.full(n, T0), pa.int64()), "s": pa.array(values.tolist(), pa.string())})
    seg, _ = make_segment(table, "2020-01-01/2020-01-02")
    col = seg.column("s")
    assert col.dictionary.to_pylist() == ["dense", "sparse", "tail"]
    stored = col.to_arrow().cast(pa.string()).to_pylist()
    assert stored == values.tolist()  # a single time value keeps input order
    arr = np.array(stored, dtype=object)
    for code, value in enumerate(["dense", "sparse", "tail"]):
        want = np.flatnonzero(arr == value)
        got = np.array(col.bitmap(code).to_array(), dtype=np.int64)
        assert np.array_equal(got, want), value
    nulls = np.flatnonzero(np.array([v is None for v in stored]))
    assert np.array_equal(np.array(col.null_bitmap().to_array(), dtype=np.int64), nulls)


@pytest.mark.parametrize("cardinality,dtype", [
    (1, np.int8), (126, np.int8), (127, np.int16), (32766, np.int16), (32767, np.int32),
])
def test_code_width_follows_cardinality(make_segment, cardinality, dtype):
    # Every value once, plus a null, in reverse order so codes are not the row numbers.
    values = [f"v{k:06d}" for k in range(cardinality)][::-1] + [None]
    table = pa.table({"__time": pa.array(np.full(len(values), T0), pa.int64()), "s": values})
    seg, _ = make_segment(table, "2020-01-01/2020-01-02")
    col = seg.column("s")
    codes = col.codes()
    assert codes.dtype == dtype
    assert codes.tolist() == list(range(cardinality))[::-1] + [-1]
    assert col.to_arrow().cast(pa.string()).to_pylist() == values
    last = cardinality - 1
    assert list(col.bitmap(last)) == [0] and list(col.null_bitmap()) == [cardinality]


def _mask(n, rows):
    m = np.zeros(n, dtype=bool)
    m[list(rows)] = True
    return m


MASKS = {
    "no-rows": np.zeros(0, dtype=bool),
    "one-row-false": np.zeros(1, dtype=bool),
    "one-row-true": np.ones(1, dtype=bool),
    "all-true-partial-chunk": np.ones(70_001, dtype=bool),
    "array-max-4096": _mask(65_536, range(0, 8192, 2)),
    "bitset-4097": _mask(65_536, range(0, 8194, 2)),
    "dense-tail-chunk": _mask(140_000, range(131_072, 140_000)),
    "sparse-and-dense": _mask(300_000, [*range(5, 65_536, 3), 65_536, 199_999, *range(262_144, 300_000)]),
    "random-half": np.random.default_rng(7).random(200_003) < 0.5,
}


@pytest.mark.parametrize("mask", list(MASKS.values()), ids=list(MASKS))
def test_serialize_mask_matches_pyroaring(mask):
    from common.segment.bitmap_serializer import serialize_mask
    from common.segment.column_reader import bitmap_of_mask

    rows = np.flatnonzero(mask).tolist()
    blob = serialize_mask(mask)
    assert blob == reference_bytes(rows)
    assert list(BitMap.deserialize(blob)) == rows
    assert list(bitmap_of_mask(mask)) == rows
