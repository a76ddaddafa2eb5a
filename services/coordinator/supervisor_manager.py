"""SupervisorManager: the leader coordinator's duty that keeps each Kafka supervisor's tasks going.

Every duty run it gathers each supervisor's facts from the metadata DB (its desired state, spec,
committed offsets and ``kafka`` task records) and the partitions the broker last reported (the lag
monitor's latest answer), asks core/supervisor_machine.py what to do, and does it: a started task
is a ``kafka`` task in the task store, launched by the TaskRunner like any ingestion task, whose
spec names its task group, its partitions and the committed offsets it starts from; a cancel goes
to the runner. The state it acts on is all in the metadata DB, so a restarted or newly elected
coordinator carries on where the last one was. A group whose task failed gets its next one only
after ``retry_after_ms``, so a broken broker address does not spin tasks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from services.coordinator.core.supervisor_machine import CancelTask, StartTask, SupervisorFacts, TaskFacts, decide
from services.coordinator.supervisor_store import SupervisorRecord, SupervisorStore

log = logging.getLogger(__name__)

TASK_TYPE = "kafka"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def task_facts(task, current_spec: dict, cancelling: bool = False) -> TaskFacts:
    """A ``kafka`` task record as the machine sees it. Tasks from before task groups carry no
    ``taskGroup``: they are group 0 reading every partition."""
    spec = task.spec or {}
    listed = spec.get("partitions")
    partitions = tuple(int(p) for p in listed) if listed is not None else None
    return TaskFacts(task.id, int(spec.get("taskGroup", 0)), partitions, not task.is_final, task.state,
                     task.finished_ms or 0, spec.get("supervisor") == current_spec, cancelling)


class SupervisorManager:
    """``partitions(supervisor_id, topic)``: the topic's partitions as the broker last reported
    them (sorted), or None when not known yet."""

    def __init__(self, supervisors: SupervisorStore, tasks, task_runner, retry_after_ms: int = 5_000,
                 clock: Callable[[], int] = _now_ms,
                 partitions: Callable[[str, str], Sequence[int] | None] | None = None) -> None:
        self.supervisors = supervisors
        self.tasks = tasks
        self.task_runner = task_runner
        self.retry_after_ms = retry_after_ms
        self._clock = clock
        self._partitions = partitions or (lambda _sid, _topic: None)
        self._cancelling: set[str] = set()  # asked once; the runner's own grace period does the rest

    def run_once(self) -> None:
        active: set[str] = set()
        for record in self.supervisors.list(include_terminated=True):
            mine = [t for t in self.tasks.list(record.id) if t.type == TASK_TYPE]
            active.update(t.id for t in mine if not t.is_final)
            if record.state != "RUNNING" and all(t.is_final for t in mine):
                continue  # nothing to stop, nothing to start
            self._run(record, mine)
        self._cancelling &= active

    def _run(self, record: SupervisorRecord, mine: list) -> None:
        spec = record.spec
        current = spec.to_json()
        committed = self.supervisors.offsets(record.id)
        start = committed.offsets if committed is not None and committed.topic == spec.topic else {}
        known = self._partitions(record.id, spec.topic)
        facts = SupervisorFacts(record.id, record.state, spec.task_count, spec.replicas,
                                tuple(sorted(known)) if known is not None else None, start, self._clock(),
                                self.retry_after_ms)
        commands = decide(facts, [task_facts(t, current, t.id in self._cancelling) for t in mine])
        started = False
        for command in commands:
            if isinstance(command, CancelTask):
                self._cancelling.add(command.task_id)
                log.info("supervisor %s: cancelling task %s (%s)", record.id, command.task_id, command.reason)
                self.task_runner.cancel(command.task_id)
            elif isinstance(command, StartTask):
                task_spec = {"supervisor": current, "taskGroup": command.group,
                             "startOffsets": {str(p): o for p, o in sorted(command.start_offsets.items())}}
                if command.partitions is not None:
                    task_spec["partitions"] = list(command.partitions)
                listed = command.partitions
                where = f"partitions {list(listed)}" if listed is not None else "every partition"
                task = self.tasks.create(record.id, TASK_TYPE,
                                         f"kafka supervisor {record.id} (topic {spec.topic}, task group "
                                         f"{command.group}: {where})", task_spec)
                log.info("supervisor %s: task %s (group %d, %s) starts at %s", record.id, task.id, command.group,
                         where, dict(command.start_offsets) or "the spec's start")
                started = True
        if started:
            self.task_runner.wake()
