"""TaskStore: ingestion tasks in the metadata DB (``strata_tasks``), with their legal state changes."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy import func, select, update

from common.errors import NotFoundError, ValidationError
from services.coordinator.store import SegmentStore, segments_table, tasks_table

log = logging.getLogger("strata.tasks")

STATES = ("PENDING", "RUNNING", "SUCCESS", "FAILED", "CANCELED")
FINAL = frozenset({"SUCCESS", "FAILED", "CANCELED"})
# A task moves forward only; a final state never changes (a late report cannot revive it).
TRANSITIONS = {
    "PENDING": {"RUNNING", "FAILED", "CANCELED"},
    "RUNNING": {"RUNNING", "SUCCESS", "FAILED", "CANCELED"},
}


class TaskNotFoundError(NotFoundError):
    pass


@dataclass(frozen=True)
class TaskRecord:
    id: str
    datasource: str
    type: str
    state: str
    statement: str
    spec: dict
    report: dict
    error: str = ""
    created_ms: int = 0
    started_ms: int = 0
    finished_ms: int = 0

    @property
    def is_final(self) -> bool:
        return self.state in FINAL


def _row(r) -> TaskRecord:
    return TaskRecord(r.id, r.datasource, r.type, r.state, r.statement, json.loads(r.spec), json.loads(r.report),
                      r.error, r.created_ms, r.started_ms, r.finished_ms)


def _now() -> int:
    return time.time_ns() // 1_000_000


class TaskStore:
    def __init__(self, store: SegmentStore, on_final: Callable[[TaskRecord], None] | None = None) -> None:
        self.store = store
        # Called once per task, after the transaction that made it final (task metrics).
        self.on_final = on_final

    def create(self, datasource: str, type_: str, statement: str, spec: dict | None = None) -> TaskRecord:
        if type_ not in ("insert", "replace", "compact", "kafka", "kill"):
            raise ValidationError(f"task type must be insert, replace, compact, kafka or kill, got '{type_}'")
        task_id = f"{type_}_{datasource}_{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}_{uuid.uuid4().hex[:8]}"
        record = TaskRecord(task_id, datasource, type_, "PENDING", statement, dict(spec or {}), {}, "", _now())
        with self.store.transaction() as conn:
            conn.execute(tasks_table.insert().values(
                id=record.id, datasource=datasource, type=type_, state=record.state, statement=statement,
                spec=json.dumps(record.spec), report="{}", error="", created_ms=record.created_ms, started_ms=0,
                finished_ms=0))
        return record

    def get(self, task_id: str) -> TaskRecord:
        with self.store.transaction(write=False) as conn:
            row = conn.execute(select(tasks_table).where(tasks_table.c.id == task_id)).first()
        if row is None:
            raise TaskNotFoundError(f"no task '{task_id}'; list tasks with 'strata task list' or sys.tasks")
        return _row(row)

    def list(self, datasource: str | None = None, state: str | None = None) -> list[TaskRecord]:
        q = select(tasks_table).order_by(tasks_table.c.created_ms)
        if datasource:
            q = q.where(tasks_table.c.datasource == datasource)
        if state:
            q = q.where(tasks_table.c.state == state)
        with self.store.transaction(write=False) as conn:
            return [_row(r) for r in conn.execute(q)]

    def count_by_state(self) -> dict[str, int]:
        """Every state with its number of tasks (0 when none), in one query."""
        q = select(tasks_table.c.state, func.count()).group_by(tasks_table.c.state)
        with self.store.transaction(write=False) as conn:
            found = {state: n for state, n in conn.execute(q)}
        return {state: found.get(state, 0) for state in STATES}

    def transition(self, task_id: str, state: str, report: dict | None = None, error: str | None = None) -> TaskRecord:
        """Move a task to ``state``; returns the stored record (unchanged if already final)."""
        if state not in STATES:
            raise ValidationError(f"unknown task state '{state}'; valid: {', '.join(STATES)}")
        with self.store.transaction() as conn:
            row = conn.execute(select(tasks_table).where(tasks_table.c.id == task_id).with_for_update()).first()
            if row is None:
                raise TaskNotFoundError(f"no task '{task_id}'")
            current = _row(row)
            if current.is_final:
                return current
            if state not in TRANSITIONS[current.state]:
                raise ValidationError(f"task {task_id} cannot go from {current.state} to {state}")
            now = _now()
            values = {"state": state}
            if state == "RUNNING" and not current.started_ms:
                values["started_ms"] = now
            if state in FINAL:
                values["finished_ms"] = now
            if report is not None:
                values["report"] = json.dumps(report)
            if error is not None:
                values["error"] = error
            conn.execute(update(tasks_table).where(tasks_table.c.id == task_id).values(**values))
        record = replace(current, state=state, report=report if report is not None else current.report,
                         error=error if error is not None else current.error,
                         started_ms=values.get("started_ms", current.started_ms),
                         finished_ms=values.get("finished_ms", current.finished_ms))
        if state in FINAL:
            self._notify_final(record)
        return record

    def claim(self, task_id: str) -> bool:
        """PENDING -> RUNNING, atomically: True only for the one caller that moved it. Two
        coordinators that both believe they lead (a resumed ex-leader, before it learns its lease
        is gone) can both see the task PENDING; only the winner may start a driver for it."""
        with self.store.transaction() as conn:
            result = conn.execute(
                update(tasks_table).where(tasks_table.c.id == task_id, tasks_table.c.state == "PENDING")
                .values(state="RUNNING", started_ms=_now()))
            return result.rowcount == 1

    def _notify_final(self, record: TaskRecord) -> None:
        if self.on_final is None:
            return
        try:
            self.on_final(record)
        except Exception:  # metrics must never undo or fail a committed transition
            log.exception("task %s: on_final hook failed", record.id)

    def settle_exited(self, task_id: str, key_prefix: str, failed_error: str, published_error: str) -> TaskRecord:
        """The final state of a task whose process exited without reporting one: SUCCESS when
        segments it uploaded (locations under ``key_prefix``) are published, since its publish
        committed and only the report was lost (calling it FAILED would invite a resubmit that
        duplicates rows); otherwise FAILED. One transaction with the task row locked, so a
        publish of this task racing with it lands before (and is counted here) or is refused
        after (the task is final). ``published_error`` may use ``{segments}``."""
        t, s = tasks_table, segments_table
        with self.store.transaction() as conn:
            row = conn.execute(select(t).where(t.c.id == task_id).with_for_update()).first()
            if row is None:
                raise TaskNotFoundError(f"no task '{task_id}'")
            current = _row(row)
            if current.is_final:
                return current
            published = conn.scalar(select(func.count()).select_from(s).where(
                s.c.datasource == current.datasource, s.c.location.startswith(key_prefix, autoescape=True)))
            now = _now()
            state, error = ("SUCCESS", published_error.format(segments=published)) if published else \
                ("FAILED", failed_error)
            values = {"state": state, "error": error, "finished_ms": now}
            if not current.started_ms:
                values["started_ms"] = now
            conn.execute(update(t).where(t.c.id == task_id).values(**values))
        record = replace(current, state=state, error=error, finished_ms=now,
                         started_ms=values.get("started_ms", current.started_ms))
        self._notify_final(record)
        return record
