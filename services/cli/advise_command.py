"""``strata advise DS``: the projection advisor's proposals for one datasource (sys.projection_advice),
best first, and the ready-to-run ``ALTER TABLE .. ADD PROJECTION`` statements. Asks as the user it
runs as: a datasource they may not READ is an error, not an empty answer."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from services.cli.cluster_client import ClusterError


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def advise(client, datasource: str, top: int = 5, sql_only: bool = False, out=None) -> int:
    out = out or sys.stdout
    listed, _ = client.sql("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid' "
                           f"AND TABLE_NAME = {_literal(datasource)}")
    if listed.num_rows == 0:
        raise ClusterError(f"datasource '{datasource}' is unknown, or you may not READ it; "
                           "advice needs READ on the datasource")
    table, _ = client.sql("SELECT * FROM sys.projection_advice "
                          f"WHERE datasource = {_literal(datasource)} ORDER BY rank LIMIT {int(top)}")
    rows = table.to_pylist()
    if sql_only:
        for r in rows:
            print(r["statement"] + ";", file=out)
        return 0
    console = Console(file=out, width=160)
    if not rows:
        console.print(f"no advice for {datasource}: the query log holds no queries on it that a new projection "
                      "would make at least twice as cheap (run the workload first; the log is kept per broker)")
        return 0
    t = Table(title=f"projection advice for {datasource} (ranked by rows saved per byte stored)")
    for col in ("#", "projection", "columns", "time", "queries", "est. rows", "rows scanned now", "with it",
                "factor", "storage", "estimate"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["rank"]), r["projection"], r["grouping_columns"] or "-", r["granularity"], str(r["queries"]),
                  f"{r['estimated_rows']:,}", f"{r['rows_scanned_without']:,}", f"{r['rows_scanned_with']:,}",
                  f"{r['factor']:.1f}x", _bytes(r["storage_bytes"]), r["estimate"])
    console.print(t)
    console.print("\nto apply (then compact the datasource, `strata compact DS`, so existing segments get it):")
    for r in rows:
        console.print(r["statement"] + ";", soft_wrap=True, highlight=False, markup=False)
    return 0


def _bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


__all__ = ["advise"]
