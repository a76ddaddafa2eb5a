"""Engine benchmark: strata's in-process native engine vs DuckDB over the same data as Parquet.

    .venv/bin/python bench/engine.py [--rows 10000000] [--runs 5] [--markdown]

Generates demo rows, builds DAY segments (reports rows/s), writes the same rows as Parquet, then
runs a fixed set of queries on both engines and prints median latency, the strata/DuckDB ratio
(below 1 means strata is faster) and rows strata scanned. Results are checked against each other.

Each query is timed two ways on both engines (``bench/first_run.py``): "repeated", one query text
run again and again (strata reuses what it kept for that text), and "first run", a text not seen
before on every run (varied output names or time bound, same work).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench import first_run  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from common.query import execute  # noqa: E402
from common.segment import Segment  # noqa: E402
from common.segment.time_partitioner import build_segments  # noqa: E402

DAYS = "2015-09-12/2015-09-19"
DAY1 = "2015-09-13/2015-09-14"


def queries(user: str):
    return [
        ("hourly timeseries count+sum", "agg", {
            "queryType": "timeseries", "dataSource": "wiki", "intervals": [DAYS], "granularity": "hour",
            "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "added"}]},
         "SELECT date_trunc('hour', __time) AS t, count(*) AS c, sum(added) AS s FROM wiki GROUP BY 1 ORDER BY 1"),
        ("topN 10 pages by sum(added), one day", "agg", {
            "queryType": "topN", "dataSource": "wiki", "intervals": [DAY1], "granularity": "all",
            "dimension": "page", "metric": "s", "threshold": 10,
            "aggregations": [{"type": "longSum", "name": "s", "fieldName": "added"}]},
         "SELECT page, sum(added) AS s FROM wiki WHERE __time >= TIMESTAMP '2015-09-13 00:00:00' AND "
         "__time < TIMESTAMP '2015-09-14 00:00:00' GROUP BY page ORDER BY s DESC, page LIMIT 10"),
        ("groupBy channel,isRobot filtered", "agg", {
            "queryType": "groupBy", "dataSource": "wiki", "intervals": [DAYS], "granularity": "all",
            "dimensions": ["channel", "isRobot"], "filter": {"type": "equals", "column": "namespace", "matchValue": "Main"},
            "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "delta"}]},
         "SELECT channel, isRobot, count(*) AS c, sum(delta) AS s FROM wiki WHERE namespace = 'Main' "
         "GROUP BY 1, 2 ORDER BY 1, 2"),
        ("approx distinct users per day", "agg", {
            "queryType": "timeseries", "dataSource": "wiki", "intervals": [DAYS], "granularity": "day",
            "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "round": True}]},
         "SELECT date_trunc('day', __time) AS t, approx_count_distinct(\"user\") AS u FROM wiki GROUP BY 1 ORDER BY 1"),
        ("scan rows of one user (equality)", "needle", {
            "queryType": "scan", "dataSource": "wiki", "intervals": [DAYS],
            "filter": {"type": "equals", "column": "user", "matchValue": user},
            "columns": ["__time", "page", "added"]},
         f"SELECT __time, page, added FROM wiki WHERE \"user\" = '{user}'"),
    ]


def print_rows(header: tuple, lines: list[tuple], markdown: bool) -> None:
    """The side-by-side table, aligned for a terminal or as Markdown for docs/benchmarks.md."""
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)))


def timed(fn, runs: int) -> tuple[float, object]:
    fn()  # warm-up: first touches of mapped pages and DuckDB's Parquet metadata
    samples, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args()

    work = args.dir or tempfile.mkdtemp(prefix="strata-bench-")
    os.makedirs(work, exist_ok=True)
    seg_dir = os.path.join(work, "segments")
    shutil.rmtree(seg_dir, ignore_errors=True)
    started = time.perf_counter()
    data = demo_table(args.rows)
    gen_s = time.perf_counter() - started
    parquet = os.path.join(work, "wiki.parquet")
    # DuckDB gets naive UTC timestamps: TIMESTAMPTZ would make it pay for time-zone handling
    # that strata's UTC buckets do not, which would flatter strata.
    naive = data.set_column(0, "__time", data.column("__time").cast(pa.timestamp("ms")))
    pq.write_table(naive, parquet)

    started = time.perf_counter()
    built = build_segments(data, "wiki", seg_dir, segment_granularity="day")
    build_s = time.perf_counter() - started
    segments = [Segment.open(p) for p, _ in built]

    con = duckdb.connect()
    con.sql(f"CREATE VIEW wiki AS SELECT * FROM read_parquet('{parquet}')")
    user = con.sql("SELECT \"user\" FROM wiki GROUP BY 1 HAVING count(*) BETWEEN 20 AND 200 ORDER BY 1 LIMIT 1").fetchall()[0][0]

    rows = []
    for name, kind, native, sql in queries(user):
        s_ms, result = timed(lambda: execute(native, segments), args.runs)
        d_ms, duck = timed(lambda: con.sql(sql).to_arrow_table(), args.runs)
        s1_ms, first = first_run.timed_first_runs(
            lambda k: (lambda q=first_run.native(native, k): execute(q, segments)), args.runs)
        d1_ms, duck1 = first_run.timed_first_runs(
            lambda k: (lambda q=first_run.sql(sql, k): con.sql(q).to_arrow_table()), args.runs)
        ok = result.table.num_rows == duck.num_rows == first.table.num_rows == duck1.num_rows
        rows.append((name, kind, s_ms, d_ms, s1_ms, d1_ms, result.stats.rows_scanned, ok))

    print(f"rows {args.rows:,}; {len(segments)} day segments; generate {gen_s:.1f}s; "
          f"segment build {build_s:.1f}s = {args.rows / build_s / 1e6:.2f}M rows/s; "
          f"load average {os.getloadavg()[0]:.1f}")
    header = ("query", "strata ms repeated", "DuckDB ms repeated", "ratio repeated", "strata ms first run",
              "DuckDB ms first run", "ratio first run", "rows scanned", "same rows")
    lines = [(n, f"{s:.1f}", f"{d:.1f}", f"{s / d:.2f}", f"{s1:.1f}", f"{d1:.1f}", f"{s1 / d1:.2f}",
              f"{scanned:,}", "yes" if ok else "NO")
             for n, _, s, d, s1, d1, scanned, ok in rows]
    print_rows(header, lines, args.markdown)
    print("ratio = strata ms / DuckDB ms (below 1: strata faster). repeated: one query text, timed after a "
          "warm-up run of it; first run: a query text not seen before on every run (bench/first_run.py)")
    for label, at in (("repeated", (2, 3)), ("first run", (4, 5))):
        agg = [r[at[0]] / r[at[1]] for r in rows if r[1] == "agg"]
        needle = [r[at[1]] / r[at[0]] for r in rows if r[1] == "needle"]
        print(f"{label}: median ratio on aggregate queries: {statistics.median(agg):.2f} (goal <= 1.5); "
              f"equality filter speed-up vs DuckDB: {needle[0]:.1f}x (goal >= 10x)")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r[7] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
