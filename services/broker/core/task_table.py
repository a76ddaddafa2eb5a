"""The rows of ``sys.tasks`` from the coordinator's task records (pure).

A task's report changes shape over its life: while it runs it is the latest progress update
(``{"phase": "building", "segments": 3}``, a count), once it ends it is the ingestion report
(``"segments": [...]``, one entry per published segment), and a task that failed before running
may have none. Every shape must give a row, so each field is read defensively.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pyarrow as pa

from common.types.interval import format_instant
from services.broker.core.druid_sys_columns import TASK_FIELDS, task_columns

TASKS_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("type", pa.string()), ("datasource", pa.string()), ("status", pa.string()),
    ("created_time", pa.string()), ("duration", pa.int64()), ("rows_read", pa.int64()),
    ("rows_written", pa.int64()), ("rows_filtered", pa.int64()), ("parse_exceptions", pa.int64()),
    ("segments", pa.int64()), ("error", pa.string()), *TASK_FIELDS])


def _report(text: str) -> dict:
    try:
        report = json.loads(text or "{}")
    except ValueError:
        return {}
    return report if isinstance(report, dict) else {}


def _count(value) -> int | None:
    """A count field: an int as it is, a list by its length, anything else unknown."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def task_row(task) -> dict:
    """One row; ``task`` has the Task message's fields (id, type, datasource, state, report_json,
    error, created_ms, started_ms, finished_ms)."""
    report = _report(task.report_json)
    return dict(task_id=task.id, type=task.type, datasource=task.datasource, status=task.state,
                created_time=format_instant(task.created_ms),
                duration=(task.finished_ms - task.started_ms) if task.finished_ms and task.started_ms else None,
                rows_read=_count(report.get("rowsRead")), rows_written=_count(report.get("rowsWritten")),
                rows_filtered=_count(report.get("rowsFiltered")),
                parse_exceptions=_count(report.get("parseExceptions")),
                segments=_count(report.get("segments")), error=task.error or None, **task_columns(task))


def tasks_table(tasks: Iterable) -> pa.Table:
    return pa.Table.from_pylist([task_row(t) for t in tasks], schema=TASKS_SCHEMA)


__all__ = ["TASKS_SCHEMA", "task_row", "tasks_table"]
