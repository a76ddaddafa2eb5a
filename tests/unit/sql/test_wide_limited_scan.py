"""A scan with a LIMIT evaluates its projected expressions only on the rows it returns: filters run
first, on every row they must see, then each segment takes its OFFSET+LIMIT rows, and only those
rows are computed. Asserted on the work done (rows each expression was evaluated on), not on time."""

from __future__ import annotations

import pytest

from common.query.memory_budget import MemoryBudget
from common.query.virtual_column import VirtualColumn

WIDE = 2_000


@pytest.fixture
def evaluated_rows(monkeypatch):
    """Rows each virtual column was evaluated on, per evaluation."""
    seen: list[tuple[str, int]] = []
    real = VirtualColumn.evaluate

    def counting(self, source):
        seen.append((self.expression, source.num_rows))
        return real(self, source)

    monkeypatch.setattr(VirtualColumn, "evaluate", counting)
    return seen


def _wide_select(n: int, where: str = "", tail: str = "LIMIT 1") -> str:
    items = ", ".join(f"added + {i} AS c{i}" for i in range(n))
    return f"SELECT {items} FROM wiki {where} {tail}"


def test_wide_select_with_limit_computes_only_the_returned_rows(sql_env, evaluated_rows):
    out = sql_env.sql(_wide_select(WIDE))
    assert out.num_rows == 1 and out.num_columns == WIDE
    segments = sum(1 for s in sql_env.segments if s.id.datasource == "wiki")
    assert len(evaluated_rows) <= WIDE * segments
    assert evaluated_rows and max(n for _, n in evaluated_rows) <= 1
    # Without ORDER BY any row may come back; its columns are one row's added plus the column's offset.
    row = out.to_pylist()[0]
    assert all(row[f"c{i}"] - row["c0"] == i for i in range(WIDE))


def test_filter_sees_every_row_but_projection_only_the_limited_ones(sql_env, evaluated_rows):
    where = "WHERE added + 1 > 50"  # an expression filter: evaluated on values, not an index
    sql = _wide_select(20, where, "LIMIT 3 OFFSET 2")
    out = sql_env.sql(sql)
    want = sql_env.duck.execute("SELECT COUNT(*) FROM wiki WHERE added + 1 > 50").fetchone()[0]
    assert want > 5
    assert out.num_rows == 3
    assert all(r["c0"] + 1 > 50 for r in out.to_pylist())
    projected = [n for expr, n in evaluated_rows if "50" not in expr]
    # Each segment returns at most OFFSET+LIMIT = 5 rows, so no projected expression saw more.
    assert projected and max(projected) <= 5


def test_ordered_limit_takes_the_segment_tail_before_computing(sql_env, evaluated_rows):
    out = sql_env.sql(_wide_select(50, tail="ORDER BY __time DESC LIMIT 2"))
    want = [r[0] for r in sql_env.duck.execute("SELECT added FROM wiki ORDER BY __time DESC LIMIT 2").fetchall()]
    assert [r["c0"] for r in out.to_pylist()] == want
    assert [r["c49"] for r in out.to_pylist()] == [w + 49 for w in want]
    assert max(n for _, n in evaluated_rows) <= 2


def test_memory_charged_for_the_limited_rows_only(sql_env):
    """The scan charges its budget for the rows it returns: 2,000 computed columns of one row fit in
    1 MiB, where the whole table's 20,000 rows of them would need hundreds of MiB."""
    from common.query import scan_engine
    from common.query.model import query_from_json
    from common.query.row_source import TableRowSource

    sql_env.native_calls.clear()
    sql_env.sql(_wide_select(WIDE))
    (native,) = sql_env.native_calls
    query = query_from_json(native) if isinstance(native, dict) else native
    table = sql_env.tables["wiki"]
    schema = TableRowSource(table).schema
    budget = MemoryBudget(1 << 20, "q", "historical")
    part = scan_engine.run(query, TableRowSource(table), schema, budget=budget)
    assert part.table.num_rows == 1
    assert 0 < budget.used < 1 << 20
