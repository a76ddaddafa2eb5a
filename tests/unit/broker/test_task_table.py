"""sys.tasks rows from task records in every shape a report takes over a task's life."""

import json
from types import SimpleNamespace

from services.broker.core.task_table import tasks_table


def _task(state, report, error=""):
    return SimpleNamespace(id=f"t-{state}", type="index_spark", datasource="wiki", state=state,
                           report_json=json.dumps(report) if report is not None else "", error=error,
                           created_ms=1_700_000_000_000, started_ms=1_700_000_000_100,
                           finished_ms=1_700_000_002_100 if state != "RUNNING" else 0)


def test_succeeded_task_with_segment_list_and_running_task_with_a_count():
    # Regression: the builder took len() of "segments", which a progress report holds as a count.
    success = {"rowsRead": 10, "rowsWritten": 9, "rowsFiltered": 1, "parseExceptions": 0,
               "segments": [{"id": "a"}, {"id": "b"}]}
    tasks = [_task("SUCCESS", success), _task("RUNNING", {"phase": "building", "segments": 3}),
             _task("FAILED", None, "bad input"), _task("PENDING", {})]
    rows = tasks_table(tasks).to_pylist()
    by_state = {r["status"]: r for r in rows}
    assert by_state["SUCCESS"]["segments"] == 2 and by_state["SUCCESS"]["rows_written"] == 9
    assert by_state["SUCCESS"]["duration"] == 2000
    assert by_state["RUNNING"]["segments"] == 3 and by_state["RUNNING"]["duration"] is None
    assert by_state["FAILED"]["error"] == "bad input" and by_state["FAILED"]["segments"] is None
    assert by_state["PENDING"]["rows_read"] is None


def test_report_that_is_not_an_object_gives_a_row():
    t = _task("SUCCESS", None)
    t.report_json = "[1, 2]"
    assert tasks_table([t]).num_rows == 1
