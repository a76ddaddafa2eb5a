"""CPU per query of the hop from the broker to a historical: the projection benchmark's four SQL
queries (``bench/projections_cluster.py``) through a local cluster (``strata up``: coordinator,
broker, two historicals as processes) with the lean Flight SQL client (pyarrow ``FlightClient``:
GetFlightInfo + DoGet), and the CPU the broker and the historicals spent per query, from
``/proc`` (steadier than wall time on a shared machine), with the median wall time.

    .venv/bin/python bench/hop_cpu.py [--rows 1000000] [--runs 300] [--rounds 2]

Projection rows do not grow with ``--rows`` past 1M (one row per hour and channel), so the
default size answers for the 10M benchmark's projection queries. ``--rounds`` repeats the whole
measurement (each query ``--runs`` times per round) and prints every round, to show the spread.
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

from bench.cluster import cpu_ms  # noqa: E402
from bench.projections import build  # noqa: E402
from bench.projections_cluster import QUERIES, LeanFlightSql  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from common.segment.descriptor import SegmentDescriptor  # noqa: E402
from services.cli.cluster_client import ClusterClient  # noqa: E402
from services.cli.local_cluster import LocalCluster  # noqa: E402
from services.deep_storage import deep_storage_from_url  # noqa: E402
from services.deep_storage.deep_storage import deep_storage_key  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="strata-bench-hop-")
    cluster = LocalCluster(os.path.join(work, "cluster"))
    try:
        data = demo_table(args.rows).select(["__time", "channel", "user", "added"])
        data = data.set_column(3, "added", data.column("added").fill_null(0))
        cluster.up(historicals=2, ports="auto")
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        built: list = []
        build(data, os.path.join(work, "segments"), built)
        storage = deep_storage_from_url(os.path.join(cluster.dir, "deep-storage"))
        descriptors = []
        for path, manifest in built:
            key = deep_storage_key(manifest.segment_id)
            size = storage.push(path, key)
            descriptors.append(SegmentDescriptor.of(manifest, key, 1, os.path.getsize(path) if size is None else size))
        client.publish(descriptors)
        client.wait_loaded("wiki", len(descriptors), 900)
        client.close()
        lean = LeanFlightSql(endpoints["flight"])
        count = "SELECT COUNT(*) AS c FROM wiki"
        deadline = time.monotonic() + 120  # the broker sees the historicals' announcements a moment later
        while lean.query(count).column(0)[0].as_py() < args.rows:
            if time.monotonic() > deadline:
                raise SystemExit("the broker did not see every segment within 120 s")
            time.sleep(0.1)
        nodes = cluster.running()["nodes"]
        pids = {n["role"]: n["pid"] for n in nodes if n["role"] in ("broker", "historical")}
        print(f"rows {args.rows:,}, {len(descriptors)} segments, {args.runs} runs per query and round; "
              f"CPU ms per query from /proc (historical: both together), wall p50 ms")
        print("| round | query | wall p50 ms | broker CPU ms | historicals CPU ms | client CPU ms |")
        print("|---|---|---|---|---|---|")
        for round_no in range(1, args.rounds + 1):
            for name, text, *_ in QUERIES:
                for _ in range(30):  # warm: the plan cache, channels, the historicals' caches
                    lean.query(text)
                walls = []
                before, client_before = cpu_ms(pids), time.process_time()
                for _ in range(args.runs):
                    started = time.perf_counter()
                    lean.query(text)
                    walls.append((time.perf_counter() - started) * 1000)
                after, client_after = cpu_ms(pids), time.process_time()
                per = {role: (after[role] - before[role]) / args.runs for role in after}
                print(f"| {round_no} | {name} | {statistics.median(walls):.2f} | {per['broker']:.3f} | "
                      f"{per['historical']:.3f} | {(client_after - client_before) * 1000 / args.runs:.3f} |",
                      flush=True)
        lean.close()
    finally:
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
