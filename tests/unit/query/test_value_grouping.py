"""Grouping by the values of integer and timestamp keys (``grouping.group_values``): the groups
against a plain Python grouping of the same rows, on both of its paths (keys packed into one
int64, keys hashed) and on a hash collision (it must give up, never merge two keys); then the
engine's groupBy and topN property tests against DuckDB again with the row floor lifted, so
their small tables take this path in every segment run and merge; then a million-group-sized
groupBy through several segments and a merge against DuckDB, as ClickBench's Q33 asks it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from common.query import execute, grouping
from common.query.grouping import group_values
from tests.unit.query import test_property_grouping as grouping_properties
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.day_segments import DaySegments


def _python_groups(arrays: list[pa.Array]) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(a.to_pylist() for a in arrays))):
        out.setdefault(key, []).append(i)
    return out


def _check(arrays: list[pa.Array]) -> None:
    n = len(arrays[0])
    groups = group_values(arrays, n)
    assert groups is not None
    want = _python_groups(arrays)
    assert groups.count == len(want)
    assert [k.type for k in groups.keys] == [a.type for a in arrays]
    keys = list(zip(*(k.to_pylist() for k in groups.keys)))
    assert len(set(keys)) == groups.count  # every group a key of its own
    for g, key in enumerate(keys):
        assert np.flatnonzero(groups.gid == g).tolist() == want[key]


def _keys(rng, n: int, spread: int, null_rate: float, arrow_type=pa.int64()) -> pa.Array:
    values = rng.integers(-spread, spread, n)
    nulls = rng.random(n) < null_rate
    return pa.array(values, pa.int64(), mask=nulls).cast(arrow_type)


@pytest.mark.parametrize("null_rate", [0.0, 0.1])
def test_packed_keys_group_as_python_does(null_rate):
    rng = np.random.default_rng(1)
    n = 6000
    _check([_keys(rng, n, 50, null_rate), _keys(rng, n, 7, null_rate, pa.int32())])
    stamps = _keys(rng, n, 3_000_000, null_rate).cast(pa.timestamp("ms", tz="UTC"))
    _check([stamps, _keys(rng, n, 3, 0.0, pa.int16())])


@pytest.mark.parametrize("null_rate", [0.0, 0.1])
def test_hashed_keys_group_as_python_does(null_rate):
    rng = np.random.default_rng(2)
    n = 6000
    # Ranges that do not fit one int64 together: hashed. Few distinct values, so groups repeat.
    wide = pa.array(rng.choice(np.array([-2**63, 2**63 - 1, 0, 5, -7], np.int64), n), pa.int64())
    _check([wide, _keys(rng, n, 2**40, null_rate)])
    _check([_keys(rng, n, 2**62, null_rate), wide, _keys(rng, n, 3, null_rate, pa.int8())])


def test_one_key_orders_its_groups_and_keeps_extremes():
    values = pa.array([2**63 - 1, -2**63, 0, -2**63, 7] * 1000, pa.int64())
    groups = group_values([values], len(values))
    assert groups.keys[0].to_pylist() == [-2**63, 0, 7, 2**63 - 1]
    assert np.bincount(groups.gid).tolist() == [2000, 1000, 1000, 1000]


def test_a_hash_collision_gives_up(monkeypatch):
    rng = np.random.default_rng(3)
    arrays = [_keys(rng, 5000, 2**62, 0.0), _keys(rng, 5000, 2**62, 0.0)]
    monkeypatch.setattr(grouping, "_hashed", lambda values, valids: np.zeros(len(values[0]), np.int64))
    assert group_values(arrays, 5000) is None


def test_other_types_and_few_rows_are_left_to_codes(monkeypatch):
    monkeypatch.setattr(grouping, "_VALUE_GROUPING_ROWS", 4096)  # the module lifts it, below
    strings = pa.array(["a", "b"] * 3000)
    assert group_values([strings], 6000) is None
    assert group_values([pa.array([1.5, 2.5] * 3000)], 6000) is None
    assert group_values([pa.array([1, 2] * 10, pa.int64())], 20) is None


# The engine's property tests with every grouping of integer keys on this path.
@pytest.fixture(scope="module", autouse=True)
def _every_size(request):
    floor = grouping._VALUE_GROUPING_ROWS
    grouping._VALUE_GROUPING_ROWS = 1
    yield
    grouping._VALUE_GROUPING_ROWS = floor


con = grouping_properties.con
test_groupby_matches_duckdb = grouping_properties.test_groupby_matches_duckdb
test_topn_matches_duckdb = grouping_properties.test_topn_matches_duckdb
test_timeseries_matches_duckdb = grouping_properties.test_timeseries_matches_duckdb


def test_two_wide_keys_over_day_segments_match_duckdb(tmp_path):
    """Unique 64-bit ids with a repeated address (hashed keys), nulls in both, over several day
    segments, ordered by count and cut at ten: each segment's groups, their merge and the limit."""
    rng = np.random.default_rng(4)
    n = 40_000
    watch = rng.integers(-2**63, 2**63 - 1, n)
    watch[rng.integers(0, n, 3000)] = watch[:3000]  # some ids repeat, across days too
    ip = rng.integers(-2**31, 2**31, n) % 500
    table = pa.table({
        "__time": pa.array(1_441_065_600_000 + rng.integers(0, 5 * 86_400_000, n), pa.timestamp("ms", tz="UTC")),
        "w": pa.array(watch, mask=rng.random(n) < 0.01),
        "ip": pa.array(ip, mask=rng.random(n) < 0.02),
        "r": pa.array(rng.integers(0, 3000, n)),
    })
    days = DaySegments(table, tmp_path, 5)
    try:
        for sql in ("SELECT w, ip, COUNT(*) AS c, SUM(r) AS s FROM t GROUP BY w, ip ORDER BY c DESC, w, ip LIMIT 10",
                    "SELECT ip, w, COUNT(*) AS c FROM t GROUP BY ip, w ORDER BY ip NULLS FIRST, w NULLS FIRST "
                    "LIMIT 20 OFFSET 3",
                    "SELECT COUNT(*) AS groups, SUM(c) AS rows_ FROM (SELECT w, ip, COUNT(*) AS c FROM t GROUP BY w, ip)"):
            assert_rows_equal(engine_rows(days.sql(sql)), duck_rows(days.duck, sql))
        # The native form too: every group, not only the first ten.
        got = execute({"queryType": "groupBy", "dataSource": "t", "intervals": ["2015-09-01/2015-10-01"],
                       "granularity": "all", "dimensions": ["w", "ip"],
                       "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s",
                                                                          "fieldName": "r"}]}, days.segments).table
        want = duck_rows(days.duck, "SELECT w, ip, COUNT(*), SUM(r) FROM t GROUP BY w, ip")
        assert sorted(engine_rows(got), key=repr) == sorted(want, key=repr)
    finally:
        days.close()
