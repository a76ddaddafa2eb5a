"""Deep nesting, SQL and native expressions: what failed with a RecursionError at about 45 nested
calls, 330 '+' terms or 490 AND terms works to a generous depth, answers as DuckDB does, and past
the limit is a user error (ValidationError) that says so, never an internal error."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import ValidationError
from common.expr import evaluate, parse
from common.expr.nesting import MAX_NESTING
from common.query import execute
from common.query.engine import union_schema
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from common.sql import execute_sql
from tests.conftest import duck_connect
from tests.unit.sql.fake_catalog import FakeCatalog


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    n = 50
    table = pa.table({
        "__time": pa.array([1442016000000 + i * 60_000 for i in range(n)], pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")),
        "x": pa.array([None if i % 7 == 3 else i - 20 for i in range(n)], pa.int64()),
        "s": pa.array([f"v{i % 5}" for i in range(n)])})
    segments = [Segment.open(p) for p, _ in build_segments(table, "t", str(tmp_path_factory.mktemp("deep")),
                                                           segment_granularity="day", version="v1")]
    duck = duck_connect()
    duck.execute("SET max_expression_depth TO 100000")
    duck.register("t", table)
    yield segments, FakeCatalog({"t": union_schema(segments)}, {}), duck
    duck.close()
    for s in segments:
        s.close()


def _run(env, sql):
    segments, catalog, _ = env
    return execute_sql(sql, catalog, lambda q: execute(q, segments).table, (), {})


def _check(env, sql, duck_sql=None):
    got = [tuple(r.values()) for r in _run(env, sql).to_pylist()]
    want = env[2].execute(duck_sql or sql).fetchall()
    assert sorted(got, key=repr) == sorted(want, key=repr)


def _nested_calls(depth: int) -> str:
    e = "x"
    for _ in range(depth):
        e = f"ABS({e})"
    return e


# ---- regressions at the depths that used to fail, and well past them ------------------------------
@pytest.mark.parametrize("depth", [45, 150, MAX_NESTING - 2])
def test_nested_calls(env, depth):
    _check(env, f"SELECT {_nested_calls(depth)} AS v FROM t")


# DuckDB itself takes minutes on chains of thousands of terms, so it gets the same question in a
# flat form (x * n, IN lists) for the long ones.
@pytest.mark.parametrize("terms", [330, 3000])
def test_long_plus_chains(env, terms):
    _check(env, "SELECT " + " + ".join(["x"] * terms) + " AS v FROM t", f"SELECT x * {terms} AS v FROM t")


@pytest.mark.parametrize("terms", [490, 5000])
def test_long_and_or_chains(env, terms):
    listed = ", ".join(str(i + 100) for i in range(terms))
    _check(env, "SELECT x FROM t WHERE " + " AND ".join(f"x <> {i + 100}" for i in range(terms)),
           f"SELECT x FROM t WHERE x NOT IN ({listed})")
    listed = ", ".join(str(i - 10) for i in range(terms))
    _check(env, "SELECT x FROM t WHERE " + " OR ".join(f"x = {i - 10}" for i in range(terms)),
           f"SELECT x FROM t WHERE x IN ({listed})")
    listed = ", ".join(str(i) for i in range(terms))
    _check(env, "SELECT x FROM t WHERE NOT (" + " OR ".join(f"x + 1 = {i}" for i in range(terms)) + ")",
           f"SELECT x FROM t WHERE NOT (x + 1 IN ({listed}))")


def test_nested_parentheses_and_case(env):
    _check(env, "SELECT " + "(" * 150 + "x + 1" + ")" * 150 + " AS v FROM t")
    case = "x"
    for i in range(60):
        case = f"CASE WHEN x > {i - 30} THEN {case} ELSE {i} END"
    _check(env, f"SELECT {case} AS v FROM t")


# ---- past the limit: a user error that names the limit ---------------------------------------------
@pytest.mark.parametrize("sql", [
    f"SELECT {_nested_calls(MAX_NESTING + 5)} FROM t",
    "SELECT " + "(" * 5000 + "x" + ")" * 5000 + " FROM t",
    "SELECT " + " + ".join(["x"] * 60_000) + " FROM t",
])
def test_past_the_limit_is_a_user_error(env, sql):
    with pytest.raises(ValidationError, match="nested .*the limit is"):
        _run(env, sql)


def test_native_expression_limits():
    deep = "abs(" * (MAX_NESTING + 1) + "x" + ")" * (MAX_NESTING + 1)
    with pytest.raises(ValidationError, match="nested"):
        parse(deep)
    chain = parse(" + ".join(["x"] * 5000))
    out = evaluate(chain, {"x": pa.array([1, 2, None], pa.int64())}, 3)
    assert out.to_pylist() == [5000, 10000, None]


def test_deeply_nested_native_filter_is_a_user_error_or_works(env):
    segments = env[0]
    flt = {"type": "selector", "dimension": "s", "value": "v1"}
    for _ in range(400):
        flt = {"type": "not", "field": {"type": "not", "field": flt}}
    q = {"queryType": "scan", "dataSource": "t", "intervals": ["2015-09-01/2015-10-01"], "columns": ["x"], "filter": flt}
    assert execute(q, segments).table.num_rows == 10


# ---- generator: random nesting of calls, arithmetic and logic, compared with DuckDB ------------------
@st.composite
def numeric(draw, depth: int) -> str:
    if depth == 0:
        return draw(st.sampled_from(["x", "1", "2", "(x - 3)"]))
    inner = draw(numeric(depth - 1))
    return draw(st.sampled_from([f"ABS({inner})", f"({inner} + 1)", f"({inner} * 1)", f"COALESCE({inner}, 0)",
                                 f"(CASE WHEN x > 0 THEN {inner} ELSE 0 END)"]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(depth=st.integers(1, 60), chain=st.integers(1, 120), data=st.data())
def test_generated_nesting_matches_duckdb(env, depth, chain, data):
    expr = data.draw(numeric(depth))
    terms = " + ".join([expr] + ["x"] * (chain - 1))
    _check(env, f"SELECT {terms} AS v FROM t WHERE " + " OR ".join(f"x <> {i + 100}" for i in range(chain)))
