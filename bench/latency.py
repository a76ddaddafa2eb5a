"""Latency floor through the cluster: a local cluster (``strata up``: coordinator, broker, two
historicals as processes), a few day segments, then the one-segment SQL query and ``SELECT 1``
in a loop through the ADBC Flight SQL driver; prints each one's p50/p10 and the CPU each process
spent per query (``/proc/<pid>/stat``, steadier than latency on a shared machine). The
one-segment query runs twice: "repeated" (one text again and again) and "first run" (a text not
seen before every run: its upper time bound moved by milliseconds, ``bench/first_run.py``).

    .venv/bin/python bench/latency.py [--rows 200000] [--runs 400]

Each query is timed twice: on one reused cursor (the driver prepares a text once and executes it
again) and with a new cursor per statement, as DB-API code is written (the issue's measure: the
driver prepares, executes, fetches and closes a statement every time). Then the round trips a new
cursor makes, one by one, with the same calls from pyarrow's FlightClient (``PreparedRoundTrips``:
CreatePreparedStatement, GetFlightInfo, DoGet, ClosePreparedStatement): each one's p50.
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
import pyarrow.flight as flight  # noqa: E402
from google.protobuf import any_pb2  # noqa: E402

from bench import first_run  # noqa: E402
from bench.cluster import TRIVIAL, TRIVIAL_SQL, cpu_ms  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from services.cli.cluster_client import ClusterClient  # noqa: E402
from services.cli.local_cluster import LocalCluster  # noqa: E402
from services.deep_storage import deep_storage_from_url  # noqa: E402
from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql  # noqa: E402


class PreparedRoundTrips:
    """The calls the ADBC driver makes for a statement on a new cursor, made one by one from
    pyarrow's FlightClient so each can be timed: CreatePreparedStatement (the broker plans and
    returns a handle and the schema), GetFlightInfo of the prepared statement, DoGet of its
    ticket, ClosePreparedStatement."""

    STEPS = ("prepare", "flight info", "fetch", "close")

    def __init__(self, location: str) -> None:
        self.client = flight.FlightClient(location)

    @staticmethod
    def _any(message) -> bytes:
        wrapper = any_pb2.Any()
        wrapper.Pack(message)
        return wrapper.SerializeToString()

    def run(self, sql: str) -> tuple[float, ...]:
        """Milliseconds of each step for one statement."""
        t0 = time.perf_counter()
        body = self._any(fsql.ActionCreatePreparedStatementRequest(query=sql))
        result = next(iter(self.client.do_action(flight.Action("CreatePreparedStatement", body))))
        wrapper = any_pb2.Any()
        wrapper.ParseFromString(result.body.to_pybytes())
        prepared = fsql.ActionCreatePreparedStatementResult()
        wrapper.Unpack(prepared)
        handle = prepared.prepared_statement_handle
        t1 = time.perf_counter()
        command = self._any(fsql.CommandPreparedStatementQuery(prepared_statement_handle=handle))
        info = self.client.get_flight_info(flight.FlightDescriptor.for_command(command))
        t2 = time.perf_counter()
        self.client.do_get(info.endpoints[0].ticket).read_all()
        t3 = time.perf_counter()
        close = self._any(fsql.ActionClosePreparedStatementRequest(prepared_statement_handle=handle))
        list(self.client.do_action(flight.Action("ClosePreparedStatement", close)))
        t4 = time.perf_counter()
        return tuple((b - a) * 1000 for a, b in ((t0, t1), (t1, t2), (t2, t3), (t3, t4)))

    def close(self) -> None:
        self.client.close()


def p50(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


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
        with flight_sql.connect(endpoints["flight"], autocommit=True) as conn:
            cur = conn.cursor()

            def reused(sql: str) -> None:
                cur.execute(sql)
                cur.fetch_arrow_table()

            def fresh(sql: str) -> None:
                c = conn.cursor()  # DB-API code's habit: a cursor per statement
                try:
                    c.execute(sql)
                    c.fetch_arrow_table()
                finally:
                    c.close()

            for text in (TRIVIAL_SQL, "SELECT 1"):
                for _ in range(30):  # warm: plan cache, channels
                    reused(text)
                    fresh(text)
            for label, texts in (
                    ("one-segment SQL query, repeated", lambda: TRIVIAL_SQL),
                    ("one-segment SQL query, first run", lambda: first_run.one_minute(TRIVIAL_SQL, first_run.fresh())),
                    ("SELECT 1", lambda: "SELECT 1")):
                for cursor, run in (("reused cursor", reused), ("new cursor per statement", fresh)):
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
                    print(f"{label}, {cursor}: p50 {samples[len(samples) // 2]:.2f} ms, "
                          f"p10 {samples[len(samples) // 10]:.2f} ms; CPU ms per query: {cpu}", flush=True)
            cur.close()
        trips = PreparedRoundTrips(endpoints["flight"])
        try:
            for label, texts in (("one-segment SQL query, repeated", lambda: TRIVIAL_SQL),
                                 ("one-segment SQL query, first run",
                                  lambda: first_run.one_minute(TRIVIAL_SQL, first_run.fresh())),
                                 ("SELECT 1", lambda: "SELECT 1")):
                for _ in range(20):
                    trips.run(texts())
                steps = [trips.run(texts()) for _ in range(args.runs)]
                parts = ", ".join(f"{name} {p50([s[i] for s in steps]):.2f}"
                                  for i, name in enumerate(PreparedRoundTrips.STEPS))
                print(f"{label}, round trips of a new statement (p50 ms): {parts}; "
                      f"sum {p50([sum(s) for s in steps]):.2f}", flush=True)
        finally:
            trips.close()
    finally:
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
