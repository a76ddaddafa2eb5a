"""Task metrics from the task store: each final state counted once, its run time, rows written
and parse exceptions from the task's report, and the tasks-by-state gauge (SQLite store, no
sockets)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.coordinator.store import SegmentStore
from services.coordinator.task_metrics import TaskMetrics
from services.coordinator.task_store import STATES, TaskStore
from services.metrics import Metrics


@pytest.fixture
def setup(tmp_path):
    metrics = Metrics("coordinator")
    store = SegmentStore(f"sqlite:///{tmp_path / 'metadata.db'}")
    task_metrics = TaskMetrics(metrics)
    tasks = TaskStore(store, on_final=task_metrics.on_final)
    task_metrics.tasks = tasks
    yield metrics, tasks, task_metrics
    store.close()


def _samples(metrics: Metrics) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_final_states_rows_and_parse_exceptions_are_counted_once(setup):
    metrics, tasks, _ = setup
    ok = tasks.create("wiki", "insert", "INSERT ...")
    tasks.transition(ok.id, "RUNNING")
    tasks.transition(ok.id, "SUCCESS", report={"rowsWritten": 1200, "parseExceptions": 3})
    tasks.transition(ok.id, "FAILED", error="late")  # a final state never changes: not counted again
    bad = tasks.create("wiki", "replace", "REPLACE ...")
    tasks.transition(bad.id, "RUNNING")
    tasks.transition(bad.id, "FAILED", report={"rowsWritten": 50, "parseExceptions": 7}, error="too many")
    never = tasks.create("edits", "insert", "INSERT ...")
    tasks.transition(never.id, "CANCELED", error="canceled before it ran")

    got = _samples(metrics)
    finished = {k[1]: v for k, v in got.items() if k[0] == "strata_tasks_finished_total"}
    assert finished == {(("datasource", "wiki"), ("state", "SUCCESS"), ("type", "insert")): 1.0,
                        (("datasource", "wiki"), ("state", "FAILED"), ("type", "replace")): 1.0,
                        (("datasource", "edits"), ("state", "CANCELED"), ("type", "insert")): 1.0}
    # Only a successful task's rows were written; parse exceptions count for failed tasks too.
    assert got[("strata_ingested_rows_total", (("datasource", "wiki"), ("type", "insert")))] == 1200
    assert ("strata_ingested_rows_total", (("datasource", "wiki"), ("type", "replace"))) not in got
    assert got[("strata_ingest_parse_exceptions_total", (("datasource", "wiki"),))] == 10
    # Run time observed for the tasks that started; the canceled one never ran.
    assert got[("strata_task_seconds_count", (("state", "SUCCESS"), ("type", "insert")))] == 1
    assert got[("strata_task_seconds_count", (("state", "FAILED"), ("type", "replace")))] == 1
    assert ("strata_task_seconds_count", (("state", "CANCELED"), ("type", "insert"))) not in got


def test_tasks_by_state_gauge_and_clear(setup):
    metrics, tasks, task_metrics = setup
    for _ in range(2):
        tasks.create("wiki", "insert", "INSERT ...")
    running = tasks.create("wiki", "insert", "INSERT ...")
    tasks.transition(running.id, "RUNNING")
    assert tasks.count_by_state() == {"PENDING": 2, "RUNNING": 1, "SUCCESS": 0, "FAILED": 0, "CANCELED": 0}
    task_metrics.refresh()
    got = {k[1][0][1]: v for k, v in _samples(metrics).items() if k[0] == "strata_tasks"}
    assert got == {"PENDING": 2, "RUNNING": 1, "SUCCESS": 0, "FAILED": 0, "CANCELED": 0}
    assert set(got) == set(STATES)
    task_metrics.clear()
    assert not [k for k in _samples(metrics) if k[0] == "strata_tasks"]


def test_active_tasks_get_zero_counters_before_they_end(setup):
    """rate() ignores a series' first sample: the counters must exist at 0 before the first
    task of a datasource ends, or its rows and its failure would never show."""
    metrics, tasks, task_metrics = setup
    t = tasks.create("fresh", "insert", "INSERT ...")
    tasks.transition(t.id, "RUNNING")
    task_metrics.refresh()
    got = _samples(metrics)
    for state in ("SUCCESS", "FAILED", "CANCELED"):
        assert got[("strata_tasks_finished_total",
                    (("datasource", "fresh"), ("state", state), ("type", "insert")))] == 0
    assert got[("strata_ingested_rows_total", (("datasource", "fresh"), ("type", "insert")))] == 0
    assert got[("strata_ingest_parse_exceptions_total", (("datasource", "fresh"),))] == 0
    tasks.transition(t.id, "FAILED", report={"rowsWritten": 0, "parseExceptions": 2})
    got = _samples(metrics)
    assert got[("strata_tasks_finished_total", (("datasource", "fresh"), ("state", "FAILED"), ("type", "insert")))] == 1
    assert got[("strata_ingest_parse_exceptions_total", (("datasource", "fresh"),))] == 2


def test_a_failing_hook_never_fails_the_transition(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'metadata.db'}")

    def broken(_task):
        raise RuntimeError("metrics broke")

    tasks = TaskStore(store, on_final=broken)
    t = tasks.create("wiki", "insert", "INSERT ...")
    assert tasks.transition(t.id, "CANCELED").state == "CANCELED"
    assert tasks.get(t.id).state == "CANCELED"
    store.close()
