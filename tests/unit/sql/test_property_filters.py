"""Random WHERE clauses (comparisons, IN, LIKE, BETWEEN, IS NULL, NOT, AND, OR, expressions) over
the table full of NULLs, checked against DuckDB: SQL's three-valued logic must survive the trip
through native filters, intervals and expression filters."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows

STRINGS = ["'a'", "'b'", "''", "'dé'", "'zz'"]
NUMBERS = ["-9", "0", "1", "3", "4", "7"]
DOUBLES = ["-1.0", "0", "2.5", "3.25"]
TIMES = ["TIMESTAMP '2015-09-12 02:00:00'", "TIMESTAMP '2015-09-12 05:30:00'", "TIMESTAMP '2015-09-12 09:00:00'"]
OPS = ["=", "<>", "<", "<=", ">", ">="]


@st.composite
def atoms(draw):
    kind = draw(st.sampled_from(["s", "g", "n", "d", "t", "in", "like", "null", "between", "expr", "cols"]))
    op = draw(st.sampled_from(OPS))
    if kind in ("s", "g"):
        return f"{kind} {op} {draw(st.sampled_from(STRINGS))}"
    if kind == "n":
        return f"n {op} {draw(st.sampled_from(NUMBERS))}"
    if kind == "d":
        return f"d {op} {draw(st.sampled_from(DOUBLES + NUMBERS))}"
    if kind == "t":
        return f"__time {op} {draw(st.sampled_from(TIMES))}"
    if kind == "in":
        column, pool = draw(st.sampled_from([("s", STRINGS), ("n", NUMBERS), ("g", STRINGS)]))
        values = draw(st.lists(st.sampled_from(pool + ["NULL"]), min_size=1, max_size=3))
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {neg}IN ({', '.join(values)})"
    if kind == "like":
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"s {neg}LIKE {draw(st.sampled_from(['%', 'a%', '_', '%é', '']))!r}".replace('"', "'")
    if kind == "null":
        return f"{draw(st.sampled_from(['s', 'n', 'd', 'g']))} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "between":
        lo, hi = sorted(draw(st.lists(st.sampled_from(NUMBERS), min_size=2, max_size=2)), key=int)
        return f"n BETWEEN {lo} AND {hi}"
    if kind == "cols":
        return f"n {op} d"
    return draw(st.sampled_from([f"n + 1 {op} 4", f"UPPER(s) {op} 'A'", f"CHAR_LENGTH(s) {op} 1",
                                 f"COALESCE(n, 0) {op} 0", f"CASE WHEN n > 3 THEN 'x' ELSE g END {op} 'x'"]))


conditions = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
        st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
        inner.map(lambda c: f"NOT ({c})"),
    ),
    max_leaves=5,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conditions)
def test_where_matches_duckdb(sql_env, condition):
    sql = f"SELECT s, n, d, g, __time FROM nulls WHERE {condition}"
    assert_rows_equal(engine_rows(sql_env.sql(sql)), duck_rows(sql_env.duck, sql), ordered=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conditions, st.sampled_from(["g", "s", "n > 3"]))
def test_grouped_aggregates_match_duckdb(sql_env, condition, key):
    sql = f"SELECT {key} AS k, COUNT(*), COUNT(n), SUM(n), MIN(d), COUNT(DISTINCT s) FROM nulls " \
          f"WHERE {condition} GROUP BY 1"
    assert_rows_equal(engine_rows(sql_env.sql(sql)), duck_rows(sql_env.duck, sql), ordered=False)
