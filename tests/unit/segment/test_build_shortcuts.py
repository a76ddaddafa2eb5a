"""The builder's cheaper paths give what the plain ones gave: distinct counts of sorted integer
columns, one shuffle-width trial per family of block parts, parts compressed in threads."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from common.segment import part_codec
from common.segment.container import _compressed, _family, write_container
from common.segment.part_codec import PartCompression, decompress
from common.segment.value_column import _distinct_count

_INTS = st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-3, 3)), max_size=300)


@settings(max_examples=200, deadline=None)
@given(_INTS, st.booleans(), st.integers(0, 5), st.sampled_from(["int64", "int32", "uint16", "ts"]))
def test_distinct_count_matches_arrow(values, sort, offset, kind):
    if kind == "int32":
        values = [v % (2**31) - 2**30 for v in values]
    elif kind == "uint16":
        values = [v % (2**16) for v in values]
    if sort:
        values = sorted(values)
    arrow_type = {"int64": pa.int64(), "int32": pa.int32(), "uint16": pa.uint16(), "ts": pa.timestamp("ms")}[kind]
    arr = pa.array([0] * offset + values, arrow_type).slice(offset)  # a non-zero offset as well
    assert _distinct_count(arr) == pc.count_distinct(arr).as_py()


def test_distinct_count_with_nulls_and_floats_takes_arrows_path():
    with_nulls = pa.array([1, None, 1, 2, None], pa.int64())
    assert _distinct_count(with_nulls) == 2
    floats = pa.array([0.0, -0.0, float("nan"), float("nan"), 1.0])
    assert _distinct_count(floats) == pc.count_distinct(floats).as_py()


def test_family_strips_the_block_number_only():
    assert _family("added/block12") == _family("added/block0") == "added/block"
    assert _family("page/codes") == "page/codes"
    assert _family("projections/p1/page/codes3") == "projections/p1/page/codes"


def _parts() -> dict[str, pa.Buffer]:
    rng = np.random.default_rng(7)
    times = np.cumsum(rng.integers(0, 50, 200_000)).astype(np.int64) + 1_600_000_000_000
    parts = {f"__time/block{i}": pa.py_buffer(times[i * 50_000:(i + 1) * 50_000].tobytes()) for i in range(4)}
    parts["page/codes"] = pa.py_buffer(rng.integers(0, 70_000, 100_000).astype(np.int32).tobytes())
    parts["noise/values"] = pa.py_buffer(rng.integers(0, 255, 50_000).astype(np.uint8).tobytes())
    parts["tiny/values"] = pa.py_buffer(b"x" * 100)
    return parts


def test_block_family_tries_widths_once_and_every_part_decodes(monkeypatch):
    tried = []
    real = PartCompression._best_width

    def counting(codec, view):
        tried.append(view.nbytes)
        return real(codec, view)

    monkeypatch.setattr(PartCompression, "_best_width", staticmethod(counting))
    parts = _parts()
    out = _compressed(parts, PartCompression(), None)
    assert len(tried) == 3  # __time's first block, page/codes, noise/values (tiny is under min_bytes)
    codecs = {name: codec for name, (_, codec) in out.items()}
    assert {codecs[f"__time/block{i}"] for i in range(4)} == {"shuffle8/zstd"}
    assert codecs["noise/values"] is None and codecs["tiny/values"] is None
    for name, (stored, codec) in out.items():
        raw = parts[name].to_pybytes()
        got = decompress(codec, pa.py_buffer(stored), len(raw)).to_pybytes() if codec else bytes(memoryview(stored))
        assert got == raw, name


def test_compressing_in_threads_writes_the_same_file(tmp_path):
    parts = _parts()

    def manifest(entries: dict) -> bytes:
        return repr(sorted(entries.items())).encode()

    write_container(str(tmp_path / "serial"), parts, manifest, PartCompression())
    with ThreadPoolExecutor(2) as pool:
        write_container(str(tmp_path / "threads"), parts, manifest, PartCompression(), pool)
    assert (tmp_path / "serial").read_bytes() == (tmp_path / "threads").read_bytes()
    assert os.path.getsize(tmp_path / "serial") < sum(p.size for p in parts.values())


def test_a_given_width_is_used_and_a_too_small_part_still_tries():
    data = pa.py_buffer(np.arange(100_000, dtype=np.int64).tobytes())
    stored, codec, width = PartCompression().encode_with_width(data, 4)
    assert codec == "shuffle4/zstd" and width == 4
    assert part_codec.decompress(codec, pa.py_buffer(stored), data.size).to_pybytes() == data.to_pybytes()
    assert PartCompression(try_shuffle=False).encode_with_width(data, 8)[1] == "zstd"
