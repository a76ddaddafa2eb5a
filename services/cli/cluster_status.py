"""``strata status``: every node of a local cluster with its health, endpoints and segments, then
what ``strata top`` shows (services/cli/cluster_overview.py: the same sources)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from services.cli.cluster_client import ClusterClient
from services.cli.cluster_overview import collect, render
from services.cli.local_cluster import LocalCluster, _alive, health


def print_status(directory: str) -> int:
    cluster = LocalCluster(directory)
    state = cluster.running()
    endpoints = cluster.endpoints()
    served: dict[str, tuple[int, int]] = {}
    leader = ""
    client = ClusterClient(endpoints.get("coordinator"), endpoints.get("broker"))
    overview = None
    try:
        overview = collect(client)  # what `strata top` shows, from the same sources
        response = client.servers()
        leader = response.leader
        for s in response.servers:
            served[s.info.id] = (len(s.served), s.served_bytes)
    except Exception as exc:  # status must still print what it can when the coordinator is down
        Console(stderr=True).print(f"[yellow]coordinator not answering: {exc}[/yellow]")
    finally:
        client.close()
    table = Table(title=f"strata cluster in {cluster.dir}")
    for col in ("node", "role", "pid", "health", "grpc", "http", "flight", "segments", "bytes"):
        table.add_column(col)
    for rec in state["nodes"]:
        ok, info = health(rec) if _alive(rec["pid"]) else (False, {})
        status = "[green]healthy[/green]" if ok else ("[red]down[/red]" if not _alive(rec["pid"]) else "[yellow]unhealthy[/yellow]")
        if rec["role"] == "coordinator" and leader:
            status += " (leader)" if info.get("leader") else ""
        count, size = served.get(rec["name"], (0, 0))
        table.add_row(rec["name"], rec["role"], str(rec["pid"]), status, str(rec.get("grpc_port", "")),
                      str(rec.get("http_port", "")), str(rec.get("flight_port", "") or ""),
                      str(count) if rec["role"] == "historical" else "", f"{size / 1e6:.1f} MB" if size else "")
    console = Console(width=max(Console().width, 120))
    console.print(table)
    if overview is not None:
        console.print(render(overview))
    return 0
