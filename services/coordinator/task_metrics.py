"""TaskMetrics: the ingestion task metrics of the coordinator (tasks by state, finished tasks,
their run time, rows written and parse exceptions), fed by the task store.

Rows and parse exceptions are counted when a task ends, from its report: a task reports them
once, at the end, so a dashboard's rows/s is a step per finished task, not a live rate.
"""

from __future__ import annotations

from services.coordinator.task_store import FINAL


class TaskMetrics:
    def __init__(self, metrics, tasks=None) -> None:
        self.metrics = metrics
        self.tasks = tasks  # the TaskStore, for the by-state gauge
        self._touched: set[tuple[str, str]] = set()

    def on_final(self, task) -> None:
        """A task reached SUCCESS, FAILED or CANCELED (called once per task by the store)."""
        m = self.metrics
        m.tasks_finished.labels(task.datasource, task.type, task.state).inc()
        if task.started_ms and task.finished_ms >= task.started_ms:
            m.task_seconds.labels(task.type, task.state).observe((task.finished_ms - task.started_ms) / 1000)
        report = task.report or {}
        if task.state == "SUCCESS":
            m.ingested_rows.labels(task.datasource, task.type).inc(max(int(report.get("rowsWritten") or 0), 0))
        # A failed task's parse exceptions count too: they are often why it failed.
        m.parse_exceptions.labels(task.datasource).inc(max(int(report.get("parseExceptions") or 0), 0))

    def refresh(self) -> None:
        """Set the by-state gauge from the store (the leader runs this with its duties), and give
        the counters of every active task's datasource a 0 sample before the task ends."""
        for state, n in self.tasks.count_by_state().items():
            self.metrics.tasks.labels(state).set(n)
        for task in self.tasks.list(state="PENDING") + self.tasks.list(state="RUNNING"):
            self._touch(task.datasource, task.type)

    def _touch(self, datasource: str, type_: str) -> None:
        """Create the label sets at 0. Prometheus's rate() and increase() see nothing of a series'
        first sample, so a counter born at 1 when the first task of a datasource fails would be
        invisible to the failed-task alert and the rows/s panel."""
        if (datasource, type_) in self._touched:
            return
        m = self.metrics
        for state in FINAL:
            m.tasks_finished.labels(datasource, type_, state)
            m.task_seconds.labels(type_, state)
        m.ingested_rows.labels(datasource, type_)
        m.parse_exceptions.labels(datasource)
        self._touched.add((datasource, type_))

    def clear(self) -> None:
        """Leadership lost: the new leader reports the states."""
        self.metrics.tasks.clear()


__all__ = ["TaskMetrics"]
