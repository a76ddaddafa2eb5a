"""The broker's own Python per query on the Flight SQL path, measured in one process.

An in-process cluster (``tests/harness/embedded_cluster.EmbeddedCluster``: coordinator, broker
and historicals on 127.0.0.1, real gRPC and Flight), the projection benchmark's day segments
(``bench/projections.build``: one hourly projection by channel), and the lean Flight SQL client
of ``bench/projections_cluster`` (pyarrow ``FlightClient``: GetFlightInfo with a
``CommandStatementQuery``, then DoGet). For ``SELECT 1`` and the projection queries it prints,
per query, the CPU the broker's Flight handlers spend on their own threads (``time.thread_time``
around the Python middleware, GetFlightInfo, DoGet and the batches DoGet streams: the historical
call made from DoGet's thread is in it, the historicals' own threads are not) and the client's
wall time. ``--profile N`` prints the N heaviest functions of a cProfile of those handlers, timed
on thread CPU time (py-spy samples every thread of this VM as busy).

    .venv/bin/python bench/broker_python.py [--rows 200000] [--runs 1000] [--profile 40] [--split]
    .venv/bin/python bench/broker_python.py --processes [--rows 200000] [--runs 2000]

Only the broker's Python is measured: Flight's and gRPC's C++ threads are not. ``--processes``
measures those too: a ``strata up`` cluster (separate processes, free ports) with the same
segments, the same client and queries, and each process's CPU per query from ``/proc`` (the
broker's, the historicals' together, this client's), with the client's wall time.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.projections import build  # noqa: E402
from bench.projections_cluster import QUERIES, LeanFlightSql, publish_built  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from common.segment.descriptor import SegmentDescriptor  # noqa: E402
from services.deep_storage.deep_storage import deep_storage_key  # noqa: E402
from tests.harness.embedded_cluster import EmbeddedCluster  # noqa: E402

CASES = [("SELECT 1", "SELECT 1")] + [(name, sql) for name, sql, _, _ in QUERIES]


_IN_HANDLER = threading.local()  # set while a timed handler runs on this thread


class HandlerClock:
    """Thread CPU time spent in the wrapped callables (on whichever thread runs them), and an
    optional cProfile of them. Calls do not overlap: the client is sequential."""

    def __init__(self, profile: bool) -> None:
        self.seconds = 0.0
        self.profiler = cProfile.Profile(time.thread_time) if profile else None

    def wrap(self, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if self.profiler is not None:
                self.profiler.enable()
            _IN_HANDLER.on = True
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start
                _IN_HANDLER.on = False
                if self.profiler is not None:
                    self.profiler.disable()
        return timed

    def wrap_iter(self, fn):
        clock = self

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            it = clock.wrap(fn)(*args, **kwargs)
            step = clock.wrap(next)
            while True:
                try:
                    item = step(it)
                except StopIteration:
                    return
                yield item
        return timed


def instrument(clock: HandlerClock) -> None:
    """Every place the broker's Flight server runs Python for a call, timed by ``clock``."""
    from services.broker import flight as broker_flight
    from services.broker import flight_auth

    server = broker_flight.BrokerFlightServer
    for name in ("get_flight_info", "do_get"):
        setattr(server, name, clock.wrap(getattr(server, name)))
    broker_flight._guarded = clock.wrap_iter(broker_flight._guarded)
    factory = flight_auth.BasicAuthMiddlewareFactory
    factory.start_call = clock.wrap(factory.start_call)
    identity = flight_auth.CallIdentity
    identity.sending_headers = clock.wrap(identity.sending_headers)
    identity.call_completed = clock.wrap(identity.call_completed)


# Inclusive thread CPU of these (``--split``): cProfile's own cost per call inflates call-heavy
# code several times over, so the split is timed by wrappers on a few stages instead.
SPLIT = [
    "services.broker.flight.BrokerFlightServer._caller",
    "services.broker.flight.BrokerFlightServer._request",
    "services.broker.flight.BrokerFlightServer._schema",
    "services.broker.core.flight_tickets.FlightTickets.put",
    "services.broker.core.flight_tickets.FlightTickets.get",
    "services.broker.core.flight_tickets.FlightTickets.take",
    "services.broker.front_door.QueryFrontDoor.stream",
    "services.broker.front_door.QueryFrontDoor.run",
    "services.broker.logged_backends.LoggedSql.execute",
    "services.broker.sql_service.SqlService.execute",
    "services.broker.sql_service.SqlService.describe",
    "services.broker.sql_service.SqlService._plan",
    "common.sql.sql_plan.SqlPlan.execute",
    "services.broker.query_executor.QueryExecutor.execute",
    "services.broker.query_executor.QueryExecutor._gather",
    "services.broker.query_executor.QueryExecutor._scatter",
    "services.broker.query_registry.QueryRegistry.native_finished",
    "services.broker.query_registry.QueryRegistry._log",
    "services.broker.core.served_view.ServedView.plan",
    "services.broker.table_choice.TableChoice.of",
    "services.historical.client.HistoricalClient.ask",
    "common.query.engine.merge",
    "common.query.engine.finalize",
]


class SplitClock:
    """Inclusive thread CPU and calls per wrapped callable, counted on the broker's handler
    threads only (the historicals in this process call some of the same functions)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def install(self, paths: list[str]) -> None:
        import importlib

        for path in paths:
            module_name, _, rest = path.rpartition(".")
            owner = None
            try:
                owner = importlib.import_module(module_name)
            except ImportError:
                module_name, _, cls = module_name.rpartition(".")
                owner = getattr(importlib.import_module(module_name), cls)
            fn = getattr(owner, rest, None)
            if fn is None:
                continue
            setattr(owner, rest, self._wrap(path.split(".", 2)[-1], fn))

    def _wrap(self, name: str, fn):
        seconds, calls = self.seconds, self.calls
        seconds[name], calls[name] = 0.0, 0

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if not getattr(_IN_HANDLER, "on", False):
                return fn(*args, **kwargs)
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += time.thread_time() - start
                calls[name] += 1
        return timed

    def watch_gc(self) -> None:
        """Garbage collections that happen on a handler thread, as one more line."""
        import gc

        self.seconds["gc (collections on handler threads)"], self.calls["gc (collections on handler threads)"] = 0.0, 0
        started = threading.local()

        def callback(phase, info):
            if not getattr(_IN_HANDLER, "on", False):
                return
            if phase == "start":
                started.at = time.thread_time()
            elif getattr(started, "at", None) is not None:
                self.seconds["gc (collections on handler threads)"] += time.thread_time() - started.at
                self.calls["gc (collections on handler threads)"] += 1
                started.at = None

        gc.callbacks.append(callback)

    def reset(self) -> None:
        for name in self.seconds:
            self.seconds[name], self.calls[name] = 0.0, 0

    def report(self, runs: int) -> None:
        for name, sec in self.seconds.items():
            if self.calls[name]:
                print(f"   {name:62} {sec * 1e6 / runs:8.1f} us/query  {self.calls[name] / runs:5.2f} calls/query")


def publish(cluster: EmbeddedCluster, rows: int, work: str) -> None:
    data = demo_table(rows).select(["__time", "channel", "user", "added"])
    data = data.set_column(3, "added", data.column("added").fill_null(0))
    built: list = []
    build(data, os.path.join(work, "segments"), built)
    storage = cluster.storage()
    descriptors = []
    for path, manifest in built:
        key = deep_storage_key(manifest.segment_id)
        size = storage.push(path, key)
        descriptors.append(SegmentDescriptor.of(manifest, key, 1, os.path.getsize(path) if size is None else size))
    cluster.client.publish(descriptors)
    cluster.wait_queryable("wiki", len(descriptors), 300)


def processes(args) -> int:
    """The same queries against a ``strata up`` cluster: CPU per query by process, from /proc."""
    from bench.cluster import cpu_ms
    from services.cli.cluster_client import ClusterClient
    from services.cli.local_cluster import LocalCluster

    work = tempfile.mkdtemp(prefix="strata-broker-python-")
    cluster = LocalCluster(os.path.join(work, "cluster"))
    lean = None
    try:
        cluster.up(historicals=args.historicals, ports="auto")
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        data = demo_table(args.rows).select(["__time", "channel", "user", "added"])
        data = data.set_column(3, "added", data.column("added").fill_null(0))
        built: list = []
        build(data, os.path.join(work, "segments"), built)
        publish_built(client, os.path.join(cluster.dir, "deep-storage"), built, 300)
        client.close()
        pids = {}
        for node in cluster.running()["nodes"]:
            pids[node["name"]] = node["pid"]
        roles = {name: ("broker" if "broker" in name else "historicals" if "historical" in name else "coordinator")
                 for name in pids}
        lean = LeanFlightSql(endpoints["flight"])
        cases = [(n, s) for n, s in CASES if args.only is None or args.only in n]
        deadline = time.monotonic() + 60
        while lean.query(CASES[1][1]).num_rows == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # the broker sees the historicals' announcements a moment later
        for _, sql in cases:
            for _ in range(50):
                lean.query(sql)
        print(f"{'query':34} {'broker CPU ms':>14} {'historicals':>12} {'client':>8} {'wall p50 ms':>12}")
        for name, sql in cases:
            samples = []
            before, client_before = cpu_ms(pids), time.process_time()
            for _ in range(args.runs):
                started = time.perf_counter()
                lean.query(sql)
                samples.append((time.perf_counter() - started) * 1000)
            after, client_after = cpu_ms(pids), time.process_time()
            per = {}
            for proc, role in roles.items():
                per[role] = per.get(role, 0.0) + (after[proc] - before[proc]) / args.runs
            print(f"{name:34} {per.get('broker', 0):14.3f} {per.get('historicals', 0):12.3f} "
                  f"{(client_after - client_before) * 1000 / args.runs:8.3f} {statistics.median(samples):12.2f}",
                  flush=True)
    finally:
        if lean is not None:
            lean.close()
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--historicals", type=int, default=2)
    ap.add_argument("--profile", type=int, default=0, help="print the N heaviest functions (cumulative)")
    ap.add_argument("--only", default=None, help="run only the cases whose name contains this")
    ap.add_argument("--split", action="store_true", help="inclusive thread CPU of the stages in SPLIT")
    ap.add_argument("--extra", default="", help="with --split: more callables to time, comma-separated dotted paths")
    ap.add_argument("--processes", action="store_true", help="a strata up cluster; CPU per query from /proc")
    ap.add_argument("--callers", default=None, help="with --profile: also who calls functions matching this")
    args = ap.parse_args()
    if args.processes:
        return processes(args)
    clock = HandlerClock(args.profile > 0)
    split = SplitClock() if args.split else None
    if split is not None:
        split.install(SPLIT + [p for p in args.extra.split(",") if p])
        split.watch_gc()
    instrument(clock)
    work = tempfile.mkdtemp(prefix="strata-broker-python-")
    cluster = EmbeddedCluster(os.path.join(work, "cluster"), historicals=args.historicals)
    lean = None
    try:
        publish(cluster, args.rows, work)
        lean = LeanFlightSql(f"grpc://127.0.0.1:{cluster.broker.flight.port}")
        cases = [(n, s) for n, s in CASES if args.only is None or args.only in n]
        for _, sql in cases:
            for _ in range(50):  # warm: plan cache, channels, manifests
                lean.query(sql)
        print(f"{'query':34} {'broker Python CPU ms/query':>27} {'wall p50 ms':>12} {'rows':>5}")
        for name, sql in cases:
            if clock.profiler is not None:
                clock.profiler.clear()
            clock.seconds = 0.0
            if split is not None:
                split.reset()
            samples = []
            for _ in range(args.runs):
                started = time.perf_counter()
                out = lean.query(sql)
                samples.append((time.perf_counter() - started) * 1000)
            cpu = clock.seconds * 1000 / args.runs
            print(f"{name:34} {cpu:27.3f} {statistics.median(samples):12.2f} {out.num_rows:5d}", flush=True)
            if split is not None:
                split.report(args.runs)
            if clock.profiler is not None:
                stats = pstats.Stats(clock.profiler)
                print(f"-- {name}: handlers' profile, thread CPU, {args.runs} queries")
                stats.sort_stats("cumulative").print_stats(args.profile)
                stats.sort_stats("tottime").print_stats(args.profile)
                if args.callers:
                    stats.print_callers(args.callers)
    finally:
        if lean is not None:
            lean.close()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
