"""Tasks the runner runs in a thread of the coordinator (kill): they need no Spark slot, end
SUCCESS/FAILED with their report or error, and a cancel stops them between batches."""

from __future__ import annotations

import threading
import time

import pytest

from common.errors import ValidationError
from services.coordinator.store import SegmentStore
from services.coordinator.task_runner import TaskRunner
from services.coordinator.task_store import TaskStore


def wait_for(predicate, what: str, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


@pytest.fixture
def runner(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'm.db'}")
    tasks = TaskStore(store)
    release = threading.Event()
    batches = []

    def kill(task, should_stop):
        if task.spec.get("fail"):
            raise ValidationError("kill task: bad spec")
        for batch in range(100):
            if should_stop():
                break
            batches.append(batch)
            release.wait(10)
        return {"numBatchesProcessed": len(batches)}, task.spec.get("error")

    # max_running=0: no Spark task may start, local ones still do.
    r = TaskRunner(tasks, lambda: "127.0.0.1:1", str(tmp_path / "tasks"), {}, max_running=0, period_s=0.02,
                   local_tasks={"kill": kill})
    r.set_leader(True)
    r.start()
    yield r, tasks, release, batches
    release.set()
    r.stop()
    store.close()


def test_a_local_task_runs_without_a_slot_and_ends_with_its_report(runner):
    r, tasks, release, batches = runner
    release.set()
    done = tasks.create("wiki", "kill", "KILL wiki", {})
    spark = tasks.create("wiki", "insert", "INSERT ...", {})
    r.wake()
    wait_for(lambda: tasks.get(done.id).is_final, "the kill task finished")
    got = tasks.get(done.id)
    assert (got.state, got.report, got.error) == ("SUCCESS", {"numBatchesProcessed": 100}, "")
    assert tasks.get(spark.id).state == "PENDING"  # no slot for Spark tasks
    failed = tasks.create("wiki", "kill", "KILL wiki", {"fail": True})
    errored = tasks.create("wiki", "kill", "KILL wiki", {"error": "2 files could not be deleted"})
    r.wake()
    wait_for(lambda: tasks.get(failed.id).is_final and tasks.get(errored.id).is_final, "both finished")
    assert (tasks.get(failed.id).state, tasks.get(failed.id).error) == ("FAILED", "kill task: bad spec")
    assert (tasks.get(errored.id).state, tasks.get(errored.id).error) == ("FAILED", "2 files could not be deleted")


def test_a_cancel_stops_a_local_task_between_batches(runner):
    r, tasks, release, batches = runner
    task = tasks.create("wiki", "kill", "KILL wiki", {})
    r.wake()
    wait_for(lambda: batches == [0], "the first batch started")
    assert task.id in r.running()
    r.cancel(task.id)
    release.set()
    wait_for(lambda: tasks.get(task.id).is_final, "the task ended")
    got = tasks.get(task.id)
    assert got.state == "CANCELED" and got.report == {"numBatchesProcessed": 1}
    assert "canceled" in got.error and task.id not in r.running()
