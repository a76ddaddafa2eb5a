"""What ``strata top`` and ``strata status`` show about a running cluster, read from one set of
sources: the broker's sys.queries (queries per second, the slowest, projection hit ratio), the
coordinator's tasks (running ones with their phase) and servers (segments and bytes per node).

``collect`` asks the cluster; ``summarize`` is pure (rows in, figures out), so what the views say
is tested without a cluster; ``render`` builds the rich view and ``render_text`` prints it once to
a string (no terminal needed).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table

MARKER = "/* strata top */"  # the views' own queries, left out of what they report
PHASES = ("reading", "planning", "allocating", "building", "publishing", "done")
QUERY_COLUMNS = ("query_id", "user", "status", "start_time", "duration_ms", "rows_scanned", "segments",
                 "projection_segments", "tables", "sql", "native_type", "datasources", "error_class")


@dataclass
class Overview:
    now_ms: int
    window_s: float
    queries: list[dict] = field(default_factory=list)  # sys.queries rows
    tasks: list[dict] = field(default_factory=list)  # id, datasource, type, state, report, started_ms
    servers: list[dict] = field(default_factory=list)  # id, role, host, segments, bytes
    problems: list[str] = field(default_factory=list)  # sources that did not answer, and why


def collect(client, window_s: float = 60.0) -> Overview:
    """Ask the broker and the coordinator; a source that does not answer is a ``problem``, not a failure."""
    out = Overview(int(time.time() * 1000), window_s)
    try:
        table, _ = client.sql(f"SELECT {', '.join(_quoted(c) for c in QUERY_COLUMNS)} FROM sys.queries {MARKER}",
                              timeout_s=30)
        out.queries = [r for r in table.to_pylist() if MARKER not in (r.get("sql") or "")]
    except Exception as exc:  # noqa: BLE001 - shown in the view
        out.problems.append(f"broker: {exc}")
    try:
        for t in client.tasks():
            out.tasks.append({"id": t.id, "datasource": t.datasource, "type": t.type, "state": t.state,
                              "report": json.loads(t.report_json or "{}"), "started_ms": t.started_ms,
                              "created_ms": t.created_ms})
        response = client.servers()
        for s in response.servers:
            out.servers.append({"id": s.info.id, "role": s.info.role, "host": f"{s.info.host}:{s.info.grpc_port}",
                                "segments": len(s.served), "bytes": s.served_bytes,
                                "leader": s.info.id == response.leader})
    except Exception as exc:  # noqa: BLE001 - shown in the view
        out.problems.append(f"coordinator: {exc}")
    return out


def _quoted(name: str) -> str:
    return f'"{name}"'


def _start_ms(row: dict) -> int:
    from common.types.interval import parse_instant

    try:
        return parse_instant(row["start_time"])
    except Exception:  # noqa: BLE001 - a row without a readable start is left out of rates
        return 0


@dataclass
class Summary:
    queries_per_s: float
    finished: int
    errors: int
    running: list[dict]
    slowest: list[dict]
    hit_ratio: float | None  # segments read from a projection / segments read, over the window
    by_datasource: dict[str, tuple[int, int]]  # datasource -> (projection segments, segments)
    tasks: list[dict]  # running/pending tasks with "progress" (0..1) and "phase"


def summarize(o: Overview, slowest: int = 5) -> Summary:
    since = o.now_ms - int(o.window_s * 1000)
    recent = [q for q in o.queries if q["status"] != "running" and _start_ms(q) >= since]
    running = sorted((q for q in o.queries if q["status"] == "running"), key=lambda q: -(q["duration_ms"] or 0))
    by_ds: dict[str, list[int]] = {}
    for q in recent:
        for t in json.loads(q.get("tables") or "[]"):
            entry = by_ds.setdefault(t["datasource"], [0, 0])
            entry[1] += t["segments"]
            if t["projection"] != "base":
                entry[0] += t["segments"]
    hit = sum(v[0] for v in by_ds.values())
    total = sum(v[1] for v in by_ds.values())
    tasks = []
    for t in o.tasks:
        if t["state"] not in ("RUNNING", "PENDING"):
            continue
        phase = t["report"].get("phase") if t["state"] == "RUNNING" else "waiting"
        done = PHASES.index(phase) / (len(PHASES) - 1) if phase in PHASES else 0.0
        started = t["started_ms"] or t["created_ms"]
        tasks.append(dict(t, phase=phase or "starting", progress=done,
                          elapsed_s=max(0.0, (o.now_ms - started) / 1000) if started else 0.0))
    return Summary(
        queries_per_s=len(recent) / o.window_s if o.window_s else 0.0, finished=len(recent),
        errors=sum(1 for q in recent if q["status"] not in ("ok",)), running=running,
        slowest=sorted(recent, key=lambda q: -(q["duration_ms"] or 0))[:slowest],
        hit_ratio=hit / total if total else None, by_datasource={k: (v[0], v[1]) for k, v in sorted(by_ds.items())},
        tasks=tasks)


def _short(text: str | None, width: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[:width - 1] + "…"


def render(o: Overview) -> Group:
    s = summarize(o)
    ratio = "n/a" if s.hit_ratio is None else f"{s.hit_ratio:.0%}"
    head = (f"[b]{s.queries_per_s:.2f}[/b] queries/s over {o.window_s:.0f}s ({s.finished} finished, "
            f"{s.errors} failed) · [b]{len(s.running)}[/b] running · projection hit ratio [b]{ratio}[/b] · "
            f"{len(o.servers)} nodes, {sum(x['segments'] for x in o.servers if x['role'] == 'historical')} "
            f"segments served")
    parts: list = [Panel(head, title="strata top", expand=True)]
    for problem in o.problems:
        parts.append(f"[yellow]{problem}[/yellow]")

    queries = Table(title="running and slowest queries", expand=True)
    for col in ("query_id", "user", "status", "ms", "rows scanned", "projection segments", "query"):
        queries.add_column(col, overflow="fold" if col == "query" else "ellipsis")
    for q in s.running + s.slowest:
        queries.add_row(q["query_id"][:12], q["user"] or "-", q["status"], str(q["duration_ms"] or 0),
                        f"{q['rows_scanned'] or 0:,}", f"{q['projection_segments'] or 0}/{q['segments'] or 0}",
                        _short(q["sql"] or f"native {q['native_type'] or ''} on {q['datasources'] or '?'}"))
    parts.append(queries)

    if s.by_datasource:
        hits = Table(title="projection hit ratio by datasource", expand=True)
        for col in ("datasource", "segments from projections", "segments read", "hit ratio"):
            hits.add_column(col)
        for ds, (hit, total) in s.by_datasource.items():
            hits.add_row(ds, str(hit), str(total), f"{hit / total:.0%}" if total else "n/a")
        parts.append(hits)

    tasks = Table(title="running tasks", expand=True)
    for col in ("task", "datasource", "type", "phase", "progress", "elapsed"):
        tasks.add_column(col)
    for t in s.tasks:
        tasks.add_row(t["id"][:16], t["datasource"], t["type"], t["phase"],
                      ProgressBar(total=1.0, completed=t["progress"], width=20), f"{t['elapsed_s']:.0f}s")
    if not s.tasks:
        tasks.add_row("-", "", "", "no tasks running", "", "")
    parts.append(tasks)
    return Group(*parts)


def render_text(o: Overview, width: int = 120) -> str:
    console = Console(width=width, record=True, file=_Null(), color_system=None, force_terminal=False)
    console.print(render(o))
    return console.export_text()


class _Null:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass


__all__ = ["MARKER", "Overview", "Summary", "collect", "render", "render_text", "summarize"]
