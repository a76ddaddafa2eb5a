"""Result ordering (``ordering.sort_indices``) against a plain Python sort: per-key direction and
null placement, stable on ties, over integers, strings, timestamps and booleans with NULLs, whole
or in chunks (the keys Arrow sorts as they are take a shorter path; the answer must not change)."""

from __future__ import annotations

import functools

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from common.query.ordering import SortKey, sort_indices

KINDS = {
    "i": (st.integers(-5, 5), pa.int64()),
    "s": (st.sampled_from(["", "a", "b", "ab", "é", "Z"]), pa.string()),
    "t": (st.integers(0, 4).map(lambda d: d * 86_400_000), pa.timestamp("ms", tz="UTC")),
    "b": (st.booleans(), pa.bool_()),
}


@st.composite
def tables(draw):
    n = draw(st.integers(0, 25))
    columns = {}
    for name, (values, _) in KINDS.items():
        columns[name] = draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
    keys = [SortKey(c, draw(st.booleans()), draw(st.sampled_from([None, True, False])))
            for c in draw(st.lists(st.sampled_from(list(KINDS)), min_size=1, max_size=3, unique=True))]
    return columns, keys, draw(st.integers(1, 3))


def _expected(columns: dict, keys: list[SortKey], n: int) -> list[int]:
    def compare(a: int, b: int) -> int:
        for k in keys:
            x, y = columns[k.column][a], columns[k.column][b]
            if x == y:
                continue
            first = (not k.descending) if k.nulls_first is None else k.nulls_first
            if x is None or y is None:
                return (-1 if x is None else 1) * (1 if first else -1)
            return (-1 if x < y else 1) * (-1 if k.descending else 1)
        return 0

    return sorted(range(n), key=functools.cmp_to_key(compare))  # sorted() is stable


@settings(max_examples=300, deadline=None)
@given(case=tables())
def test_sort_indices_is_a_stable_sort_with_the_keys_null_placement(case):
    columns, keys, chunks = case
    n = len(columns["i"])
    arrays = {name: pa.array(values, KINDS[name][1]) for name, values in columns.items()}
    table = pa.table(arrays)
    if chunks > 1 and n > chunks:
        step = n // chunks
        table = pa.concat_tables([table.slice(0, step), table.slice(step)])
    assert sort_indices(table, keys).to_pylist() == _expected(columns, keys, n)
