"""What `strata top` and `strata status` report, from sys.queries rows, tasks and servers: rates over
the window, the slowest and running queries, projection hit ratio by datasource, task phases as
progress; rendered once to text (no terminal)."""

from __future__ import annotations

import json

from common.types.interval import format_instant
from services.cli.cluster_overview import Overview, render_text, summarize

NOW = 1_700_000_000_000


def q(qid, start_ago_s, duration_ms, status="ok", tables=(), sql="SELECT 1", user="alice"):
    segs = sum(t["segments"] for t in tables)
    hits = sum(t["segments"] for t in tables if t["projection"] != "base")
    return {"query_id": qid, "user": user, "status": status, "start_time": format_instant(NOW - start_ago_s * 1000),
            "duration_ms": duration_ms, "rows_scanned": 10 * duration_ms, "segments": segs,
            "projection_segments": hits, "tables": json.dumps(list(tables)), "sql": sql, "native_type": "groupBy",
            "datasources": "wiki", "error_class": None}


def overview() -> Overview:
    wiki_hit = {"datasource": "wiki", "projection": "hourly", "segments": 3, "rejected": {}}
    wiki_miss = {"datasource": "wiki", "projection": "base", "segments": 1, "rejected": {"hourly": "filter"}}
    sales = {"datasource": "sales", "projection": "base", "segments": 2, "rejected": {}}
    return Overview(NOW, 60.0, queries=[
        q("fast", 10, 5, tables=[wiki_hit]), q("slow", 20, 900, tables=[wiki_miss], sql="SELECT slow FROM wiki"),
        q("failed", 30, 50, status="error", tables=[]), q("old", 600, 99_999, tables=[sales]),
        q("now", 1, 4_000, status="running", sql="SELECT running FROM wiki"),
        q("sales", 5, 20, tables=[sales])],
        tasks=[{"id": "task-1", "datasource": "wiki", "type": "insert", "state": "RUNNING",
                "report": {"phase": "building", "segments": 4}, "started_ms": NOW - 30_000, "created_ms": NOW - 31_000},
               {"id": "task-0", "datasource": "wiki", "type": "insert", "state": "SUCCESS", "report": {},
                "started_ms": NOW - 90_000, "created_ms": NOW - 91_000}],
        servers=[{"id": "h1", "role": "historical", "host": "h:1", "segments": 7, "bytes": 10, "leader": False}])


def test_summary_counts_the_window_only():
    s = summarize(overview())
    assert (s.finished, s.errors) == (4, 1)  # 'old' is outside the 60 s window; 'now' still runs
    assert s.queries_per_s == 4 / 60
    assert [x["query_id"] for x in s.running] == ["now"]
    assert [x["query_id"] for x in s.slowest][:2] == ["slow", "failed"]
    assert s.by_datasource == {"sales": (0, 2), "wiki": (3, 4)}
    assert s.hit_ratio == 3 / 6


def test_running_tasks_show_their_phase_as_progress():
    [task] = summarize(overview()).tasks
    assert (task["id"], task["phase"], task["progress"], task["elapsed_s"]) == ("task-1", "building", 0.6, 30.0)


def test_render_once_to_text():
    text = render_text(overview(), width=140)
    assert "0.07 queries/s over 60s (4 finished, 1 failed)" in text
    assert "projection hit ratio 50%" in text and "1 nodes, 7 segments served" in text
    assert "SELECT slow FROM wiki" in text and "SELECT running FROM wiki" in text
    assert "building" in text and "task-1" in text
    assert any("wiki" in line and "75%" in line for line in text.splitlines())  # 3 of 4 wiki segments


def test_an_empty_cluster_renders_too():
    text = render_text(Overview(NOW, 60.0, problems=["broker: UNAVAILABLE"]))
    assert "0.00 queries/s" in text and "projection hit ratio n/a" in text
    assert "broker: UNAVAILABLE" in text and "no tasks running" in text
