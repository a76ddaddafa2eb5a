"""Projections through a cluster: the projections benchmark's queries as SQL through the broker of
a local cluster (``strata up``: coordinator, broker, historicals as separate processes) with the
ADBC Flight SQL driver, projections on and off (``SET noProjections = true;``), beside ClickHouse
(chdb, in-process) with the equivalent projection and DuckDB on the raw rows. The cluster runs on
free ports (``ports="auto"``), so the bench can run beside another cluster.

    .venv/bin/python bench/projections_cluster.py [--rows 10000000] [--runs 5] [--markdown]

The day segments are built locally with the projection (as ``bench/projections.py`` builds them),
pushed to the cluster's deep storage and published. Rows scanned are the growth of the
historicals' ``strata_rows_scanned_total`` counters over one run of the query (all labels of the
datasource), so they are what the servers read, not what the client was told. Goals (issue 11):
>= 50x fewer rows scanned and >= 10x faster for matching queries through the cluster; no slower
than ClickHouse's projection.

ClickHouse (chdb) runs in this process with no network hop, so the table puts two comparisons side
by side: strata through the cluster (ADBC -> broker -> historicals) against chdb, and strata's
engine in this process over the same segments (``common.query.execute``, the native form of each
query, no broker) against chdb: the like-for-like one.

A second client column ("proj ms lean") sends the same SQL through the same broker with a lean
Flight SQL client: pyarrow.flight's FlightClient sending GetFlightInfo with a Flight SQL
``CommandStatementQuery`` and DoGet on the returned ticket, nothing else (no ADBC driver, no Go
runtime, no cgo hand-over, no prepared statement). Its rows must equal ADBC's for every query, or
the bench stops. The ADBC column itself reuses one prepared statement per query text: the DBAPI
cursor prepares a text once (CreatePreparedStatement) and executes the same text again without
preparing, the way a dashboard re-runs its SQL; the floor line adds ADBC without a prepared
statement (a fresh statement, ``CommandStatementQuery``, every run) for the hourly query, the same
query as one plain-Flight DoGet (SQL text as the ticket), and the lean client against a bare
pyarrow Flight server in another process (the client-and-transport floor). Then CPU per query of
the client (this process), the broker and the historicals, from /proc.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import adbc_driver_manager  # noqa: E402
import duckdb  # noqa: E402
from google.protobuf import any_pb2  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.flight as flight  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.cluster import cpu_ms  # noqa: E402
from bench.engine import print_rows  # noqa: E402
from bench.projections import CHANNELS, build, clickhouse, timed  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from common.query import execute  # noqa: E402
from common.segment.descriptor import SegmentDescriptor  # noqa: E402
from services.cli.cluster_client import ClusterClient  # noqa: E402
from services.cli.local_cluster import LocalCluster  # noqa: E402
from services.deep_storage import deep_storage_from_url  # noqa: E402
from services.deep_storage.deep_storage import deep_storage_key  # noqa: E402
from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql  # noqa: E402

_IN = "', '".join(CHANNELS)
# (name, strata SQL, DuckDB SQL, ClickHouse SQL)
QUERIES = [
    ("hourly timeseries count+sum",
     "SELECT TIME_FLOOR(__time, 'PT1H') AS t, COUNT(*) AS c, SUM(added) AS s FROM wiki GROUP BY 1",
     "SELECT date_trunc('hour', __time) AS t, count(*), sum(added) FROM wiki GROUP BY 1",
     "SELECT toStartOfHour(__time) AS t, count(), sum(added) FROM b.wiki GROUP BY t"),
    ("top 5 channels by sum(added)",
     "SELECT channel, SUM(added) AS s FROM wiki GROUP BY channel ORDER BY s DESC LIMIT 5",
     "SELECT channel, sum(added) AS s FROM wiki GROUP BY channel ORDER BY s DESC LIMIT 5",
     "SELECT channel, sum(added) AS s FROM b.wiki GROUP BY channel ORDER BY s DESC LIMIT 5"),
    ("distinct users per day (HLL)",
     "SELECT TIME_FLOOR(__time, 'P1D') AS d, APPROX_COUNT_DISTINCT(\"user\") AS u FROM wiki GROUP BY 1",
     "SELECT date_trunc('day', __time) AS d, approx_count_distinct(\"user\") FROM wiki GROUP BY 1",
     "SELECT toStartOfDay(__time) AS d, uniqHLL12(user) FROM b.wiki GROUP BY d"),
    ("hourly timeseries, 3 channels",
     f"SELECT TIME_FLOOR(__time, 'PT1H') AS t, COUNT(*) AS c, SUM(added) AS s FROM wiki "
     f"WHERE channel IN ('{_IN}') GROUP BY 1",
     f"SELECT date_trunc('hour', __time), count(*), sum(added) FROM wiki WHERE channel IN ('{_IN}') GROUP BY 1",
     f"SELECT toStartOfHour(__time) AS t, count(), sum(added) FROM b.wiki WHERE channel IN ('{_IN}') GROUP BY t"),
]
_DAYS = ["2015-09-12/2015-09-19"]
_SUM = {"type": "longSum", "name": "s", "fieldName": "added"}
# The native form of each query above, for strata's engine in this process (no broker).
NATIVE = [
    {"queryType": "timeseries", "dataSource": "wiki", "intervals": _DAYS, "granularity": "hour",
     "aggregations": [{"type": "count", "name": "c"}, _SUM]},
    {"queryType": "topN", "dataSource": "wiki", "intervals": _DAYS, "granularity": "all", "dimension": "channel",
     "metric": "s", "threshold": 5, "aggregations": [_SUM]},
    {"queryType": "timeseries", "dataSource": "wiki", "intervals": _DAYS, "granularity": "day",
     "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "round": True}]},
    {"queryType": "timeseries", "dataSource": "wiki", "intervals": _DAYS, "granularity": "hour",
     "filter": {"type": "in", "dimension": "channel", "values": CHANNELS},
     "aggregations": [{"type": "count", "name": "c"}, _SUM]},
]
# The floor of any query through the cluster: a count over one minute of one segment.
TRIVIAL = ("SELECT COUNT(*) AS c FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' "
           "AND __time < TIMESTAMP '2015-09-12 00:01:00'")
HOURLY_NATIVE = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-19"],
                 "granularity": "hour", "aggregations": [{"type": "count", "name": "c"},
                                                         {"type": "longSum", "name": "s", "fieldName": "added"}]}
_SCANNED = re.compile(r'^strata_rows_scanned_total\{([^}]*)\}\s+([0-9.eE+]+)$', re.M)


def rows_scanned(metric_urls: list[str]) -> float:
    total = 0.0
    for url in metric_urls:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        total += sum(float(v) for labels, v in _SCANNED.findall(text) if 'datasource="wiki"' in labels)
    return total


def sorted_rows(table: pa.Table) -> list:
    return sorted(tuple(r.values()) for r in table.to_pylist())


class LeanFlightSql:
    """The least a Flight SQL client does for a query: GetFlightInfo with the SQL packed as a
    ``CommandStatementQuery`` (a protobuf Any in a command descriptor), then DoGet on each
    endpoint's ticket from the same connection."""

    def __init__(self, location: str) -> None:
        self.client = flight.FlightClient(location)

    def query(self, sql: str) -> pa.Table:
        command = any_pb2.Any()
        command.Pack(fsql.CommandStatementQuery(query=sql))
        info = self.client.get_flight_info(flight.FlightDescriptor.for_command(command.SerializeToString()))
        if len(info.endpoints) != 1 or info.endpoints[0].locations:
            # strata's broker answers with one endpoint on itself; anything else is not what this measures
            raise SystemExit(f"lean client: expected one endpoint on the broker, got {info.endpoints}")
        return self.client.do_get(info.endpoints[0].ticket).read_all()

    def one_call(self, sql: str) -> pa.Table:
        """strata's plain-Flight form, not Flight SQL: the SQL text is the DoGet ticket, one call."""
        return self.client.do_get(flight.Ticket(sql.encode())).read_all()

    def close(self) -> None:
        self.client.close()


class BareFlightServer(flight.FlightServerBase):
    """A Flight server that plans nothing: every GetFlightInfo answers one endpoint on itself and
    every DoGet streams the same table (the hourly query's answer). The lean client against it is
    the client-and-transport floor, with no strata code on the server side."""

    def __init__(self, location: str, table: pa.Table) -> None:
        super().__init__(location)
        self.table = table

    def get_flight_info(self, context, descriptor):
        return flight.FlightInfo(self.table.schema, descriptor, [flight.FlightEndpoint(b"t", [])], -1, -1)

    def do_get(self, context, ticket):
        return flight.RecordBatchStream(self.table)


def _serve_bare(table_ipc: bytes, port) -> None:
    """Runs a BareFlightServer in its own process (as the broker runs in its own), its port sent back."""
    server = BareFlightServer("grpc://127.0.0.1:0", pa.ipc.open_stream(table_ipc).read_all())
    port.put(server.port)
    server.serve()


def bare_floor_ms(table: pa.Table, sql: str, runs: int, best: bool) -> float:
    """The lean client's time for ``sql`` against a BareFlightServer in another process."""
    import multiprocessing
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    ctx = multiprocessing.get_context("spawn")
    port = ctx.Queue()
    proc = ctx.Process(target=_serve_bare, args=(sink.getvalue().to_pybytes(), port), daemon=True)
    proc.start()
    try:
        client = LeanFlightSql(f"grpc://127.0.0.1:{port.get(timeout=60)}")
        try:
            ms, out = timed(lambda: client.query(sql), runs, best)
            if not out.equals(table):
                raise SystemExit("the bare Flight server sent back another table than it was given")
            return ms
        finally:
            client.close()
    finally:
        proc.terminate()
        proc.join(10)


def cpu_per_query(fn, runs: int, pids: dict) -> dict:
    """CPU ms per run of ``fn``: this process (the client, the ADBC driver's Go threads included),
    the broker and the historicals together, from /proc (steadier than latency on a shared machine)."""
    fn()
    before, client_before = cpu_ms(pids), time.process_time()
    for _ in range(runs):
        fn()
    after, client_after = cpu_ms(pids), time.process_time()
    out = {"client": (client_after - client_before) * 1000 / runs}
    for role in after:
        out[role] = (after[role] - before[role]) / runs
    return out


def adbc_unprepared(conn, sql: str) -> pa.Table:
    """ADBC without a prepared statement: a fresh statement, SQL set, executed (the driver sends
    ``CommandStatementQuery``), as a client that never re-runs a text would."""
    stmt = adbc_driver_manager.AdbcStatement(conn.adbc_connection)
    try:
        stmt.set_sql_query(sql)
        stream, _ = stmt.execute_query()
        return pa.RecordBatchReader._import_from_c(stream.address).read_all()
    finally:
        stmt.close()


def publish_built(client, deep_storage_dir: str, built: list, timeout_s: float) -> list:
    """Push built segments (``(path, manifest)``) to a cluster's deep storage, publish them and wait
    until the historicals have loaded them all; the descriptors published."""
    storage = deep_storage_from_url(deep_storage_dir)
    descriptors = []
    for path, manifest in built:
        key = deep_storage_key(manifest.segment_id)
        size = storage.push(path, key)
        descriptors.append(SegmentDescriptor.of(manifest, key, 1, os.path.getsize(path) if size is None else size))
    client.publish(descriptors)
    client.wait_loaded("wiki", len(descriptors), timeout_s)
    return descriptors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--historicals", type=int, default=2)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--best", action="store_true", help="report each query's fastest run, not the median")
    args = ap.parse_args()
    import adbc_driver_flightsql.dbapi as flight_sql

    work = tempfile.mkdtemp(prefix="strata-bench-proj-cluster-")
    cluster = LocalCluster(os.path.join(work, "cluster"))
    lines, fewer, speedups, vs_ch, all_same, local_vs_ch, local_segments = [], [], [], [], True, [], []
    lean_vs_ch, lean = [], None
    try:
        data = demo_table(args.rows).select(["__time", "channel", "user", "added"])
        data = data.set_column(3, "added", data.column("added").fill_null(0))
        cluster.up(historicals=args.historicals, ports="auto")
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        started = time.perf_counter()
        built: list = []
        local_segments, _, _ = build(data, os.path.join(work, "segments"), built)
        descriptors = publish_built(client, os.path.join(cluster.dir, "deep-storage"), built, 900)
        load_s = time.perf_counter() - started
        metric_urls = [f"http://127.0.0.1:{n['http_port']}/metrics" for n in cluster.running()["nodes"]
                       if n["role"] == "historical"]
        parquet = os.path.join(work, "wiki.parquet")
        pq.write_table(data.set_column(0, "__time", data.column("__time").cast(pa.timestamp("ms"))), parquet)
        con = duckdb.connect()
        con.sql(f"CREATE TABLE wiki AS SELECT * FROM read_parquet('{parquet}')")
        ch = clickhouse(parquet)
        with flight_sql.connect(endpoints["flight"]) as conn:
            cur = conn.cursor()

            def sql(text: str) -> pa.Table:
                cur.execute(text)
                return cur.fetch_arrow_table()

            deadline = time.monotonic() + 120  # the broker sees the historicals' announcements a moment later
            while sql("SELECT COUNT(*) AS c FROM wiki").column(0)[0].as_py() < args.rows:
                if time.monotonic() > deadline:
                    raise SystemExit("the broker did not see every segment within 120 s")
                time.sleep(0.1)
            lean = LeanFlightSql(endpoints["flight"])
            floor_ms, _ = timed(lambda: sql(TRIVIAL), max(args.runs, 20), args.best)
            lean_floor_ms, _ = timed(lambda: lean.query(TRIVIAL), max(args.runs, 20), args.best)
            unprepared_ms, hourly = timed(lambda: adbc_unprepared(conn, QUERIES[0][1]), max(args.runs, 20), args.best)
            pids = {n["role"]: n["pid"] for n in cluster.running()["nodes"] if n["role"] in ("broker", "historical")}
            cpu = {label: cpu_per_query(fn, 200, pids) for label, fn in (
                ("ADBC", lambda: sql(QUERIES[0][1])), ("lean", lambda: lean.query(QUERIES[0][1])),
                ("one DoGet", lambda: lean.one_call(QUERIES[0][1])), ("native gRPC", lambda: client.native(HOURLY_NATIVE)),
                ("lean SELECT 1", lambda: lean.query("SELECT 1")))}
            one_call_ms, one_call = timed(lambda: lean.one_call(QUERIES[0][1]), max(args.runs, 20), args.best)
            if sorted_rows(one_call) != sorted_rows(hourly):
                raise SystemExit("the hourly query as a plain-Flight DoGet got other rows than through ADBC")
            bare_ms = bare_floor_ms(hourly, QUERIES[0][1], max(args.runs, 20), args.best)
            native_ms, _ = timed(lambda: client.native(HOURLY_NATIVE), max(args.runs, 20), args.best)
            for (name, text, duck_sql, ch_sql), native in zip(QUERIES, NATIVE):
                off_text = "SET noProjections = true; " + text
                scanned = {}
                for label, q in (("on", text), ("off", off_text)):
                    before = rows_scanned(metric_urls)
                    sql(q)
                    scanned[label] = rows_scanned(metric_urls) - before
                on_ms, on = timed(lambda: sql(text), args.runs, args.best)
                off_ms, off = timed(lambda: sql(off_text), args.runs, args.best)
                lean_ms, lean_on = timed(lambda: lean.query(text), args.runs, args.best)
                if sorted_rows(lean_on) != sorted_rows(on):
                    raise SystemExit(f"{name}: the lean Flight SQL client got other rows than ADBC:\n"
                                     f"lean {sorted_rows(lean_on)[:10]}\nADBC {sorted_rows(on)[:10]}")
                same = sorted_rows(on) == sorted_rows(off)
                all_same &= same
                local_ms, local = timed(lambda: execute(native, local_segments).table, args.runs, args.best)
                d_ms, _ = timed(lambda: con.sql(duck_sql).fetchall(), args.runs, args.best)
                c_ms = timed(lambda: ch.query(ch_sql, "Arrow"), args.runs, args.best)[0] if ch is not None else float("nan")
                fewer.append(scanned["off"] / max(1.0, scanned["on"]))
                speedups.append(off_ms / on_ms)
                if ch is not None:
                    vs_ch.append(on_ms / c_ms)
                    local_vs_ch.append(local_ms / c_ms)
                    lean_vs_ch.append(lean_ms / c_ms)
                lines.append((name, f"{scanned['on']:,.0f}", f"{scanned['off']:,.0f}", f"{fewer[-1]:,.0f}x",
                              f"{on_ms:.1f}", f"{off_ms:.1f}", f"{speedups[-1]:.1f}x", f"{d_ms:.1f}",
                              f"{c_ms:.1f}", f"{on_ms / c_ms:.2f}" if ch is not None else "n/a",
                              f"{lean_ms:.1f}", f"{lean_ms / c_ms:.2f}" if ch is not None else "n/a",
                              f"{local_ms:.1f}", f"{local_ms / c_ms:.2f}" if ch is not None else "n/a",
                              "yes" if same else "NO"))
            cur.close()
        client.close()
    finally:
        if lean is not None:
            lean.close()
        for segment in local_segments:
            segment.close()
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"rows {args.rows:,}; {len(descriptors)} day segments with the projection on {args.historicals} "
          f"historicals; build+push+publish+load {load_s:.1f}s; load average {os.getloadavg()[0]:.1f}")
    print_rows(("query (SQL via ADBC)", "rows (proj)", "rows (base)", "fewer", "proj ms", "base ms", "speed-up",
                "DuckDB ms", "ClickHouse ms", "proj/CH", "proj ms lean", "lean/ClickHouse", "in-process proj ms", "in-process/CH", "same result"),
               lines, args.markdown)
    print(f"floor: a trivial SQL query (count over one minute) takes {floor_ms:.1f} ms through Flight SQL with ADBC, "
          f"{lean_floor_ms:.1f} ms with the lean client; the hourly timeseries as a native query over the broker's "
          f"gRPC API (projection on) {native_ms:.1f} ms, as SQL through ADBC without a prepared statement "
          f"{unprepared_ms:.1f} ms, as one plain-Flight DoGet with the SQL as the ticket {one_call_ms:.1f} ms; "
          f"the lean client against a bare pyarrow Flight server in another process "
          f"that plans nothing and sends the same {hourly.num_rows} rows {bare_ms:.1f} ms")
    print("CPU ms per query, the hourly projection query unless named (200 runs): " + "; ".join(
        f"{label}: " + ", ".join(f"{role} {ms:.2f}" for role, ms in sorted(roles.items())) for label, roles in cpu.items()))
    print("ClickHouse (chdb) and DuckDB run in this process, no network hop: proj/CH is strata through the cluster "
          "(ADBC, broker, historicals) vs chdb; in-process/CH is strata's engine in this process over the same "
          "segments (native query, projections on) vs chdb; lean/ClickHouse is strata through the cluster with the "
          "lean Flight SQL client (pyarrow FlightClient: GetFlightInfo + DoGet, same rows as ADBC) vs chdb")
    print(f"min rows-scanned reduction {min(fewer):,.0f}x (goal >= 50x); min speed-up {min(speedups):.1f}x "
          f"(goal >= 10x); worst time vs ClickHouse {max(vs_ch) if vs_ch else float('nan'):.2f} through the cluster, "
          f"{max(lean_vs_ch) if lean_vs_ch else float('nan'):.2f} through the cluster with the lean client, "
          f"{max(local_vs_ch) if local_vs_ch else float('nan'):.2f} in-process (goal <= 1)")
    return 0 if all_same else 1


if __name__ == "__main__":
    raise SystemExit(main())
