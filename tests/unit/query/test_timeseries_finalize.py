"""Finalizing a timeseries partial: every bucket of the query's intervals within the segments'
coverage, zero-filled where no rows fell, in time order; whether the partial came in order or
not, whole or in chunks, and for the same query object run again over another coverage."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from common.query import engine
from common.query.model import query_from_json
from common.query.partial import Partial, RunStats
from common.types.column_type import ColumnType
from common.types.interval import format_instant

H = 3_600_000
SCHEMA = {"x": ColumnType.parse("LONG")}


def _query(spans: list[tuple[int, int]], descending: bool):
    return query_from_json({
        "queryType": "timeseries", "dataSource": "w", "granularity": "hour", "descending": descending,
        "intervals": [f"{format_instant(a * H)}/{format_instant(b * H)}" for a, b in spans],
        "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "x"}]})


def _expected(spans, coverage, rows: dict[int, tuple[int, int]], descending: bool) -> list[dict]:
    lo, hi = coverage
    hours = sorted({h for a, b in spans for h in range(max(a, lo), min(b, hi))} | set(rows))
    return [{"__time": h * H, "c": rows.get(h, (0, None))[0], "s": rows.get(h, (0, None))[1]}
            for h in (reversed(hours) if descending else hours)]


@settings(max_examples=150, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 30), st.integers(1, 20)).map(lambda t: (t[0], t[0] + t[1])),
                      min_size=1, max_size=3),
       picks=st.lists(st.integers(0, 60), max_size=30), order=st.sampled_from(["sorted", "reversed", "shuffled"]),
       chunks=st.integers(1, 3), descending=st.booleans(), seed=st.randoms(use_true_random=False))
def test_buckets_are_all_there_zero_filled_and_in_order(spans, picks, order, chunks, descending, seed):
    query = _query(spans, descending)
    lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
    hours = sorted({p % (hi - lo) + lo for p in picks})
    if order == "reversed":
        hours.reverse()
    elif order == "shuffled":
        seed.shuffle(hours)
    rows = {h: (h % 7 + 1, h * 3) for h in hours}
    table = pa.table({"__time": pa.array([h * H for h in hours], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                      "c": pa.array([rows[h][0] for h in hours], pa.int64()),
                      "s": pa.array([rows[h][1] for h in hours], pa.int64())})
    if chunks > 1 and table.num_rows > chunks:
        step = table.num_rows // chunks
        table = pa.concat_tables([table.slice(i, step) for i in range(0, step * (chunks - 1), step)]
                                 + [table.slice(step * (chunks - 1))])
    for coverage in [(lo, hi), (lo + 1, hi), (lo, hi)]:  # the same query object again, over other coverage
        if coverage[0] >= coverage[1]:
            continue
        got = engine.finalize(query, Partial(table, RunStats(), (coverage[0] * H, coverage[1] * H)), SCHEMA)
        want = _expected(spans, coverage, rows, descending)
        assert [{**r, "__time": r["__time"].timestamp() * 1000} for r in got.to_pylist()] == want
