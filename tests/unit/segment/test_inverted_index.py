"""The in-memory inverted index of a STRING column (inverted_index.py): the rows it gives for
ids, runs and the null pseudo-id equal one pass over the codes, and a column builds it only
when a filter finds its codes already decoded and the index fits the cache's budget; queries
read the same rows with it as without it (equality, IN, NOT, null, code blocks)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.query import execute
from common.segment import Segment, SegmentId, build_segment
from common.segment import inverted_index
from common.segment.column_reader import IdRun, rows_with_ids
from common.segment.inverted_index import InvertedIndex
from common.segment.part_cache import PROCESS_CACHE
from common.types import Interval, parse_instant


@st.composite
def codes_and_ids(draw):
    cardinality = draw(st.integers(0, 300))
    n = draw(st.integers(0, 400))
    codes = np.array(draw(st.lists(st.integers(-1, max(cardinality - 1, -1)), min_size=n, max_size=n)),
                     dtype=np.int32)
    if draw(st.booleans()):  # a run of ids, possibly holding the null pseudo-id or empty
        lo = draw(st.integers(0, cardinality + 1))
        ids = IdRun(lo, draw(st.integers(lo - 2, cardinality + 2)))
    else:  # ids as a list: repeats, the null pseudo-id, unsorted
        ids = np.array(draw(st.lists(st.integers(0, cardinality), max_size=12)), dtype=np.int64)
    return codes, cardinality, ids


@settings(max_examples=300, deadline=None)
@given(codes_and_ids(), st.sampled_from([np.int8, np.int16, np.int32]))
def test_rows_equal_a_scan_of_the_codes(case, dtype):
    codes, cardinality, ids = case
    if dtype is not np.int32 and cardinality >= np.iinfo(dtype).max:
        dtype = np.int32
    codes = codes.astype(dtype)
    index = InvertedIndex.build(codes, cardinality)
    got = index.rows(ids)
    want = rows_with_ids(codes, cardinality, ids)
    if got is not None:
        assert list(got) == list(want)
    else:  # the index declines only for a dense match or a long IN list
        assert len(want) > len(codes) * inverted_index.MAX_MATCH_FRACTION or len(ids) > inverted_index.MAX_IDS


def test_wide_codes_take_two_radix_passes():
    rng = np.random.default_rng(3)
    cardinality = 70_000
    codes = rng.integers(-1, cardinality, 200_000).astype(np.int32)
    index = InvertedIndex.build(codes, cardinality)
    for code in (0, 65_535, 65_536, cardinality - 1, cardinality, int(codes[17])):
        want = rows_with_ids(codes, cardinality, np.array([code]))
        assert list(index.rows(np.array([code]))) == list(want)
    assert index.nbytes == InvertedIndex.nbytes_for(len(codes), cardinality)


T0 = parse_instant("2020-01-01")
IV = "2020-01-01/2020-01-02"
SID = SegmentId("ds", Interval.of(IV), "v1", 0)


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(8)
    pool = np.array(["", "é", "\U0001F600", "NULL", " ", "a\x00b"] + [f"user{i:05d}" for i in range(3000)],
                    dtype=object)
    return pa.table({
        "__time": pa.array(T0 + np.arange(n), pa.int64()),
        "user": pa.array(pool[rng.integers(0, len(pool), n)].tolist(), pa.string(), mask=rng.random(n) < 0.03),
        "v": pa.array(np.arange(n), pa.int64()),
    })


def _segment(tmp_path, table: pa.Table, options: dict | None = None) -> Segment:
    path = str(tmp_path / "s.sseg")
    build_segment(table, path, SID, column_options=options)
    return Segment.open(path)


def _index_entries(seg: Segment) -> int:
    token = seg._container._token  # white-box: which entries of this file the cache holds
    return sum(1 for key in PROCESS_CACHE._entries if key[0] == token and key[2] == "inverted")


FILTERS = [
    {"type": "equals", "column": "user", "matchValue": "user00042"},
    {"type": "equals", "column": "user", "matchValue": "é"},
    {"type": "equals", "column": "user", "matchValue": "absent"},
    {"type": "in", "dimension": "user", "values": ["user00001", "", "\U0001F600", "absent", "user02999"]},
    {"type": "in", "dimension": "user", "values": ["user00001", None]},
    {"type": "null", "column": "user"},
    {"type": "not", "field": {"type": "equals", "column": "user", "matchValue": "user00042"}},
    {"type": "not", "field": {"type": "in", "dimension": "user", "values": ["user00007", "NULL"]}},
    {"type": "range", "column": "user", "lower": "user00100", "upper": "user00104", "matchValueType": "STRING"},
    {"type": "and", "fields": [{"type": "equals", "column": "user", "matchValue": "user00042"},
                               {"type": "range", "column": "v", "lower": 10, "matchValueType": "LONG"}]},
]


def _scan(filt: dict) -> dict:
    return {"queryType": "scan", "dataSource": "ds", "intervals": [IV], "filter": filt, "columns": ["v", "user"]}


@pytest.mark.parametrize("options", [None, {"user": {"codeBlockRows": 4096}}], ids=["one codes part", "code blocks"])
def test_queries_read_the_same_rows_with_the_index(tmp_path, monkeypatch, options):
    table = _table(20_000)
    seg = _segment(tmp_path, table, options)
    for filt in FILTERS:
        monkeypatch.setattr(inverted_index, "MIN_CARDINALITY", 1 << 40)  # off: the plain scan
        PROCESS_CACHE.clear()
        want = execute(_scan(filt), [seg]).table
        monkeypatch.undo()
        PROCESS_CACHE.clear()
        cold = execute(_scan(filt), [seg]).table  # decodes the codes
        warm = execute(_scan(filt), [seg]).table
        again = execute(_scan(filt), [seg]).table
        for got in (cold, warm, again):
            assert got.to_pylist() == want.to_pylist(), filt
    # A cold equality scans (and decodes) the codes without building the index; the next builds it.
    PROCESS_CACHE.clear()
    execute(_scan(FILTERS[0]), [seg])
    assert _index_entries(seg) == 0
    execute(_scan(FILTERS[0]), [seg])
    assert _index_entries(seg) == 1


def test_no_index_for_low_cardinality_or_a_small_budget(tmp_path):
    table = _table(20_000)
    table = table.append_column("flag", pa.array(["a", "b", "c"] * 6666 + ["a", "b"], pa.string()))
    seg = _segment(tmp_path, table)
    saved = PROCESS_CACHE.max_bytes
    try:
        PROCESS_CACHE.clear()
        for _ in range(3):
            execute(_scan({"type": "equals", "column": "flag", "matchValue": "b"}), [seg])
        assert _index_entries(seg) == 0  # three ids: the scan answers
        # A budget under 8x the index's size keeps the scan: the index would push out the codes.
        PROCESS_CACHE.set_max_bytes(InvertedIndex.nbytes_for(20_000, seg.column("user").cardinality) * 8 - 1)
        PROCESS_CACHE.clear()
        first = execute(_scan(FILTERS[0]), [seg]).table
        second = execute(_scan(FILTERS[0]), [seg]).table
        assert _index_entries(seg) == 0
        assert first.to_pylist() == second.to_pylist() == [
            {"v": i, "user": u} for i, u in enumerate(table.column("user").to_pylist()) if u == "user00042"]
    finally:
        PROCESS_CACHE.set_max_bytes(saved)


@given(codes_and_ids())
@settings(max_examples=200, deadline=None)
def test_rows_with_ids_are_the_rows_whose_code_is_one_of_them(case):
    codes, cardinality, ids = case
    wanted = set(range(ids.lo, ids.hi)) if isinstance(ids, IdRun) else {int(i) for i in ids}
    # a null row (code -1) has the pseudo-id ``cardinality``
    naive = [r for r, c in enumerate(codes) if (cardinality if c < 0 else int(c)) in wanted]
    assert list(rows_with_ids(codes, cardinality, ids)) == naive


@pytest.mark.parametrize("codes,run,want", [
    ([0, 1, 2, 1], IdRun(0, 3), [0, 1, 2, 3]),  # every value, no null: all rows
    ([0, -1, 2, 1], IdRun(0, 3), [0, 2, 3]),  # every value: the non-null rows
    ([0, -1, 2, 1], IdRun(0, 4), [0, 1, 2, 3]),  # every value and the null pseudo-id
    ([0, -1, 2, 1], IdRun(-2, 9), [0, 1, 2, 3]),
    ([-1, -1], IdRun(0, 3), []),
])
def test_a_run_of_every_value(codes, run, want):
    assert list(rows_with_ids(np.array(codes, dtype=np.int32), 3, run)) == want
