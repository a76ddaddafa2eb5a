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

Every strata and peer figure is printed two ways (``bench/first_run.py``), as "repeated / first
run": repeated runs one query text again and again (strata keeps the plan, the projection choice
and row selections of that text between runs, and ADBC re-executes its prepared statement);
first run sends a text not seen before on every run (a time bound before the data, an hour
earlier each run; for the one-minute floor query a varied upper bound within that minute), as a
dashboard that moves its time range does: same work.
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

from bench import first_run  # noqa: E402
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


def cpu_per_query(fn, runs: int, pids: dict, first: bool = False) -> dict:
    """CPU ms per run of ``fn``: this process (the client, the ADBC driver's Go threads included),
    the broker and the historicals together, from /proc (steadier than latency on a shared machine).
    With ``first``, ``fn`` takes a fresh variant number on every call (first-run figures)."""
    call = (lambda: fn(first_run.fresh())) if first else fn
    call()
    before, client_before = cpu_ms(pids), time.process_time()
    for _ in range(runs):
        call()
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
    speedups_first, vs_ch_first, local_vs_ch_first, lean_vs_ch_first = [], [], [], []
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
            floor_runs = max(args.runs, 20)
            hourly_sql = QUERIES[0][1]

            def both(fn, variant, runs=args.runs):
                """(repeated ms, first-run ms, the repeated run's result) of ``fn(text)``."""
                ms, out = timed(lambda: fn(variant(0)), runs, args.best)
                ms1, _ = first_run.timed_first_runs(lambda k: (lambda t=variant(k): fn(t)), runs, args.best)
                return ms, ms1, out

            def hourly_variant(k):
                return hourly_sql if k == 0 else first_run.sql(hourly_sql, k)

            def trivial(k):
                return TRIVIAL if k == 0 else first_run.one_minute(TRIVIAL, k)

            floor_ms, floor1_ms, _ = both(sql, trivial, floor_runs)
            lean_floor_ms, lean_floor1_ms, _ = both(lean.query, trivial, floor_runs)
            unprepared_ms, unprepared1_ms, hourly = both(lambda t: adbc_unprepared(conn, t), hourly_variant, floor_runs)
            pids = {n["role"]: n["pid"] for n in cluster.running()["nodes"] if n["role"] in ("broker", "historical")}
            cpu = {label: cpu_per_query(fn, 200, pids) for label, fn in (
                ("ADBC", lambda: sql(hourly_sql)), ("lean", lambda: lean.query(hourly_sql)),
                ("one DoGet", lambda: lean.one_call(hourly_sql)), ("native gRPC", lambda: client.native(HOURLY_NATIVE)),
                ("lean SELECT 1", lambda: lean.query("SELECT 1")))}
            cpu.update({label: cpu_per_query(fn, 200, pids, first=True) for label, fn in (
                ("ADBC first run", lambda k: sql(hourly_variant(k))),
                ("lean first run", lambda k: lean.query(hourly_variant(k))),
                ("native gRPC first run", lambda k: client.native(first_run.native(HOURLY_NATIVE, k))))})
            one_call_ms, one_call1_ms, one_call = both(lean.one_call, hourly_variant, floor_runs)
            if sorted_rows(one_call) != sorted_rows(hourly):
                raise SystemExit("the hourly query as a plain-Flight DoGet got other rows than through ADBC")
            bare_ms = bare_floor_ms(hourly, hourly_sql, floor_runs, args.best)
            native_ms, native1_ms, _ = both(
                client.native, lambda k: HOURLY_NATIVE if k == 0 else first_run.native(HOURLY_NATIVE, k), floor_runs)
            for (name, text, duck_sql, ch_sql), native in zip(QUERIES, NATIVE):
                off_text = "SET noProjections = true; " + text
                scanned = {}
                for label, q in (("on", text), ("off", off_text)):
                    before = rows_scanned(metric_urls)
                    sql(q)
                    scanned[label] = rows_scanned(metric_urls) - before

                def variant(k, text=text):
                    return text if k == 0 else first_run.sql(text, k)

                on_ms, on1_ms, on = both(sql, variant)
                off_ms, off1_ms, off = both(lambda t: sql("SET noProjections = true; " + t), variant)
                lean_ms, lean1_ms, lean_on = both(lean.query, variant)
                if sorted_rows(lean_on) != sorted_rows(on):
                    raise SystemExit(f"{name}: the lean Flight SQL client got other rows than ADBC:\n"
                                     f"lean {sorted_rows(lean_on)[:10]}\nADBC {sorted_rows(on)[:10]}")
                if sorted_rows(sql(variant(first_run.fresh()))) != sorted_rows(on):
                    raise SystemExit(f"{name}: the first-run variant of the query got other rows")
                same = sorted_rows(on) == sorted_rows(off)
                all_same &= same
                local_ms, local1_ms, local = both(
                    lambda q: execute(q, local_segments).table,
                    lambda k, native=native: native if k == 0 else first_run.native(native, k))
                d_ms, d1_ms, _ = both(lambda t: con.sql(t).fetchall(),
                                      lambda k, t=duck_sql: t if k == 0 else first_run.sql(t, k))
                if ch is not None:
                    c_ms, c1_ms, _ = both(lambda t: ch.query(t, "Arrow"),
                                          lambda k, t=ch_sql: t if k == 0 else first_run.clickhouse_sql(t, k))
                else:
                    c_ms = c1_ms = float("nan")
                fewer.append(scanned["off"] / max(1.0, scanned["on"]))
                speedups.append(off_ms / on_ms)
                speedups_first.append(off1_ms / on1_ms)
                if ch is not None:
                    vs_ch.append(on_ms / c_ms)
                    vs_ch_first.append(on1_ms / c1_ms)
                    local_vs_ch.append(local_ms / c_ms)
                    local_vs_ch_first.append(local1_ms / c1_ms)
                    lean_vs_ch.append(lean_ms / c_ms)
                    lean_vs_ch_first.append(lean1_ms / c1_ms)

                def pair(a, b, fmt="{:.1f}"):
                    return f"{fmt.format(a)} / {fmt.format(b)}"

                ratio = (lambda a, b, c, d: pair(a / b, c / d, "{:.2f}")) if ch is not None else (lambda *_: "n/a")
                lines.append((name, f"{scanned['on']:,.0f}", f"{scanned['off']:,.0f}", f"{fewer[-1]:,.0f}x",
                              pair(on_ms, on1_ms), pair(off_ms, off1_ms), pair(off_ms / on_ms, off1_ms / on1_ms, "{:.1f}x"),
                              pair(d_ms, d1_ms), pair(c_ms, c1_ms), ratio(on_ms, c_ms, on1_ms, c1_ms),
                              pair(lean_ms, lean1_ms), ratio(lean_ms, c_ms, lean1_ms, c1_ms),
                              pair(local_ms, local1_ms), ratio(local_ms, c_ms, local1_ms, c1_ms),
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
    print("each time cell is 'repeated / first run' (" + ("fastest" if args.best else "median") + f" of {args.runs}): "
          "repeated = one query text again and again, after a warm-up run of it (strata keeps its plan, projection "
          "choice and row selections; ADBC re-executes its prepared statement); first run = a query text not seen "
          "before on every run, same work (bench/first_run.py)")
    print_rows(("query (SQL via ADBC)", "rows (proj)", "rows (base)", "fewer", "proj ms", "base ms", "speed-up",
                "DuckDB ms", "ClickHouse ms", "proj/CH", "proj ms lean", "lean/ClickHouse", "in-process proj ms",
                "in-process/CH", "same result"), lines, args.markdown)
    print(f"floor (repeated / first run, ms): a trivial SQL query (count over one minute) through Flight SQL with ADBC "
          f"{floor_ms:.1f} / {floor1_ms:.1f}, with the lean client {lean_floor_ms:.1f} / {lean_floor1_ms:.1f}; the "
          f"hourly timeseries as a native query over the broker's gRPC API (projection on) {native_ms:.1f} / "
          f"{native1_ms:.1f}, as SQL through ADBC without a prepared statement {unprepared_ms:.1f} / "
          f"{unprepared1_ms:.1f}, as one plain-Flight DoGet with the SQL as the ticket {one_call_ms:.1f} / "
          f"{one_call1_ms:.1f}; the lean client against a bare pyarrow Flight server in another process "
          f"that plans nothing and sends the same {hourly.num_rows} rows {bare_ms:.1f}")
    print("CPU ms per query, the hourly projection query unless named (200 runs): " + "; ".join(
        f"{label}: " + ", ".join(f"{role} {ms:.2f}" for role, ms in sorted(roles.items())) for label, roles in cpu.items()))
    print("ClickHouse (chdb) and DuckDB run in this process, no network hop: proj/CH is strata through the cluster "
          "(ADBC, broker, historicals) vs chdb; in-process/CH is strata's engine in this process over the same "
          "segments (native query, projections on) vs chdb; lean/ClickHouse is strata through the cluster with the "
          "lean Flight SQL client (pyarrow FlightClient: GetFlightInfo + DoGet, same rows as ADBC) vs chdb")

    def worst(values):
        return max(values) if values else float("nan")

    print(f"min rows-scanned reduction {min(fewer):,.0f}x (goal >= 50x); min speed-up {min(speedups):.1f}x repeated, "
          f"{min(speedups_first):.1f}x first run (goal >= 10x); worst time vs ClickHouse, repeated / first run: "
          f"{worst(vs_ch):.2f} / {worst(vs_ch_first):.2f} through the cluster, {worst(lean_vs_ch):.2f} / "
          f"{worst(lean_vs_ch_first):.2f} through the cluster with the lean client, {worst(local_vs_ch):.2f} / "
          f"{worst(local_vs_ch_first):.2f} in-process (goal <= 1)")
    return 0 if all_same else 1


if __name__ == "__main__":
    raise SystemExit(main())
