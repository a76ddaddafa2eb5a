"""SupervisorManager over real stores (SQLite file) and a recording task runner, without sockets."""

from __future__ import annotations

import pytest

from common.ingest.supervisor_spec import parse_supervisor_spec
from services.coordinator.store import SegmentStore
from services.coordinator.supervisor_manager import SupervisorManager
from services.coordinator.supervisor_store import SUSPENDED, TERMINATED, SupervisorStore
from services.coordinator.task_store import TaskStore

SPEC = {"type": "kafka", "spec": {"dataSchema": {"dataSource": "wiki"},
                                  "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "h:1"}}}}


class Runner:
    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.wakes = 0

    def cancel(self, task_id: str) -> None:
        self.cancelled.append(task_id)

    def wake(self) -> None:
        self.wakes += 1


class Clock:
    now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def parts(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'm.db'}")
    supervisors, tasks, runner, clock = SupervisorStore(store), TaskStore(store), Runner(), Clock()
    yield supervisors, tasks, runner, clock, SupervisorManager(supervisors, tasks, runner, 5_000, clock)
    store.close()


def test_one_task_per_running_supervisor_from_committed_offsets(parts):
    supervisors, tasks, runner, clock, manager = parts
    supervisors.upsert(parse_supervisor_spec(SPEC))
    supervisors.reset_offsets("wiki", {0: 7, 1: 3}, topic="edits")
    manager.run_once()
    manager.run_once()  # the task is still PENDING: no second one
    [task] = tasks.list("wiki")
    assert task.type == "kafka" and task.spec["startOffsets"] == {"0": 7, "1": 3}
    assert task.spec["supervisor"] == SPEC and runner.wakes == 1


def test_suspend_cancels_once_and_failed_tasks_back_off(parts):
    supervisors, tasks, runner, clock, manager = parts
    supervisors.upsert(parse_supervisor_spec(SPEC))
    manager.run_once()
    [task] = tasks.list("wiki")
    supervisors.set_state("wiki", SUSPENDED)
    manager.run_once()
    manager.run_once()
    assert runner.cancelled == [task.id]
    tasks.transition(task.id, "RUNNING")
    tasks.transition(task.id, "FAILED", error="broker down")
    supervisors.set_state("wiki", "RUNNING")
    clock.now = tasks.get(task.id).finished_ms + 1_000
    manager.run_once()
    assert len(tasks.list("wiki")) == 1  # failed a second ago: wait
    clock.now += 5_000
    manager.run_once()
    assert len(tasks.list("wiki")) == 2
    supervisors.set_state("wiki", TERMINATED)
    manager.run_once()
    assert len(runner.cancelled) == 2


def test_task_groups_and_replicas_from_the_reported_partitions(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'g.db'}")
    known: dict = {}
    supervisors, tasks, runner, clock = SupervisorStore(store), TaskStore(store), Runner(), Clock()
    manager = SupervisorManager(supervisors, tasks, runner, 5_000, clock, partitions=lambda sid, topic: known.get(topic))
    spec = {"type": "kafka", "spec": {**SPEC["spec"], "ioConfig": {**SPEC["spec"]["ioConfig"], "taskCount": 2,
                                                                   "replicas": 2}}}
    supervisors.upsert(parse_supervisor_spec(spec))
    supervisors.reset_offsets("wiki", {0: 7, 1: 3, 2: 9}, topic="edits")
    manager.run_once()
    assert tasks.list("wiki") == []  # two groups need the partition list first
    known["edits"] = [0, 1, 2]
    manager.run_once()
    manager.run_once()
    got = sorted((t.spec["taskGroup"], t.spec["partitions"], t.spec["startOffsets"]) for t in tasks.list("wiki"))
    assert got == [(0, [0, 2], {"0": 7, "2": 9}), (0, [0, 2], {"0": 7, "2": 9}), (1, [1], {"1": 3}), (1, [1], {"1": 3})]
    # A replica that lost a publish race ends superseded: only it is replaced, from the new offsets.
    loser = tasks.list("wiki")[0]
    tasks.transition(loser.id, "RUNNING")
    tasks.transition(loser.id, "SUCCESS", report={"superseded": "offsets moved"})
    supervisors.reset_offsets("wiki", {0: 20, 2: 11})
    manager.run_once()
    [new] = [t for t in tasks.list("wiki") if t.id not in {x.id for x in tasks.list("wiki")[:4]}]
    assert (new.spec["taskGroup"], new.spec["startOffsets"]) == (0, {"0": 20, "2": 11})
    # A changed spec (taskCount 1) cancels every old task once and starts the new group's replicas
    # (the compare-and-swap keeps a cancelled task that publishes meanwhile from duplicating).
    one = {"type": "kafka", "spec": {**SPEC["spec"], "ioConfig": {**SPEC["spec"]["ioConfig"], "replicas": 2}}}
    supervisors.upsert(parse_supervisor_spec(one))
    manager.run_once()
    manager.run_once()
    active = [t.id for t in tasks.list("wiki") if not t.is_final]
    assert sorted(runner.cancelled) == sorted(active[:4]) and len(active) == 6
    assert [tasks.get(t).spec["partitions"] for t in active[4:]] == [[0, 1, 2], [0, 1, 2]]
    store.close()
