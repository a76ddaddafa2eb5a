"""SqlPlan.streamed_scan: which statements the broker may stream (one scan in no order, under
renames and column choices) and that shaping the scan's rows piece by piece gives exactly the
rows ``execute`` gives."""

import pyarrow as pa
import pytest

from common.demo import table as demo_table
from common.query import engine, scan_engine
from common.query.row_source import TableRowSource
from common.sql.sql_plan import plan_sql
from common.types.column_type import ColumnType
from tests.unit.sql.fake_catalog import FakeCatalog

DATA = demo_table(2_000, days=1)
SCHEMA = {f.name: ColumnType.from_arrow(f.type, f.name) for f in DATA.schema}
CATALOG = FakeCatalog({"wiki": SCHEMA}, {"servers": pa.table({"server": ["h1"]})})


def run_native(query):
    return engine.execute_on_table(query, DATA).table


@pytest.mark.parametrize("sql", [
    "SELECT * FROM wiki",
    "SELECT __time, page, added AS a FROM wiki",
    "SELECT page AS p, added + 1 AS a1 FROM wiki WHERE channel = '#en'",
    "SELECT \"user\", page FROM wiki LIMIT 17 OFFSET 5",
    "SELECT t.page FROM (SELECT page, added FROM wiki) t",
])
def test_unordered_scans_stream_and_give_the_rows_execute_gives(sql):
    plan = plan_sql(sql, CATALOG)
    scan = plan.streamed_scan()
    assert scan is not None, plan.explain()
    query, shape = scan
    schema = dict(SCHEMA)
    finalize = scan_engine.StreamFinalizer(query, schema)
    partial = engine.run(query, TableRowSource(DATA), schema)
    pieces = []
    for batch in partial.table.to_batches(max_chunksize=97):  # arrives in pieces, as from historicals
        table = finalize(pa.Table.from_batches([batch]))
        if table is not None:
            pieces.append(shape(table))
        if finalize.done:
            break
    streamed = pa.concat_tables(pieces) if pieces else plan.result_schema.empty_table()
    assert streamed.schema.equals(plan.result_schema)
    assert streamed.equals(plan.execute(run_native))


@pytest.mark.parametrize("sql", [
    "SELECT page FROM wiki ORDER BY __time",
    "SELECT page FROM wiki ORDER BY page LIMIT 3",
    "SELECT channel, COUNT(*) FROM wiki GROUP BY 1",
    "SELECT COUNT(*) FROM wiki",
    "SELECT * FROM sys.servers",
    "SELECT 1",
    "EXPLAIN PLAN FOR SELECT page FROM wiki",
])
def test_other_statements_do_not_stream(sql):
    assert plan_sql(sql, CATALOG).streamed_scan() is None
