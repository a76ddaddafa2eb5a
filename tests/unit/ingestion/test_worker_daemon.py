"""strata's Spark Python worker daemon (services/ingestion/worker_daemon.py): it imports the
executor modules once, before forking workers, and a forked worker can use them (no thread that a
fork would lose holds a lock they need). Each check runs in a fresh interpreter, as Spark starts the
daemon, so this test process's own imports do not count."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from services.ingestion import worker_daemon
from services.ingestion.spark_session import WORKER_DAEMON, session_conf

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DEADLINE_S = 120


def _python(code: str) -> subprocess.CompletedProcess:
    # OMP_NUM_THREADS=1 as Spark sets it for its Python workers (one core per task).
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S, env=env)


def test_every_session_forks_workers_from_the_preloading_daemon_and_reuses_them():
    assert WORKER_DAEMON == worker_daemon.MODULE
    for master in ("local[2]", "spark://10.0.0.1:7077"):
        conf = session_conf(master)
        assert conf["spark.python.daemon.module"] == WORKER_DAEMON
        assert conf["spark.python.worker.reuse"] == "true"
    # A deployment whose executors cannot import strata at start can still choose pyspark's own.
    assert session_conf("local[2]", {"spark.python.daemon.module": "pyspark.daemon"})[
        "spark.python.daemon.module"] == "pyspark.daemon"


def test_preload_imports_the_executor_modules_and_leaves_no_unsafe_thread():
    out = _python(
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "from services.ingestion import worker_daemon as w\n"
        "done, failed = w.preload()\n"
        "print(json.dumps({'done': done, 'failed': failed, 'threads': w.other_threads(),\n"
        "                  'new': sorted(set(sys.modules) - before)}))\n")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["failed"] == []
    assert got["done"] == list(worker_daemon.PRELOAD)
    from common.segment import nested_native_split

    wanted = ["pyarrow", "numpy", "orjson", "pyspark.worker", "services.ingestion.build", "services.ingestion.text_scan",
              "common.ingest.row_parser"]
    if nested_native_split.available():  # the C split, when pip install -e . built it
        wanted.append("common.segment._nested_split")
    for name in wanted:
        assert name in got["new"], name
    assert set(got["threads"]) <= set(worker_daemon.FORK_SAFE_THREADS), got["threads"]
    assert out.stderr == ""


def test_a_worker_forked_after_the_preload_builds_a_segment():
    """What a worker does after the fork, with every module inherited: zstd Arrow IPC, pyarrow
    compute on threads, numpy, the compiled nested split and a segment build."""
    out = _python(
        "import os, sys, tempfile\n"
        "from services.ingestion import worker_daemon as w\n"
        "w.preload()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    import pyarrow as pa, pyarrow.compute as pc\n"
        "    from common.segment.builder import build_segment\n"
        "    from common.segment.segment_id import SegmentId\n"
        "    from common.types.column_type import JSON\n"
        "    from common.types.interval import Interval\n"
        "    from services.ingestion.build import decode_blob, encode_blob\n"
        "    n = 20000\n"
        "    t = pa.table({'__time': pa.array([i * 1000 for i in range(n)], pa.timestamp('ms')),\n"
        "                  'doc': [f'{{\"a\": {{\"b\": {i}}}, \"c\": \"x{i % 7}\"}}' for i in range(n)]})\n"
        "    t = decode_blob(encode_blob(t.to_batches()).buffers()[2])\n"
        "    assert pc.sum(pc.cast(pc.utf8_length(t.column('doc')), pa.int64())).as_py() > 0\n"
        "    path = os.path.join(tempfile.mkdtemp(), 's.sseg')\n"
        "    m = build_segment(t, path, SegmentId('d', Interval(0, 86400000), 'v', 0), column_types={'doc': JSON})\n"
        "    os._exit(0 if m.num_rows == n else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0", out.stderr


def test_a_module_that_cannot_be_preloaded_is_named_and_left_to_the_task():
    out = _python(
        "from services.ingestion import worker_daemon as w\n"
        "done, failed = w.preload(('pyarrow', 'no_such_module_xyz', 'services.ingestion.build'))\n"
        "print(done, [name for name, _ in failed])\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "('pyarrow', 'services.ingestion.build') ['no_such_module_xyz']"
    assert "could not pre-import no_such_module_xyz (ModuleNotFoundError" in out.stderr
    assert "tasks import it themselves" in out.stderr


def test_workers_that_cannot_start_fail_the_task_with_what_python_said():
    from services.ingestion.failure_message import failure_message

    # What Spark 4.3 raises when the executors' Python cannot import the daemon module (trimmed).
    spark_error = RuntimeError(
        "An error occurred while calling o95.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, "
        "most recent failure: Lost task 0.0 in stage 1.0 (TID 2) (192.0.2.2 executor driver): "
        "org.apache.spark.SparkException: \n"
        "Error from python worker:\n"
        "  /usr/bin/python3: No module named services.ingestion.worker_daemon\n"
        "PYTHONPATH was:\n"
        "  /opt/spark/python/lib/pyspark.zip:/opt/spark/python/lib/py4j-0.10.9.9-src.zip\n"
        "org.apache.spark.SparkException: EOFException occurred while reading the port number from "
        "services.ingestion.worker_daemon's stdout and terminated with code: 1..\n"
        "\tat org.apache.spark.api.python.PythonWorkerFactory.startDaemon(PythonWorkerFactory.scala:300)\n")
    message = failure_message(spark_error)
    assert message.startswith("Spark's Python workers could not start: /usr/bin/python3: No module named "
                              "services.ingestion.worker_daemon (their PYTHONPATH: /opt/spark/python/lib/pyspark.zip:")
    assert "spark.executorEnv.PYTHONPATH" in message
