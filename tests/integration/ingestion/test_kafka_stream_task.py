"""A Kafka supervisor's task end to end on a real Kafka-protocol broker (Tansu) and real Spark:
micro-batches read with assign + seek, segments built by the ordinary Spark ingestion path, and
published with their end offsets in one metadata transaction (SQLite) with compare-and-swap.

The coordinator's side is SupervisorStore itself (what PublishSegments with a StreamCommit calls);
rows are read back from the published segments with strata's engine."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from common.ingest.supervisor_spec import parse_supervisor_spec
from services.ingestion.ingestion_report import IngestionFailed
from services.ingestion.stream_task import StreamTask, TooManyStreamParseExceptions
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

DEADLINE_S = 300.0  # a loaded 2-core machine: each micro-batch is a Spark job


def drain(task: StreamTask, start: dict[int, int], until) -> dict[int, int]:
    """Micro-batches until ``until(offsets)`` holds, within a deadline."""
    deadline = time.monotonic() + DEADLINE_S
    offsets = dict(start)
    while not until(offsets):
        assert time.monotonic() < deadline, f"offsets stuck at {offsets}"
        offsets = task.run_micro_batch(offsets).end
    return offsets


def test_micro_batches_load_every_event_exactly_once(spark, kafka_broker, store, deep):  # noqa: F811
    kafka_broker.create_topic("wiki-a", 3)
    rows = events(500)
    counts = produce(kafka_broker, "wiki-a", rows, 3)
    spec = parse_supervisor_spec(supervisor("wiki-a", kafka_broker.bootstrap, "wiki_a"))
    publisher = StorePublisher(store)
    task = StreamTask(spark, spec, "task-a1", publisher, deep.root)
    try:
        start = task.reader.start_offsets(spec.topic, {}, earliest=True)
        assert start == {0: 0, 1: 0, 2: 0}
        end = drain(task, start, lambda o: o == counts)
    finally:
        task.close()
    assert task.batches >= 3  # maxRowsInMemory 200 cut 500 events into several publishes
    assert publisher.supervisors.offsets("wiki_a").offsets == end == counts
    got = stored_rows(store, deep, "wiki_a")
    assert got == expected_rows(rows)  # count and every value: nothing lost, nothing twice

    # A second task started from the offsets the first one started from (a replica, or a
    # restart from stale offsets) re-reads the range, and its publish is refused: no duplicates.
    stale = StreamTask(spark, spec, "task-a2", publisher, deep.root)
    try:
        with pytest.raises(IngestionFailed, match="moved since the task started"):
            stale.run_micro_batch(start)
    finally:
        stale.close()
    assert stored_rows(store, deep, "wiki_a") == expected_rows(rows)
    published = {r.location for r in store.list("wiki_a")}
    on_disk = {os.path.relpath(os.path.join(b, f), deep.root) for b, _, fs in os.walk(deep.root) for f in fs}
    assert on_disk == published  # the refused task removed what it uploaded

    # More events: the next task starts at the committed offsets and loads only those.
    more = events(100, start=500)
    counts2 = produce(kafka_broker, "wiki-a", more, 3)
    nxt = StreamTask(spark, spec, "task-a3", publisher, deep.root)
    try:
        committed = publisher.supervisors.offsets("wiki_a").offsets
        want = {p: counts[p] + counts2.get(p, 0) for p in counts}
        drain(nxt, nxt.reader.start_offsets(spec.topic, committed, earliest=True), lambda o: o == want)
    finally:
        nxt.close()
    assert stored_rows(store, deep, "wiki_a") == expected_rows(rows + more)


def test_task_dying_before_publish_loses_and_duplicates_nothing(spark, kafka_broker, store, deep):  # noqa: F811
    kafka_broker.create_topic("wiki-b", 2)
    rows = events(120)
    counts = produce(kafka_broker, "wiki-b", rows, 2)
    spec = parse_supervisor_spec(supervisor("wiki-b", kafka_broker.bootstrap, "wiki_b"))
    dying = StreamTask(spark, spec, "task-b1", StorePublisher(store, fail_publish=True), deep.root)
    try:
        with pytest.raises(IngestionFailed, match="died before its publish"):
            dying.run_micro_batch({0: 0, 1: 0})
    finally:
        dying.close()
    publisher = StorePublisher(store)
    assert publisher.supervisors.offsets("wiki_b") is None and store.list("wiki_b") == []
    task = StreamTask(spark, spec, "task-b2", publisher, deep.root)
    try:
        start = task.reader.start_offsets(spec.topic, {}, earliest=True)
        drain(task, start, lambda o: o == counts)
    finally:
        task.close()
    assert stored_rows(store, deep, "wiki_b") == expected_rows(rows)


def test_parse_exceptions_name_partition_and_offset(spark, kafka_broker, store, deep):  # noqa: F811
    kafka_broker.create_topic("wiki-c", 1)
    good = events(5)
    kafka_broker.produce("wiki-c", [(0, json.dumps(good[0]).encode()), (0, b"{not json"), (0, b"[1, 2]"),
                                    (0, json.dumps({"id": 99}).encode()),
                                    *[(0, json.dumps(r).encode()) for r in good[1:]]])
    spec = parse_supervisor_spec(supervisor("wiki-c", kafka_broker.bootstrap, "wiki_c", maxParseExceptions=3))
    publisher = StorePublisher(store)
    task = StreamTask(spark, spec, "task-c1", publisher, deep.root)
    try:
        result = task.run_micro_batch({0: 0})
    finally:
        task.close()
    assert [(e.partition, e.offset) for e in result.parse_exceptions] == [(0, 1), (0, 2), (0, 3)]
    reasons = [e.reason for e in result.parse_exceptions]
    assert reasons[0].startswith("not JSON") and "not an object" in reasons[1] and "no timestamp" in reasons[2]
    assert result.end == {0: 8} and publisher.supervisors.offsets("wiki_c").offsets == {0: 8}
    assert stored_rows(store, deep, "wiki_c") == expected_rows(good)

    # Over the limit: the micro-batch fails and nothing moves.
    kafka_broker.produce("wiki-c", [(0, b"bad")])
    strict = StreamTask(spark, parse_supervisor_spec(supervisor("wiki-c", kafka_broker.bootstrap, "wiki_c",
                                                                maxParseExceptions=0)), "task-c2", publisher,
                        deep.root)
    try:
        with pytest.raises(TooManyStreamParseExceptions, match="partition 0, offset 8: not JSON"):
            strict.run_micro_batch({0: 8})
    finally:
        strict.close()
    assert publisher.supervisors.offsets("wiki_c").offsets == {0: 8}


def test_run_stops_when_asked(spark, kafka_broker, store, deep):  # noqa: F811
    kafka_broker.create_topic("wiki-d", 1)
    spec = parse_supervisor_spec(supervisor("wiki-d", kafka_broker.bootstrap, "wiki_d"))
    stop = threading.Event()
    stop.set()
    task = StreamTask(spark, spec, "task-d1", StorePublisher(store), deep.root)
    try:
        assert task.run({0: 0}, stop) == {0: 0}
    finally:
        task.close()
