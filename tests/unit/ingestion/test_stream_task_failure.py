"""A Kafka task stopped by maxParseExceptions ends with a report that keeps its parse exception
samples (partition, offset, reason, when), which the supervisor's recentErrors show. The bad
messages are refused before any Spark job, so a scripted reader stands in for the broker and a
scripted micro-batch for the streaming query (the real ones are tested against Tansu and Spark in
tests/integration/ingestion). No sockets, no Spark."""

from __future__ import annotations

import threading

import pytest

from services.ingestion import stream_task
from services.ingestion.kafka_reader import KafkaMessage

SPEC = {"type": "kafka", "spec": {
    "dataSchema": {"dataSource": "wiki", "timestampSpec": {"column": "ts"}},
    "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "h:1"}},
    "tuningConfig": {"type": "kafka", "maxParseExceptions": 1}}}


class Reader:
    def __init__(self, *args) -> None:
        self.closed = False

    def start_offsets(self, topic, committed, earliest):
        return {0: 5, 1: 0}

    def close(self) -> None:
        self.closed = True


class Publisher:
    def __init__(self) -> None:
        self.calls = []

    def publish(self, *args, **kwargs):
        self.calls.append((args, kwargs))


def one_micro_batch(self, start, stop, duration_s=None, progress=None):
    """The streaming query's first micro-batch: offsets 5-6 of partition 0 and 0 of partition 1."""
    messages = [KafkaMessage(0, 5, b"{oops", 1), KafkaMessage(1, 0, b"[1, 2]", 1), KafkaMessage(0, 6, b"", 1)]
    return self.process_batch(start, {0: 7, 1: 1}, messages).end


def test_too_many_parse_exceptions_fail_the_task_with_the_samples(monkeypatch):
    monkeypatch.setattr(stream_task, "KafkaReader", Reader)
    monkeypatch.setattr(stream_task.StreamTask, "run", one_micro_batch)
    publisher = Publisher()
    with pytest.raises(stream_task.StreamTaskFailed) as caught:
        stream_task.run_supervisor_task(None, "t1", {"supervisor": SPEC, "startOffsets": {"0": 5}}, publisher,
                                        "file:///nowhere", "", threading.Event())
    assert "3 unparseable messages exceed tuningConfig.maxParseExceptions (1)" in str(caught.value)
    assert "partition 0, offset 6: empty message" in str(caught.value)
    report = caught.value.report
    assert report["parseExceptions"] == 3 and report["startOffsets"] == {"0": 5, "1": 0}
    samples = report["parseExceptionSamples"]
    assert [(s["partition"], s["offset"]) for s in samples] == [(0, 5), (1, 0), (0, 6)]
    assert samples[0]["reason"].startswith("not JSON") and samples[1]["reason"] == "a JSON list, not an object"
    assert all(s["seenMs"] > 0 for s in samples)
    assert publisher.calls == []  # nothing of the batch was published: the offsets stay for the next task
