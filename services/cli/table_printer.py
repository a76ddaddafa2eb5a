"""Printing Arrow tables for people (rich tables) and for programs (CSV, JSON lines)."""

from __future__ import annotations

import datetime as dt
import json
import sys

import pyarrow as pa
import pyarrow.csv as pacsv


def _cell(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def print_table(table: pa.Table, fmt: str = "table", max_rows: int = 100, title: str | None = None) -> None:
    if fmt == "csv":
        sink = pa.BufferOutputStream()
        pacsv.write_csv(table, sink)
        sys.stdout.write(sink.getvalue().to_pybytes().decode())
        return
    if fmt == "json":
        for row in table.to_pylist():
            print(json.dumps({k: (_cell(v) if isinstance(v, dt.datetime) else v) for k, v in row.items()}, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    out = Table(title=title, show_lines=False)
    for name in table.column_names:
        out.add_column(name, overflow="fold")
    for row in table.slice(0, max_rows).to_pylist():
        out.add_row(*(_cell(v) for v in row.values()))
    Console().print(out)
    if table.num_rows > max_rows:
        print(f"... {table.num_rows - max_rows} more rows")
