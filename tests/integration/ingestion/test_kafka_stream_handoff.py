"""A Kafka stream task's handoff on a real Kafka-protocol broker (Tansu) and real Spark: the small
realtime segments of its micro-batches are rewritten into full-size segments (the catalog's
projections built in) in one metadata transaction, at maxRowsPerSegment and at taskDuration, and a
task SIGKILLed the moment its handoff committed loses and duplicates nothing.

The coordinator's side is the metadata store itself (tests/integration/ingestion/stream_tasks.py);
what a query reads is the used segments no newer used version overshadows, as the broker's
timeline has it. The broker-level race (queries during a handoff) is in test_kafka_supervisor.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from common.ingest.supervisor_spec import parse_supervisor_spec
from common.segment import Segment
from services.ingestion.stream_handoff import StreamHandoff
from services.ingestion.stream_task import run_supervisor_task
from tests.fixtures.kafka_broker import kafka_broker  # noqa: F401
from tests.fixtures.spark_session import spark  # noqa: F401
from tests.integration.ingestion.stream_tasks import (  # noqa: F401 - deep and store are fixtures
    StorePublisher,
    deep,
    events,
    expected_rows,
    produce,
    store,
    supervisor,
    visible,
    visible_rows,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEADLINE_S = 300.0
HOURLY = {"type": "aggregate", "name": "hourly",
          "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
          "groupingColumns": [{"type": "long", "name": "h"}],
          "aggregators": [{"type": "count", "name": "c"}]}


def one_hour(n: int, start: int = 0) -> list[dict]:
    """events() (NULLs, -0.0, fractions, non-ASCII), all in one hour, so they share a time chunk."""
    return [{**e, "ts": f"2024-03-05T07:{e['id'] % 60:02d}:{e['id'] % 59:02d}.{e['id'] % 1000:03d}+00:00"}
            for e in events(n, start)]


def wait_until(what: str, check, failed=lambda: None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        reason = failed()
        assert reason is None, f"{what}: {reason}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


class Running:
    """run_supervisor_task (micro-batches and handoffs) in a thread until stopped."""

    def __init__(self, spark, task_id: str, spec: dict, publisher, root: str, start: dict, table=None) -> None:
        self.cancel = threading.Event()
        self.outcome: dict = {}

        def run() -> None:
            try:
                self.outcome["report"] = run_supervisor_task(
                    spark, task_id, {"supervisor": spec, "startOffsets": {str(p): o for p, o in start.items()}},
                    publisher, root, "", self.cancel, catalog_table=table)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                self.outcome["error"] = exc

        self.thread = threading.Thread(target=run, name=task_id, daemon=True)
        self.thread.start()

    def failed(self):
        return self.outcome.get("error")

    def stop(self) -> dict:
        self.cancel.set()
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), "the task did not stop"
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["report"]


def test_handoff_at_max_rows_per_segment_swaps_in_full_segments_at_once(spark, kafka_broker, store, deep):  # noqa: F811
    kafka_broker.create_topic("handoff-a", 2)
    rows = one_hour(130)
    counts = produce(kafka_broker, "handoff-a", rows, 2)
    spec = supervisor("handoff-a", kafka_broker.bootstrap, "handoff_a", maxRowsInMemory=50, maxRowsPerSegment=100)
    publisher = StorePublisher(store)
    table = {"type": "datasource", "properties": {"projections": [HOURLY]}}
    task = Running(spark, "task-h1", spec, publisher, deep.root, {}, table)
    seen_realtime = False
    try:
        def handed_off() -> bool:
            nonlocal seen_realtime
            now = visible(store, "handoff_a")
            seen_realtime = seen_realtime or any(r.realtime for r in now)
            got = visible_rows(store, deep, "handoff_a")
            # Every snapshot of the metadata: no row twice, none that was not produced (the
            # small segments and the full ones are never visible together).
            assert len(set(got)) == len(got) and set(got) <= set(expected_rows(rows)), got
            committed = publisher.supervisors.offsets("handoff_a")
            return committed is not None and committed.offsets == counts and any(not r.realtime for r in now)
        wait_until("a handoff after the micro-batches", handed_off, task.failed)
    finally:
        report = task.stop()
    assert seen_realtime and report["handoffs"] >= 1 and report.get("handoffErrors") is None
    assert visible_rows(store, deep, "handoff_a") == expected_rows(rows)
    full = [r for r in visible(store, "handoff_a") if not r.realtime]
    assert sum(r.num_rows for r in full) >= 100 and all(r.num_rows <= 100 for r in full)  # maxRowsPerSegment
    for r in full:
        segment = Segment.open(os.path.join(deep.root, *r.location.split("/")))
        try:
            assert [p.name for p in segment.manifest.projections] == ["hourly"]  # the catalog's, as for INSERT
        finally:
            segment.close()
    # The overshadowed small segments are still used (the coordinator drops them once the new
    # version is served) and realtime; nothing realtime is left visible unless appended since.
    hidden = [r for r in store.list("handoff_a") if r.id not in {v.id for v in visible(store, "handoff_a")}]
    assert hidden and all(r.realtime for r in hidden)


def test_task_killed_the_moment_its_handoff_committed(spark, kafka_broker, store, deep, tmp_path):  # noqa: F811
    kafka_broker.create_topic("handoff-k", 2)
    rows = one_hour(150)
    counts = produce(kafka_broker, "handoff-k", rows, 2)
    spec = supervisor("handoff-k", kafka_broker.bootstrap, "handoff_k", maxRowsInMemory=50, maxRowsPerSegment=100)
    log_path = tmp_path / "task.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.ingestion.stream_tasks", json.dumps(spec), store.url, deep.root],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, "STRATA_TEST_DIE_AFTER_HANDOFF": "1"},
            stdout=subprocess.DEVNULL, stderr=log)
    try:
        process.wait(timeout=DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, log_path.read_text()[-3000:]
    publisher = StorePublisher(store)
    committed = publisher.supervisors.offsets("handoff_k").offsets
    # The handoff committed (a full version visible) and the task died before anything after it.
    assert any(not r.realtime for r in visible(store, "handoff_k"))
    prefix = [r for p in sorted(committed) for r in [e for e in rows if e["id"] % 2 == p][:committed[p]]]
    assert visible_rows(store, deep, "handoff_k") == expected_rows(prefix)

    # The next task goes on from the committed offsets and appends to the handoff's version
    # (realtime again); the handoff at taskDuration then takes every realtime segment: every row once.
    more = one_hour(40, start=150)
    more_counts = produce(kafka_broker, "handoff-k", more, 2)
    want = {p: counts[p] + more_counts.get(p, 0) for p in counts}
    task = Running(spark, "task-k2", spec, publisher, deep.root, committed)
    try:
        wait_until("the next task catching up", lambda: publisher.supervisors.offsets("handoff_k").offsets == want,
                   task.failed)
    finally:
        task.stop()  # a cancel: no handoff at the end
    assert visible_rows(store, deep, "handoff_k") == expected_rows(rows + more)
    handoff = StreamHandoff(spark, parse_supervisor_spec(spec), "task-k3", publisher, deep.root)
    handoff.at_end()  # what run_supervisor_task does when taskDuration ends the task
    assert handoff.errors == [] and handoff.handoffs >= 1
    assert not any(r.realtime for r in visible(store, "handoff_k"))
    assert visible_rows(store, deep, "handoff_k") == expected_rows(rows + more)
