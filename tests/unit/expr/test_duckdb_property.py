"""Random arithmetic, comparison and logic expressions agree with DuckDB on random columns.

Each generated expression carries three things: strata's expression text, an equivalent DuckDB
SQL expression, and its static type ('L' LONG, 'D' DOUBLE, 'B' boolean). The SQL spells out
the semantics strata promises (integer division truncating toward zero, x/0 and x%0 null,
non-zero numbers true), so the oracle checks the implementation, not a restatement of it.
"""

import math

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.expr import Literal, evaluate, evaluate_predicate, infer_type, parse
from common.types.column_type import DOUBLE, LONG

SMALL_INT = st.integers(-100, 100)  # eight leaves multiply to at most 1e16: no LONG overflow
SMALL_FLOAT = st.floats(-100, 100, allow_nan=False, allow_infinity=False)
COLUMN_LEAVES = [("i1", "i1", "L"), ("i2", "i2", "L"), ("f1", "f1", "D"), ("f2", "f2", "D")]


def _int_leaf(v):
    return (Literal(v).to_string(), f"CAST({v} AS BIGINT)", "L")


def _float_leaf(v):
    return (Literal(v).to_string(), f"CAST('{v!r}' AS DOUBLE)", "D")


LEAF = st.one_of(
    st.sampled_from(COLUMN_LEAVES),
    SMALL_INT.map(_int_leaf),
    SMALL_FLOAT.map(_float_leaf),
    st.just(("null", "CAST(NULL AS BIGINT)", "L")),
)


def _arith(parts):
    (lt, ls, lty), op, (rt, rs, rty) = parts
    ty = "L" if lty == rty == "L" else "D"
    ours = f"({lt} {op} {rt})"
    if op in "+-*":
        sql = f"({ls} {op} {rs})"
    elif op == "/":
        sql = f"({ls} // NULLIF({rs}, 0))" if ty == "L" else f"(CAST({ls} AS DOUBLE) / NULLIF({rs}, 0))"
    else:
        sql = f"({ls} % NULLIF({rs}, 0))"
    return ours, sql, ty


def _negate(part):
    text, sql, ty = part
    return f"-({text})", f"(-({sql}))", ty


NUMBER = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner).map(_arith),
        inner.map(_negate),
    ),
    max_leaves=8,
)

_SQL_COMPARISON = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _compare(parts):
    (lt, ls, _), op, (rt, rs, _) = parts
    return f"({lt} {op} {rt})", f"({ls} {_SQL_COMPARISON[op]} {rs})", "B"


def _truth(part):
    text, sql, _ = part
    return text, f"({sql} > 0)", "B"


def _logic(parts):
    (lt, ls, _), op, (rt, rs, _) = parts
    return f"({lt} {op} {rt})", f"({ls} {'AND' if op == '&&' else 'OR'} {rs})", "B"


BOOLEAN = st.recursive(
    st.one_of(st.tuples(NUMBER, st.sampled_from(list(_SQL_COMPARISON)), NUMBER).map(_compare), NUMBER.map(_truth)),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(_logic),
        inner.map(lambda p: (f"!({p[0]})", f"(NOT {p[1]})", "B")),
    ),
    max_leaves=4,
)


@st.composite
def batches(draw):
    n = draw(st.integers(1, 25))
    column = {
        "i": st.lists(st.one_of(st.none(), SMALL_INT, st.just(0)), min_size=n, max_size=n),
        "f": st.lists(st.one_of(st.none(), SMALL_FLOAT, st.just(0.0)), min_size=n, max_size=n),
    }
    return {
        "i1": pa.array(draw(column["i"]), pa.int64()),
        "i2": pa.array(draw(column["i"]), pa.int64()),
        "f1": pa.array(draw(column["f"]), pa.float64()),
        "f2": pa.array(draw(column["f"]), pa.float64()),
    }


def duckdb_values(sql: str, columns: dict) -> list:
    n = len(columns["i1"])
    table = pa.table({**columns, "idx": pa.array(range(n), pa.int64())})
    con = duckdb.connect()
    con.register("t", table)
    return [row[0] for row in con.execute(f"SELECT {sql} FROM t ORDER BY idx").fetchall()]


def same(ours, theirs) -> bool:
    if ours is None or theirs is None:
        return ours is None and theirs is None
    if isinstance(ours, float) or isinstance(theirs, float):
        return math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-9)
    return ours == theirs


TYPES = {"i1": LONG, "i2": LONG, "f1": DOUBLE, "f2": DOUBLE}
RELAXED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@RELAXED
@given(expr=NUMBER, columns=batches())
def test_arithmetic_matches_duckdb(expr, columns):
    text, sql, ty = expr
    tree = parse(text)
    if text != "null":  # a bare null has no numeric type
        assert infer_type(tree, TYPES) == (LONG if ty == "L" else DOUBLE)
    result = evaluate(tree, columns, len(columns["i1"]))
    if text != "null":
        assert result.type == (pa.int64() if ty == "L" else pa.float64())
    ours, theirs = result.to_pylist(), duckdb_values(sql, columns)
    assert all(same(a, b) for a, b in zip(ours, theirs, strict=True)), (text, sql, ours, theirs)


@RELAXED
@given(expr=BOOLEAN, columns=batches())
def test_comparisons_and_logic_match_duckdb(expr, columns):
    text, sql, _ = expr
    result = evaluate_predicate(parse(text), columns, len(columns["i1"]))
    assert result.type == pa.bool_()
    if not text.startswith("!") and any(op in text for op in ("==", "!=", "<", ">", "&&", "||")):
        assert evaluate(parse(text), columns, len(columns["i1"])).equals(result)
    ours, theirs = result.to_pylist(), duckdb_values(sql, columns)
    assert ours == theirs, (text, sql, ours, theirs)


@pytest.mark.parametrize(
    "text,sql,expected",
    [
        ("-7 / 2", "CAST(-7 AS BIGINT) // 2", -3),
        ("-7 % 2", "CAST(-7 AS BIGINT) % 2", -1),
        ("7 % -2", "CAST(7 AS BIGINT) % -2", 1),
        ("-7.5 % 2", "CAST(-7.5 AS DOUBLE) % 2", -1.5),
        ("7 / 0", "CAST(7 AS BIGINT) // NULLIF(0, 0)", None),
    ],
)
def test_known_corners_match_duckdb(text, sql, expected):
    ours = evaluate(parse(text), {}, 1).to_pylist()
    assert ours == [expected]
    assert duckdb.connect().execute(f"SELECT {sql}").fetchall() == [(expected,)]
