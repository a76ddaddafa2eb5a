"""SQL test data: the demo Wikipedia edits, the shared events data set and a small table full of
nulls, as segments behind a fake catalog, and the same rows in DuckDB for comparison."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from common.demo import table as demo_table
from common.query import execute
from common.query.engine import union_schema
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from common.sql import execute_sql, plan_sql
from tests.conftest import duck_connect
from tests.unit.sql.fake_catalog import FakeCatalog

NOW = "2015-09-14T00:00:00Z"


def nulls_table() -> pa.Table:
    """Small, hand-written, with a null in every column but __time (and '' next to NULL)."""
    ms = [1442016000000 + i * 3_600_000 for i in range(10)]
    return pa.table({
        "__time": pa.array(ms, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "s": pa.array(["a", "b", None, "", "a", "c", None, "b", "a", "dé"]),
        "n": pa.array([1, None, 3, 4, None, 6, 7, 8, -9, 0], pa.int64()),
        "d": pa.array([1.5, 2.5, None, -1.0, 0.0, None, 3.25, 4.0, 2.5, None], pa.float64()),
        "g": pa.array(["x", "y", "x", None, "y", "x", "y", None, "x", "y"]),
    })


def system_tables(segments) -> dict[str, pa.Table]:
    rows = [s for s in segments]
    segs = pa.table({
        "segment_id": [str(s.id) for s in rows],
        "datasource": [s.id.datasource for s in rows],
        "start": [str(s.id.interval).split("/")[0] for s in rows],
        "end": [str(s.id.interval).split("/")[1] for s in rows],
        "size": pa.array([os.path.getsize(s.path) if hasattr(s, "path") else 1000 for s in rows], pa.int64()),
        "version": [s.id.version for s in rows],
        "partition_num": pa.array([s.id.partition for s in rows], pa.int64()),
        "num_rows": pa.array([s.num_rows for s in rows], pa.int64()),
        "is_available": pa.array([1] * len(rows), pa.int64()),
    })
    servers = pa.table({
        "server": ["h1:8083", "h2:8084", "b:8082"],
        "host": ["h1", "h2", "b"],
        "server_type": ["historical", "historical", "broker"],
        "current_size": pa.array([1000, 2000, 0], pa.int64()),
    })
    server_segments = pa.table({
        "server": ["h1:8083" if i % 2 == 0 else "h2:8084" for i in range(len(rows))],
        "segment_id": [str(s.id) for s in rows],
    })
    return {"segments": segs, "servers": servers, "server_segments": server_segments}


class SqlEnv:
    def __init__(self, segments, catalog, duck, tables) -> None:
        self.segments = segments
        self.catalog = catalog
        self.duck = duck
        self.tables = tables
        self.native_calls = []

    def run_native(self, query):
        self.native_calls.append(query)
        return execute(query, self.segments).table

    def plan(self, sql, parameters=(), context=None):
        ctx = {"sqlCurrentTimestamp": NOW, **(context or {})}
        return plan_sql(sql, self.catalog, parameters, ctx)

    def sql(self, sql, parameters=(), context=None) -> pa.Table:
        ctx = {"sqlCurrentTimestamp": NOW, **(context or {})}
        return execute_sql(sql, self.catalog, self.run_native, parameters, ctx)


@pytest.fixture(scope="session")
def sql_env(tmp_path_factory, events):
    base = tmp_path_factory.mktemp("sql")
    wiki = demo_table(20_000, days=2, seed=3)
    segments = []
    for path, _ in build_segments(wiki, "wiki", str(base / "wiki"), segment_granularity="day",
                                  rows_per_segment=6000, version="v1"):
        segments.append(Segment.open(path))
    nulls = nulls_table()
    for path, _ in build_segments(nulls, "nulls", str(base / "nulls"), segment_granularity="day", version="v1"):
        segments.append(Segment.open(path))
    segments += [s for s in events.segments if s.id.datasource == "events"]
    schemas = {}
    for ds in ("wiki", "nulls", "events"):
        schemas[ds] = union_schema([s for s in segments if s.id.datasource == ds])
    catalog = FakeCatalog(schemas, system_tables(segments))
    duck = duck_connect()
    duck.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
    tables = {"wiki": wiki, "nulls": nulls, "events": events.table}
    for name, t in tables.items():
        duck.register(f"{name}_arrow", t)
        duck.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_arrow")
        duck.unregister(f"{name}_arrow")
    yield SqlEnv(segments, catalog, duck, tables)
    duck.close()
