"""A task submitted right after another one ended goes to the warm driver that ran it, not to a
JVM of its own: the ended task reports its final state a moment before its driver says "done",
and in that moment the runner waits for the driver (its "done" wakes the next pass) instead of
starting a cold task process. A driver that never says "done" does not hold tasks back. A task
cancelled in a driver that ends it cleanly (a Kafka task between micro-batches) leaves the
driver serving when the driver says so, and its cleanup does not wait for the driver to exit."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from services.coordinator import task_runner as task_runner_module
from services.coordinator.store import SegmentStore
from services.coordinator.task_runner import TaskRunner, _Driver
from services.coordinator.task_store import TaskStore


def wait_for(predicate, what: str, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


@pytest.fixture
def setup(tmp_path):
    """A runner (its loop not started: the test runs its passes) with one fake warm driver: a
    process that swallows its commands, and a status pipe the test writes "done" lines to."""
    store = SegmentStore(f"sqlite:///{tmp_path / 'm.db'}")
    tasks = TaskStore(store)
    cold: list[str] = []

    def command(task_id: str, _coordinator: str) -> list[str]:
        cold.append(task_id)
        return [sys.executable, "-c", "pass"]

    runner = TaskRunner(tasks, lambda: "127.0.0.1:1", str(tmp_path / "tasks"), {}, max_running=2, period_s=60,
                        task_command=command, warm_drivers=1)
    runner.set_leader(True)
    # Its own process group, as a real driver's (the cleanup duty waits for a task's group).
    proc = subprocess.Popen([sys.executable, "-c", "import sys\nfor _ in sys.stdin: pass"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, start_new_session=True)
    read_end, write_end = os.pipe()
    driver = _Driver("driver-test", proc, os.fdopen(read_end, "r"), str(tmp_path / "driver.log"))
    driver.reader = threading.Thread(target=runner._read_status, args=(driver,), daemon=True)
    driver.reader.start()
    runner._drivers.append(driver)
    status = os.fdopen(write_end, "w", buffering=1)
    yield runner, tasks, driver, status, cold
    status.close()
    proc.stdin.close()
    proc.wait(10)
    for other in runner._procs.values():  # the cold "task processes" (they exit at once)
        other.wait(10)
    store.close()


def _run_in_driver(runner, tasks, driver) -> str:
    first = tasks.create("wiki", "insert", "INSERT ...", {})
    runner._launch()
    assert driver.task == first.id
    tasks.transition(first.id, "RUNNING")
    tasks.transition(first.id, "SUCCESS")  # reported by the task; the driver has not said "done" yet
    return first.id


def test_a_task_waits_for_the_driver_finishing_the_last_one(setup):
    runner, tasks, driver, status, cold = setup
    first = _run_in_driver(runner, tasks, driver)
    second = tasks.create("wiki", "insert", "INSERT ...", {})
    runner._launch()
    assert tasks.get(second.id).state == "PENDING" and cold == []

    runner._wake.clear()
    status.write(f"done {first} keep\n")
    wait_for(runner._wake.is_set, "the driver's done line wakes the runner")
    runner._reap()
    runner._launch()
    assert driver.task == second.id and tasks.get(second.id).state == "RUNNING"
    assert cold == []
    for proc in list(runner._procs.values()):
        assert proc is driver.proc


def test_a_driver_that_does_not_say_done_in_time_is_not_waited_for(setup, monkeypatch):
    runner, tasks, driver, status, cold = setup
    _run_in_driver(runner, tasks, driver)
    monkeypatch.setattr(task_runner_module, "_FINISHING_GRACE_S", 0.0)
    second = tasks.create("wiki", "insert", "INSERT ...", {})
    runner._launch()
    assert cold == [second.id]  # a process of its own, as before warm drivers
    assert tasks.get(second.id).state == "RUNNING"


def test_a_driver_still_running_its_task_is_not_waited_for(setup):
    runner, tasks, driver, status, cold = setup
    first = tasks.create("wiki", "insert", "INSERT ...", {})
    runner._launch()
    tasks.transition(first.id, "RUNNING")  # still running: its end is not in sight
    second = tasks.create("wiki", "insert", "INSERT ...", {})
    runner._launch()
    assert cold == [second.id]


def _cancel_in_driver(runner, tasks, driver, status, verdict: str) -> str:
    """Cancels a task the driver runs; the task reports CANCELED itself, then the driver says
    ``done ID verdict``. Returns the task id once the runner has settled that line."""
    first = tasks.create("wiki", "kafka", "kafka supervisor wiki", {})
    runner._launch()
    assert driver.task == first.id
    tasks.transition(first.id, "RUNNING")
    runner.cancel(first.id)
    wait_for(lambda: driver.proc.poll() is None, "the driver alive")
    tasks.transition(first.id, "CANCELED")  # the task stopped between micro-batches
    wait_for(lambda: first.id in runner.pending_cleanup(), "the cancel settled")
    runner._clean_up()
    assert runner.pending_cleanup() == [first.id]  # the driver has not said it is done with it
    status.write(f"done {first.id} {verdict}\n")
    wait_for(lambda: runner._driver_done, "the driver's done line read")
    runner._reap()
    return first.id


def test_a_task_that_ends_cleanly_on_its_cancel_leaves_the_driver_serving(setup):
    runner, tasks, driver, status, cold = setup
    _cancel_in_driver(runner, tasks, driver, status, "keep")
    assert not driver.retiring and driver.task is None
    runner._clean_up()
    assert runner.pending_cleanup() == []  # its process group lives on, but nothing of the task runs
    second = tasks.create("wiki", "kafka", "kafka supervisor wiki", {})
    runner._launch()
    assert driver.task == second.id and cold == []


def test_a_driver_retiring_after_a_cancel_holds_the_cleanup_until_it_exits(setup):
    runner, tasks, driver, status, cold = setup
    cancelled = _cancel_in_driver(runner, tasks, driver, status, "retire")
    assert driver.retiring
    runner._clean_up()
    assert runner.pending_cleanup() == [cancelled]  # a worker of its stopped jobs could still upload
    driver.proc.stdin.close()  # the driver exits
    driver.proc.wait(10)
    runner._clean_up()
    assert runner.pending_cleanup() == []
