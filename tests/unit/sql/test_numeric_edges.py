"""Numbers at the edges, SQL against DuckDB: fractions against integer columns (IN must not
truncate 2.5 to 2), -0.0 next to 0.0 (one value: one group, one distinct value, equal in IN as
in =), NaN (equal to itself, above every number) and the infinities, NULL inside IN lists.

The fixed regressions come first as named cases; a hypothesis generator then draws IN lists,
comparisons and groupings over the same class of values."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.day_segments import DaySegments

NAN, INF = float("nan"), float("inf")
N = [2, 3, None, -2, 0, 2, 9_007_199_254_740_993, -1]
D = [2.5, 0.0, -0.0, None, 1.0, NAN, INF, -INF, -0.0, 2.0, 0.0, NAN]


def _table() -> pa.Table:
    rows = max(len(N), len(D))
    hour = 3_600_000
    # Two days, so two segments and a merge of their partials.
    return pa.table({
        "__time": pa.array([1442016000000 + i * 5 * hour for i in range(rows)], pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")),
        "rid": pa.array(range(rows), pa.int64()),
        "n": pa.array((N * 2)[:rows], pa.int64()),
        "d": pa.array((D * 2)[:rows], pa.float64()),
        "s": pa.array([None if v is None else repr(v) for v in (D * 2)[:rows]], pa.string()),
    })


class Env(DaySegments):
    def __init__(self, tmp) -> None:
        super().__init__(_table(), tmp, 2)

    def check(self, sql: str, duck_sql: str | None = None, ordered: bool = False) -> None:
        assert_rows_equal(engine_rows(self.sql(sql)), duck_rows(self.duck, duck_sql or sql), ordered=ordered)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env(tmp_path_factory.mktemp("numeric_edges"))
    yield e
    e.close()


REGRESSIONS = [
    # IN on BIGINT with fractions truncated them: n IN (2.5) matched n = 2, NOT IN the other way.
    "SELECT rid FROM t WHERE n IN (2.5)",
    "SELECT rid FROM t WHERE n IN (2.5, 3)",
    "SELECT rid FROM t WHERE n NOT IN (2.5)",
    "SELECT rid FROM t WHERE n NOT IN (2.5, -1)",
    "SELECT rid FROM t WHERE n IN (2.0, -0.5)",
    "SELECT rid FROM t WHERE n IN (1e30)",
    "SELECT rid FROM t WHERE n IN (9007199254740993)",  # above 2**53: must not go through a double
    "SELECT rid, n IN (2.5) AS x FROM t",
    # -0.0 and 0.0 were two groups and two distinct values; IN (-0.0) disagreed with = -0.0.
    "SELECT d, COUNT(*) FROM t WHERE d = 0 GROUP BY d",
    "SELECT COUNT(DISTINCT d) FROM t",
    "SELECT rid FROM t WHERE d IN (1.5, -0.0)",
    "SELECT rid FROM t WHERE d = -0.0",
    "SELECT rid FROM t WHERE d NOT IN (-0.0, 1.0)",
    # NaN equals NaN and orders above every number, as DuckDB has it.
    "SELECT d, COUNT(*) FROM t GROUP BY d ORDER BY d",
    "SELECT d, COUNT(*) FROM t GROUP BY d ORDER BY d DESC",
    "SELECT rid FROM t WHERE d > 100",
    "SELECT rid FROM t WHERE d = CAST('NaN' AS DOUBLE)",
    "SELECT rid FROM t WHERE d IN (CAST('NaN' AS DOUBLE), 2.5)",
    "SELECT MIN(d), MAX(d) FROM t",
    # NULL inside IN lists
    "SELECT rid FROM t WHERE n IN (2, NULL)",
    "SELECT rid FROM t WHERE n NOT IN (2, NULL)",
]


@pytest.mark.parametrize("sql", REGRESSIONS)
def test_regression_matches_duckdb(env, sql):
    env.check(sql, ordered="ORDER BY" in sql)


@pytest.mark.parametrize("values,hits", [
    ([2.5], set()), ([2.5, 3], {3}), (["2.5"], set()), ([2.0], {2}), ([1e30, float("nan")], set()),
    ([9_007_199_254_740_993.0], set()),  # the double is 2**53, which no row holds
])
def test_native_in_on_bigint_keeps_fractions(env, values, hits):
    n = env.table.column("n").to_pylist()
    got = env.native({"queryType": "scan", "columns": ["rid"], "filter": {"type": "in", "dimension": "n",
                                                                           "values": values}})
    assert sorted(got.column("rid").to_pylist()) == [i for i, v in enumerate(n) if v in hits]
    negated = env.native({"queryType": "scan", "columns": ["rid"], "filter": {
        "type": "not", "field": {"type": "in", "dimension": "n", "values": values}}})
    assert sorted(negated.column("rid").to_pylist()) == [i for i, v in enumerate(n) if v is not None and v not in hits]


def test_native_in_on_string_index_path(env):
    # The index path (a dictionary column): 2.5 looks up its canonical text, 2.0 looks up "2.0".
    got = env.native({"queryType": "scan", "columns": ["rid"],
                      "filter": {"type": "in", "dimension": "s", "values": [2.5, "-0.0"]}})
    want = [i for i, v in enumerate(env.table.column("s").to_pylist()) if v in ("2.5", "-0.0")]
    assert sorted(got.column("rid").to_pylist()) == want


# ---- generators ---------------------------------------------------------------------------------
SPECIAL = [0.0, -0.0, 0.5, -0.5, 2.5, 2.0, 1.0, -1.0, NAN, INF, -INF, 1e30]


def _lit(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        if math.isnan(v):
            return "CAST('NaN' AS DOUBLE)"  # Java's spelling, which Druid and DuckDB both read
        if math.isinf(v):
            return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)"
        if v == 0 and math.copysign(1, v) < 0:
            return "-0.0"
        return repr(v)
    return str(v)


values = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(SPECIAL))


@st.composite
def conditions(draw) -> str:
    col = draw(st.sampled_from(["n", "d"]))
    kind = draw(st.sampled_from(["in", "not in", "=", "<>", "<", ">=", "group"]))
    if kind in ("in", "not in"):
        items = draw(st.lists(values, min_size=1, max_size=5))
        return f"SELECT rid FROM t WHERE {col} {kind.upper()} ({', '.join(_lit(v) for v in items)})"
    if kind == "group":
        return f"SELECT {col}, COUNT(*), COUNT(DISTINCT {col}) FROM t GROUP BY {col}"
    v = draw(st.one_of(st.integers(-3, 3), st.sampled_from(SPECIAL)))
    return f"SELECT rid FROM t WHERE {col} {kind} {_lit(v)}"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=conditions())
def test_generated_numeric_conditions_match_duckdb(env, sql):
    env.check(sql)
