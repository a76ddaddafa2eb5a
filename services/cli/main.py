"""``strata``: the command line. Each subcommand is a thin wrapper over ``common`` or a service."""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

from common.errors import StrataError

DEFAULT_DIR = "var/cluster"


def _segment_paths(location: str) -> list[str]:
    if os.path.isdir(location):
        paths = sorted(glob.glob(os.path.join(location, "**", "*.sseg"), recursive=True))
    else:
        paths = sorted(glob.glob(location))
    if not paths:
        raise StrataError(f"no segment files (*.sseg) under '{location}'; build some with 'strata build'")
    return paths


def cmd_demo_data(args) -> int:
    from common.demo import write

    started = time.perf_counter()
    paths = write(args.out, args.rows, fmt=args.format, seed=args.seed, start=args.start, days=args.days,
                  files=args.files)
    elapsed = time.perf_counter() - started
    print(f"wrote {args.rows:,} rows to {', '.join(paths)} in {elapsed:.1f}s")
    return 0


def cmd_build(args) -> int:
    from common.segment.time_partitioner import build_segments
    from services.ingestion.local_input import read_inputs

    started = time.perf_counter()
    table = read_inputs(args.inputs, args.format, args.time_column)
    read_s = time.perf_counter() - started
    sort_columns = [c for c in (args.sort_columns or "").split(",") if c]
    built = build_segments(table, args.datasource, args.out, segment_granularity=args.granularity,
                           sort_columns=sort_columns, rows_per_segment=args.rows_per_segment)
    total = time.perf_counter() - started
    size = sum(m.size for _, m in built)
    print(f"built {len(built)} segments of '{args.datasource}' ({table.num_rows:,} rows, {size / 1e6:.1f} MB) "
          f"in {args.out}: read {read_s:.1f}s, total {total:.1f}s ({table.num_rows / max(total, 1e-9):,.0f} rows/s)")
    return 0


def cmd_query(args) -> int:
    from common.query import execute
    from common.segment import Segment
    from services.cli.table_printer import print_table

    text = args.query
    if text is None or text == "-":
        text = sys.stdin.read()
    elif os.path.exists(text):
        with open(text) as f:
            text = f.read()
    try:
        query = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StrataError(f"the native query is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    started = time.perf_counter()
    if args.segments:
        segments = [Segment.open(p) for p in _segment_paths(args.segments)]
        result = execute(query, segments)
        table, stats = result.table, result.stats
    else:
        client = _client(args)
        table, stats = client.native(query, args.timeout)
        client.close()
    elapsed = time.perf_counter() - started
    print_table(table, args.output)
    if args.output == "table":
        print(f"{table.num_rows} rows in {elapsed * 1000:.1f} ms; scanned {stats.rows_scanned:,} of "
              f"{stats.rows_in_segments:,} rows in {stats.segments} segments", file=sys.stderr)
    return 0


def _client(args):
    from services.cli.cluster_client import ClusterClient
    from services.cli.local_cluster import LocalCluster

    coordinator, broker = getattr(args, "coordinator", None), getattr(args, "broker", None)
    if not (coordinator and broker):
        cluster = LocalCluster(args.dir)
        if cluster.state() is not None or not (coordinator or broker):
            endpoints = cluster.endpoints()  # explains how to start a cluster when there is none
            coordinator = coordinator or endpoints["coordinator"]
            broker = broker or endpoints["broker"]
    return ClusterClient(coordinator, broker)


def cmd_node(args) -> int:
    from services.node_config import load_config

    config = load_config(args.command, args.config)
    if args.command == "coordinator":
        from services.coordinator.main import CoordinatorProcess as Process
    elif args.command == "broker":
        from services.broker.main import BrokerProcess as Process
    elif args.command == "router":
        from services.router.main import RouterProcess as Process  # lazy: each role loads only its own modules
    else:
        from services.historical.main import HistoricalProcess as Process
    return Process(config).run_forever()


def cmd_sql(args) -> int:
    from services.cli.sql_command import run_sql

    client = _client(args)
    try:
        return run_sql(client, args)
    finally:
        client.close()


def cmd_task(args) -> int:
    from services.cli.sql_command import task_command

    client = _client(args)
    try:
        return task_command(client, args)
    finally:
        client.close()


def cmd_compact(args) -> int:
    """Rewrite a datasource's segments (of an interval) as a new version with the catalog's
    current projections."""
    from common.types.interval import Interval
    from services.cli.sql_command import wait_task

    spec = {"interval": str(Interval.parse(args.interval))} if args.interval else {}
    client = _client(args)
    try:
        task = client.submit_task(args.datasource, "compact", f"COMPACT {args.datasource} {args.interval or ''}".strip(),
                                  spec)
        if args.async_:
            print(task.id)
            return 0
        return wait_task(client, task.id, args.timeout)
    finally:
        client.close()


def cmd_advise(args) -> int:
    from services.cli.advise_command import advise

    client = _client(args)
    try:
        return advise(client, args.datasource, args.top, args.sql)
    finally:
        client.close()


def cmd_top(args) -> int:
    """A live view of the cluster (queries/s, slowest queries, tasks, projection hit ratio);
    ``--once`` prints it once, for scripts and terminals without cursor control."""
    from rich.console import Console
    from rich.live import Live

    from services.cli.cluster_overview import collect, render, render_text

    client = _client(args)
    try:
        if args.once:
            print(render_text(collect(client, args.window), width=args.width), end="")
            return 0
        with Live(render(collect(client, args.window)), console=Console(), screen=False,
                  refresh_per_second=4) as live:
            try:
                while True:
                    time.sleep(args.interval)
                    live.update(render(collect(client, args.window)))
            except KeyboardInterrupt:
                return 0
    finally:
        client.close()


def cmd_kill(args) -> int:
    client = _client(args)
    try:
        print(client.cancel_query(args.query_id))
        return 0
    finally:
        client.close()


def cmd_up(args) -> int:
    from services.cli.local_cluster import LocalCluster, parse_tiers

    cluster = LocalCluster(args.dir)
    started = time.perf_counter()
    tiers = parse_tiers(args.tiers) if args.tiers else None
    historicals = args.historicals if args.historicals is not None else (len(tiers) if tiers else 2)
    state = cluster.up(historicals, args.etcd, max_cache_bytes=args.max_cache_bytes, ports=args.ports,
                       warm_task_drivers=args.warm_drivers, tiers=tiers)
    print(f"strata cluster up in {time.perf_counter() - started:.1f}s ({len(state['nodes'])} nodes, logs in "
          f"{os.path.join(cluster.dir, 'logs')})")
    for name, value in cluster.endpoints().items():
        print(f"  {name:18} {value}")
    return 0


def cmd_down(args) -> int:
    from services.cli.local_cluster import LocalCluster

    stopped = LocalCluster(args.dir).down()
    print(f"stopped {', '.join(stopped)}")
    return 0


def cmd_status(args) -> int:
    from services.cli.cluster_status import print_status

    return print_status(args.dir)


def cmd_publish(args) -> int:
    from services.deep_storage import deep_storage_from_config
    from services.ingestion.local_input import read_inputs
    from services.node_config import load_config

    client = _client(args)
    config = load_config("coordinator", _coordinator_config(args))
    storage = deep_storage_from_config(config.deep_storage)
    started = time.perf_counter()
    table = read_inputs(args.inputs, args.format, args.time_column)
    sort_columns = [c for c in (args.sort_columns or "").split(",") if c]
    descriptors = client.build_and_publish(table, args.datasource, storage, segment_granularity=args.granularity,
                                           sort_columns=sort_columns, rows_per_segment=args.rows_per_segment)
    print(f"published {len(descriptors)} segments of '{args.datasource}' ({table.num_rows:,} rows) in "
          f"{time.perf_counter() - started:.1f}s")
    if args.wait:
        client.wait_loaded(args.datasource, len(descriptors), args.timeout)
        print(f"all {len(descriptors)} segments loaded")
    client.close()
    return 0


def _coordinator_config(args) -> str | None:
    if getattr(args, "config", None):
        return args.config
    from services.cli.local_cluster import LocalCluster

    return LocalCluster(args.dir).node("coordinator")["config"]


def cmd_inspect(args) -> int:
    from common.segment import Segment
    from common.types.interval import format_instant

    for path in _segment_paths(args.path):
        seg = Segment.open(path, verify=args.verify)
        m = seg.manifest
        print(f"{seg.id}\n  rows {m.num_rows:,}, {seg.size:,} bytes, ordering {', '.join(m.ordering)}")
        if m.min_time is not None:
            print(f"  data {format_instant(m.min_time)} .. {format_instant(m.max_time)}")
        for col in m.columns:
            stats = ", ".join(f"{k}={v}" for k, v in col.stats.items())
            print(f"  {col.name:24} {col.type.sql_name:16} {col.encoding:10} {stats}")
        if args.verify:
            print("  checksums ok")
    return 0


def cmd_demo(args) -> int:
    from services.cli.demo import run_demo

    return run_demo(args.dir, args.rows, args.cluster)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strata", description="strata: a real-time analytics database")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo-data", help="generate deterministic Wikipedia-edit-like rows")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--start", default="2015-09-12")
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--format", default="parquet", help="parquet | json | csv (add .gz to the path to compress)")
    p.add_argument("--files", type=int, default=1, help="split into this many files (then --out is a directory)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_demo_data)

    p = sub.add_parser("build", help="build segments from input files (local, single process)")
    p.add_argument("inputs", nargs="+", help="parquet, json (.gz) or csv/tsv files")
    p.add_argument("--datasource", required=True)
    p.add_argument("--out", required=True, help="directory for the segment files")
    p.add_argument("--format", default=None)
    p.add_argument("--time-column", default=None, help="default: the first of __time, time, timestamp")
    p.add_argument("--granularity", default="day", help="segment granularity: hour, day, month, all, or a period")
    p.add_argument("--sort-columns", default="", help="comma-separated columns to sort by after __time")
    p.add_argument("--rows-per-segment", type=int, default=3_000_000)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("query", help="run a native (Druid JSON) query on the cluster or on local segments")
    p.add_argument("query", nargs="?", help="JSON text, a file, or - for stdin")
    p.add_argument("--segments", help="run in-process over a directory of segments (or a glob) instead")
    p.add_argument("--broker", help="broker gRPC host:port (default: from --dir)")
    p.add_argument("--dir", default=DEFAULT_DIR, help="directory of a cluster started with 'strata up'")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds")
    p.add_argument("--output", default="table", choices=["table", "csv", "json"])
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("sql", help="run SQL (Druid dialect) through the broker")
    p.add_argument("sql", nargs="?", help="the statement, or - for stdin")
    p.add_argument("--file", "-f", help="read the SQL from a file")
    p.add_argument("--format", default="table", choices=["table", "csv", "json", "arrow"])
    p.add_argument("--context", "-c", action="append", help="query context key=value (repeatable)")
    p.add_argument("--async", dest="async_", action="store_true", help="INSERT/REPLACE: print the task id and return")
    p.add_argument("--max-rows", type=int, default=100, help="rows shown by --format table")
    p.add_argument("--broker", help="broker gRPC host:port (default: from --dir)")
    p.add_argument("--coordinator", help="coordinator gRPC host:port (default: from --dir)")
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("task", help="ingestion tasks: list, status, report, cancel")
    p.add_argument("action", choices=["list", "status", "report", "cancel"])
    p.add_argument("id", nargs="?")
    p.add_argument("--coordinator", help="coordinator gRPC host:port (default: from --dir)")
    p.add_argument("--broker", help=argparse.SUPPRESS)
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.set_defaults(func=cmd_task)

    p = sub.add_parser("advise", help="projections worth adding to a datasource, from the query log")
    p.add_argument("datasource")
    p.add_argument("--top", type=int, default=5, help="how many proposals (default 5)")
    p.add_argument("--sql", action="store_true", help="print only the ALTER TABLE statements")
    p.add_argument("--broker", help="broker gRPC host:port (default: from --dir)")
    p.add_argument("--coordinator", help=argparse.SUPPRESS)
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.set_defaults(func=cmd_advise)

    p = sub.add_parser("top", help="live view: queries/s, slowest queries, running tasks, projection hit ratio")
    p.add_argument("--once", action="store_true", help="print the view once and exit")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    p.add_argument("--window", type=float, default=60.0, help="seconds of query log the rates cover")
    p.add_argument("--width", type=int, default=120, help="columns of the --once output")
    p.add_argument("--broker", help="broker gRPC host:port (default: from --dir)")
    p.add_argument("--coordinator", help="coordinator gRPC host:port (default: from --dir)")
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.set_defaults(func=cmd_top)

    p = sub.add_parser("kill", help="end a running query (its id is in sys.queries)")
    p.add_argument("query_id")
    p.add_argument("--broker", help="broker gRPC host:port (default: from --dir)")
    p.add_argument("--coordinator", help=argparse.SUPPRESS)
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.set_defaults(func=cmd_kill)

    p = sub.add_parser("compact", help="rewrite a datasource's segments with the catalog's current projections")
    p.add_argument("datasource")
    p.add_argument("--interval", help="ISO interval (start/end); whole time chunks inside it are rewritten")
    p.add_argument("--async", dest="async_", action="store_true", help="print the task id and return")
    p.add_argument("--coordinator", help="coordinator gRPC host:port (default: from --dir)")
    p.add_argument("--broker", help=argparse.SUPPRESS)
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.set_defaults(func=cmd_compact)

    from services.cli.catalog_command import register as register_catalog

    register_catalog(sub, DEFAULT_DIR)

    from services.cli.rules_command import register as register_rules  # lazy, as every command: fast start-up

    register_rules(sub, DEFAULT_DIR)

    from services.cli.supervisor_command import register as register_supervisor  # lazy, as every command

    register_supervisor(sub, DEFAULT_DIR)

    for role in ("coordinator", "broker", "historical", "router"):
        p = sub.add_parser(role, help=f"run a {role} in the foreground")
        p.add_argument("--config", help="TOML config file (env STRATA_<SECTION>_<KEY> overrides)")
        p.set_defaults(func=cmd_node)

    p = sub.add_parser("up", help="start a local cluster in background processes")
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.add_argument("--historicals", type=int, default=None, help="how many historicals (default 2, or as --tiers)")
    p.add_argument("--tiers", default=None, help="historicals per tier, e.g. hot=1,cold=1 (retention rules place "
                                                  "replicas per tier); default: all in _default_tier")
    p.add_argument("--etcd", default=None, help="use etcd at this URL instead of embedded discovery")
    p.add_argument("--max-cache-bytes", type=int, default=10 * 1024**3)
    p.add_argument("--ports", choices=["fixed", "auto"], default="fixed",
                   help="fixed (default): the documented ports, an error naming any that is in use; "
                        "auto: free ports instead of taken ones")
    p.add_argument("--warm-drivers", type=int, default=1,
                   help="long-lived Spark drivers that take ingestion tasks without starting a JVM each "
                        "(a small INSERT is queryable in about 2 s instead of about 20 s); 0 starts a "
                        "driver process per task")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop the local cluster")
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("status", help="show every node, its health and its segments")
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("publish", help="build segments from files, push them to deep storage and publish them")
    p.add_argument("inputs", nargs="+")
    p.add_argument("--datasource", required=True)
    p.add_argument("--dir", default=DEFAULT_DIR)
    p.add_argument("--coordinator", help="coordinator gRPC host:port (default: from --dir)")
    p.add_argument("--config", help="a coordinator config naming the deep storage (default: from --dir)")
    p.add_argument("--format", default=None)
    p.add_argument("--time-column", default=None)
    p.add_argument("--granularity", default="day")
    p.add_argument("--sort-columns", default="")
    p.add_argument("--rows-per-segment", type=int, default=3_000_000)
    p.add_argument("--wait", action="store_true", help="wait until historicals serve every segment")
    p.add_argument("--timeout", type=float, default=300.0)
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("inspect", help="show a segment's manifest (and verify checksums)")
    p.add_argument("path")
    p.add_argument("--verify", action="store_true")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("demo", help="generate demo data, build segments and run example queries")
    p.add_argument("--dir", default="var/demo")
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--cluster", default=None, help="run on the cluster started with 'strata up --dir CLUSTER'")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StrataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
