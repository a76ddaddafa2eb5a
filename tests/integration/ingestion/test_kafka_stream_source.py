"""The Kafka task as a Structured Streaming query over the ``strata_kafka`` Python data source, on
a real Kafka-protocol broker (Tansu) and real Spark, published into a real metadata store:

- the messages are read in Spark's executors: the driver's Kafka clients may read metadata and
  offsets but never assign a partition or fetch a message, and every row still arrives;
- the query keeps streaming what is produced while it runs and stops when asked; a task whose
  start offsets are stale has its first publish refused and ends on that error;
- a task SIGKILLed mid-stream and restarted from the committed offsets loses and duplicates
  nothing: the rows and their checksum equal what was produced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from common.ingest.supervisor_spec import parse_supervisor_spec
from services.ingestion import kafka_reader
from services.ingestion.ingestion_report import IngestionFailed
from services.ingestion.stream_task import StreamTask
from tests.fixtures.kafka_broker import kafka_broker  # noqa: F401
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.stream_tasks import (  # noqa: F401 - deep and store are fixtures
    StorePublisher,
    deep,
    events,
    expected_rows,
    produce,
    store,
    stored_rows,
    supervisor,
)

pytestmark = pytest.mark.integration
DEADLINE_S = 400.0  # a loaded 2-core machine; the killed task's process starts a JVM of its own
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class MetadataOnlyConsumer:
    """The driver's Kafka consumer, allowed to read topic metadata and watermarks only."""

    fetches: list[str] = []

    def __init__(self, conf) -> None:
        self._inner = REAL_CONSUMER(conf)

    def list_topics(self, *args, **kwargs):
        return self._inner.list_topics(*args, **kwargs)

    def get_watermark_offsets(self, *args, **kwargs):
        return self._inner.get_watermark_offsets(*args, **kwargs)

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name):
        MetadataOnlyConsumer.fetches.append(name)
        raise AssertionError(f"the driver called Consumer.{name}: messages must be read by the executors")


REAL_CONSUMER = kafka_reader.Consumer


def checksum(rows: list[tuple]) -> tuple[int, int, float]:
    return len(rows), sum(r[0] for r in rows), sum(r[2] for r in rows if r[2] is not None)


def wait_until(what: str, check, deadline_s: float = DEADLINE_S, failed=lambda: None) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        error = failed()
        if error is not None:
            raise AssertionError(f"{what}: the task failed first: {error!r}")
        assert time.monotonic() < deadline, f"{what}: not within {deadline_s:.0f} s"
        time.sleep(0.2)


def test_streaming_task_reads_in_the_executors(spark, kafka_broker, store, deep, monkeypatch):  # noqa: F811
    monkeypatch.setattr(kafka_reader, "Consumer", MetadataOnlyConsumer)
    MetadataOnlyConsumer.fetches = []
    kafka_broker.create_topic("exec-read", 3)
    rows = events(240)
    counts = produce(kafka_broker, "exec-read", rows, 3)
    spec = parse_supervisor_spec(supervisor("exec-read", kafka_broker.bootstrap, "exec_read", maxRowsInMemory=100))
    publisher = StorePublisher(store)
    task = StreamTask(spark, spec, "task-e1", publisher, deep.root)
    stop = threading.Event()
    reports: list[dict] = []
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["end"] = task.run(task.reader.start_offsets(spec.topic, {}, earliest=True), stop,
                                      progress=reports.append)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = exc

    def committed() -> dict:
        offsets = publisher.supervisors.offsets("exec_read")
        return offsets.offsets if offsets is not None else {}

    thread = threading.Thread(target=run, name="stream-task", daemon=True)
    thread.start()
    try:
        wait_until("the first events", lambda: committed() == counts, failed=lambda: outcome.get("error"))
        # Produced while the query runs: the next micro-batches pick them up.
        more = events(90, start=240)
        more_counts = produce(kafka_broker, "exec-read", more, 3)
        want = {p: counts[p] + more_counts.get(p, 0) for p in counts}
        wait_until("the events produced while streaming", lambda: committed() == want,
                   failed=lambda: outcome.get("error"))
    finally:
        stop.set()
        thread.join(timeout=DEADLINE_S)
        task.close()
    assert not thread.is_alive() and "error" not in outcome, outcome
    assert outcome["end"] == want
    assert task.batches >= 4  # maxRowsInMemory 100 cut 330 events into several micro-batches
    assert reports and reports[-1]["offsets"] == {str(p): o for p, o in want.items()}
    assert MetadataOnlyConsumer.fetches == []  # the driver never assigned, polled or consumed
    got = stored_rows(store, deep, "exec_read")
    assert got == expected_rows(rows + more)

    # A task started from stale offsets (the range was published since) streams its first
    # micro-batch, whose publish is refused: the task ends with that error and adds no row.
    stale = StreamTask(spark, spec, "task-e2", publisher, deep.root)
    try:
        with pytest.raises(IngestionFailed, match="moved since the task started"):
            stale.run({p: 0 for p in counts}, threading.Event(), duration_s=DEADLINE_S)
    finally:
        stale.close()
    assert stored_rows(store, deep, "exec_read") == got


def test_task_killed_mid_stream_restarts_from_the_committed_offsets(spark, kafka_broker, store, deep,  # noqa: F811
                                                                  tmp_path):
    kafka_broker.create_topic("killed-task", 2)
    rows = events(600)
    counts = produce(kafka_broker, "killed-task", rows, 2)
    spec_json = supervisor("killed-task", kafka_broker.bootstrap, "killed_task", maxRowsInMemory=50)
    log_path = tmp_path / "task.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.ingestion.stream_tasks", json.dumps(spec_json), store.url,
             deep.root], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE, stderr=log)
    published: list[dict] = []

    def follow() -> None:
        for line in process.stdout:
            if line.startswith(b"PUBLISHED "):
                published.append(json.loads(line.split(b" ", 1)[1]))

    follower = threading.Thread(target=follow, name="task-output", daemon=True)
    follower.start()
    try:
        wait_until("two publishes of the task process", lambda: len(published) >= 2,
                   failed=lambda: None if process.poll() is None
                   else f"exit {process.returncode}: {log_path.read_text()[-3000:]}")
        # Mid-stream: the next micro-batch (50 of 600 events) is under way, nothing of it published.
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=60)
        follower.join(timeout=60)
        process.stdout.close()
    publisher = StorePublisher(store)
    committed = publisher.supervisors.offsets("killed_task").offsets
    assert 100 <= sum(committed.values()) < len(rows), committed  # killed before the end
    # What is published is exactly the committed offsets' rows: per partition, the first ones produced.
    prefix = [r for p in sorted(committed) for r in [e for e in rows if e["id"] % 2 == p][:committed[p]]]
    assert stored_rows(store, deep, "killed_task") == expected_rows(prefix)

    # More events while no task runs; the next task starts from the committed offsets.
    more = events(60, start=600)
    more_counts = produce(kafka_broker, "killed-task", more, 2)
    want = {p: counts[p] + more_counts.get(p, 0) for p in counts}
    spec = parse_supervisor_spec(spec_json)
    task = StreamTask(spark, spec, "task-k2", publisher, deep.root)
    stop = threading.Event()
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["end"] = task.run(task.reader.start_offsets(spec.topic, committed, earliest=True), stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="restarted-task", daemon=True)
    thread.start()
    try:
        wait_until("the restarted task catching up",
                   lambda: publisher.supervisors.offsets("killed_task").offsets == want,
                   failed=lambda: outcome.get("error"))
    finally:
        stop.set()
        thread.join(timeout=DEADLINE_S)
        task.close()
    assert "error" not in outcome, outcome
    got = stored_rows(store, deep, "killed_task")
    assert checksum(got) == checksum(expected_rows(rows + more))
    assert got == expected_rows(rows + more)  # every row once: nothing lost, nothing twice
