"""GROUP BY keys that are functions of other keys (``rules/derived_group_keys``): the aggregate
groups by the other keys only and computes these per group. The plans group on fewer
dimensions, and the answers are DuckDB's over mean data: NULL keys, '' next to NULL, a DOUBLE
column with -0.0, 0.0 and NaN (whose functions stay keys), timestamps, booleans, constants,
repeated keys, HAVING and ORDER BY on a derived key, and no rows at all."""

from __future__ import annotations

import pyarrow as pa
import pytest

from common.sql import plan_sql
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.day_segments import DaySegments

HOUR = 3_600_000
NAN = float("nan")
X = [1, None, -3, 0, 7, None, 1, -3, 2**61, 9, None, 2, 100, -(2**61)]
S = ["a", "", None, "B", "a", "", "é", None, "a", "B", "x y", "", None, "a"]
D = [0.0, -0.0, NAN, 1.5, None, 0.0, -0.0, NAN, 2.5, 1.5, None, -0.0, 0.0, 3.0]


def _table() -> pa.Table:
    n = len(X)
    return pa.table({
        "__time": pa.array([1442016000000 + i * 5 * HOUR + i * 61_000 for i in range(n)], pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")),
        "x": pa.array(X, pa.int64()),
        "s": pa.array(S, pa.string()),
        "d": pa.array(D, pa.float64()),
    })


class Env(DaySegments):
    def __init__(self, tmp) -> None:
        super().__init__(_table(), tmp, 3)

    def dimensions(self, sql: str) -> list[str]:
        queries = plan_sql(sql, self.catalog, (), {}).native_queries()
        assert len(queries) == 1
        q = queries[0]
        if q["queryType"] == "topN":
            return [q["dimension"]["dimension"]]
        return [d["dimension"] for d in q.get("dimensions", [])]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env(tmp_path_factory.mktemp("derived_group_keys"))
    yield e
    e.close()


# (strata SQL, DuckDB SQL or None when the same text, the dimensions strata groups on)
CASES = [
    ("SELECT x, x - 1, x - 2, x + 3, COUNT(*) AS c FROM t GROUP BY x, x - 1, x - 2, x + 3", None, ["x"]),
    ("SELECT x, x * 2 AS y, COUNT(*) AS c FROM t GROUP BY x, x * 2 ORDER BY c DESC, x LIMIT 3", None, ["x"]),
    ("SELECT 1 AS one, s, COUNT(*) AS c FROM t GROUP BY 1, s", None, ["s"]),
    ("SELECT s, UPPER(s) AS u, CHAR_LENGTH(s) AS n, s || '!' AS e, COUNT(*) FROM t GROUP BY s, UPPER(s), "
     "CHAR_LENGTH(s), s || '!'",
     "SELECT s, UPPER(s) AS u, length(s) AS n, s || '!' AS e, COUNT(*) FROM t GROUP BY s, UPPER(s), length(s), "
     "s || '!'", ["s"]),
    ("SELECT s, x, COALESCE(s, 'none') AS k, x + 1 AS y, SUM(x) FROM t GROUP BY s, x, COALESCE(s, 'none'), x + 1",
     None, ["s", "x"]),
    ("SELECT x, x, COUNT(*) FROM t GROUP BY x, x", None, ["x"]),
    ("SELECT CASE WHEN x > 0 THEN 'pos' ELSE 'other' END AS k, x, COUNT(*) FROM t "
     "GROUP BY x, CASE WHEN x > 0 THEN 'pos' ELSE 'other' END", None, ["x"]),
    ("SELECT CASE WHEN x > 0 THEN 'pos' ELSE 'other' END AS k, x, COUNT(*) FROM t "
     "GROUP BY CASE WHEN x > 0 THEN 'pos' ELSE 'other' END, x", None, None),
    ("SELECT x, x - 1 AS y, COUNT(*) AS c FROM t GROUP BY x, x - 1 HAVING x - 1 > 0", None, ["x"]),
    ("SELECT x, x - 1 AS y, COUNT(*) AS c FROM t GROUP BY x, x - 1 ORDER BY y DESC LIMIT 4", None, ["x"]),
    ("SELECT x, x > 1 AS b, COUNT(*) FROM t GROUP BY x, x > 1", None, ["x"]),
    ("SELECT x > 1 AS b, NOT (x > 1) AS nb, COUNT(*) FROM t GROUP BY x > 1, NOT (x > 1)", None, None),
    ("SELECT __time, TIME_FLOOR(__time, 'P1D') AS dd, COUNT(*) FROM t GROUP BY __time, TIME_FLOOR(__time, 'P1D')",
     "SELECT __time, date_trunc('day', __time) AS dd, COUNT(*) FROM t GROUP BY __time, date_trunc('day', __time)",
     None),
    ("SELECT s, __time, EXTRACT(HOUR FROM __time) AS h, COUNT(*) FROM t GROUP BY s, __time, EXTRACT(HOUR FROM __time)",
     None, None),
    ("SELECT x, x - 1, COUNT(*) FROM t WHERE x > 10000 GROUP BY x, x - 1", None, ["x"]),  # no rows
    ("SELECT 1 AS a, 2 AS b, COUNT(*) FROM t GROUP BY 1, 2", None, None),
    ("SELECT 1 AS a, 2 AS b, COUNT(*) FROM t WHERE x > 10000 GROUP BY 1, 2", None, None),  # no rows: no group
    # a DOUBLE key: -0.0 and 0.0 are one group, NaNs one, so its functions keep grouping
    ("SELECT d, d * 2 AS e, COUNT(*) FROM t GROUP BY d, d * 2", None, None),
    # a negated column as a key or sort key (was a TypeError while looking for a position number)
    ("SELECT x, -x AS m, COUNT(*) FROM t GROUP BY x, -x ORDER BY -x LIMIT 5", None, ["x"]),
    ("SELECT d, d + 1 AS e, -d AS f, COUNT(*) FROM t GROUP BY d, d + 1, -d", None, None),
]


@pytest.mark.parametrize("sql,duck_sql,dims", CASES)
def test_matches_duckdb(env, sql, duck_sql, dims):
    assert_rows_equal(engine_rows(env.sql(sql)), duck_rows(env.duck, duck_sql or sql), ordered="ORDER BY" in sql)
    if dims is not None:
        assert env.dimensions(sql) == dims


def test_double_keys_and_their_functions_stay_keys(env):
    assert len(env.dimensions("SELECT d, d * 2, COUNT(*) FROM t GROUP BY d, d * 2")) == 2


def test_constant_keys_alone_keep_one_key(env):
    assert len(env.dimensions("SELECT 1, 2, COUNT(*) FROM t GROUP BY 1, 2")) == 1


def test_a_key_before_the_column_it_is_computed_from_stays_a_key(env):
    """Without ORDER BY Druid orders groups by their keys: ``GROUP BY -x, x`` orders by -x, which
    grouping by x alone would not, so -x stays a key; after x it is computed per group."""
    assert len(env.dimensions("SELECT -x, x, COUNT(*) FROM t GROUP BY -x, x")) == 2
    assert env.dimensions("SELECT x, -x, COUNT(*) FROM t GROUP BY x, -x") == ["x"]
    got = engine_rows(env.sql("SELECT -x AS m, x, COUNT(*) AS c FROM t WHERE x IS NOT NULL GROUP BY -x, x"))
    assert [r[0] for r in got] == sorted(r[0] for r in got)
