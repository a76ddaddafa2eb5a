"""Big JSON/TSV files are parsed in byte ranges by several tasks; every row keeps its real line
number, so the ranges together give exactly what the whole file gives."""

from __future__ import annotations

import random

import pyarrow as pa

from common.ingest.external_source import ExternalSource
from common.ingest.row_parser import parse_file
from services.ingestion.text_splits import open_range, splittable, text_ranges


def _parse(path, fmt, sig, ranges=None):
    source = ExternalSource.of({"type": "inline", "data": "x"}, fmt, sig)
    batches = []
    for r in ranges or [None]:
        stream = open(path, "rb") if r is None else open_range(str(path), r.start, r.end)
        with stream:
            batches += list(parse_file(str(path), stream, source.input_format, source.signature, 64,
                                       first_line=1 if r is None else r.first_line))
    return pa.Table.from_batches(batches).to_pylist()


def _json_lines(rng: random.Random, n: int) -> bytes:
    out = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.05:
            line = b"not json"
        elif kind < 0.08:
            line = b""
        elif kind < 0.1:
            line = b'{"a": "\xff"}'
        else:
            line = ('{"a": "%s", "n": %d}' % (rng.choice(["x", "é", "日本", "a b"]), i)).encode()
        out.append(line + rng.choice([b"\n", b"\n", b"\r\n", b"\r"]))
    return b"".join(out)


def test_json_ranges_give_the_whole_file(tmp_path):
    rng = random.Random(3)
    sig = [{"name": "a", "type": "string"}, {"name": "n", "type": "long"}]
    for trial in range(5):
        path = tmp_path / f"t{trial}.json"
        path.write_bytes(_json_lines(rng, 3000))
        ranges = text_ranges(str(path), {"type": "json"}, 4, min_range_bytes=2000)
        assert len(ranges) == 8 and ranges[0].start == 0 and ranges[-1].end == path.stat().st_size
        assert all(a.end == b.start for a, b in zip(ranges, ranges[1:]))
        assert _parse(path, {"type": "json"}, sig, ranges) == _parse(path, {"type": "json"}, sig)


def test_tsv_ranges_skip_the_header_once(tmp_path):
    path = tmp_path / "t.tsv"
    lines = ["a\tn"] + [f"v{i}\t{i if i % 17 else 'bad'}" for i in range(2000)]
    path.write_text("\n".join(lines) + "\n")
    fmt = {"type": "tsv", "skipHeaderRows": 1, "columns": ["a", "n"]}
    sig = [{"name": "a", "type": "string"}, {"name": "n", "type": "long"}]
    ranges = text_ranges(str(path), fmt, 2, min_range_bytes=1000)
    assert len(ranges) == 4
    whole = _parse(path, fmt, sig)
    assert _parse(path, fmt, sig, ranges) == whole and len(whole) == 2000 and whole[0]["__strata_line"] == 2


def test_what_is_not_cut(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a\n" * 5000)
    assert text_ranges(str(path), {"type": "csv"}, 4, min_range_bytes=100) == text_ranges(str(path), {"type": "json"}, 4)
    assert not splittable("x.json.gz", {"type": "json"})
    assert not splittable("x.tsv", {"type": "tsv", "findColumnsFromHeader": True})
    assert len(text_ranges(str(path), {"type": "tsv", "skipHeaderRows": 3000}, 4, min_range_bytes=100)) == 1


def test_line_ends_across_blocks_with_and_without_carriage_returns(tmp_path, monkeypatch):
    # Blocks without a b"\r" skip its counts; a b"\r" ending one block and a b"\n" starting the
    # next (whose only line ends are b"\n") is still one line end.
    from services.ingestion import text_splits

    rng = random.Random(11)
    parts = []
    for _ in range(400):
        parts.append(b"x" * rng.randrange(0, 7) + rng.choice([b"\n", b"\n", b"\n", b"\r\n", b"\r"]))
    data = b"".join(parts) + b"\r\n\n\n"
    path = tmp_path / "lines.json"
    path.write_bytes(data)
    expected = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    for block in (1, 2, 3, 5, 8, 64, 1 << 20):
        monkeypatch.setattr(text_splits, "_SCAN_BYTES", block)
        with open(path, "rb") as f:
            for cut in (0, 1, len(data) // 3, len(data) - 1):
                first, after_cr = text_splits._line_ends(f, 0, cut, False)
                rest, _ = text_splits._line_ends(f, cut, len(data), after_cr)
                assert first + rest == expected, (block, cut)
