"""Damaged segment files raise SegmentCorruptError naming the segment and the failed check, and
never hand back rows. Files are damaged through the documented layout (container.py): magic,
aligned parts, JSON manifest, 32-byte footer (manifest offset/length/crc32, version, tail magic)."""

import json
import os
import struct
import zlib

import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError
from common.query import execute
from common.segment import Segment
from common.types import parse_instant

T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"
FOOTER = struct.Struct("<QQII8s")


@pytest.fixture
def good(make_segment):
    table = pa.table({
        "__time": pa.array([T0 + i for i in range(100)], pa.int64()),
        "s": [f"v{i % 7}" for i in range(100)],
        "n": pa.array(range(100), pa.int64()),
    })
    seg, path = make_segment(table, IV, name="good.sseg", string_bitmaps=True)
    return seg, path


def _write(path: str, data: bytes) -> str:
    out = os.path.join(os.path.dirname(path), "bad.sseg")
    with open(out, "wb") as f:
        f.write(data)
    return out


def _split(data: bytes):
    m_off, m_len, m_crc, version, tail = FOOTER.unpack(data[-FOOTER.size:])
    return m_off, m_len, m_crc, version, tail


def rewrite_manifest(path: str, edit) -> str:
    """A copy of the segment whose manifest JSON was changed by ``edit``, with a valid checksum:
    so only the check under test can fail."""
    data = open(path, "rb").read()
    m_off, m_len, _, version, tail = _split(data)
    obj = json.loads(data[m_off:m_off + m_len])
    edit(obj)
    manifest = json.dumps(obj).encode()
    footer = FOOTER.pack(m_off, len(manifest), zlib.crc32(manifest) & 0xFFFFFFFF, version, tail)
    return _write(path, data[:m_off] + manifest + footer)


def flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1:]


def corrupt_open(path: str) -> str:
    with pytest.raises(SegmentCorruptError) as err:
        Segment.open(path)
    return str(err.value)


def test_good_file_opens(good):
    seg, path = good
    assert Segment.open(path, verify=True).num_rows == 100


@pytest.mark.parametrize("keep,check", [
    (lambda size: size - 1, "footer check failed"),
    (lambda size: size // 2, "footer check failed"),
    (lambda size: 20, "size check failed"),
    (lambda size: 0, "size check failed"),
])
def test_truncated_file(good, keep, check):
    _, path = good
    data = open(path, "rb").read()
    msg = corrupt_open(_write(path, data[:keep(len(data))]))
    assert msg.startswith("segment bad.sseg: ") and check in msg


def test_wrong_magic(good):
    _, path = good
    data = open(path, "rb").read()
    msg = corrupt_open(_write(path, b"PAR1XXXX" + data[8:]))
    assert msg == "segment bad.sseg: magic check failed: the file does not start with the segment magic"


def test_not_a_segment_at_all(good, tmp_path):
    path = tmp_path / "text.sseg"
    path.write_bytes(b"hello world, this is not a segment file at all" * 3)
    assert "magic check failed" in corrupt_open(str(path))
    assert "cannot open" in corrupt_open(str(tmp_path / "missing.sseg"))


def test_tail_magic_and_container_version(good):
    _, path = good
    data = open(path, "rb").read()
    assert "footer check failed: tail magic missing" in corrupt_open(_write(path, data[:-8] + b"XXXXXXXX"))
    m_off, m_len, m_crc, _, tail = _split(data)
    newer = data[:-FOOTER.size] + FOOTER.pack(m_off, m_len, m_crc, 2, tail)
    msg = corrupt_open(_write(path, newer))
    assert "container version check failed: version 2, this reader knows 1" in msg


def test_footer_pointing_elsewhere(good):
    _, path = good
    data = open(path, "rb").read()
    m_off, m_len, m_crc, version, tail = _split(data)
    moved = data[:-FOOTER.size] + FOOTER.pack(m_off - 1, m_len, m_crc, version, tail)
    assert "footer check failed: manifest at" in corrupt_open(_write(path, moved))


def test_flipped_byte_in_manifest(good):
    _, path = good
    data = open(path, "rb").read()
    m_off, m_len, *_ = _split(data)
    msg = corrupt_open(_write(path, flip(data, m_off + m_len // 2)))
    assert msg == "segment bad.sseg: manifest checksum check failed"


def test_flipped_byte_in_a_part_fails_only_when_that_part_is_read(good):
    seg, path = good
    entry = seg.manifest.files["s/codes"]
    data = open(path, "rb").read()
    bad = Segment.open(_write(path, flip(data, entry.offset + entry.length // 2)))  # opening is cheap: no checks
    sid = str(seg.id)
    # Other columns still read, and correctly.
    assert bad.column("n").values().to_pylist() == list(range(100))
    assert bad.column("s").dictionary.to_pylist() == [f"v{i}" for i in range(7)]
    with pytest.raises(SegmentCorruptError) as err:
        bad.column("s").codes()
    assert str(err.value) == f"segment {sid}: checksum check failed for part 's/codes'"
    # A query touching the column fails instead of returning rows; one that does not, works.
    with pytest.raises(SegmentCorruptError, match=r"checksum check failed for part 's/codes'"):
        execute({"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["s"]}, [bad])
    with pytest.raises(SegmentCorruptError, match="checksum"):
        execute({"queryType": "groupBy", "dataSource": "ds", "intervals": [IV], "dimensions": ["s"],
                 "aggregations": [{"type": "count", "name": "c"}]}, [bad])
    ok = execute({"queryType": "timeseries", "dataSource": "ds", "intervals": [IV],
                  "aggregations": [{"type": "longSum", "name": "x", "fieldName": "n"}]}, [bad])
    assert ok.table.column("x").to_pylist() == [4950]


@pytest.mark.parametrize("part", ["__time/values", "s/dictionary", "s/bitmaps", "n/values"])
def test_every_part_is_checksummed(good, part):
    seg, path = good
    entry = seg.manifest.files[part]
    data = open(path, "rb").read()
    bad_path = _write(path, flip(data, entry.offset + entry.length - 1))
    with pytest.raises(SegmentCorruptError) as err:
        Segment.open(bad_path, verify=True)
    assert str(err.value) == f"segment {seg.id}: checksum check failed for part '{part}'"
    with pytest.raises(SegmentCorruptError, match=f"'{part}'"):
        Segment.open(bad_path).verify()


def test_filter_on_corrupt_bitmaps_never_returns_rows(good):
    seg, path = good
    entry = seg.manifest.files["s/bitmaps"]
    data = open(path, "rb").read()
    bad = Segment.open(_write(path, flip(data, entry.offset + entry.length - 3)))
    with pytest.raises(SegmentCorruptError, match=r"checksum check failed for part 's/bitmaps'"):
        execute({"queryType": "scan", "dataSource": "ds", "intervals": [IV], "columns": ["n"],
                 "filter": {"type": "equals", "column": "s", "matchValue": "v3"}}, [bad])


@pytest.mark.parametrize("edit,check", [
    (lambda m: m.update(formatVersion=2), "format version check failed: version 2, this reader knows 1..1"),
    (lambda m: m.update(formatVersion=0), "format version check failed: version 0"),
    (lambda m: m.update(requiredFeatures=["zstd-parts"]),
     "feature check failed: needs ['zstd-parts'], which this version cannot read"),
    (lambda m: m.update(format="parquet"), "manifest check failed: not a strata-segment manifest"),
    (lambda m: m.pop("numRows"), "manifest check failed"),
    (lambda m: m["columns"][0].update(type="WIDGET"), "manifest check failed: unknown type 'WIDGET'"),
])
def test_manifest_checks_name_the_file(good, edit, check):
    _, path = good
    msg = corrupt_open(rewrite_manifest(path, edit))
    assert msg.startswith("segment bad.sseg: ") and check in msg, msg


def _column(m, name):
    return next(c for c in m["columns"] if c["name"] == name)


@pytest.mark.parametrize("edit,check", [
    (lambda m: _column(m, "s").update(encoding="rle"),
     "encoding check failed: column 's' uses encoding 'rle', which this version cannot read"),
    (lambda m: m["files"]["n/values"].__setitem__(0, 10**9), "bounds check failed for part 'n/values'"),
    (lambda m: m["files"]["n/values"].__setitem__(1, 10**9), "bounds check failed for part 'n/values'"),
    (lambda m: m["files"].pop("s/codes"), "part check failed: column 's' lacks ['s/codes']"),
])
def test_manifest_content_checks_name_the_segment_id(good, edit, check):
    seg, path = good
    msg = corrupt_open(rewrite_manifest(path, edit))
    assert str(seg.id) in msg and check in msg, msg


def test_undecodable_part_with_matching_checksum(good):
    seg, path = good
    data = open(path, "rb").read()
    entry = seg.manifest.files["n/values"]
    garbage = bytes(range(256)) * (entry.length // 256 + 1)
    damaged = data[:entry.offset] + garbage[:entry.length] + data[entry.offset + entry.length:]
    fixed_crc = zlib.crc32(garbage[:entry.length]) & 0xFFFFFFFF
    bad = rewrite_manifest(_write(path, damaged), lambda m: m["files"]["n/values"].__setitem__(2, fixed_crc))
    with pytest.raises(SegmentCorruptError, match=rf"segment {seg.id}: decode check failed for part 'n/values'"):
        Segment.open(bad).column("n").values()
