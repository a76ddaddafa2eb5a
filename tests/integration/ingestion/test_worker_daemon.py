"""Spark's Python workers on the shared local[2] session come from strata's worker daemon
(services/ingestion/worker_daemon.py): they start with the executor modules already imported, are
reused from task to task, and a task that fails still fails the job with its own error."""

from __future__ import annotations

import pytest

from services.ingestion.failure_message import failure_message
from tests.fixtures.spark_session import spark  # noqa: F401


def _probe(batches):
    # Defined at module level, so the task unpickles it by reference: this module imports none of
    # what is looked for below, so whatever the worker holds, it held before the task arrived.
    import os
    import sys

    import pyarrow as pa

    daemon = sys.modules.get("services.ingestion.worker_daemon")
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\0", b" ").decode()
    for _ in batches:
        pass
    yield pa.RecordBatch.from_arrays([
        pa.array([os.getpid()], pa.int64()), pa.array([parent]),
        pa.array([len(daemon.PRELOADED) if daemon else -1], pa.int64()),
        pa.array(["services.ingestion.text_scan" in sys.modules and "common.segment._nested_split" in sys.modules]),
    ], names=["pid", "parent", "preloaded", "has_modules"])


def _fail_on_partition_three(batches):
    from pyspark import TaskContext

    for batch in batches:
        if TaskContext.get().partitionId() == 3:
            raise ValueError("row 7 of part-3.json: 'added' is not a number; fix the input")
        yield batch


def test_tasks_run_in_preloaded_reused_workers(spark):  # noqa: F811 - a fixture
    from services.ingestion import worker_daemon

    seen = []
    for _ in range(2):
        rows = spark.range(6, numPartitions=6).mapInArrow(
            _probe, "pid BIGINT, parent STRING, preloaded BIGINT, has_modules BOOLEAN").collect()
        assert len(rows) == 6
        for r in rows:
            assert "services.ingestion.worker_daemon" in r["parent"], r["parent"]
            assert r["preloaded"] == len(worker_daemon.PRELOAD)
            assert r["has_modules"]
        seen.append({r["pid"] for r in rows})
    # Two task slots: twelve tasks over at most a couple of workers, the same ones in both jobs.
    assert len(seen[0] | seen[1]) <= 4 and seen[0] & seen[1]


def test_a_failing_task_fails_the_job_with_its_own_error_and_the_next_job_runs(spark):  # noqa: F811
    with pytest.raises(Exception) as failed:
        spark.range(8, numPartitions=4).mapInArrow(_fail_on_partition_three, "id BIGINT").collect()
    message = failure_message(failed.value)
    assert message == "ValueError: row 7 of part-3.json: 'added' is not a number; fix the input"
    assert spark.range(8, numPartitions=4).mapInArrow(_probe, "pid BIGINT, parent STRING, preloaded BIGINT, "
                                                             "has_modules BOOLEAN").count() == 4
