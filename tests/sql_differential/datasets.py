"""The tables the SQL differential suite queries, as Arrow tables: strata publishes them as segments,
DuckDB (the oracle) loads exactly the same tables.

- ``wiki``: 20,000 demo Wikipedia edits over 4 days (2015-09-12 .. 2015-09-15), two partitions a day.
- ``nulls``: 18 hand-made rows over 3 days with a NULL in every column but __time, '' next to
  NULL, a group whose numbers are all NULL, a column NULL in all rows and a column missing from
  the first day's segment.
- ``wikisample``: Druid's own ``wikipedia-sampled.json`` (20 real rows, keys missing in most rows,
  JSON booleans read as 'true'/'false' strings as Druid's quickstart does), hour segments.
- ``null_example``: Druid's SQL-null tutorial rows (``docs_inline/null_example.json``).
- ``countries``: a small lookup table for joins (one code absent from ``wiki``, one NULL code).
- ``time_edges``: 14 instants around DST changes, year and month ends, leap days and the epoch,
  in year segments.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re

import pyarrow as pa

from common.demo import table as demo_table
from common.types.time_parsing import parse_timestamps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
TS = pa.timestamp("ms", tz="UTC")

WIKI_ROWS = 20_000
WIKI_DAYS = 4
WIKI_ROWS_PER_SEGMENT = 3_000


def _times(values) -> pa.Array:
    return parse_timestamps(pa.array(values, pa.string())).cast(TS)


def wiki() -> pa.Table:
    return demo_table(WIKI_ROWS, days=WIKI_DAYS, seed=11)


def nulls() -> pa.Table:
    times = [f"2015-09-{12 + i // 6}T{(i % 6) * 4 + 1:02d}:{(7 * i) % 60:02d}:00.{i:03d}Z" for i in range(18)]
    return pa.table({
        "__time": _times(times),
        "s": pa.array(["a", "b", None, "", "a", "c", None, "B", "a", "dé", "  pad  ", "x_y", "50%", None, "b", "",
                       "a", "Ω"]),
        "n": pa.array([1, None, 3, 4, None, 6, 7, 8, -9, 0, None, 12, -3, 5, None, 2, 100, None], pa.int64()),
        "d": pa.array([1.5, 2.5, None, -1.0, 0.0, None, 3.25, 4.0, 2.5, None, -0.5, 1e10, 0.125, None, 7.0, 2.0,
                       None, -2.25], pa.float64()),
        "g": pa.array(["x", "y", "x", None, "y", "x", "y", None, "x", "y", "z", "x", None, "y", "z", "x", "y", "z"]),
        # all NULL in every row
        "e": pa.array([None] * 18, pa.string()),
        # NULL on the whole first day: that day's segment has nothing in it
        "m": pa.array([None] * 6 + [10, 20, None, 40, 50, None, 70, None, 90, 100, 110, None], pa.int64()),
    })


_SAMPLE_STRINGS = ("channel", "flags", "page", "diffUrl", "comment", "user", "namespace", "cityName", "countryName",
                   "regionIsoCode", "countryIsoCode", "regionName")
_SAMPLE_BOOLS = ("isRobot", "isUnpatrolled", "isNew", "isMinor", "isAnonymous")
_SAMPLE_LONGS = ("added", "commentLength", "delta", "deleted", "metroCode")


def wikisample() -> pa.Table:
    with open(os.path.join(SHARED_DATA, "wikipedia-sampled.json")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    columns = {"__time": _times([r["timestamp"] for r in rows])}
    for name in _SAMPLE_STRINGS:
        columns[name] = pa.array([r.get(name) for r in rows], pa.string())
    for name in _SAMPLE_BOOLS:
        columns[name] = pa.array([None if r.get(name) is None else str(r[name]).lower() for r in rows], pa.string())
    for name in _SAMPLE_LONGS:
        columns[name] = pa.array([r.get(name) for r in rows], pa.int64())
    columns["deltaBucket"] = pa.array([r.get("deltaBucket") for r in rows], pa.float64())
    return pa.table(columns)


def null_example() -> pa.Table:
    with open(os.path.join(SHARED_DATA, "docs_inline", "null_example.json")) as f:
        rows = [json.loads(line) for line in f if line.strip()]

    def iso(text: str) -> str:  # the doc's 'd/M/yyyy H:mm:ss'
        d, mo, y, h, mi, s = map(int, re.split(r"[/ :]", text))
        return dt.datetime(y, mo, d, h, mi, s).strftime("%Y-%m-%dT%H:%M:%SZ")

    return pa.table({
        "__time": _times([iso(r["date"]) for r in rows]),
        "title": pa.array([r["title"] for r in rows], pa.string()),
        "string_value": pa.array([r["string_value"] for r in rows], pa.string()),
        "numeric_value": pa.array([r["numeric_value"] for r in rows], pa.int64()),
    })


def countries() -> pa.Table:
    data = [("GB", "United Kingdom", 67_000_000, 242_495.0), ("US", "United States", 331_000_000, 9_833_520.0),
            ("DE", "Germany", 83_000_000, 357_022.0), ("FR", "France", 68_000_000, 551_695.0),
            ("IE", "Ireland", 5_000_000, 70_273.0), ("ES", "Spain", 47_000_000, 505_990.0),
            ("IT", "Italy", 59_000_000, 301_340.0), ("JP", "Japan", 125_000_000, 377_975.0),
            ("XX", "Nowhere", 0, None), (None, "Unknown", None, 1.5)]
    return pa.table({
        "__time": _times(["2000-01-01T00:00:00Z"] * len(data)),
        "isoCode": pa.array([r[0] for r in data], pa.string()),
        "name": pa.array([r[1] for r in data], pa.string()),
        "population": pa.array([r[2] for r in data], pa.int64()),
        "area": pa.array([r[3] for r in data], pa.float64()),
    })


def time_edges() -> pa.Table:
    """Instants where time arithmetic goes wrong: DST changes (Paris, Los Angeles), a year end in
    ISO week 53, a leap day, a month end, and one instant before the epoch."""
    rows = [
        ("1969-12-31T23:59:59.500Z", "pre-epoch", 1),
        ("2000-02-29T00:00:00.000Z", "leap-2000", 2),
        ("2015-03-29T00:30:00.000Z", "paris-before-dst", 3),
        ("2015-03-29T01:30:00.000Z", "paris-after-dst", 4),
        ("2015-11-01T07:30:00.000Z", "la-00:30-pdt", 5),
        ("2015-11-01T08:30:00.000Z", "la-01:30-pdt", 6),
        ("2015-11-01T09:30:00.000Z", "la-01:30-pst", 7),
        ("2015-11-01T10:30:00.000Z", "la-02:30-pst", 8),
        ("2015-12-31T23:59:59.999Z", "year-end", 9),
        ("2016-01-01T00:00:00.000Z", "new-year", 10),
        ("2016-01-31T12:00:00.000Z", "month-end", 11),
        ("2016-02-29T12:00:00.000Z", "leap-day", 12),
        ("2016-03-13T09:30:00.000Z", "la-01:30-pst-spring", 13),
        ("2016-03-13T10:30:00.000Z", "la-03:30-pdt-spring", 14),
    ]
    return pa.table({
        "__time": _times([r[0] for r in rows]),
        "label": pa.array([r[1] for r in rows], pa.string()),
        "v": pa.array([r[2] for r in rows], pa.int64()),
    })


# datasource -> (table builder, publish keyword arguments)
DATASETS = {
    "wiki": (wiki, {"sort_columns": ["channel"], "segment_granularity": "day",
                    "rows_per_segment": WIKI_ROWS_PER_SEGMENT}),
    "nulls": (nulls, {"segment_granularity": "day"}),
    "wikisample": (wikisample, {"segment_granularity": "hour"}),
    "null_example": (null_example, {"segment_granularity": "day"}),
    "countries": (countries, {"segment_granularity": "day"}),
    "time_edges": (time_edges, {"segment_granularity": "year"}),
}


def tables() -> dict[str, pa.Table]:
    return {name: build() for name, (build, _) in DATASETS.items()}


def publish_all(cluster, data: dict[str, pa.Table]) -> dict[str, list]:
    """Publish every table and wait until the broker sees all of its segments."""
    published = {}
    for name, table in data.items():
        published[name] = cluster.publish(table, name, **DATASETS[name][1])
    for name, descriptors in published.items():
        cluster.wait_queryable(name, len(descriptors), replicas=len(cluster.historicals))
    return published


def load_duckdb(data: dict[str, pa.Table]):
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # Druid's order of NULLs: first ascending, last descending.
    con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
    con.execute("CREATE SCHEMA druid")
    for name, table in data.items():
        con.register(f"{name}_arrow", table)
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM "{name}_arrow"')
        con.unregister(f"{name}_arrow")
        con.execute(f'CREATE VIEW druid."{name}" AS SELECT * FROM main."{name}"')
    return con
