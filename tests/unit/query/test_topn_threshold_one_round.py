"""TPUT's one-round exit (common/query/topn_threshold.py): a historical with at most ``whole``
groups sends all of them in round 1, marked; the broker's rounds (``exact_parts``, the code the
broker runs) then never ask it again, and when every historical was whole round 1 is the
answer. Results equal shipping every group for any mix of whole and pruned historicals, the mark
survives the historical -> broker Arrow stream, and fewer round trips are made."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.query import engine, topn_threshold
from common.query.model import query_from_json
from common.query.partial import Partial
from services.rpc.arrow_stream import chunks_to_table, table_to_chunks

LONG = {"type": "longSum", "name": "m", "fieldName": "v"}
DOUBLE = {"type": "doubleSum", "name": "m", "fieldName": "v"}


def topn(k: int, agg: dict):
    return query_from_json({"queryType": "topN", "dataSource": "t", "intervals": ["2000-01-01/2030-01-01"],
                            "granularity": "all", "dimension": "url", "metric": agg["name"], "threshold": k,
                            "aggregations": [agg, {"type": "count", "name": "rows"}]})


def partial(keys: list, values: list, kind: str) -> Partial:
    arrow = pa.int64() if kind == "long" else pa.float64()
    return Partial(pa.table({"url": pa.array(keys, pa.string()), "m": pa.array(values, arrow),
                             "rows": pa.array(list(range(1, len(keys) + 1)), pa.int64())}))


def wire(table: pa.Table) -> pa.Table:
    """The table as the broker receives it from a historical."""
    return chunks_to_table(table_to_chunks(table))[0]


def run(query, parts: list[Partial], whole: int):
    """The broker's rounds over simulated historicals: (finalized result or None for a fallback,
    network rounds made, rows shipped)."""
    calls = {"rounds": 1, "rows": 0}
    firsts = []
    for p in parts:
        t = wire(topn_threshold.prune(query, p, {"phase": 1, "k": query.threshold, "whole": whole}).table)
        calls["rows"] += t.num_rows
        firsts.append(t)

    def ask(directives):
        if directives:
            calls["rounds"] += 1
        out = [wire(topn_threshold.prune(query, parts[i], d).table) for i, d in directives]
        calls["rows"] += sum(t.num_rows for t in out)
        return out

    exact = topn_threshold.exact_parts(query, firsts, ask)
    if exact is None:
        return None, calls
    merged = engine.merge(query, [Partial(t) for t in exact]) if exact else Partial(pa.table({}))
    return engine.finalize(query, merged, {}), calls


def everything(query, parts):
    return engine.finalize(query, engine.merge(query, parts), {})


def test_the_whole_mark_crosses_the_wire_and_comes_off():
    query = topn(2, LONG)
    p = partial(["a", "b", "c", "d"], [4, 3, 2, 1], "long")
    got = wire(topn_threshold.prune(query, p, {"phase": 1, "k": 2, "whole": 4}).table)
    assert topn_threshold.is_whole(got) and got.num_rows == 4
    assert not topn_threshold.is_whole(topn_threshold.unmarked(got))
    assert topn_threshold.unmarked(got).equals(p.table)
    pruned = wire(topn_threshold.prune(query, p, {"phase": 1, "k": 2, "whole": 3}).table)
    assert not topn_threshold.is_whole(pruned) and pruned.num_rows == 3  # top 2 and the lowest
    old_broker = wire(topn_threshold.prune(query, p, {"phase": 1, "k": 2}).table)
    assert not topn_threshold.is_whole(old_broker)


def test_few_groups_everywhere_take_one_round_even_with_negative_values():
    # Negative values break TPUT's bounds (it would fall back and ship everything again);
    # with every group already at the broker no bounds are needed.
    query = topn(2, LONG)
    parts = [partial(["a", "b", "c"], [5, -9, 3], "long"), partial(["b", "c", "d"], [1, 7, -2], "long")]
    got, calls = run(query, parts, whole=topn_threshold.ONE_ROUND_GROUPS)
    assert calls["rounds"] == 1
    assert got.equals(everything(query, parts))
    assert run(query, parts, whole=0)[0] is None  # without the exit: the fallback


def test_a_whole_historical_is_not_asked_again():
    rng = np.random.default_rng(3)
    big = partial([f"u{i}" for i in range(5_000)], rng.zipf(1.3, 5_000).clip(max=10**6).tolist(), "long")
    small = partial([f"u{i}" for i in range(0, 60, 3)], rng.integers(0, 10**4, 20).tolist(), "long")
    query = topn(5, LONG)
    asked = []
    firsts = [wire(topn_threshold.prune(query, p, {"phase": 1, "k": 5, "whole": 100}).table) for p in (big, small)]
    assert [topn_threshold.is_whole(t) for t in firsts] == [False, True]

    def ask(directives):
        asked.extend(i for i, _ in directives)
        return [wire(topn_threshold.prune(query, (big, small)[i], d).table) for i, d in directives]

    exact = topn_threshold.exact_parts(query, firsts, ask)
    assert asked and set(asked) == {0}
    got = engine.finalize(query, engine.merge(query, [Partial(t) for t in exact]), {})
    assert got.equals(everything(query, [big, small]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), historicals=st.integers(2, 4), k=st.integers(1, 12),
       kind=st.sampled_from(["long", "double"]), whole=st.sampled_from([0, 3, 10, 1024]))
def test_any_mix_of_whole_and_pruned_historicals_equals_shipping_everything(data, historicals, k, kind, whole):
    universe = data.draw(st.integers(1, 40))
    value = (st.integers(0, 6) | st.integers(0, 10**12)) if kind == "long" else \
        (st.sampled_from([0.0, -0.0, 0.1, 0.2, 0.3, 1e-300, 1e300, 2.5]) | st.floats(0, 1e6, allow_nan=False))
    parts = []
    for _ in range(historicals):
        present = data.draw(st.lists(st.integers(0, universe - 1), unique=True, max_size=universe))
        values = [data.draw(value | st.none()) for _ in present]
        parts.append(partial([f"u{i:03d}" for i in present], values, kind))
    query = topn(k, LONG if kind == "long" else DOUBLE)
    want = everything(query, parts)
    got, calls = run(query, parts, whole)
    if all(p.table.num_rows <= whole for p in parts):
        assert calls["rounds"] == 1 and got is not None
    if got is None:  # too few positive groups to bound: the broker ships everything
        return
    assert got.column("url").to_pylist() == want.column("url").to_pylist()
    assert np.allclose(got.column("m").to_numpy(zero_copy_only=False).astype(float),
                       want.column("m").to_numpy(zero_copy_only=False).astype(float), rtol=1e-12,
                       equal_nan=True)  # a group whose values are all null sums to null
    assert got.column("rows").to_pylist() == want.column("rows").to_pylist()


@pytest.mark.parametrize("whole", [0, 1024])
def test_many_groups_still_ship_a_fraction(whole):
    rng = np.random.default_rng(7)
    parts = []
    for _ in range(3):
        counts = rng.zipf(1.3, 20_000).clip(max=10**6)
        keep = rng.random(20_000) < 0.7
        parts.append(partial([f"https://example.com/{i}" for i in np.flatnonzero(keep)], counts[keep].tolist(), "long"))
    query = topn(10, LONG)
    got, calls = run(query, parts, whole)
    assert got.equals(everything(query, parts))
    assert calls["rows"] < sum(p.table.num_rows for p in parts) / 20
