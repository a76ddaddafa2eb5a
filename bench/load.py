"""Load benchmark: N concurrent Flight SQL clients (the ADBC driver, one connection each) run a
mix of SQL queries for S seconds against a local cluster (``strata up``: coordinator, broker,
two historicals as separate processes) holding the demo data; every answer is compared with the
one DuckDB gives over the same rows. Prints throughput, p50/p95/p99 latency per query and in all,
and the errors and wrong answers by kind.

    .venv/bin/python bench/load.py [--rows 5000000] [--clients 64] [--seconds 60] [--markdown]

``--scan-rows N`` instead measures one scan of N rows through Flight SQL: its time and the
broker's peak resident memory (``VmHWM``) against the size of the result.
"""

from __future__ import annotations

import argparse
import warnings
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402

from common.demo import table as demo_table  # noqa: E402
from services.cli.cluster_client import ClusterClient  # noqa: E402
from services.cli.local_cluster import LocalCluster  # noqa: E402
from services.deep_storage import deep_storage_from_url  # noqa: E402

# (name, strata SQL, DuckDB SQL over the same rows); answers are compared as sets of rows.
QUERIES = [
    ("hourly count+sum", "SELECT TIME_FLOOR(__time, 'PT1H') AS t, COUNT(*) AS c, SUM(added) AS s FROM wiki GROUP BY 1",
     "SELECT date_trunc('hour', __time) AS t, count(*) AS c, sum(added) AS s FROM wiki GROUP BY 1"),
    ("topN pages one day", "SELECT page, SUM(added) AS s FROM wiki WHERE __time >= TIMESTAMP '2015-09-13' AND "
                           "__time < TIMESTAMP '2015-09-14' GROUP BY page ORDER BY s DESC, page LIMIT 10",
     "SELECT page, sum(added) AS s FROM wiki WHERE __time >= TIMESTAMP '2015-09-13' AND "
     "__time < TIMESTAMP '2015-09-14' GROUP BY page ORDER BY s DESC, page LIMIT 10"),
    ("groupBy channel,isRobot", "SELECT channel, isRobot, COUNT(*) AS c, SUM(delta) AS s FROM wiki "
                                "WHERE namespace = 'Main' GROUP BY 1, 2",
     "SELECT channel, isRobot, count(*) AS c, sum(delta) AS s FROM wiki WHERE namespace = 'Main' GROUP BY 1, 2"),
    ("count one minute", "SELECT COUNT(*) AS c FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' AND "
                         "__time < TIMESTAMP '2015-09-12 00:01:00'",
     "SELECT count(*) AS c FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' AND "
     "__time < TIMESTAMP '2015-09-12 00:01:00'"),
    ("one user's rows", "SELECT __time, page, added FROM wiki WHERE \"user\" = '{user}'",
     "SELECT __time, page, added FROM wiki WHERE \"user\" = '{user}'"),
    ("count distinct countries", "SELECT COUNT(DISTINCT countryName) AS n FROM wiki WHERE channel = '#en'",
     "SELECT count(DISTINCT countryName) AS n FROM wiki WHERE channel = '#en'"),
]


def canonical(table: pa.Table) -> list[tuple]:
    """Rows as sorted tuples: times as epoch millis, floats rounded, so equal answers compare equal
    whatever their row order or Arrow types."""
    cols = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        cols.append(col.to_pylist())
    rows = []
    for row in zip(*cols):
        rows.append(tuple(round(v, 6) if isinstance(v, float) and math.isfinite(v) else v for v in row))
    return sorted(rows, key=repr)


def expected_answers(data: pa.Table, user: str) -> list[tuple[str, str, list[tuple]]]:
    """(name, strata SQL, DuckDB's answer) per query of the mix."""
    con = duckdb.connect()
    con.register("wiki_arrow", data)
    con.sql("CREATE TABLE wiki AS SELECT * FROM wiki_arrow")
    con.sql("SET TimeZone = 'UTC'")
    quoted = user.replace("'", "''")
    out = [(name, sql.replace("{user}", quoted), canonical(con.sql(duck.replace("{user}", quoted)).to_arrow_table()))
           for name, sql, duck in QUERIES]
    con.close()
    return out


def pick_user(data: pa.Table) -> str:
    con = duckdb.connect()
    con.register("wiki", data)
    user = con.sql("SELECT \"user\" FROM wiki WHERE \"user\" IS NOT NULL GROUP BY 1 HAVING count(*) BETWEEN 5 AND 200 "
                   "ORDER BY 1 LIMIT 1").fetchall()[0][0]
    con.close()
    return user


@dataclass
class LoadResult:
    seconds: float
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter = field(default_factory=Counter)
    wrong: Counter = field(default_factory=Counter)
    first_error: str | None = None
    answered_by: Counter = field(default_factory=Counter)  # client number -> answers it got

    @property
    def queries(self) -> int:
        return sum(len(v) for v in self.latencies_ms.values())


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


def run_load(flight_uri: str, answers: list[tuple[str, str, list[tuple]]], clients: int, seconds: float,
             connect_timeout_s: float = 60.0) -> LoadResult:
    """``clients`` threads, each with its own ADBC connection, run the mix round-robin (each
    starting at a different query) until ``seconds`` have passed; every answer is checked."""
    import adbc_driver_flightsql.dbapi as flight_sql

    # The driver warns on every connect that it cannot turn autocommit off (there are no transactions).
    warnings.filterwarnings("ignore", message="Cannot disable autocommit")
    result = LoadResult(seconds)
    lock = threading.Lock()
    state = {"stop": 0.0}

    def start_clock() -> None:
        state["stop"] = time.monotonic() + seconds

    # The clock starts in the barrier's action, before any client is released: set after the
    # wait, a client could read the unset end, stop at once, and the run have fewer clients.
    ready = threading.Barrier(clients + 1, action=start_clock, timeout=connect_timeout_s)

    def record(name: str, ms: float | None, error: str | None = None, wrong: bool = False,
               client: int | None = None) -> None:
        with lock:
            if client is not None and error is None:
                result.answered_by[client] += 1
            if error is not None:
                result.errors[error.split(":", 1)[0][:80]] += 1
                result.first_error = result.first_error or error
            elif wrong:
                result.wrong[name] += 1
            else:
                result.latencies_ms.setdefault(name, []).append(ms)

    def worker(i: int) -> None:
        conn = None
        try:
            conn = flight_sql.connect(flight_uri)
            cur = conn.cursor()
        except Exception as exc:  # noqa: BLE001 - counted as an error of the run
            record("connect", None, f"connect: {type(exc).__name__}: {exc}")
        try:
            ready.wait()
        except threading.BrokenBarrierError:
            pass
        if conn is None:
            return
        n = i
        try:
            while time.monotonic() < state["stop"]:
                name, sql, want = answers[n % len(answers)]
                n += 1
                started = time.perf_counter()
                try:
                    cur.execute(sql)
                    got = cur.fetch_arrow_table()
                except Exception as exc:  # noqa: BLE001 - counted, and the loop goes on
                    record(name, None, f"{name}: {type(exc).__name__}: {exc}")
                    continue
                ms = (time.perf_counter() - started) * 1000
                record(name, ms, wrong=canonical(got) != want, client=i)
        finally:
            cur.close()
            conn.close()

    threads = [threading.Thread(target=worker, args=(i,), name=f"load-client-{i}", daemon=True)
               for i in range(clients)]
    for t in threads:
        t.start()
    try:
        ready.wait()  # every client connected: the clock starts
    except threading.BrokenBarrierError:
        pass
    if not state["stop"]:
        start_clock()  # the barrier broke (a client could not connect in time): the rest run anyway
    for t in threads:
        t.join(timeout=seconds + 600)
    stuck = sum(t.is_alive() for t in threads)
    if stuck:
        result.errors["client still waiting for an answer 10 min after the end"] += stuck
    return result


def report(result: LoadResult, clients: int, markdown: bool) -> None:
    from bench.engine import print_rows

    rows = []
    every = []
    for name, _sql, _duck in QUERIES:
        samples = result.latencies_ms.get(name, [])
        every += samples
        rows.append((name, f"{len(samples):,}", f"{percentile(samples, 0.5):.1f}", f"{percentile(samples, 0.95):.1f}",
                     f"{percentile(samples, 0.99):.1f}", str(result.wrong.get(name, 0))))
    rows.append(("all", f"{len(every):,}", f"{percentile(every, 0.5):.1f}", f"{percentile(every, 0.95):.1f}",
                 f"{percentile(every, 0.99):.1f}", str(sum(result.wrong.values()))))
    print(f"{clients} Flight SQL clients (ADBC) for {result.seconds:g} s: {result.queries:,} queries, "
          f"{result.queries / result.seconds:.1f} queries/s; errors {sum(result.errors.values())}, "
          f"wrong answers {sum(result.wrong.values())}")
    print_rows(("query", "answers", "p50 ms", "p95 ms", "p99 ms", "wrong"), rows, markdown)
    for kind, count in result.errors.most_common():
        print(f"  error x{count}: {kind}")
    if result.first_error:
        print(f"  first error: {result.first_error}")




def start_cluster(work: str, data: pa.Table, historicals: int = 2) -> tuple[LocalCluster, dict]:
    """A local cluster with ``data`` published as ``wiki`` (2 replicas) and seen by the broker."""
    cluster = LocalCluster(os.path.join(work, "cluster"))
    cluster.up(historicals=historicals, ports="auto")
    try:
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        storage = deep_storage_from_url(os.path.join(cluster.dir, "deep-storage"))
        descriptors = client.build_and_publish(data, "wiki", storage)
        client.wait_loaded("wiki", len(descriptors), 900, replicas=min(2, historicals))
        probe = "SELECT COUNT(*) AS c FROM wiki"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the broker sees the announcements a moment later
            table, _ = client.sql(probe)
            if table.column(0).to_pylist() == [data.num_rows]:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"the broker did not see all {data.num_rows} rows within 120 s")
        client.close()
    except BaseException:
        cluster.down()
        raise
    endpoints["segments"] = len(descriptors)
    return cluster, endpoints


def broker_pid(cluster: LocalCluster) -> int:
    return next(rec["pid"] for rec in cluster.running()["nodes"] if rec["name"] == "broker")


def rss_bytes(pid: int) -> tuple[int, int]:
    """(current, peak) resident memory of a process, from /proc."""
    now = peak = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    return now, peak


def reset_peak_rss(pid: int) -> bool:
    """Reset the kernel's peak-RSS mark (``VmHWM``) of ``pid``; False where not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def scan_through_flight(flight_uri: str, sql: str) -> tuple[int, int, float]:
    """Read a scan's result batch by batch without keeping it: (rows, Arrow bytes, seconds)."""
    import adbc_driver_flightsql.dbapi as flight_sql

    warnings.filterwarnings("ignore", message="Cannot disable autocommit")
    rows = nbytes = 0
    started = time.perf_counter()
    with flight_sql.connect(flight_uri) as conn:
        cur = conn.cursor()
        cur.execute(sql)
        reader = cur.fetch_record_batch()
        for batch in reader:
            rows += batch.num_rows
            nbytes += batch.nbytes
        cur.close()
    return rows, nbytes, time.perf_counter() - started


def scan_benchmark(args) -> int:
    work = tempfile.mkdtemp(prefix="strata-scan-bench-")
    data = demo_table(args.scan_rows)
    cluster = None
    try:
        cluster, endpoints = start_cluster(work, data)
        del data  # the benchmark's own copy is not needed past loading
        pid = broker_pid(cluster)
        sql = "SELECT __time, channel, page, \"user\", added, deleted FROM wiki"
        before, _ = rss_bytes(pid)
        reset = reset_peak_rss(pid)
        rows, nbytes, seconds = scan_through_flight(endpoints["flight"], sql)
        after, peak = rss_bytes(pid)
    finally:
        if cluster is not None and cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    mib = 1 << 20
    print(f"scan of {rows:,} rows ({nbytes / mib:,.0f} MiB as Arrow) through Flight SQL (ADBC) in {seconds:.1f} s "
          f"({rows / seconds:,.0f} rows/s)")
    print(f"broker RSS: {before / mib:,.0f} MiB before, peak {peak / mib:,.0f} MiB during "
          f"({(peak - before) / mib:+,.0f} MiB{'' if reset else ', peak since the broker started'}), "
          f"{after / mib:,.0f} MiB after; growth / result size {(peak - before) / max(nbytes, 1):.2f}")
    return 0 if rows == args.scan_rows else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--scan-rows", type=int, default=0, help="measure one scan of this many rows instead")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if args.scan_rows:
        return scan_benchmark(args)

    work = tempfile.mkdtemp(prefix="strata-load-bench-")
    data = demo_table(args.rows)
    answers = expected_answers(data, pick_user(data))
    cluster = None
    try:
        started = time.perf_counter()
        cluster, endpoints = start_cluster(work, data)
        load_s = time.perf_counter() - started
        result = run_load(endpoints["flight"], answers, args.clients, args.seconds)
    finally:
        if cluster is not None and cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"rows {args.rows:,}; {endpoints['segments']} segments x 2 replicas on 2 historicals; "
          f"up+build+publish+load {load_s:.1f}s")
    report(result, args.clients, args.markdown)
    return 0 if not result.errors and not result.wrong else 1


if __name__ == "__main__":
    sys.exit(main())
