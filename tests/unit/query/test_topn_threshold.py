"""TPUT (common/query/topn_threshold.py): the three rounds, run over simulated historicals'
partials, give exactly the topN of shipping every group, and fall back when the bounds break.
Mean inputs: skewed and flat values, ties at the k-th place, nulls, zeros, -0.0, fractions,
groups on one historical only, k larger than the group count."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.query import engine, topn_threshold
from common.query.model import query_from_json
from common.query.partial import Partial


def topn(k: int, agg: dict, **context) -> object:
    return query_from_json({"queryType": "topN", "dataSource": "t", "intervals": ["2000-01-01/2030-01-01"],
                            "granularity": "all", "dimension": "url", "metric": agg["name"], "threshold": k,
                            "aggregations": [agg, {"type": "count", "name": "rows"}], "context": context})


LONG = {"type": "longSum", "name": "m", "fieldName": "v"}
DOUBLE = {"type": "doubleSum", "name": "m", "fieldName": "v"}


def exact(query, partials):
    return engine.finalize(query, engine.merge(query, partials), {})


def rounds(query, partials):
    """What the broker does with its historicals (services/broker/query_executor.py), without
    the network; (result or None for a fallback, rows shipped)."""
    shipped = 0
    first = [topn_threshold.prune(query, p, {"phase": 1, "k": query.threshold}).table for p in partials]
    shipped += sum(t.num_rows for t in first)
    r2 = topn_threshold.first_threshold(query, first)
    if r2 is None:
        return None, shipped
    second = [topn_threshold.prune(query, p, {"phase": 2, "threshold": r2.threshold}).table for p in partials]
    shipped += sum(t.num_rows for t in second)
    found = topn_threshold.candidates(query, second, r2.threshold)
    if found is None:
        return None, shipped
    wanted, missing = found
    exact_parts = []
    for p, table, keys in zip(partials, second, missing):
        parts = [topn_threshold.keep_candidates(query, table, wanted)]
        if keys:
            third = topn_threshold.prune(query, p, {"phase": 3, "keys": keys}).table
            shipped += third.num_rows
            parts.append(third)
        exact_parts.append(Partial(pa.concat_tables(parts)))
    return engine.finalize(query, engine.merge(query, exact_parts), {}), shipped


def partial(keys: list, values: list, kind: str) -> Partial:
    arrow = pa.int64() if kind == "long" else pa.float64()
    return Partial(pa.table({"url": pa.array(keys, pa.string()), "m": pa.array(values, arrow),
                             "rows": pa.array([1] * len(keys), pa.int64())}))


def test_zipf_urls_over_three_historicals_ship_a_fraction_and_match():
    rng = np.random.default_rng(7)
    n = 20_000
    parts = []
    for _ in range(3):
        counts = rng.zipf(1.3, n).clip(max=10**6)
        keep = rng.random(n) < 0.7
        keys = [f"https://example.com/{i}" for i in np.flatnonzero(keep)]
        parts.append(partial(keys, counts[keep].tolist(), "long"))
    query = topn(10, LONG)
    got, shipped = rounds(query, parts)
    assert got is not None
    assert got.equals(exact(query, parts))
    assert shipped < sum(p.table.num_rows for p in parts) / 20


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), historicals=st.integers(1, 4), k=st.integers(1, 12),
       kind=st.sampled_from(["long", "double"]))
def test_rounds_equal_shipping_everything(data, historicals, k, kind):
    universe = data.draw(st.integers(1, 40))
    value = (st.integers(0, 6) | st.integers(0, 10**12)) if kind == "long" else \
        (st.sampled_from([0.0, -0.0, 0.1, 0.2, 0.3, 1e-300, 1e300, 2.5]) | st.floats(0, 1e6, allow_nan=False))
    parts = []
    for _ in range(historicals):
        present = data.draw(st.lists(st.integers(0, universe - 1), unique=True, max_size=universe))
        values = [data.draw(value | st.none()) for _ in present]
        parts.append(partial([f"u{i:03d}" for i in present], values, kind))
    query = topn(k, LONG if kind == "long" else DOUBLE)
    want = exact(query, parts)
    got, _ = rounds(query, parts)
    if got is None:  # too few positive groups to bound: the broker ships everything
        return
    assert got.column("url").to_pylist() == want.column("url").to_pylist()
    assert np.allclose(got.column("m").to_numpy(zero_copy_only=False).astype(float),
                       want.column("m").to_numpy(zero_copy_only=False).astype(float), rtol=1e-12)
    assert got.column("rows").to_pylist() == want.column("rows").to_pylist()


def test_ties_at_the_kth_place_are_all_candidates():
    # Four groups tie for the 2nd place; the winner among them is the first by name, as in finalize.
    parts = [partial(["a", "d", "c", "b", "e"], [100, 5, 5, 5, 5], "long"),
             partial(["e", "b", "c", "d"], [5, 5, 5, 5], "long")]
    query = topn(2, LONG)
    got, _ = rounds(query, parts)
    assert got.column("url").to_pylist() == ["a", "b"] == exact(query, parts).column("url").to_pylist()


@pytest.mark.parametrize("values", [[3, -1, 2], [3.0, float("nan"), 2.0]])
def test_a_negative_or_nan_value_falls_back(values):
    kind = "double" if isinstance(values[0], float) else "long"
    parts = [partial(["a", "b", "c"], values, kind), partial(["a", "b", "c"], [1, 1, 1] if kind == "long"
                                                             else [1.0, 1.0, 1.0], kind)]
    query = topn(1, DOUBLE if kind == "double" else LONG)
    got, _ = rounds(query, parts)
    assert got is None


def test_fewer_positive_groups_than_k_falls_back():
    parts = [partial(["a", "b"], [0, 3], "long"), partial(["c"], [0], "long")]
    assert rounds(topn(3, LONG), parts)[0] is None


@pytest.mark.parametrize("q", [
    topn(10, {"type": "longMin", "name": "m", "fieldName": "v"}),
    topn(10, LONG, topNThreshold=False),
    query_from_json({"queryType": "topN", "dataSource": "t", "intervals": ["2000/2030"], "granularity": "hour",
                     "dimension": "url", "metric": "m", "threshold": 3, "aggregations": [LONG]}),
    query_from_json({"queryType": "topN", "dataSource": "t", "intervals": ["2000/2030"], "granularity": "all",
                     "dimension": "url", "metric": {"type": "inverted", "metric": "m"}, "threshold": 3,
                     "aggregations": [LONG]}),
    query_from_json({"queryType": "topN", "dataSource": "t", "intervals": ["2000/2030"], "granularity": "all",
                     "dimension": "url", "metric": {"type": "dimension"}, "threshold": 3, "aggregations": [LONG]}),
])
def test_only_descending_sums_and_counts_over_all_time_are_eligible(q):
    assert not topn_threshold.eligible(q)
    assert topn_threshold.eligible(topn(10, LONG)) and topn_threshold.eligible(topn(3, {"type": "count", "name": "m"}))


def test_the_directive_is_dropped_from_a_clients_query():
    q = topn(3, LONG, **{topn_threshold.PHASE_KEY: {"phase": 1, "k": 1}}, priority=1)
    assert topn_threshold.without_directive(q).context == {"priority": 1}


def test_an_array_dimension_falls_back():
    query = topn(1, LONG)
    tables = [pa.table({"url": pa.array([["a", "b"], ["c"]]), "m": pa.array([3, 1], pa.int64()),
                        "rows": pa.array([1, 1], pa.int64())}) for _ in range(2)]
    assert topn_threshold.first_threshold(query, tables) is None
