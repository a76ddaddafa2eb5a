"""Cluster benchmark: the engine benchmark's queries end to end through the broker of a local
cluster (``strata up``: coordinator, broker, two historicals as separate processes), beside the
in-process engine and the peers on the same data: DuckDB over Parquet, DuckDB over a native
table, and ClickHouse (chdb, a MergeTree table ORDER BY __time; peers run in-process, no network
hop); plus trivial-query latency and throughput, and a topN over 100,000 URL-like values with the
broker's exact three-round topN beside shipping every group (rows and bytes historicals sent,
from the broker's metrics). The geomean of strata / ClickHouse covers the five queries (the
equality filter on the high-cardinality ``user`` among them) and the topN over 100k URLs.

    .venv/bin/python bench/cluster.py [--rows 5000000] [--runs 5] [--url-rows 2000000] [--markdown]

Query times are printed as "repeated / first run" (``bench/first_run.py``): repeated runs one query
text again and again (strata keeps what it worked out for that text between runs); first run gives
every run a text not seen before (varied output names of a native query, a time bound before the
data in SQL), same work, for strata and the peers alike. The trivial-query latency and throughput
lines repeat one text.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench import first_run  # noqa: E402
from bench.engine import print_rows, queries  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from common.query import execute  # noqa: E402
from common.segment import Segment  # noqa: E402
from services.cli.cluster_client import ClusterClient  # noqa: E402
from services.cli.local_cluster import LocalCluster  # noqa: E402
from services.deep_storage import deep_storage_from_url  # noqa: E402

SQL_QUERIES = [
    ("SQL hourly count+sum", "SELECT TIME_FLOOR(__time, 'PT1H') AS t, COUNT(*) AS c, SUM(added) AS s FROM wiki GROUP BY 1"),
    ("SQL topN pages one day", "SELECT page, SUM(added) AS s FROM wiki WHERE __time >= TIMESTAMP '2015-09-13' AND "
                               "__time < TIMESTAMP '2015-09-14' GROUP BY page ORDER BY s DESC LIMIT 10"),
    ("SQL groupBy channel,isRobot", "SELECT channel, isRobot, COUNT(*) AS c, SUM(delta) AS s FROM wiki "
                                    "WHERE namespace = 'Main' GROUP BY 1, 2"),
    ("SQL approx distinct users/day", "SELECT TIME_FLOOR(__time, 'P1D') AS d, APPROX_COUNT_DISTINCT(\"user\") AS u "
                                      "FROM wiki GROUP BY 1"),
    ("SQL one user's rows", "SELECT __time, page, added FROM wiki WHERE \"user\" = ?"),
]
DUCK_SQL = [
    "SELECT date_trunc('hour', __time) AS t, count(*) AS c, sum(added) AS s FROM wiki GROUP BY 1",
    "SELECT page, sum(added) AS s FROM wiki WHERE __time >= TIMESTAMP '2015-09-13' AND __time < TIMESTAMP '2015-09-14' "
    "GROUP BY page ORDER BY s DESC LIMIT 10",
    "SELECT channel, isRobot, count(*) AS c, sum(delta) AS s FROM wiki WHERE namespace = 'Main' GROUP BY 1, 2",
    "SELECT date_trunc('day', __time) AS d, approx_count_distinct(\"user\") AS u FROM wiki GROUP BY 1",
    "SELECT __time, page, added FROM wiki WHERE \"user\" = ?",
]
# The same queries for ClickHouse (chdb): its idiomatic spelling, uniq() for approximate distinct.
CH_SQL = [
    "SELECT toStartOfHour(__time) AS t, count() AS c, sum(added) AS s FROM b.wiki GROUP BY t ORDER BY t",
    "SELECT page, sum(added) AS s FROM b.wiki WHERE __time >= toDateTime64('2015-09-13 00:00:00', 3, 'UTC') AND "
    "__time < toDateTime64('2015-09-14 00:00:00', 3, 'UTC') GROUP BY page ORDER BY s DESC, page LIMIT 10",
    "SELECT channel, isRobot, count() AS c, sum(delta) AS s FROM b.wiki WHERE namespace = 'Main' "
    "GROUP BY channel, isRobot ORDER BY channel, isRobot",
    "SELECT toStartOfDay(__time) AS d, uniq(user) AS u FROM b.wiki GROUP BY d ORDER BY d",
    "SELECT __time, page, added FROM b.wiki WHERE user = ?",
]
CH_URLS = "SELECT url, sum(bytes) AS b, count() AS n FROM b.urls GROUP BY url ORDER BY b DESC, url LIMIT 10"
TRIVIAL_SQL = "SELECT COUNT(*) AS c FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' AND __time < TIMESTAMP '2015-09-12 00:01:00'"

TRIVIAL = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12T00:00:00Z/2015-09-12T00:01:00Z"],
           "granularity": "all", "aggregations": [{"type": "count", "name": "c"}]}


URLS = 100_000


def url_table(rows: int) -> pa.Table:
    """Page views over 100,000 URL-like values with a long tail (Zipf), a week of time."""
    rng = np.random.default_rng(16)
    rank = (rng.zipf(1.1, rows) - 1) % URLS
    start = 1442016000000  # 2015-09-12
    ids = np.arange(URLS)
    names = pa.array([f"https://www.example{i % 997}.com/articles/{i}/index.html" for i in ids])
    return pa.table({
        "__time": pa.array(start + np.sort(rng.integers(0, 7 * 86_400_000, rows)), pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")),
        "url": names.take(pa.array(rank)),
        "bytes": pa.array(rng.integers(200, 50_000, rows), pa.int64()),
    })


def topn_urls(k: int, rounds: bool) -> dict:
    return {"queryType": "topN", "dataSource": "urls", "intervals": ["2015-09-01/2015-10-01"], "granularity": "all",
            "dimension": "url", "metric": "b", "threshold": k,
            "aggregations": [{"type": "longSum", "name": "b", "fieldName": "bytes"}, {"type": "count", "name": "n"}],
            "context": {"topNThreshold": rounds}}


def shipped(broker_http: str) -> tuple[float, float]:
    """(rows, bytes) of partial results historicals sent the broker so far, from its metrics."""
    with urllib.request.urlopen(broker_http + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {"rows": 0.0, "bytes": 0.0}
    for line in text.splitlines():
        for what in out:
            if line.startswith(f"strata_broker_partial_{what}_total{{"):
                out[what] += float(line.rsplit(" ", 1)[1])
    return out["rows"], out["bytes"]


class ClickHouse:
    """ClickHouse in-process (chdb): the rows in MergeTree tables ORDER BY __time; None when chdb
    (a benchmark extra) is not installed."""

    def __init__(self, path: str) -> None:
        from chdb import session as chs

        self.session = chs.Session(path)
        self.session.query("CREATE DATABASE IF NOT EXISTS b")

    def load(self, name: str, parquet: str) -> None:
        # Parquet columns read back as Nullable; the sort key must not be.
        self.session.query(f"CREATE TABLE b.{name} ENGINE = MergeTree ORDER BY __time AS SELECT "
                           f"assumeNotNull(__time) AS __time, * EXCEPT (__time) FROM file('{parquet}', Parquet)")
        self.session.query(f"OPTIMIZE TABLE b.{name} FINAL")

    def rows(self, sql: str) -> list[str]:
        return self.session.query(sql, "TSV").bytes().decode().splitlines()

    def close(self) -> None:
        self.session.close()


def clickhouse(work: str) -> ClickHouse | None:
    try:
        return ClickHouse(os.path.join(work, "chdb"))
    except ImportError:
        return None


def _quoted(sql: str, value: str) -> str:
    return sql.replace("?", "'" + value.replace("'", "''") + "'")


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def topn_over_urls(client: ClusterClient, endpoints: dict, con, ch, args) -> list:
    """topN 10 URLs by bytes: rounds vs shipping everything vs DuckDB and ClickHouse; same rows checked."""
    rows = []
    duck_sql = "SELECT url, sum(bytes) AS b, count(*) AS n FROM urls GROUP BY url ORDER BY b DESC, url LIMIT 10"
    d_ms, d1_ms, want = first_run.repeated_and_first(lambda t: con.sql(t).to_arrow_table(),
                                                     first_run.sql_variant(duck_sql), args.runs)
    h_ms, h1_ms, h_rows = first_run.repeated_and_first(ch.rows, first_run.clickhouse_variant(CH_URLS), args.runs) \
        if ch else (float("nan"), float("nan"), None)
    want_urls = want.column("url").to_pylist()
    h_same = h_rows is None or [r.split("\t")[0] for r in h_rows] == want_urls
    for label, flag in (("exact topN in rounds (TPUT)", True), ("ship every group", False)):
        client.native(topn_urls(10, flag))  # warm
        r0, b0 = shipped(endpoints["broker_http"])
        got, _ = client.native(topn_urls(10, flag))
        r1, b1 = shipped(endpoints["broker_http"])
        ms, ms1, _ = first_run.repeated_and_first(client.native, first_run.native_variant(topn_urls(10, flag)),
                                                  args.runs)
        same = got.column("url").to_pylist() == want_urls and \
            got.column("b").to_pylist() == want.column("b").to_pylist() and h_same
        rows.append((label, (ms, ms1), (d_ms, d1_ms), (h_ms, h1_ms), r1 - r0, b1 - b0, same))
    return rows


def latency(client: ClusterClient, n: int) -> tuple[float, float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        client.native(TRIVIAL)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def throughput(endpoints: dict, clients: int, seconds: float) -> float:
    done = [0] * clients
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        c = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        while time.monotonic() < stop:
            c.native(TRIVIAL)
            done[i] += 1
        c.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / seconds


def cpu_ms(pids: dict) -> dict:
    """CPU time (user + system, ms) each cluster process has used so far: per query, a figure the
    machine's other load hardly moves, unlike latency."""
    out = {}
    for role, pid in pids.items():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[role] = out.get(role, 0.0) + (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    return out


def sql_through_adbc(flight_uri: str, con, ch, user: str, args, pids: dict) -> tuple[list, list]:
    """Every SQL query end to end through the real ADBC Flight SQL driver, beside DuckDB
    (Parquet) and ClickHouse."""
    import adbc_driver_flightsql.dbapi as flight_sql

    out = []
    with flight_sql.connect(flight_uri) as conn:
        cur = conn.cursor()

        def run(sql, params=None):
            cur.execute(sql, parameters=params)
            return cur.fetch_arrow_table()

        for (name, sql), duck, ch_sql in zip(SQL_QUERIES, DUCK_SQL, CH_SQL):
            params = [user] if "?" in sql else None
            s_ms, s1_ms, got = first_run.repeated_and_first(lambda t: run(t, params), first_run.sql_variant(sql),
                                                            args.runs)
            d_ms, d1_ms, want = first_run.repeated_and_first(
                lambda t: con.sql(t).to_arrow_table(), first_run.sql_variant(_quoted(duck, user)), args.runs)
            h_ms, h1_ms, h_rows = first_run.repeated_and_first(
                ch.rows, first_run.clickhouse_variant(_quoted(ch_sql, user)), args.runs) \
                if ch else (float("nan"), float("nan"), None)
            same = got.num_rows == want.num_rows and (h_rows is None or len(h_rows) == got.num_rows)
            out.append((name, (s_ms, s1_ms), (d_ms, d1_ms), (h_ms, h1_ms), same))
        figures = []
        for text in (TRIVIAL_SQL, "SELECT 1"):
            samples = []
            before = cpu_ms(pids)
            for _ in range(args.latency_runs):
                started = time.perf_counter()
                run(text)
                samples.append((time.perf_counter() - started) * 1000)
            after = cpu_ms(pids)
            samples.sort()
            cpu = {role: (after[role] - before[role]) / args.latency_runs for role in after}
            figures.append((samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))],
                            cpu))
        cur.close()
    return out, figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of the throughput run")
    ap.add_argument("--url-rows", type=int, default=2_000_000, help="rows of the topN-over-100k-URLs datasource")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="strata-cluster-bench-")
    cluster = LocalCluster(os.path.join(work, "cluster"))
    try:
        cluster.up(historicals=2, ports="auto")  # a benchmark must not depend on the documented ports being free
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        data = demo_table(args.rows)
        started = time.perf_counter()
        storage = deep_storage_from_url(os.path.join(cluster.dir, "deep-storage"))
        descriptors = client.build_and_publish(data, "wiki", storage)
        client.wait_loaded("wiki", len(descriptors), 600, replicas=2)
        load_s = time.perf_counter() - started
        while client.native(TRIVIAL)[1].segments < 1:  # the broker sees announcements a moment later
            time.sleep(0.05)
        urls = url_table(args.url_rows)
        url_descriptors = client.build_and_publish(urls, "urls", storage)
        client.wait_loaded("urls", len(url_descriptors), 600, replicas=2)
        probe = dict(topn_urls(1, False), intervals=["2015-09-12/2015-09-13"])
        deadline = time.monotonic() + 60
        while client.native(probe)[1].segments < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        segments = [Segment.open(storage.uri(d.location).removeprefix("file://")) for d in descriptors]
        parquet = os.path.join(work, "wiki.parquet")
        pq.write_table(data.set_column(0, "__time", data.column("__time").cast(pa.timestamp("ms"))), parquet)
        con = duckdb.connect()
        con.sql(f"CREATE VIEW wiki AS SELECT * FROM read_parquet('{parquet}')")
        url_parquet = os.path.join(work, "urls.parquet")
        pq.write_table(urls.set_column(0, "__time", urls.column("__time").cast(pa.timestamp("ms"))), url_parquet)
        con.sql(f"CREATE VIEW urls AS SELECT * FROM read_parquet('{url_parquet}')")
        table_con = duckdb.connect()  # DuckDB's own table format
        table_con.sql(f"CREATE TABLE wiki AS SELECT * FROM read_parquet('{parquet}')")
        ch = clickhouse(work)
        if ch is not None:
            ch.load("wiki", parquet)
            ch.load("urls", url_parquet)
        user = con.sql("SELECT \"user\" FROM wiki GROUP BY 1 HAVING count(*) BETWEEN 20 AND 200 ORDER BY 1 LIMIT 1"
                       ).fetchall()[0][0]

        rows = []
        for (name, _kind, native, sql), ch_sql in zip(queries(user), CH_SQL):
            variant = first_run.native_variant(native)
            c_ms, c1_ms, (table, _) = first_run.repeated_and_first(client.native, variant, args.runs)
            e_ms, e1_ms, local = first_run.repeated_and_first(lambda q: execute(q, segments), variant, args.runs)
            d_ms, d1_ms, _ = first_run.repeated_and_first(lambda t: con.sql(t).to_arrow_table(),
                                                          first_run.sql_variant(sql), args.runs)
            t_ms, t1_ms, _ = first_run.repeated_and_first(lambda t: table_con.sql(t).to_arrow_table(),
                                                          first_run.sql_variant(sql), args.runs)
            h_ms, h1_ms, h_rows = first_run.repeated_and_first(
                ch.rows, first_run.clickhouse_variant(_quoted(ch_sql, user)), args.runs) \
                if ch else (float("nan"), float("nan"), None)
            same = table.num_rows == local.table.num_rows and (h_rows is None or len(h_rows) == table.num_rows)
            rows.append((name, (c_ms, c1_ms), (e_ms, e1_ms), (d_ms, d1_ms), (t_ms, t1_ms), (h_ms, h1_ms), same))
        p50, p99 = latency(client, args.latency_runs)
        qps = throughput(endpoints, 8, args.seconds)
        sql_rows, latencies = sql_through_adbc(endpoints["flight"], con, ch, user, args,
                                               {rec["name"]: rec["pid"] for rec in cluster.running()["nodes"]})
        url_rows = topn_over_urls(client, endpoints, con, ch, args)
        if ch is not None:
            ch.close()
        client.close()
    finally:
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)

    def pair(a: tuple, fmt: str = "{:.1f}") -> str:
        return f"{fmt.format(a[0])} / {fmt.format(a[1])}"

    def ratio(a: tuple, b: tuple) -> str:
        return pair((a[0] / b[0], a[1] / b[1]), "{:.2f}")

    print(f"rows {args.rows:,}; {len(descriptors)} segments x 2 replicas on 2 historicals; "
          f"build+push+publish+load {load_s:.1f}s; load average {os.getloadavg()[0]:.1f}")
    print("each time and ratio cell is 'repeated / first run' (median of " f"{args.runs}): repeated = one query "
          "text again and again, after a warm-up run of it; first run = a query text not seen before on every run, "
          "same work (bench/first_run.py)")
    header = ("query", "cluster ms", "engine ms", "DuckDB Parquet ms", "DuckDB table ms", "ClickHouse ms",
              "cluster/engine", "cluster/DuckDB Parquet", "cluster/DuckDB table", "cluster/ClickHouse", "same rows")
    lines = [(n, pair(c), pair(e), pair(d), pair(t), pair(h), ratio(c, e), ratio(c, d), ratio(c, t), ratio(c, h),
              "yes" if ok else "NO")
             for n, c, e, d, t, h, ok in rows]
    print_rows(header, lines, args.markdown)
    print(f"trivial query through the broker (one text, repeated): p50 {p50:.2f} ms, p99 {p99:.2f} ms; "
          f"{qps:.0f} queries/s with 8 concurrent clients")
    for at, label in ((0, "repeated"), (1, "first run")):
        print(f"median cluster/DuckDB Parquet ratio, {label}: {statistics.median(r[1][at] / r[3][at] for r in rows):.2f}")
    print()
    header = ("SQL query (ADBC Flight SQL)", "strata ms", "DuckDB Parquet ms", "ClickHouse ms", "strata/DuckDB",
              "strata/ClickHouse", "same rows")
    print_rows(header, [(n, pair(s), pair(d), pair(h), ratio(s, d), ratio(s, h), "yes" if ok else "NO")
                        for n, s, d, h, ok in sql_rows], args.markdown)
    for label, goal, (p50_ms, p99_ms, cpu) in zip(("one-segment SQL query", "SELECT 1 (no historical)"), (3, 2),
                                                   latencies):
        used = ", ".join(f"{name} {ms:.2f}" for name, ms in sorted(cpu.items()))
        print(f"{label} through Flight SQL (ADBC), one text repeated: p50 {p50_ms:.2f} ms, p99 {p99_ms:.2f} ms "
              f"(goal p50 <= {goal} ms); CPU ms per query: {used}; all processes {sum(cpu.values()):.2f}")
    print()
    print(f"topN 10 of {URLS:,} URL-like values by sum(bytes), {args.url_rows:,} rows, {len(url_descriptors)} segments:")
    header = ("topN over 100k URLs", "strata ms", "DuckDB Parquet ms", "ClickHouse ms", "strata/DuckDB",
              "strata/ClickHouse", "rows shipped", "bytes shipped", "same rows")
    print_rows(header, [(n, pair(s), pair(d), pair(h), ratio(s, d), ratio(s, h), f"{r:,.0f}",
                         f"{b:,.0f}", "yes" if ok else "NO") for n, s, d, h, r, b, ok in url_rows], args.markdown)
    print()
    # The issue's set: the five queries (equality filter on the high-cardinality user among them)
    # and the topN over 100k URLs (the exact rounds, the default path).
    for at, label in ((0, "repeated"), (1, "first run")):
        native_ratios = [r[1][at] / r[5][at] for r in rows] + [url_rows[0][1][at] / url_rows[0][3][at]]
        sql_ratios = [r[1][at] / r[3][at] for r in sql_rows] + [url_rows[0][1][at] / url_rows[0][3][at]]
        print(f"{label}: geomean strata/ClickHouse over {len(native_ratios)} queries: native via the broker's gRPC "
              f"{geomean(native_ratios):.2f}, SQL via ADBC Flight SQL {geomean(sql_ratios):.2f} (goal <= 1.0); "
              f"equality filter on user: native {rows[-1][1][at] / rows[-1][5][at]:.2f}, SQL "
              f"{sql_rows[-1][1][at] / sql_rows[-1][3][at]:.2f} (goal <= 1.5); topN over 100k URLs "
              f"{url_rows[0][1][at] / url_rows[0][3][at]:.2f}")
        print(f"{label}: geomean strata/DuckDB table: {geomean([r[1][at] / r[4][at] for r in rows]):.2f}; "
              f"strata/DuckDB Parquet: {geomean([r[1][at] / r[3][at] for r in rows]):.2f}")
    return 0 if all(r[6] for r in rows) and all(r[4] for r in sql_rows) and all(r[6] for r in url_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
