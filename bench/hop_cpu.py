"""CPU per query of the hop from the broker to a historical: the projection benchmark's four SQL
queries (``bench/projections_cluster.py``) through a local cluster (``strata up``: coordinator,
broker, two historicals as processes) with the lean Flight SQL client (pyarrow ``FlightClient``:
GetFlightInfo + DoGet), and the CPU the broker and the historicals spent per query, from
``/proc`` (steadier than wall time on a shared machine), with the median wall time.

    .venv/bin/python bench/hop_cpu.py [--rows 1000000] [--runs 300] [--rounds 2] [--baseline DIR]

Projection rows do not grow with ``--rows`` past 1M (one row per hour and channel), so the
default size answers for the 10M benchmark's projection queries. ``--rounds`` repeats the whole
measurement (each query ``--runs`` times per round) and prints every round, to show the spread.

``--baseline DIR``: a second cluster runs the servers from another checkout of strata at DIR
(say ``git worktree add`` or ``git archive`` of the commit before a change), on the same segments,
and every batch of runs alternates between the two clusters, so both see the same load from
the rest of the machine; each line then shows this tree's figures and the baseline's.
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
from bench.projections_cluster import QUERIES, LeanFlightSql, publish_built  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from services.cli.cluster_client import ClusterClient  # noqa: E402
from services.cli.local_cluster import LocalCluster  # noqa: E402

HERE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class Served:
    """A local cluster whose processes run the strata checkout at ``tree``, with the segments."""

    def __init__(self, tree: str, work: str, built: list, rows: int) -> None:
        self.cluster = LocalCluster(os.path.join(work, "cluster"))
        env_before, cwd_before = os.environ.get("PYTHONPATH"), os.getcwd()
        os.environ["PYTHONPATH"] = tree  # the processes run ``python -m services.cli.main`` from there
        os.chdir(tree)
        try:
            self.cluster.up(historicals=2, ports="auto")
        except BaseException:  # nodes that did start go down with it (a slow coordinator under load)
            if self.cluster.state() is not None:
                self.cluster.down()
            raise
        finally:
            os.chdir(cwd_before)
            if env_before is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = env_before
        endpoints = self.cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        publish_built(client, os.path.join(self.cluster.dir, "deep-storage"), built, 900)
        client.close()
        self.lean = LeanFlightSql(endpoints["flight"])
        deadline = time.monotonic() + 120  # the broker sees the historicals' announcements a moment later
        while self.lean.query("SELECT COUNT(*) AS c FROM wiki").column(0)[0].as_py() < rows:
            if time.monotonic() > deadline:
                raise SystemExit("the broker did not see every segment within 120 s")
            time.sleep(0.1)
        self.pids = {n["role"]: n["pid"] for n in self.cluster.running()["nodes"]
                     if n["role"] in ("broker", "historical")}
        self.cpu = {"broker": 0.0, "historical": 0.0, "client": 0.0}
        self.walls: list[float] = []
        self.runs = 0

    def batch(self, text: str, runs: int) -> None:
        before, client_before = cpu_ms(self.pids), time.process_time()
        for _ in range(runs):
            started = time.perf_counter()
            self.lean.query(text)
            self.walls.append((time.perf_counter() - started) * 1000)
        after, client_after = cpu_ms(self.pids), time.process_time()
        for role in after:
            self.cpu[role] += after[role] - before[role]
        self.cpu["client"] += (client_after - client_before) * 1000
        self.runs += runs

    def take(self) -> tuple[float, dict]:
        """Median wall ms and CPU ms per query since the last take."""
        out = statistics.median(self.walls), {role: ms / self.runs for role, ms in self.cpu.items()}
        self.cpu = dict.fromkeys(self.cpu, 0.0)
        self.walls, self.runs = [], 0
        return out

    def close(self) -> None:
        self.lean.close()
        if self.cluster.state() is not None:
            self.cluster.down()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", help="another strata checkout whose servers run beside this tree's")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="strata-bench-hop-")
    servers: list[Served] = []
    try:
        data = demo_table(args.rows).select(["__time", "channel", "user", "added"])
        data = data.set_column(3, "added", data.column("added").fill_null(0))
        built: list = []
        build(data, os.path.join(work, "segments"), built)
        servers.append(Served(HERE, os.path.join(work, "this"), built, args.rows))
        if args.baseline:
            servers.append(Served(os.path.abspath(args.baseline), os.path.join(work, "baseline"), built, args.rows))
        batch = 50 if args.baseline else args.runs
        print(f"rows {args.rows:,}, {len(built)} segments, {args.runs} runs per query and round"
              f"{' in batches of 50 alternating between the two clusters' if args.baseline else ''}; CPU ms per "
              f"query from /proc (historicals: both together), wall p50 ms")
        cells = "wall p50 ms | broker CPU ms | historicals CPU ms | client CPU ms"
        print(f"| round | query | {cells} |" + (" baseline: " + cells.replace(" | ", " | baseline: ") + " |"
                                               if args.baseline else ""))
        print("|---|---|---|---|---|---|" + ("---|---|---|---|" if args.baseline else ""))
        for round_no in range(1, args.rounds + 1):
            for name, text, *_ in QUERIES:
                for s in servers:
                    for _ in range(30):  # warm: the plan cache, channels, the historicals' caches
                        s.lean.query(text)
                done = 0
                while done < args.runs:
                    n = min(batch, args.runs - done)
                    for s in (servers if done // batch % 2 == 0 else servers[::-1]):
                        s.batch(text, n)
                    done += n
                row = []
                for s in servers:
                    wall, per = s.take()
                    row += [f"{wall:.2f}", f"{per['broker']:.3f}", f"{per['historical']:.3f}", f"{per['client']:.3f}"]
                print(f"| {round_no} | {name} | " + " | ".join(row) + " |", flush=True)
    finally:
        for s in servers:
            s.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
