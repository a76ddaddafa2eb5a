"""``strata sql`` and ``strata task``: SQL through the broker, and ingestion task control."""

from __future__ import annotations

import json
import sys
import time

import pyarrow as pa

from services.cli.table_printer import print_table

FINAL = ("SUCCESS", "FAILED", "CANCELED")


def read_sql(args) -> str:
    if args.file:
        with open(args.file) as f:
            return f.read()
    if args.sql in (None, "-"):
        return sys.stdin.read()
    return args.sql


def run_sql(client, args) -> int:
    sql = read_sql(args)
    context = dict(kv.split("=", 1) for kv in args.context or [])
    started = time.perf_counter()
    table, _ = client.sql(sql, context, args.timeout)
    elapsed = time.perf_counter() - started
    from common.sql.statement_kind import classify

    if classify(sql).is_ingestion and not args.async_:
        task_id = table.column("task_id")[0].as_py()
        return wait_task(client, task_id, args.timeout)
    if args.format == "arrow":
        sink = sys.stdout.buffer
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return 0
    print_table(table, args.format, max_rows=args.max_rows)
    if args.format == "table":
        print(f"{table.num_rows} rows in {elapsed * 1000:.1f} ms", file=sys.stderr)
    return 0


def wait_task(client, task_id: str, timeout_s: float) -> int:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    deadline = time.monotonic() + timeout_s
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  transient=True) as progress:
        bar = progress.add_task(f"task {task_id}: PENDING", total=None)
        while True:
            task = client.task(task_id)
            report = json.loads(task.report_json or "{}")
            rows = report.get("rowsRead") or report.get("rows_read")
            progress.update(bar, description=f"task {task_id}: {task.state}" + (f", {rows:,} rows read" if rows else ""))
            if task.state in FINAL:
                break
            if time.monotonic() > deadline:
                print(f"still {task.state} after {timeout_s:.0f}s; follow it with 'strata task status {task_id}'")
                return 1
            time.sleep(0.5)
    print_task(task)
    return 0 if task.state == "SUCCESS" else 1


def print_task(task, full: bool = False) -> None:
    report = json.loads(task.report_json or "{}")
    took = (task.finished_ms - task.started_ms) / 1000 if task.finished_ms and task.started_ms else None
    print(f"task {task.id}: {task.state}" + (f" in {took:.1f}s" if took is not None else ""))
    print(f"  datasource {task.datasource} ({task.type})")
    for key in ("rowsRead", "rowsWritten", "rowsFiltered", "parseExceptions"):
        if report.get(key) is not None:
            value = report[key]
            print(f"  {key:16} {value if not isinstance(value, (list, dict)) else len(value)}")
    segments = report.get("segments") or []
    if segments:
        print(f"  segments         {len(segments)}")
    if task.error:
        print(f"  error: {task.error}")
    if full:
        print(json.dumps(report, indent=2))


def task_command(client, args) -> int:
    if args.action == "list":
        from common.types.interval import format_instant

        rows = [{"id": t.id, "datasource": t.datasource, "type": t.type, "state": t.state,
                 "created": format_instant(t.created_ms)} for t in client.tasks()]
        print_table(pa.Table.from_pylist(rows) if rows else pa.table({"id": pa.array([], pa.string())}))
        return 0
    if not args.id:
        raise SystemExit(f"strata task {args.action} needs a task id")
    if args.action == "cancel":
        task = client.cancel_task(args.id)
        print(f"task {task.id}: cancel requested (state {task.state})")
        return 0
    print_task(client.task(args.id), full=args.action == "report")
    return 0
