"""Compressed segment parts: the manifest records each compressed part's codec behind the
``compressedParts`` feature, readers give the same values as from an uncompressed file, files
written without compression keep the original format, damaged compressed parts raise
SegmentCorruptError naming the part, and the decoded-part cache stays within its budget."""

import json
import math
import os
import struct
import threading
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import SegmentCorruptError
from common.query import execute
from common.segment import Segment, SegmentId, build_segment
from common.segment.part_cache import DecodedPartCache
from common.segment.part_codec import (
    COMPRESSED_PARTS,
    PartCompression,
    decompress,
    parse_codec,
    shuffle,
    unshuffle,
)
from common.types import ColumnType, Interval, parse_instant

T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"
FOOTER = struct.Struct("<QQII8s")
EVERY_PART = PartCompression(min_bytes=0, min_saving=0.0)  # compress every part, whatever it saves


def _table(n: int = 5000) -> pa.Table:
    return pa.table({
        "__time": pa.array([T0 + i * 7 for i in range(n)], pa.int64()),
        "s": [None if i % 13 == 0 else f"page-{(i * 7919) % 977}" for i in range(n)],
        "low": [("a", "b", "c")[i % 3] for i in range(n)],
        "n": pa.array([None if i % 11 == 0 else i * 3 - 700 for i in range(n)], pa.int64()),
        "d": pa.array([(-0.0, float("nan"), 1.5, None, 2.25)[i % 5] for i in range(n)], pa.float64()),
        "j": pa.array([json.dumps({"a": i % 5, "b": {"c": f"x{i % 3}"}}) if i % 4 else None for i in range(n)],
                      pa.string()),
    })


def _build(tmp_path, table, name, compression):
    path = str(tmp_path / name)
    sid = SegmentId("ds", Interval.of(IV), "v1", 0)
    build_segment(table, path, sid, column_types={"j": ColumnType.parse("COMPLEX<json>")}, compression=compression)
    return path


def _manifest(path: str) -> dict:
    data = open(path, "rb").read()
    m_off, m_len, *_ = FOOTER.unpack(data[-FOOTER.size:])
    return json.loads(data[m_off:m_off + m_len])


def _rewrite(path: str, edit_data=None, edit_manifest=None) -> str:
    data = bytearray(open(path, "rb").read())
    m_off, m_len, _, version, tail = FOOTER.unpack(bytes(data[-FOOTER.size:]))
    obj = json.loads(bytes(data[m_off:m_off + m_len]))
    if edit_data:
        edit_data(data, obj)
    if edit_manifest:
        edit_manifest(obj)
    manifest = json.dumps(obj).encode()
    footer = FOOTER.pack(m_off, len(manifest), zlib.crc32(manifest) & 0xFFFFFFFF, version, tail)
    out = os.path.join(os.path.dirname(path), "edited.sseg")
    with open(out, "wb") as f:
        f.write(bytes(data[:m_off]) + manifest + footer)
    return out


def _values(seg: Segment) -> dict:
    out = {}
    for name in seg.schema:
        col = seg.column(name)
        out[name] = col.values().to_pylist() if name != "s" else col.values().cast(pa.string()).to_pylist()
    out["j.a"] = seg.column("j").field("$.a").values().to_pylist()
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


def test_compressed_parts_read_like_uncompressed(tmp_path):
    table = _table()
    plain = Segment.open(_build(tmp_path, table, "plain.sseg", None), verify=True)
    packed_path = _build(tmp_path, table, "packed.sseg", EVERY_PART)
    packed = Segment.open(packed_path, verify=True)
    manifest = _manifest(packed_path)
    assert COMPRESSED_PARTS in manifest["requiredFeatures"]
    assert all(len(entry) == 5 and entry[3].endswith("zstd") for entry in manifest["files"].values())
    assert {entry[3] for entry in manifest["files"].values()} > {"zstd"}  # some parts shuffled first
    a, b = _values(plain), _values(packed)
    assert a.keys() == b.keys()
    for name in a:
        assert len(a[name]) == len(b[name]) and all(_same(x, y) for x, y in zip(a[name], b[name])), name
    assert os.path.getsize(packed_path) < os.path.getsize(plain.path)


def test_queries_on_compressed_and_uncompressed_segments_agree(tmp_path):
    table = _table()
    plain = Segment.open(_build(tmp_path, table, "plain.sseg", None))
    packed = Segment.open(_build(tmp_path, table, "packed.sseg", EVERY_PART))
    queries = [
        {"queryType": "groupBy", "dataSource": "ds", "intervals": [IV], "granularity": "all", "dimensions": ["low"],
         "filter": {"type": "equals", "column": "s", "matchValue": "page-7"},
         "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "x", "fieldName": "n"}]},
        {"queryType": "timeseries", "dataSource": "ds", "intervals": [IV], "granularity": "hour",
         "aggregations": [{"type": "doubleSum", "name": "d", "fieldName": "d"}, {"type": "count", "name": "c"}]},
        {"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["__time", "s", "n"],
         "filter": {"type": "range", "column": "n", "matchValueType": "LONG", "lower": 100, "upper": 400}},
    ]
    for q in queries:
        # repr: a NaN sum must read as NaN on both sides
        assert repr(execute(q, [packed]).table.to_pylist()) == repr(execute(q, [plain]).table.to_pylist())


def test_uncompressed_build_keeps_the_original_format(tmp_path):
    path = _build(tmp_path, _table(200), "plain.sseg", None)
    manifest = _manifest(path)
    assert COMPRESSED_PARTS not in manifest["requiredFeatures"]
    assert all(len(entry) == 3 for entry in manifest["files"].values())
    assert Segment.open(path, verify=True).column("n").values().to_pylist()[:2] == [None, -697]


def test_small_or_incompressible_parts_stay_mapped(tmp_path):
    path = _build(tmp_path, _table(5000), "default.sseg", PartCompression())
    seg = Segment.open(path)
    files = seg.manifest.files
    assert files["low/dictionary"].codec is None  # under 4 KiB: stays in the memory map
    assert files["n/values"].codec in ("zstd", "shuffle8/zstd", "shuffle4/zstd", "shuffle2/zstd")
    assert seg._container.part_length("n/values") < files["n/values"].raw_length


def test_unknown_codec_is_refused_on_open(tmp_path):
    path = _build(tmp_path, _table(500), "packed.sseg", EVERY_PART)
    bad = _rewrite(path, edit_manifest=lambda m: m["files"]["n/values"].__setitem__(3, "brotli"))
    with pytest.raises(SegmentCorruptError, match="codec check failed for part 'n/values': codec 'brotli' is unknown"):
        Segment.open(bad)


def test_reader_without_the_feature_refuses(tmp_path, monkeypatch):
    path = _build(tmp_path, _table(500), "packed.sseg", EVERY_PART)
    import common.segment.manifest as manifest_module
    monkeypatch.setattr(manifest_module, "COMPRESSED_PARTS", "somethingElse")
    with pytest.raises(SegmentCorruptError, match=r"feature check failed: needs \['compressedParts'\]"):
        Segment.open(path)


def test_flipped_byte_in_compressed_part_fails_its_checksum(tmp_path):
    path = _build(tmp_path, _table(), "packed.sseg", EVERY_PART)

    def flip(data, obj):
        off, length, *_ = obj["files"]["n/values"]
        data[off + length // 2] ^= 0xFF

    bad = _rewrite(path, edit_data=flip)
    seg = Segment.open(bad)
    with pytest.raises(SegmentCorruptError, match="checksum check failed for part 'n/values'"):
        seg.column("n").values()
    with pytest.raises(SegmentCorruptError, match="checksum check failed for part 'n/values'"):
        Segment.open(bad, verify=True)


def test_garbled_block_with_matching_checksum_fails_to_decompress(tmp_path):
    path = _build(tmp_path, _table(), "packed.sseg", EVERY_PART)

    def garble(data, obj):
        entry = obj["files"]["n/values"]
        off, length = entry[0], entry[1]
        data[off:off + length] = bytes(length)
        entry[2] = zlib.crc32(bytes(length)) & 0xFFFFFFFF

    seg = Segment.open(_rewrite(path, edit_data=garble))
    with pytest.raises(SegmentCorruptError, match="decompress check failed for part 'n/values'"):
        seg.column("n").values()


def test_wrong_decoded_length_fails(tmp_path):
    path = _build(tmp_path, _table(), "packed.sseg", EVERY_PART)
    seg = Segment.open(_rewrite(path, edit_manifest=lambda m: m["files"]["s/codes"].__setitem__(4, 12)))
    with pytest.raises(SegmentCorruptError, match="decompress check failed for part 's/codes'"):
        seg.column("s").values()


def test_cache_keeps_decoded_parts_within_budget(tmp_path):
    path = _build(tmp_path, _table(), "packed.sseg", EVERY_PART)
    cache = DecodedPartCache(max_bytes=30_000)
    seg = Segment(path)
    seg._container._cache = cache  # this test's own budget, not the process's
    sizes = {name: e.raw_length for name, e in seg.manifest.files.items()}
    assert sum(sizes.values()) > 2 * cache.max_bytes
    for _ in range(2):
        for name in seg.schema:
            seg.column(name).values()
            assert cache.stats().bytes <= cache.max_bytes
    stats = cache.stats()
    assert stats.evictions > 0 and stats.entries > 0
    before = stats.hits
    seg.column("low").values()  # int8 codes and a 3-value dictionary: small enough to stay
    seg.column("low").values()
    assert cache.stats().hits >= before + 2
    seg.close()
    assert cache.stats().bytes == 0 and cache.stats().entries == 0


def test_cache_lru_order_and_oversized_values():
    cache = DecodedPartCache(max_bytes=100)
    loads = []

    def loader(v):
        return lambda: loads.append(v) or v

    cache.get(("o", "a"), loader("a"), 40)
    cache.get(("o", "b"), loader("b"), 40)
    cache.get(("o", "a"), loader("a"), 40)  # hit: a becomes most recent
    cache.get(("o", "c"), loader("c"), 40)  # evicts b, the least recent
    assert loads == ["a", "b", "c"]
    cache.get(("o", "a"), loader("a"), 40)
    cache.get(("o", "b"), loader("b"), 40)
    assert loads == ["a", "b", "c", "b"]
    assert cache.get(("o", "big"), loader("big"), 101) == "big"  # larger than the budget: not kept
    assert cache.stats().bytes <= 100 and ("o", "big") not in cache._entries
    cache.set_max_bytes(40)
    assert cache.stats().bytes <= 40
    with pytest.raises(ValueError, match="decompressed_cache_bytes"):
        cache.set_max_bytes(-1)


def test_cache_decodes_once_under_concurrent_misses():
    cache = DecodedPartCache(max_bytes=1000)
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow():
        calls.append(1)
        started.set()
        assert release.wait(10)
        return "v"

    results = []
    first = threading.Thread(target=lambda: results.append(cache.get(("o", "k"), slow, 10)))
    first.start()
    assert started.wait(10)
    others = [threading.Thread(target=lambda: results.append(cache.get(("o", "k"), slow, 10))) for _ in range(3)]
    for t in others:
        t.start()
    release.set()
    for t in [first, *others]:
        t.join(10)
        assert not t.is_alive()
    assert results == ["v"] * 4 and len(calls) == 1


def test_cache_load_error_reaches_every_waiter():
    cache = DecodedPartCache(max_bytes=1000)

    def broken():
        raise SegmentCorruptError("segment x: decompress check failed for part 'p'")

    for _ in range(2):  # a failed load is not cached: the next caller tries (and fails) again
        with pytest.raises(SegmentCorruptError, match="part 'p'"):
            cache.get(("o", "p"), broken, 10)
    assert cache.stats().entries == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
                          st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
                          st.one_of(st.none(), st.text(max_size=12))), min_size=1, max_size=300))
def test_any_values_round_trip_compressed(tmp_path_factory, rows):
    tmp = tmp_path_factory.mktemp("rt")
    table = pa.table({
        "__time": pa.array([T0 + i for i in range(len(rows))], pa.int64()),
        "n": pa.array([r[0] for r in rows], pa.int64()),
        "d": pa.array([r[1] for r in rows], pa.float64()),
        "s": pa.array([r[2] for r in rows], pa.string()),
    })
    path = str(tmp / "x.sseg")
    build_segment(table, path, SegmentId("ds", Interval.of(IV), "v1", 0), compression=EVERY_PART)
    seg = Segment.open(path, verify=True)
    assert seg.column("n").values().to_pylist() == [r[0] for r in rows]
    got = seg.column("d").values().to_pylist()
    assert all(_same(x, y) for x, y in zip(got, [r[1] for r in rows]))
    assert seg.column("s").values().cast(pa.string()).to_pylist() == [r[2] for r in rows]
    seg.close()


def test_policy_keeps_parts_that_compress_poorly_uncompressed():
    noise = os.urandom(64 * 1024)
    assert PartCompression().encode(noise)[1] is None  # random bytes do not shrink by a fifth
    zeros = bytes(64 * 1024)
    stored, codec = PartCompression(codec="lz4_frame").encode(zeros)
    assert codec == "lz4_frame" and memoryview(stored).nbytes < 1024
    with pytest.raises(ValueError, match="unknown segment part codec 'snappy'"):
        PartCompression(codec="snappy")


def test_string_columns_without_bitmaps_filter_like_with_them(tmp_path):
    table = _table()
    sid = SegmentId("ds", Interval.of(IV), "v1", 0)
    with_path, without_path = str(tmp_path / "with.sseg"), str(tmp_path / "without.sseg")
    build_segment(table, with_path, sid, string_bitmaps=True)
    build_segment(table, without_path, sid)  # the default since bitmaps became opt-in
    with_bitmaps, without = Segment.open(with_path), Segment.open(without_path, verify=True)
    assert "stringIndexFromCodes" in without.manifest.required_features
    assert "s/bitmaps" not in without.manifest.files and "s/bitmaps" in with_bitmaps.manifest.files
    assert os.path.getsize(without_path) < os.path.getsize(with_path)
    a, b = with_bitmaps.column("s").index(), without.column("s").index()
    for ids in (a.lookup("page-7"), a.range("page-1", "page-3", False, True), a.prefix("page-9"),
                np.arange(0, 200, dtype=np.int64), np.array([a.cardinality], dtype=np.int64)):
        assert list(b.bitmap(ids)) == list(a.bitmap(ids))
    assert list(b.null_bitmap()) == list(a.null_bitmap()) and len(a.null_bitmap()) > 0
    queries = [
        {"queryType": "groupBy", "dataSource": "ds", "intervals": [IV], "granularity": "all", "dimensions": ["low"],
         "filter": {"type": "or", "fields": [{"type": "equals", "column": "s", "matchValue": "page-7"},
                                             {"type": "null", "column": "s"},
                                             {"type": "like", "dimension": "s", "pattern": "page-9%"}]},
         "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "x", "fieldName": "n"}]},
        {"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["__time", "s", "low"],
         "filter": {"type": "in", "dimension": "low", "values": ["a", "c"]}, "limit": 50},
    ]
    for q in queries:
        assert execute(q, [without]).table.to_pylist() == execute(q, [with_bitmaps]).table.to_pylist()


def test_reader_without_the_codes_index_feature_refuses(tmp_path, monkeypatch):
    path = str(tmp_path / "x.sseg")
    build_segment(_table(300), path, SegmentId("ds", Interval.of(IV), "v1", 0), string_bitmaps=False)
    import common.segment.encoding as encoding_module
    monkeypatch.setattr(encoding_module, "_SPEC_FEATURES", set())
    with pytest.raises(SegmentCorruptError, match=r"feature check failed: needs \[.*'stringIndexFromCodes'\]"):
        Segment.open(path)


@pytest.mark.parametrize("length", [0, 1, 7, 8, 9, 4096, 4099])
@pytest.mark.parametrize("width", [2, 4, 8])
def test_shuffle_round_trips_any_length(length, width):
    data = os.urandom(length)
    shuffled = shuffle(data, width)
    assert shuffled.size == length
    assert unshuffle(shuffled, width).to_pybytes() == data


def test_shuffle_is_chosen_for_sorted_times_and_round_trips():
    times = np.arange(1_600_000_000_000, 1_600_000_000_000 + 200_000 * 431, 431, dtype=np.int64)
    stored, codec = PartCompression().encode(times.tobytes())
    assert codec == "shuffle8/zstd"
    assert decompress(codec, stored, times.nbytes).to_pybytes() == times.tobytes()
    stored_plain, plain = PartCompression(try_shuffle=False).encode(times.tobytes())
    assert plain == "zstd" and memoryview(stored).nbytes < memoryview(stored_plain).nbytes
    text = "".join(f"page-{i}" for i in range(60_000)).encode()
    stored_text, text_codec = PartCompression().encode(text)
    assert decompress(text_codec, stored_text, len(text)).to_pybytes() == text
    assert parse_codec("shuffle4/lz4_frame") == (4, "lz4_frame") and parse_codec("shuffle3/zstd") is None
    assert parse_codec("zstd") == (0, "zstd") and parse_codec("brotli") is None


OLD_FILE = os.path.join(os.path.dirname(__file__), "data", "before_compression.sseg")


def test_a_file_written_before_compression_reads_as_it_did(tmp_path):
    """data/before_compression.sseg was written by the builder before compressed parts existed
    (600 rows: __time = 2020-01-01 + 11 ms * i, s, n, d as below)."""
    seg = Segment.open(OLD_FILE, verify=True)
    assert seg.manifest.required_features == ()
    assert all(e.codec is None for e in seg.manifest.files.values())
    n = 600
    assert seg.column("__time").values().cast(pa.int64()).to_pylist() == [T0 + i * 11 for i in range(n)]
    assert seg.column("s").values().cast(pa.string()).to_pylist() == \
        [None if i % 13 == 0 else f"page-{(i * 7919) % 211}" for i in range(n)]
    assert seg.column("n").values().to_pylist() == [None if i % 11 == 0 else i * 3 - 700 for i in range(n)]
    got = seg.column("d").values().to_pylist()
    assert all(_same(x, y) for x, y in zip(got, [(-0.0, 1.5, None, 2.25)[i % 4] for i in range(n)]))
    q = {"queryType": "groupBy", "dataSource": "old", "intervals": ["2020-01-01/2020-01-02"], "granularity": "all",
         "dimensions": ["s"], "filter": {"type": "equals", "column": "s", "matchValue": "page-7"},
         "aggregations": [{"type": "count", "name": "c"}]}
    expected = sum(1 for i in range(n) if i % 13 and f"page-{(i * 7919) % 211}" == "page-7")
    assert execute(q, [seg]).table.to_pylist() == [{"s": "page-7", "c": expected}]
    # Rewriting the same rows with compression gives a smaller file with the same values.
    path = str(tmp_path / "rewritten.sseg")
    table = pa.table({name: seg.column(name).values() for name in seg.schema})
    build_segment(table, path, seg.id, compression=EVERY_PART)
    again = Segment.open(path, verify=True)
    assert again.column("n").values().to_pylist() == seg.column("n").values().to_pylist()
    assert os.path.getsize(path) < os.path.getsize(OLD_FILE)
