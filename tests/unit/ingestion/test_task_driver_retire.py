"""When a warm task driver keeps serving after a task and when it retires: a cancel that stopped
the task's Spark jobs (status 1), an unexpected failure (status 2), a stopped session or a
streaming query left running retire it; a task that ended cleanly despite a cancel (a Kafka task
stopped between micro-batches: status 0) leaves it serving, so a supervisor's suspend or
terminate does not cost the next task a JVM. The session here is a stand-in: what is decided is
the driver's, not Spark's."""

from __future__ import annotations

import io
import threading

import pytest

from services.ingestion import task_main
from services.ingestion.task_driver import TaskDriver


class FakeStreams:
    def __init__(self) -> None:
        self.active: list = []


class FakeSession:
    """A Spark Connect-like session (``is_stopped``), the one shape healthy() reads without a JVM."""

    def __init__(self) -> None:
        self.is_stopped = False
        self.streams = FakeStreams()


def serve_one(tmp_path, monkeypatch, task, cancel_first: bool = False) -> tuple[str, TaskDriver]:
    """Runs ``task(driver)`` -> status as the driver's one task; returns its "done" line."""
    status = io.StringIO()
    driver = TaskDriver("127.0.0.1:1", str(tmp_path), status=status)
    driver.spark = FakeSession()
    started = threading.Event()

    def run_task(task_id, coordinator, cancel_event, spark):
        started.set()
        if cancel_first:
            driver.cancel_task(task_id)
            assert cancel_event.is_set()
        return task(driver)

    monkeypatch.setattr(task_main, "run_task", run_task)
    driver.commands.put("t1")
    driver.commands.put(None)  # served one task, then the loop ends
    driver.serve()
    assert started.is_set()
    return status.getvalue().strip(), driver


@pytest.mark.parametrize("cancel_first, rc, want", [
    (False, 0, "keep"),    # ran to its end
    (False, 1, "keep"),    # failed on its input (reported FAILED itself)
    (True, 0, "keep"),     # cancelled, and ended cleanly: a Kafka task between micro-batches
    (True, 1, "retire"),   # cancelled mid-job: its Spark jobs were stopped half-way
    (False, 2, "retire"),  # an unexpected error
])
def test_whether_the_driver_stays_after_a_task(tmp_path, monkeypatch, cancel_first, rc, want):
    line, _ = serve_one(tmp_path, monkeypatch, lambda d: rc, cancel_first)
    assert line == f"done t1 {want}"


def test_a_streaming_query_left_running_retires_the_driver(tmp_path, monkeypatch):
    def leaves_a_query(driver):
        driver.spark.streams.active.append("a query")
        return 0

    line, _ = serve_one(tmp_path, monkeypatch, leaves_a_query, cancel_first=True)
    assert line == "done t1 retire"


def test_a_stopped_session_retires_the_driver(tmp_path, monkeypatch):
    def stops(driver):
        driver.spark.is_stopped = True
        return 0

    line, _ = serve_one(tmp_path, monkeypatch, stops)
    assert line == "done t1 retire"
