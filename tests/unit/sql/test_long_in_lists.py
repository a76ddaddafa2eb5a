"""Long IN lists: the statement parser folds long literal lists out of sqlglot's per-item parsing
(the tree must be exactly what sqlglot builds), 20,000-value lists plan and answer as DuckDB
does, and the query timeout covers planning."""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import QueryTimeoutError
from common.query import execute
from common.query.engine import union_schema
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from common.sql import execute_sql
from common.sql.statement import FOLD_LIST_ITEMS, parse_statement
from services.broker.sql_service import SqlService
from tests.conftest import duck_connect
from tests.unit.sql.fake_catalog import FakeCatalog

literals = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(alphabet="ab' %_é\\", max_size=4).map(lambda s: "'" + s.replace("'", "''") + "'"),
    st.just("NULL"), st.just("-0.0"), st.just("1e5"),
)
separators = st.sampled_from([", ", ",", " ,\n  ", ", /* c */ ", ",\n-- note\n"])


@st.composite
def statements(draw) -> str:
    n = draw(st.sampled_from([1, FOLD_LIST_ITEMS - 1, FOLD_LIST_ITEMS, FOLD_LIST_ITEMS + 7, 200]))
    items = draw(st.lists(literals, min_size=n, max_size=n))
    sep = draw(separators)
    in_list = f"({sep.join(items)})"
    shape = draw(st.sampled_from([
        "SELECT x FROM t WHERE x IN {l}", "SELECT x FROM t WHERE x NOT IN {l} OR y = 1",
        "SELECT x IN {l} AS b FROM t", "SELECT * FROM (SELECT x FROM t WHERE s IN {l}) WHERE x IN {l}",
        "SELECT x FROM t WHERE x IN {l} AND 'IN (1, 2)' = s",
    ]))
    return shape.format(l=in_list)


@settings(max_examples=150, deadline=None)
@given(sql=statements())
def test_folded_lists_parse_to_sqlglots_tree(sql):
    assert parse_statement(sql).query == sqlglot.parse_one(sql, read="druid")


def test_list_marker_is_not_allowed_outside_in():
    # A folded list goes back only where a list was; anything else keeps sqlglot's meaning.
    sql = "SELECT x FROM t WHERE x IN (" + ", ".join(str(i) for i in range(100)) + ")"
    assert len(parse_statement(sql).query.find(sqlglot.exp.In).expressions) == 100


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    n = 50_000
    table = pa.table({
        "__time": pa.array([1442016000000 + i * 1000 for i in range(n)], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "x": pa.array(range(n), pa.int64()), "s": pa.array([f"v{i}" for i in range(n)]),
        "d": pa.array([i / 4 for i in range(n)], pa.float64())})
    segments = [Segment.open(p) for p, _ in build_segments(table, "t", str(tmp_path_factory.mktemp("inlist")),
                                                           segment_granularity="hour", version="v1")]
    duck = duck_connect()
    duck.register("t", table)
    yield segments, FakeCatalog({"t": union_schema(segments)}, {}), duck
    duck.close()
    for s in segments:
        s.close()


@pytest.mark.parametrize("column,literal", [
    ("x", lambda i: str(i * 3)), ("s", lambda i: f"'v{i * 3}'"), ("d", lambda i: repr(i * 0.75)),
    ("x", lambda i: "NULL" if i == 7 else (repr(i + 0.5) if i % 5 == 0 else str(i * 2))),
])
def test_twenty_thousand_values_match_duckdb(env, column, literal):
    segments, catalog, duck = env
    values = ", ".join(literal(i) for i in range(20_000))
    for negate in ("", "NOT "):
        sql = f"SELECT COUNT(*) AS c, SUM(x) AS s FROM t WHERE {column} {negate}IN ({values})"
        got = execute_sql(sql, catalog, lambda q: execute(q, segments).table, (), {}).to_pylist()
        want = duck.execute(sql).fetchall()
        assert [(r["c"], r["s"]) for r in got] == want


class _Executor:
    def execute(self, query, remaining, _, is_active, schemas=None, tracked=None):
        raise AssertionError("planning must time out before anything runs")


def test_timeout_covers_planning(env):
    _, catalog, _ = env
    service = SqlService(catalog, _Executor(), default_timeout_s=30)
    values = ", ".join(str(i) for i in range(20_000))
    with pytest.raises(QueryTimeoutError, match="while planning"):
        service.execute(f"SET timeout = 1; SELECT COUNT(*) FROM t WHERE x IN ({values})")
