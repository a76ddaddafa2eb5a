"""SqlPlan.streamed: which statements the broker may stream (one scan, in no order or by time,
under renames and column choices) and that shaping the scan's rows piece by piece gives exactly
the rows ``execute`` gives; ``take_in_time_order`` merges time-sorted streams into one order."""

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
    "SELECT page FROM wiki ORDER BY __time",
    "SELECT __time, page FROM wiki ORDER BY __time DESC LIMIT 30 OFFSET 4",
])
def test_unordered_scans_stream_and_give_the_rows_execute_gives(sql):
    plan = plan_sql(sql, CATALOG)
    scan = plan.streamed
    assert scan is not None, plan.explain()
    query, shape = scan
    schema = dict(SCHEMA)
    finalize = scan_engine.StreamFinalizer(query, schema)
    partial = engine.merge(query, [engine.run(query, TableRowSource(DATA), schema)])
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
    "SELECT page FROM wiki ORDER BY page LIMIT 3",
    "SELECT channel, COUNT(*) FROM wiki GROUP BY 1",
    "SELECT COUNT(*) FROM wiki",
    "SELECT * FROM sys.servers",
    "SELECT 1",
    "EXPLAIN PLAN FOR SELECT page FROM wiki",
])
def test_other_statements_do_not_stream(sql):
    assert plan_sql(sql, CATALOG).streamed is None


@pytest.mark.parametrize("descending", [False, True])
def test_merging_time_sorted_streams_a_piece_at_a_time(descending):
    import numpy as np

    rng = np.random.default_rng(7)
    streams = []
    for n in (0, 1, 40, 333, 1000):
        times = np.sort(rng.integers(0, 200, n))  # many ties, across streams too
        if descending:
            times = times[::-1]
        table = pa.table({"__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                          "v": pa.array(rng.integers(0, 10**6, n))})
        streams.append(list(table.to_batches(max_chunksize=int(rng.integers(1, 50)))))
    current = [None] * len(streams)
    out = []
    while True:
        live = []
        for i, batches in enumerate(streams):
            while (current[i] is None or current[i].num_rows == 0) and batches:
                current[i] = pa.Table.from_batches([batches.pop(0)])
            if current[i] is not None and current[i].num_rows:
                live.append(i)
        if not live:
            break
        ready, rest = scan_engine.take_in_time_order([current[i] for i in live], descending)
        for i, left in zip(live, rest):
            current[i] = left
        assert ready.num_rows > 0
        out.append(ready)
    merged = pa.concat_tables(out)
    times = merged.column("__time").cast(pa.int64()).to_pylist()
    assert times == sorted(times, reverse=descending)
    assert merged.num_rows == 1374
