"""SUM of a BIGINT shifted or scaled by a constant, computed as one SUM and one COUNT of the
expression (``rules/distribute_sums``), and identical aggregate calls computed once: the plans
have the fewer aggregators, and the answers are DuckDB's over mean data (NULLs, a group whose
values are all NULL, filters that keep no row, FILTER clauses, HAVING and ORDER BY on a rewritten
sum) and, where the sums overflow 64 bits, exactly what summing every row's ``x + c`` in a
wrapping 64-bit long gives (Druid's longSum; DuckDB sums in 128 bits, so its side wraps the
128-bit total, which is the same number modulo 2^64)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from common.sql import plan_sql
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.day_segments import DaySegments

MAX, MIN = 2**63 - 1, -(2**63)
HOUR = 3_600_000
X = [1, None, -3, 0, 7, None, 12, -40, 5, 9, None, 2, 100, -1]
G = ["a", "b", "a", None, "b", "c", "a", "b", None, "a", "c", "b", "a", "b"]  # "c" has only NULL x
BIG = [MAX, MAX - 1, None, MIN, MIN + 3, 2**62, MAX, -(2**62), None, MAX - 5, 17, MIN, MAX, 1]
D = [1.5, None, -0.0, 0.1, 2.5, None, 1e16, -3.25, 0.2, 0.3, None, 7.0, 1e-3, -1.0]

# DuckDB sums BIGINT into HUGEINT; wrap(v) is v modulo 2^64 as a signed 64-bit integer.
WRAP = ("CREATE MACRO wrap(v) AS CAST(((v + (1::HUGEINT << 63)) % (1::HUGEINT << 64) + (1::HUGEINT << 64)) "
        "% (1::HUGEINT << 64) - (1::HUGEINT << 63) AS BIGINT)")


def _table() -> pa.Table:
    n = len(X)
    return pa.table({
        # three days: three segments, whose partials merge
        "__time": pa.array([1442016000000 + i * 5 * HOUR for i in range(n)], pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")),
        "g": pa.array(G, pa.string()),
        "x": pa.array(X, pa.int64()),
        "big": pa.array(BIG, pa.int64()),
        "d": pa.array(D, pa.float64()),
    })


class Env(DaySegments):
    def __init__(self, tmp) -> None:
        super().__init__(_table(), tmp, 3, WRAP)

    def aggregators(self, sql: str) -> list[dict]:
        return [a for q in plan_sql(sql, self.catalog, (), {}).native_queries() for a in q.get("aggregations", [])]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env(tmp_path_factory.mktemp("distribute_sums"))
    yield e
    e.close()


# (strata SQL, DuckDB SQL or None when the same text)
CASES = [
    ("SELECT SUM(x), SUM(x + 1), SUM(x + 2), SUM(x - 3), SUM(4 + x), SUM(5 - x), SUM(x * 3), SUM(-2 * x) FROM t",
     None),
    ("SELECT g, SUM(x + 10), SUM(x - 1), COUNT(x + 1), COUNT(*), SUM(x) FROM t GROUP BY g", None),
    ("SELECT SUM(x + 1), COUNT(x + 1), SUM(x * 0) FROM t WHERE x > 1000", None),  # no rows: NULL sums, count 0
    ("SELECT SUM(x + 1) FILTER (WHERE g = 'a'), SUM(x + 1) FILTER (WHERE g = 'c'), SUM(x + 1) FROM t", None),
    ("SELECT g, SUM(x + 7) AS s FROM t GROUP BY g HAVING SUM(x + 7) > 10", None),
    ("SELECT g, SUM(x + 7) AS s FROM t GROUP BY g ORDER BY s DESC LIMIT 2", None),
    ("SELECT g, SUM(x - 100) AS s FROM t GROUP BY g ORDER BY s LIMIT 2", None),
    ("SELECT SUM((x + 1) + 2), SUM((x - 1) * 2), SUM(2 * (x + 3)) FROM t", None),
    ("SELECT AVG(x + 1), AVG(x), SUM(x + 1) FROM t", None),
    ("SELECT SUM(x + x), SUM(x + 1) FROM t", None),  # not a constant: not rewritten
    ("SELECT SUM(d + 1), SUM(d + 1.5), SUM(x + 0.5) FROM t", None),  # DOUBLE: not rewritten
    ("SELECT g, SUM(x), SUM(x), COUNT(x), COUNT(x), MIN(x), MIN(x) FROM t GROUP BY g", None),
    ("SELECT SUM(x + 1) + SUM(x + 2) AS s, COUNT(DISTINCT x + 1) FROM t", None),
    # 64-bit overflow: DuckDB's 128-bit total, wrapped to 64 bits, is what the row-by-row long sum gives
    ("SELECT SUM(big), SUM(big + 1), SUM(big + 9223372036854775807), SUM(big - 5), SUM(3 * big), "
     "SUM(-9223372036854775807 - big) FROM t",
     "SELECT wrap(SUM(big::HUGEINT)), wrap(SUM(big::HUGEINT + 1)), wrap(SUM(big::HUGEINT + 9223372036854775807)), "
     "wrap(SUM(big::HUGEINT - 5)), wrap(SUM(3 * big::HUGEINT)), wrap(SUM(-9223372036854775807 - big::HUGEINT)) "
     "FROM t"),
    ("SELECT g, SUM(big + 1000), SUM(big * 4) FROM t GROUP BY g",
     "SELECT g, wrap(SUM(wrap(big::HUGEINT + 1000))), wrap(SUM(wrap(big::HUGEINT * 4))) FROM t GROUP BY g"),
]


@pytest.mark.parametrize("sql,duck_sql", CASES)
def test_matches_duckdb(env, sql, duck_sql):
    assert_rows_equal(engine_rows(env.sql(sql)), duck_rows(env.duck, duck_sql or sql), ordered="ORDER BY" in sql)


def test_ninety_shifted_sums_are_two_aggregators(env):
    sql = "SELECT " + ", ".join(["SUM(x)"] + [f"SUM(x + {k})" for k in range(1, 90)]) + " FROM t"
    aggs = env.aggregators(sql)
    assert [a["type"] for a in aggs] == ["longSum", "filtered"]
    assert aggs[0]["fieldName"] == "x" and aggs[1]["aggregator"]["type"] == "count"
    want = duck_rows(env.duck, sql)
    assert engine_rows(env.sql(sql)) == want


def test_identical_calls_are_one_aggregator(env):
    assert len(env.aggregators("SELECT SUM(x), SUM(x), COUNT(*), COUNT(*), MAX(d), MAX(d) FROM t")) == 3
    # COUNT of a shifted or scaled expression counts the expression's own non-null rows
    assert len(env.aggregators("SELECT COUNT(x), COUNT(x + 1), COUNT(2 * x) FROM t")) == 1


def test_doubles_and_non_constants_keep_their_expressions(env):
    aggs = env.aggregators("SELECT SUM(d + 1), SUM(x + x) FROM t")
    assert [a["type"] for a in aggs] == ["doubleSum", "longSum"]
    assert all("fieldName" in a for a in aggs)


def test_overflow_equals_the_row_by_row_long_sum(env):
    """The rewritten SQL gives exactly what the native longSum of a virtual ``big + c`` column
    (each row's addition and the sum wrapping in 64 bits) gives."""
    for k in (1, 9223372036854775807, -9223372036854775807, -7):
        native = env.native({"queryType": "timeseries", "granularity": "all",
                             "virtualColumns": [{"type": "expression", "name": "v", "expression": f"big + {k}",
                                                 "outputType": "LONG"}],
                             "aggregations": [{"type": "longSum", "name": "s", "fieldName": "v"}]})
        literal = str(k) if k >= 0 else f"({k})"
        got = env.sql(f"SELECT SUM(big + {literal}) AS s FROM t")
        assert got.column("s").to_pylist() == native.column("s").to_pylist()
