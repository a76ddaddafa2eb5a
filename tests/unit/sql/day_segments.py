"""DaySegments: a table as day segments of datasource ``t`` and as a DuckDB table ``t`` beside them,
the setup of the SQL modules that check strata against DuckDB over a few segments."""

from __future__ import annotations

import pyarrow as pa

from common.query import execute
from common.query.engine import union_schema
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from common.sql import execute_sql
from tests.conftest import duck_connect
from tests.unit.sql.fake_catalog import FakeCatalog


class DaySegments:
    def __init__(self, table: pa.Table, tmp, min_segments: int, *duck_setup: str) -> None:
        self.table = table
        self.segments = [Segment.open(p) for p, _ in build_segments(table, "t", str(tmp), segment_granularity="day",
                                                                       version="v1")]
        assert len(self.segments) >= min_segments  # partials of several segments merge
        self.catalog = FakeCatalog({"t": union_schema(self.segments)}, {})
        self.duck = duck_connect()
        self.duck.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
        for statement in duck_setup:
            self.duck.execute(statement)
        self.duck.register("t_arrow", table)
        self.duck.execute("CREATE TABLE t AS SELECT * FROM t_arrow")

    def sql(self, sql: str) -> pa.Table:
        return execute_sql(sql, self.catalog, lambda q: execute(q, self.segments).table, (), {})

    def native(self, query: dict) -> pa.Table:
        return execute({"dataSource": "t", "intervals": ["2015-09-01/2015-10-01"], **query}, self.segments).table

    def close(self) -> None:
        for s in self.segments:
            s.close()
        self.duck.close()
