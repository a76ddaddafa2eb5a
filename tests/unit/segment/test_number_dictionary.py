"""DOUBLE/FLOAT columns with few distinct values are stored as a value dictionary plus codes
(spec ``valueDictionary``, feature ``numberDictionary``): every bit pattern reads back exactly
(-0.0, NaN payloads, infinities, nulls), columns with many distinct values or few rows stay plain,
and a reader that does not know the feature refuses the segment."""

import numpy as np
import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError
from common.query import execute
from common.segment import Segment, SegmentId, build_segment
from common.segment.value_column import value_dictionary
from common.types import ColumnType, Interval, parse_instant

T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"
SID = SegmentId("ds", Interval.of(IV), "v1", 0)
QUIET_NAN = np.float64("nan")
PAYLOAD_NAN = np.array([0x7FF8_0000_0000_0123], dtype=np.uint64).view(np.float64)[0]
NEGATIVE_NAN = np.array([0xFFF8_0000_0000_0000], dtype=np.uint64).view(np.float64)[0]
HOSTILE = [0.0, -0.0, QUIET_NAN, PAYLOAD_NAN, NEGATIVE_NAN, np.inf, -np.inf, 5e-324, -1.7976931348623157e308, 0.1]


def _hostile_column(n: int, with_nulls: bool) -> pa.Array:
    rng = np.random.default_rng(3)
    values = np.array(HOSTILE, dtype=np.float64)[rng.integers(0, len(HOSTILE), n)]
    mask = (rng.random(n) < 0.2) if with_nulls else None
    return pa.array(values, mask=mask)


def _bits(arr: pa.Array) -> list:
    """Bit patterns of the valid rows, None for null ones: equality that tells -0.0 from 0.0 and NaNs apart."""
    width = arr.type.bit_width // 8
    raw = np.frombuffer(arr.buffers()[1], dtype=f"<u{width}", count=len(arr) + arr.offset)[arr.offset:]
    valid = arr.is_valid().to_pylist()
    return [int(b) if ok else None for b, ok in zip(raw, valid)]


def _build(tmp_path, columns: dict, name: str = "x.sseg", **kwargs) -> Segment:
    n = len(next(iter(columns.values())))
    table = pa.table({"__time": pa.array(np.full(n, T0), pa.int64()), **columns})
    path = str(tmp_path / name)
    build_segment(table, path, SID, **kwargs)
    return Segment.open(path, verify=True)


@pytest.mark.parametrize("with_nulls", [False, True])
@pytest.mark.parametrize("compression", ["default", None])
def test_hostile_doubles_round_trip_bit_for_bit(tmp_path, with_nulls, compression):
    d = _hostile_column(5000, with_nulls)
    kwargs = {} if compression == "default" else {"compression": None}
    seg = _build(tmp_path, {"d": d}, **kwargs)
    col = seg.manifest.column("d")
    assert col.spec.to_json() == {"valueDictionary": True}
    assert set(col.parts) == {"dictionary", "codes"}
    assert "numberDictionary" in seg.manifest.required_features
    got = seg.column("d").values()
    assert got.type == pa.float64() and got.null_count == d.null_count
    assert _bits(got) == _bits(d)
    rows = np.array([0, 17, 4999, 17])
    assert _bits(seg.column("d").take(rows)) == [_bits(d)[i] for i in rows]


def test_float32_and_all_null_columns(tmp_path):
    n = 3000
    f = pa.array(np.array([1.5, -0.0, np.nan, 2.25], dtype=np.float32)[np.arange(n) % 4])
    nulls = pa.nulls(n, pa.float64())
    seg = _build(tmp_path, {"f": f, "z": nulls}, column_types={"f": ColumnType.parse("FLOAT")})
    assert seg.manifest.column("f").spec.to_json() == {"valueDictionary": True}
    assert _bits(seg.column("f").values()) == _bits(f)
    z = seg.column("z").values()
    assert z.null_count == n and len(z) == n


def test_many_distinct_values_or_few_rows_stay_plain(tmp_path):
    rng = np.random.default_rng(1)
    seg = _build(tmp_path, {"noise": pa.array(rng.random(5000))})
    assert seg.manifest.column("noise").parts == {"values": "noise/values"}
    assert value_dictionary(pa.array([0.5] * 10)) is None  # one-row-ish columns are not worth a dictionary
    assert value_dictionary(pa.array(list(range(5000)), pa.int64())) is None  # integers keep their own path
    one = _build(tmp_path, {"d": pa.array([-0.0])}, name="one.sseg")
    assert _bits(one.column("d").values()) == _bits(pa.array([-0.0]))


def test_queries_read_dictionary_doubles_like_plain_ones(tmp_path):
    n = 6000
    rng = np.random.default_rng(5)
    d = pa.array(np.round(rng.random(n) * 20) / 4, mask=rng.random(n) < 0.1)
    k = pa.array([f"k{i % 5}" for i in range(n)])
    plain = _build(tmp_path, {"d": d, "k": k}, name="plain.sseg")
    assert plain.manifest.column("d").spec.to_json() == {"valueDictionary": True}
    table = pa.table({"__time": pa.array(np.full(n, T0), pa.int64()), "d": d, "k": k})
    old_path = str(tmp_path / "old.sseg")
    # The format before value dictionaries: built by hand with the dictionary switched off.
    import common.segment.value_column as vc
    saved = vc._MIN_ROWS
    vc._MIN_ROWS = 1 << 62
    try:
        build_segment(table, old_path, SID, compression=None, string_bitmaps=True)
    finally:
        vc._MIN_ROWS = saved
    old = Segment.open(old_path)
    assert old.manifest.column("d").parts == {"values": "d/values"}
    queries = [
        {"queryType": "groupBy", "dataSource": "ds", "intervals": [IV], "granularity": "all", "dimensions": ["k"],
         "aggregations": [{"type": "doubleSum", "name": "s", "fieldName": "d"},
                          {"type": "doubleMax", "name": "m", "fieldName": "d"}, {"type": "count", "name": "c"}]},
        {"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["d", "k"],
         "filter": {"type": "range", "column": "d", "matchValueType": "DOUBLE", "lower": 1.0, "upper": 2.5},
         "limit": 200},
    ]
    for q in queries:
        assert execute(q, [plain]).table.to_pylist() == execute(q, [old]).table.to_pylist()


def test_reader_without_the_number_dictionary_feature_refuses(tmp_path, monkeypatch):
    path = str(tmp_path / "x.sseg")
    n = 2000
    table = pa.table({"__time": pa.array(np.full(n, T0), pa.int64()), "d": pa.array(np.arange(n) % 3 / 2.0)})
    build_segment(table, path, SID)
    import common.segment.encoding as encoding_module
    monkeypatch.setattr(encoding_module, "_SPEC_FEATURES", {"stringIndexFromCodes"})
    with pytest.raises(SegmentCorruptError, match=r"feature check failed: needs \['numberDictionary'\]"):
        Segment.open(path)
