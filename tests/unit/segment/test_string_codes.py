"""STRING codes stored narrow: bit-packed to 1, 2 or 4 bits when the column has at most 16 ids
(counting null), and without Arrow's validity bitmap when wider and nullable (spec ``codeBits``,
feature ``bitPackedCodes``). Readers give the same codes, values and index answers as before."""

import json
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import SegmentCorruptError
from common.segment import Segment, SegmentId, build_segment
from common.segment.bit_packing import pack, unpack, width_for
from common.types import Interval, parse_instant

T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"
SID = SegmentId("ds", Interval.of(IV), "v1", 0)
LONG = "ü" * 5000 + "x"


@given(st.sampled_from([1, 2, 4]), st.data())
@settings(max_examples=60, deadline=None)
def test_pack_round_trips(width, data):
    values = data.draw(st.lists(st.integers(0, (1 << width) - 1), max_size=300))
    arr = np.array(values, dtype=np.uint8)
    packed = pack(arr, width)
    assert len(packed) == -(-len(values) * width // 8)
    assert unpack(packed, width, len(values)).tolist() == values


def test_pack_rejects_what_does_not_fit():
    assert [width_for(n) for n in (0, 1, 2, 3, 4, 5, 16, 17)] == [1, 1, 1, 2, 2, 4, 4, None]
    with pytest.raises(ValueError, match="value 4 does not fit in 2 bits"):
        pack(np.array([1, 4]), 2)
    with pytest.raises(ValueError, match="bit width must be one of"):
        pack(np.array([1]), 3)
    with pytest.raises(ValueError, match="2 packed bytes hold 16 values, not 17"):
        unpack(np.zeros(2, np.uint8), 1, 17)


def _segment(tmp_path, values: list, name: str, **kwargs) -> Segment:
    n = len(values)
    table = pa.table({"__time": pa.array(np.full(n, T0), pa.int64()), "s": pa.array(values, pa.string())})
    path = str(tmp_path / name)
    build_segment(table, path, SID, **kwargs)
    return Segment.open(path, verify=True)


def _cases():
    rng = np.random.default_rng(11)
    def pick(choices, n, null_share=0.0):
        out = [choices[i] for i in rng.integers(0, len(choices), n)]
        return [None if rng.random() < null_share else v for v in out]
    return {
        "two-values": (pick(["true", "false"], 3000), 1),
        "two-values-nulls": (pick(["true", "false"], 3000, 0.3), 2),
        "one-row": (["é"], 1),
        "one-null-row": ([None], 1),
        "all-null": ([None] * 500, 1),
        "empty-and-unicode": (pick(["", "\U0001F600", "a", "é", LONG], 2000, 0.1), 4),
        "sixteen-ids": (pick([f"v{i}" for i in range(16)], 2000), 4),
        "sixteen-with-null": (pick([f"v{i}" for i in range(16)], 2000, 0.2), 8),
        "int16-with-nulls": (pick([f"w{i}" for i in range(300)], 5000, 0.5), 16),
        "int32-with-nulls": (pick([f"u{i}" for i in range(80_000)], 100_000, 0.1), 32),
        "int16-no-nulls": (pick([f"w{i}" for i in range(300)], 5000), None),
    }


CASES = _cases()


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_narrow_codes_read_like_the_old_format(tmp_path, case):
    values, bits = CASES[case]
    new = _segment(tmp_path, values, "new.sseg")
    old = _segment(tmp_path, values, "old.sseg", compression=None, string_bitmaps=True,
                   column_options={"s": {"packCodes": False, "bitmaps": True}})
    spec = new.manifest.column("s").spec.to_json()
    assert spec.get("codeBits") == bits
    assert ("bitPackedCodes" in new.manifest.required_features) == (bits is not None)
    assert "codeBits" not in old.manifest.column("s").spec.to_json()
    a, b = new.column("s"), old.column("s")
    assert a.values().to_pylist() == b.values().to_pylist() == values
    assert a.codes().tolist() == b.codes().tolist()
    assert a.codes_array.null_count == values.count(None)
    rows = np.array([0, len(values) - 1, len(values) // 2])
    assert a.take(rows).to_pylist() == [values[i] for i in rows]
    ia, ib = a.index(), b.index()
    for value in {v for v in values[:50] if v is not None}:
        assert list(ia.bitmap(ia.lookup(value))) == list(ib.bitmap(ib.lookup(value))) == \
            [i for i, v in enumerate(values) if v == value]
    assert list(ia.null_bitmap()) == list(ib.null_bitmap()) == [i for i, v in enumerate(values) if v is None]


def test_reader_without_the_packed_codes_feature_refuses(tmp_path, monkeypatch):
    _segment(tmp_path, ["a", "b"] * 50, "x.sseg")
    path = str(tmp_path / "x.sseg")
    import common.segment.encoding as encoding_module
    monkeypatch.setattr(encoding_module, "_SPEC_FEATURES", {"stringIndexFromCodes", "numberDictionary"})
    with pytest.raises(SegmentCorruptError, match=r"feature check failed: needs \['bitPackedCodes'\]"):
        Segment.open(path)


def _rewrite_spec(path: str, out: str, edit) -> None:
    """Rewrites the manifest (and its footer) of a segment file with ``edit`` applied."""
    data = bytearray(open(path, "rb").read())
    footer = struct.Struct("<QQII8s")
    offset, length, crc, version, magic = footer.unpack_from(data, len(data) - footer.size)
    manifest = json.loads(bytes(data[offset:offset + length]))
    edit(manifest)
    blob = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    import zlib
    body = bytes(data[:offset]) + blob
    with open(out, "wb") as f:
        f.write(body + footer.pack(offset, len(blob), zlib.crc32(blob) & 0xFFFFFFFF, version, magic))


def test_unknown_code_width_is_refused_with_the_column_named(tmp_path):
    _segment(tmp_path, ["a", "b"] * 50, "x.sseg")
    bad = str(tmp_path / "bad.sseg")

    def edit(m):
        for c in m["columns"]:
            if c["name"] == "s":
                c["spec"]["codeBits"] = 3
    _rewrite_spec(str(tmp_path / "x.sseg"), bad, edit)
    with pytest.raises(SegmentCorruptError, match=r"column 's' has codeBits 3"):
        Segment.open(bad).column("s").codes()


def test_unpacked_codes_live_in_the_bounded_cache_and_leave_on_close(tmp_path):
    from common.segment.part_cache import DecodedPartCache
    from common.segment.container import Container

    _segment(tmp_path, ["a", None, "b"] * 400, "x.sseg")
    cache = DecodedPartCache(1 << 20)
    container = Container(str(tmp_path / "x.sseg"), cache=cache)
    calls = []

    def load():
        calls.append(1)
        return np.arange(10)

    assert container.derived("s/codes", "unpacked", load, 80).tolist() == list(range(10))
    assert container.derived("s/codes", "unpacked", load, 80).tolist() == list(range(10))
    assert len(calls) == 1 and cache.stats().entries == 1
    container.close()
    assert cache.stats().entries == 0
    seg = Segment.open(str(tmp_path / "x.sseg"))
    assert seg.column("s").codes().tolist() == [0, -1, 1] * 400
