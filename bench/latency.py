"""Latency floor through the cluster: a local cluster (``strata up``: coordinator, broker, two
historicals as processes), a few day segments, then the one-segment SQL query and ``SELECT 1``
in a loop through the ADBC Flight SQL driver; prints each one's p50/p10 and the CPU each process
spent per query (``/proc/<pid>/stat``, steadier than latency on a shared machine). The
one-segment query runs twice: "repeated" (one text again and again) and "first run" (a text not
seen before every run: its upper time bound moved by milliseconds, ``bench/first_run.py``).

    .venv/bin/python bench/latency.py [--rows 200000] [--runs 400]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import adbc_driver_flightsql.dbapi as flight_sql  # noqa: E402

from bench import first_run  # noqa: E402
from bench.cluster import TRIVIAL, TRIVIAL_SQL, cpu_ms  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from services.cli.cluster_client import ClusterClient  # noqa: E402
from services.cli.local_cluster import LocalCluster  # noqa: E402
from services.deep_storage import deep_storage_from_url  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=400)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="strata-latency-")
    cluster = LocalCluster(os.path.join(work, "cluster"))
    try:
        cluster.up(historicals=2, ports="auto")
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        storage = deep_storage_from_url(os.path.join(cluster.dir, "deep-storage"))
        descriptors = client.build_and_publish(demo_table(args.rows), "wiki", storage)
        client.wait_loaded("wiki", len(descriptors), 600, replicas=2)
        deadline = time.monotonic() + 60
        while client.native(TRIVIAL)[1].segments < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # the broker sees announcements a moment later
        client.close()
        pids = {rec["name"]: rec["pid"] for rec in cluster.running()["nodes"]}
        with flight_sql.connect(endpoints["flight"]) as conn:
            cur = conn.cursor()

            def run(sql: str) -> None:
                cur.execute(sql)
                cur.fetch_arrow_table()

            for text in (TRIVIAL_SQL, "SELECT 1"):
                for _ in range(30):  # warm: plan cache, channels
                    run(text)
            for label, texts in (
                    ("one-segment SQL query, repeated", lambda: TRIVIAL_SQL),
                    ("one-segment SQL query, first run", lambda: first_run.one_minute(TRIVIAL_SQL, first_run.fresh())),
                    ("SELECT 1", lambda: "SELECT 1")):
                samples = []
                before = cpu_ms(pids)
                for _ in range(args.runs):
                    text = texts()
                    started = time.perf_counter()
                    run(text)
                    samples.append((time.perf_counter() - started) * 1000)
                after = cpu_ms(pids)
                samples.sort()
                cpu = ", ".join(f"{role} {(after[role] - before[role]) / args.runs:.2f}" for role in sorted(after))
                print(f"{label}: p50 {samples[len(samples) // 2]:.2f} ms, p10 {samples[len(samples) // 10]:.2f} ms; "
                      f"CPU ms per query: {cpu}")
            cur.close()
    finally:
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
