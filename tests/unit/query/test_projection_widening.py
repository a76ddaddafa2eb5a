"""Projections serve what Druid's serve (issue 23), with the answers base rows give.

One day segment of Druid's projection test columns (strings a, b with '' and NULL; long c with
NULLs; double d with -0.0 and fractions; float e) carries projections defined in SQL; a second
segment carries none, so every query mixes projection and base rows. Each query runs with
projections, with ``noProjections`` and in DuckDB, and the projection expected to serve it does.
A rollup table (metrics as columns) gets the same treatment.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import source_for, union_schema
from common.query.model import query_from_json
from common.query.projection import ProjectionSpec, projection_rows
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql, plan_sql
from common.sql.projection_select import projection_from_select
from common.types.column_type import ColumnType
from common.types.interval import Interval, parse_instant
from tests.conftest import duck_connect
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.fake_catalog import FakeCatalog

DAY = 86_400_000
T0 = parse_instant("2024-03-09")


def _t_table(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = 3000
    times = T0 + rng.integers(0, 2 * DAY, n)
    return pa.table({
        "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "a": pa.array([["a", "b", "aa", "", None][i] for i in rng.integers(0, 5, n)]),
        "b": pa.array([["foo", "bar", "", None][i] for i in rng.integers(0, 4, n)]),
        "c": pa.array(rng.integers(-2, 5, n), pa.int64(), mask=rng.random(n) < 0.1),
        "d": pa.array(rng.choice([1.1, 2.1, 3.1, -0.0, 0.5, 0.2], n)),
        "e": pa.array(rng.choice([1.0, 0.5, 2.25, -0.0], n), pa.float32()),
    })


def _rolled_table(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = 800
    times = T0 + (rng.integers(0, 2 * 24, n) * 3_600_000)
    return pa.table({
        "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "channel": pa.array([["#en", "#fr", "#de", None][i] for i in rng.integers(0, 4, n)]),
        "page": pa.array([f"p{i}" for i in rng.integers(0, 30, n)]),
        "sum_added": pa.array(rng.integers(0, 10_000, n), pa.int64()),
        "cnt": pa.array(rng.integers(1, 50, n), pa.int64()),
        "max_delta": pa.array(rng.integers(-500, 500, n), pa.int64()),
    })


PROJECTIONS = {
    "t": {
        "ab": "SELECT CONCAT(a, b) AS ab, SUM(c) AS sc, COUNT(*) AS n FROM t GROUP BY 1",
        "de": "SELECT d + e AS de, COUNT(*) AS n, SUM(c) AS sc FROM t GROUP BY 1",
        "bf": "SELECT TIME_FLOOR(__time, 'PT1H') AS h, concat(b, 'foo') AS bf, SUM(d) AS sd, COUNT(*) AS n "
              "FROM t GROUP BY 1, 2",
        "cd": "SELECT a, SUM(d) AS sd, COUNT(*) AS n FROM t WHERE c + d IN (2.1, 4.2) GROUP BY 1",
        "hab": "SELECT TIME_FLOOR(__time, 'PT1H') AS h, a, b, SUM(c) AS sc, COUNT(*) AS n, MIN(d) AS md "
               "FROM t GROUP BY 1, 2, 3",
    },
    "rolled": {
        "by_channel": "SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, SUM(sum_added) AS sum_added, "
                      "SUM(cnt) AS cnt, MAX(max_delta) AS max_delta FROM rolled GROUP BY 1, 2",
    },
}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("widening"))
    tables = {"t": _t_table(31), "rolled": _rolled_table(32)}
    schemas = {name: {f.name: ColumnType.from_arrow(f.type, f.name) for f in t.schema} for name, t in tables.items()}
    defining = FakeCatalog(schemas)
    segments = []
    for name, table in tables.items():
        specs = [ProjectionSpec.from_json(projection_from_select(p, sql, defining, name))
                 for p, sql in PROJECTIONS[name].items()]
        times = table.column("__time").cast(pa.int64()).to_numpy()
        for day in range(2):
            iv = Interval(T0 + day * DAY, T0 + (day + 1) * DAY)
            part = table.filter(pa.array((times >= iv.start) & (times < iv.end)))
            path = os.path.join(directory, f"{name}{day}.sseg")
            # The second day has no projections: each query mixes projection and base rows.
            build_segment(part, path, SegmentId(name, iv, "v1", 0),
                          projections=[projection_rows(s, part) for s in specs] if day == 0 else [])
            segments.append(Segment.open(path, verify=True))
    catalog = FakeCatalog({n: union_schema([s for s in segments if s.id.datasource == n]) for n in tables})
    duck = duck_connect()
    for name, table in tables.items():
        duck.register(f"{name}_arrow", table)
        duck.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_arrow")
        duck.unregister(f"{name}_arrow")
    yield segments, catalog, duck
    duck.close()
    for s in segments:
        s.close()


CASES = [
    # (strata SQL, DuckDB SQL or None when the same, the projection serving the first segment)
    ("SELECT CONCAT(a, b) AS x, SUM(c) AS s FROM t GROUP BY 1", "SELECT a || b, SUM(c) FROM t GROUP BY 1", "ab"),
    ("SELECT a || b AS x, COUNT(*) AS n FROM t GROUP BY 1", None, "ab"),
    ("SELECT d + e AS x, COUNT(*) AS n FROM t GROUP BY 1", "SELECT d + CAST(e AS DOUBLE), COUNT(*) FROM t GROUP BY 1",
     "de"),
    ("SELECT concat(b, 'foo') AS x, SUM(d) AS s FROM t GROUP BY 1", "SELECT b || 'foo', SUM(d) FROM t GROUP BY 1",
     "bf"),
    ("SELECT TIME_FLOOR(__time, 'P1D') AS t0, concat(b, 'foo') AS x, COUNT(*) AS n FROM t GROUP BY 1, 2",
     "SELECT date_trunc('day', __time), b || 'foo', COUNT(*) FROM t GROUP BY 1, 2", "bf"),
    ("SELECT a, SUM(d) AS s FROM t WHERE c + d IN (2.1, 4.2) GROUP BY 1", None, "cd"),
    ("SELECT a, COUNT(*) AS n FROM t WHERE c + d IN (4.2, 2.1) GROUP BY 1", None, "cd"),
    ("SELECT SUM(c) FILTER (WHERE a = 'a') AS s FROM t", "SELECT SUM(c) FILTER (WHERE a = 'a') FROM t", "hab"),
    ("SELECT b, SUM(c) FILTER (WHERE a = 'a') AS s, COUNT(*) FILTER (WHERE a <> 'aa') AS n, "
     "MIN(d) FILTER (WHERE b IS NULL) AS m FROM t GROUP BY 1", None, "hab"),
    ("SELECT TIME_FLOOR(__time, 'P1D', NULL, 'America/New_York') AS t0, a, SUM(c) AS s FROM t GROUP BY 1, 2",
     "SELECT timezone('America/New_York', date_trunc('day', timezone('America/New_York', __time))), a, SUM(c) "
     "FROM t GROUP BY 1, 2", "hab"),
    ("SELECT TIME_FLOOR(__time, 'P1D', NULL, 'Asia/Kolkata') AS t0, a, SUM(c) AS s FROM t GROUP BY 1, 2",
     "SELECT timezone('Asia/Kolkata', date_trunc('day', timezone('Asia/Kolkata', __time))), a, SUM(c) "
     "FROM t GROUP BY 1, 2", "base"),
    ("SELECT channel, SUM(sum_added) AS s, SUM(cnt) AS n, MAX(max_delta) AS m FROM rolled GROUP BY 1", None,
     "by_channel"),
    ("SELECT TIME_FLOOR(__time, 'PT6H') AS t0, SUM(cnt) FILTER (WHERE channel = '#fr') AS n FROM rolled GROUP BY 1",
     "SELECT time_bucket(INTERVAL 6 HOUR, __time), SUM(cnt) FILTER (WHERE channel = '#fr') FROM rolled GROUP BY 1",
     "by_channel"),
    ("SELECT channel, COUNT(*) AS n FROM rolled GROUP BY 1", None, "base"),
]


@pytest.mark.parametrize("sql, duck_sql, served", CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_widened_matches_answer_what_base_rows_and_duckdb_answer(env, sql, duck_sql, served):
    segments, catalog, duck = env
    run = lambda **ctx: execute_sql(sql, catalog, lambda q: execute(q, segments).table, (), ctx)  # noqa: E731
    got = engine_rows(run())
    assert_rows_equal(got, engine_rows(run(noProjections=True)), ordered=False, rel=1e-6)
    assert_rows_equal(got, duck_rows(duck, duck_sql or sql), ordered=False, rel=1e-6)
    (native,) = plan_sql(sql, catalog, (), {}).native_queries()
    first = next(s for s in segments if s.id.datasource == native["dataSource"])
    assert (source_for(query_from_json(native), first).projection or "base") == served
