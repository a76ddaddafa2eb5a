"""Cluster benchmark: the engine benchmark's queries end to end through the broker of a local
cluster (``strata up``: coordinator, broker, two historicals as separate processes), beside the
in-process engine and DuckDB on the same data; plus trivial-query latency and throughput.

    .venv/bin/python bench/cluster.py [--rows 5000000] [--runs 5] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.engine import print_rows, queries, timed  # noqa: E402
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
TRIVIAL_SQL = "SELECT COUNT(*) AS c FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' AND __time < TIMESTAMP '2015-09-12 00:01:00'"

TRIVIAL = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12T00:00:00Z/2015-09-12T00:01:00Z"],
           "granularity": "all", "aggregations": [{"type": "count", "name": "c"}]}


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


def sql_through_adbc(flight_uri: str, con, user: str, args) -> tuple[list, float, float]:
    """Every SQL query end to end through the real ADBC Flight SQL driver, beside DuckDB."""
    import adbc_driver_flightsql.dbapi as flight_sql

    out = []
    with flight_sql.connect(flight_uri) as conn:
        cur = conn.cursor()

        def run(sql, params=None):
            cur.execute(sql, parameters=params)
            return cur.fetch_arrow_table()

        for (name, sql), duck in zip(SQL_QUERIES, DUCK_SQL):
            params = [user] if "?" in sql else None
            s_ms, got = timed(lambda: run(sql, params), args.runs)
            duck_sql = duck.replace("?", "'" + user.replace("'", "''") + "'") if params else duck
            d_ms, want = timed(lambda: con.sql(duck_sql).to_arrow_table(), args.runs)
            out.append((name, s_ms, d_ms, got.num_rows == want.num_rows))
        samples = []
        for _ in range(args.latency_runs):
            started = time.perf_counter()
            run(TRIVIAL_SQL)
            samples.append((time.perf_counter() - started) * 1000)
        cur.close()
    samples.sort()
    return out, samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of the throughput run")
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
        segments = [Segment.open(storage.uri(d.location).removeprefix("file://")) for d in descriptors]
        parquet = os.path.join(work, "wiki.parquet")
        pq.write_table(data.set_column(0, "__time", data.column("__time").cast(pa.timestamp("ms"))), parquet)
        con = duckdb.connect()
        con.sql(f"CREATE VIEW wiki AS SELECT * FROM read_parquet('{parquet}')")
        user = con.sql("SELECT \"user\" FROM wiki GROUP BY 1 HAVING count(*) BETWEEN 20 AND 200 ORDER BY 1 LIMIT 1"
                       ).fetchall()[0][0]

        rows = []
        for name, _kind, native, sql in queries(user):
            c_ms, (table, _) = timed(lambda: client.native(native), args.runs)
            e_ms, local = timed(lambda: execute(native, segments), args.runs)
            d_ms, _ = timed(lambda: con.sql(sql).to_arrow_table(), args.runs)
            same = table.num_rows == local.table.num_rows
            rows.append((name, c_ms, e_ms, d_ms, same))
        p50, p99 = latency(client, args.latency_runs)
        qps = throughput(endpoints, 8, args.seconds)
        sql_rows, flight_p50, flight_p99 = sql_through_adbc(endpoints["flight"], con, user, args)
        client.close()
    finally:
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)

    print(f"rows {args.rows:,}; {len(descriptors)} segments x 2 replicas on 2 historicals; "
          f"build+push+publish+load {load_s:.1f}s")
    header = ("query", "cluster ms", "engine ms", "DuckDB ms", "cluster/engine", "cluster/DuckDB", "same rows")
    lines = [(n, f"{c:.1f}", f"{e:.1f}", f"{d:.1f}", f"{c / e:.2f}", f"{c / d:.2f}", "yes" if ok else "NO")
             for n, c, e, d, ok in rows]
    print_rows(header, lines, args.markdown)
    print(f"trivial query through the broker: p50 {p50:.2f} ms, p99 {p99:.2f} ms; "
          f"{qps:.0f} queries/s with 8 concurrent clients")
    print(f"median cluster/DuckDB ratio: {statistics.median(c / d for _, c, _, d, _ in rows):.2f}")
    print()
    header = ("SQL query (ADBC Flight SQL)", "strata ms", "DuckDB ms", "ratio", "same rows")
    print_rows(header, [(n, f"{s:.1f}", f"{d:.1f}", f"{s / d:.2f}", "yes" if ok else "NO") for n, s, d, ok in sql_rows],
               args.markdown)
    print(f"trivial SQL query through Flight SQL (ADBC): p50 {flight_p50:.2f} ms, p99 {flight_p99:.2f} ms (goal p50 <= 3 ms)")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
