"""SupervisorManager: the leader coordinator's duty that keeps each Kafka supervisor's task going.

Every duty run: a RUNNING supervisor without a live task gets one (a ``kafka`` task in the task
store, launched by the TaskRunner like any ingestion task) that starts from the offsets committed
with the datasource's published segments; a suspended or terminated supervisor's tasks are
cancelled. The state it acts on is all in the metadata DB, so a restarted or newly elected
coordinator carries on where the last one was. A task that failed is replaced only after
``retry_after_ms``, so a broken broker address does not spin tasks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from services.coordinator.supervisor_store import RUNNING, SupervisorStore

log = logging.getLogger(__name__)

TASK_TYPE = "kafka"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SupervisorManager:
    def __init__(self, supervisors: SupervisorStore, tasks, task_runner, retry_after_ms: int = 5_000,
                 clock: Callable[[], int] = _now_ms) -> None:
        self.supervisors = supervisors
        self.tasks = tasks
        self.task_runner = task_runner
        self.retry_after_ms = retry_after_ms
        self._clock = clock
        self._cancelling: set[str] = set()  # asked once; the runner's own grace period does the rest

    def run_once(self) -> None:
        for record in self.supervisors.list(include_terminated=True):
            mine = [t for t in self.tasks.list(record.id) if t.type == TASK_TYPE]
            active = [t for t in mine if not t.is_final]
            if record.state != RUNNING:
                for t in active:
                    if t.id in self._cancelling:
                        continue
                    self._cancelling.add(t.id)
                    log.info("supervisor %s is %s: cancelling its task %s", record.id, record.state, t.id)
                    self.task_runner.cancel(t.id)
                continue
            if active:
                continue
            failed = [t for t in mine if t.state == "FAILED" and self._clock() - t.finished_ms < self.retry_after_ms]
            if failed:
                continue
            committed = self.supervisors.offsets(record.id)
            start = committed.offsets if committed is not None and committed.topic == record.spec.topic else {}
            task = self.tasks.create(record.id, TASK_TYPE, f"kafka supervisor {record.id} (topic {record.spec.topic})",
                                     {"supervisor": record.spec.to_json(),
                                      "startOffsets": {str(p): o for p, o in sorted(start.items())}})
            log.info("supervisor %s: task %s starts at %s", record.id, task.id, start or "the spec's start")
            self.task_runner.wake()
