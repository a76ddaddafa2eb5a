"""A STRING column handed over as an Arrow dictionary array (ingestion reads Parquet string
columns that way) is stored byte for byte as the same values handed over as plain strings:
unused, unsorted, repeated or null dictionary entries, null rows, and chunks with different
dictionaries change nothing."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.segment.string_column import encode_string
from common.types.interval import Interval

_TEXT = st.text(alphabet=st.sampled_from(["a", "b", "é", "Z", "0", " ", "\u0000", "😀"]), max_size=4)


def _dictionary_array(values: list, extra: list, data) -> pa.DictionaryArray:
    """``values`` as a dictionary array whose dictionary also holds ``extra`` (unused) entries,
    in a random order, possibly with a null or a repeated entry."""
    distinct = list(dict.fromkeys([v for v in values if v is not None] + extra))
    entries = data.draw(st.permutations(distinct))
    if entries and data.draw(st.booleans()):
        entries = entries + [entries[0]]  # a repeated value; rows may point at either copy
    if data.draw(st.booleans()):
        entries = entries + [None]
    position = {}
    for i, e in enumerate(entries):
        if e is not None:
            position.setdefault(e, []).append(i)
    indices = [None if v is None else data.draw(st.sampled_from(position[v])) for v in values]
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(entries, pa.string()))


def _same(a, b) -> None:
    assert a.stats == b.stats and a.code_bits == b.code_bits and a.code_ranges == b.code_ranges
    assert a.parts.keys() == b.parts.keys()
    for role in a.parts:
        assert a.parts[role].to_pybytes() == b.parts[role].to_pybytes(), role


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), _TEXT), max_size=60), st.lists(_TEXT, max_size=5), st.booleans(),
       st.booleans(), st.data())
def test_dictionary_input_stores_what_plain_input_stores(values, extra, bitmaps, pack, data):
    plain = encode_string(pa.array(values, pa.string()), bitmaps, pack, 0)
    _same(encode_string(_dictionary_array(values, extra, data), bitmaps, pack, 0), plain)
    if len(values) > 1:
        cut = data.draw(st.integers(1, len(values) - 1))
        chunked = pa.chunked_array([_dictionary_array(values[:cut], extra, data),
                                    _dictionary_array(values[cut:], [], data)])
        _same(encode_string(chunked, bitmaps, pack, 0), plain)
        sliced = _dictionary_array([None] + values, extra, data).slice(1)
        _same(encode_string(sliced, bitmaps, pack, 0), plain)


def test_code_blocks_and_wide_dictionaries_match(tmp_path):
    values = [None if i % 97 == 0 else f"page-{(i * 7919) % 40_000}" for i in range(200_000)]
    plain = encode_string(pa.array(values), False, True, 65_536)
    as_dictionary = pa.array(values).dictionary_encode()
    _same(encode_string(as_dictionary, False, True, 65_536), plain)


def test_a_segment_built_from_dictionary_columns_reads_the_same_rows(tmp_path):
    rows = 5000
    times = pa.array([1_600_000_000_000 + i for i in range(rows)], pa.timestamp("ms"))
    page = [None if i % 13 == 0 else f"p{(i * 31) % 700}" for i in range(rows)]
    flag = ["true" if i % 3 else "false" for i in range(rows)]
    plain = pa.table({"__time": times, "page": pa.array(page), "flag": pa.array(flag)})
    chunks = [pa.array(page[:2000]).dictionary_encode(), pa.array(page[2000:]).dictionary_encode()]
    coded = pa.table({"__time": times, "page": pa.chunked_array(chunks), "flag": pa.array(flag).dictionary_encode()})
    sid = SegmentId("t", Interval(1_600_000_000_000, 1_600_000_000_000 + 86_400_000), "v1", 0)
    for sort in ((), ("page",)):
        a = build_segment(plain, str(tmp_path / f"plain{len(sort)}"), sid, sort)
        b = build_segment(coded, str(tmp_path / f"coded{len(sort)}"), sid, sort)
        assert a.columns == b.columns and a.required_features == b.required_features
        # Same offsets, lengths and checksums: the files differ only in their creation time.
        assert a.files == b.files
        seg = Segment.open(str(tmp_path / f"coded{len(sort)}"), verify=True)
        assert seg.num_rows == rows
        seg.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), _TEXT), min_size=1, max_size=60), st.lists(st.integers(0, 60), max_size=4),
       st.booleans(), st.data())
def test_chunks_over_growing_dictionaries_store_what_plain_input_stores(values, cuts, pack, data):
    """Parquet's reader hands a row group's batches over with the dictionary read so far (each a
    prefix of the next): the chunks share the longest one instead of being unified. Chunks whose
    dictionaries are not prefixes of one another still unify."""
    from common.segment.string_column import _grown_dictionary

    plain = encode_string(pa.array(values, pa.string()), False, pack, 0)
    entries = list(dict.fromkeys(v for v in values if v is not None))
    entries += data.draw(st.lists(_TEXT.filter(lambda t: t not in entries), max_size=3, unique=True))
    bounds = sorted({0, len(values), *(c for c in cuts if c < len(values))})
    chunks = []
    for lo, hi in zip(bounds, bounds[1:]):
        needed = max([entries.index(v) + 1 for v in values[lo:hi] if v is not None], default=0)
        size = data.draw(st.integers(needed, len(entries)))
        indices = pa.array([None if v is None else entries.index(v) for v in values[lo:hi]], pa.int32())
        chunks.append(pa.DictionaryArray.from_arrays(indices, pa.array(entries[:size], pa.string())))
    chunked = pa.chunked_array(chunks, pa.dictionary(pa.int32(), pa.string()))
    if len(chunks) > 1:
        assert _grown_dictionary(chunked) is not None
    _same(encode_string(chunked, False, pack, 0), plain)
    if len(entries) > 1 and len(chunks) > 1:
        swapped = [entries[1], entries[0], *entries[2:]]
        last = chunks[-1]
        back = {i: swapped.index(e) for i, e in enumerate(entries)}
        other = pa.DictionaryArray.from_arrays(
            pa.array([None if i is None else back[i] for i in last.indices.to_pylist()], pa.int32()),
            pa.array(swapped, pa.string()))
        _same(encode_string(pa.chunked_array([*chunks[:-1], other], chunked.type), False, pack, 0), plain)
