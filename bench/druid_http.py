"""Druid's HTTP API beside Flight SQL, through a local cluster (``strata up``: coordinator, broker,
one historical as processes): ``SELECT 1`` and the one-segment SQL query in a loop through the
ADBC Flight SQL driver and through ``POST /druid/v2/sql`` (a kept-alive HTTP connection,
``resultFormat: array``), p50/p99 of each and their ratio; then the whole table streamed as
arrayLines and csv (and fetched over Flight SQL), rows per second and the broker's resident memory
growth while it streams (sampled from ``/proc/<pid>/status``).

    .venv/bin/python bench/druid_http.py [--rows 1000000] [--runs 300] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import adbc_driver_flightsql.dbapi as flight_sql  # noqa: E402
import requests  # noqa: E402

from bench.cluster import TRIVIAL_SQL  # noqa: E402
from bench.demo_cluster import demo_cluster  # noqa: E402

LARGE_SQL = "SELECT __time, channel, page, \"user\", added, deleted FROM wiki"


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """The highest resident size of a process while the block runs, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.base, self.peak = pid, rss_bytes(pid), 0
        self._stop = threading.Event()

    def __enter__(self) -> PeakRss:
        def sample():
            while not self._stop.wait(0.02):
                self.peak = max(self.peak, rss_bytes(self.pid))
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes(self.pid))

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.base) / (1 << 20)


def percentiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    lines = []
    with demo_cluster(args.rows, prefix="strata-druid-http-") as (cluster, endpoints):
        broker_pid = next(rec["pid"] for rec in cluster.running()["nodes"] if rec["role"] == "broker")
        url = endpoints["broker_http"] + "/druid/v2/sql"
        session = requests.Session()

        def http(sql: str) -> None:
            r = session.post(url, json={"query": sql, "resultFormat": "array"}, timeout=120)
            r.raise_for_status()
            r.json()

        with flight_sql.connect(endpoints["flight"]) as conn:
            cur = conn.cursor()

            def flight(sql: str) -> None:
                cur.execute(sql)
                cur.fetch_arrow_table()

            for sql in ("SELECT 1", TRIVIAL_SQL):
                for _ in range(30):  # warm: plan cache, channels, the kept-alive connection
                    flight(sql)
                    http(sql)
            lines.append("| query | Flight SQL p50 / p99 ms | HTTP p50 / p99 ms | HTTP - Flight p50 ms | ratio p50 |")
            lines.append("|---|---|---|---|---|")
            for label, sql in (("SELECT 1", "SELECT 1"), ("one-segment query", TRIVIAL_SQL)):
                # interleaved in rounds, so the machine's load moves both alike
                f_samples, h_samples = [], []
                for _ in range(max(1, args.runs // 50)):
                    f_samples += timed(lambda: flight(sql), 50)
                    h_samples += timed(lambda: http(sql), 50)
                f50, f99 = percentiles(f_samples)
                h50, h99 = percentiles(h_samples)
                lines.append(f"| {label} | {f50:.2f} / {f99:.2f} | {h50:.2f} / {h99:.2f} | {h50 - f50:+.2f} | "
                             f"{h50 / f50:.2f} |")

            lines.append("")
            lines.append(f"| {args.rows:,} rows ({LARGE_SQL}) | seconds | rows/s | broker RSS growth MiB |")
            lines.append("|---|---|---|---|")
            with PeakRss(broker_pid) as rss:
                started = time.perf_counter()
                flight(LARGE_SQL)
                seconds = time.perf_counter() - started
            lines.append(f"| Flight SQL (Arrow) | {seconds:.2f} | {args.rows / seconds:,.0f} | {rss.growth_mib:.0f} |")
            for fmt in ("arrayLines", "csv", "object"):
                with PeakRss(broker_pid) as rss:
                    started = time.perf_counter()
                    count = 0
                    with session.post(url, json={"query": LARGE_SQL, "resultFormat": fmt}, stream=True,
                                      timeout=600) as r:
                        r.raise_for_status()
                        for chunk in r.iter_content(chunk_size=1 << 20):
                            count += chunk.count(b"\n")
                    seconds = time.perf_counter() - started
                lines.append(f"| HTTP {fmt} | {seconds:.2f} | {args.rows / seconds:,.0f} | {rss.growth_mib:.0f} |")
            cur.close()
    lines.append("")
    lines.append(f"load average {os.getloadavg()[0]:.1f}")
    print("\n".join(lines) if args.markdown else "\n".join(line.replace("|", " ") for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
