"""A Kafka task of a task group reads only its group's partitions, and a task whose publish the
coordinator refuses because another replica published that range first (a CONFLICT) ends
superseded, not failed. Batches of bad messages only (no Spark job runs for them), a scripted
reader standing in for the broker and scripted micro-batches for the streaming query. No sockets,
no Spark."""

from __future__ import annotations

import threading

import pytest

from common.errors import ErrorKind, StrataError
from services.ingestion import stream_task
from services.ingestion.kafka_reader import KafkaMessage

SPEC = {"type": "kafka", "spec": {
    "dataSchema": {"dataSource": "wiki", "timestampSpec": {"column": "ts"}},
    "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "h:1"}, "taskCount": 2,
                 "replicas": 2}}}


class Reader:
    reads: list = []

    def __init__(self, *args) -> None:
        pass

    def start_offsets(self, topic, committed, earliest):
        return {0: 0, 1: int(committed.get(1, 0)), 2: 0}

    def close(self) -> None:
        pass


def micro_batches(self, start, stop, duration_s=None, progress=None):
    """The streaming query: one bad message per partition and micro-batch, until a publish is refused."""
    offsets = dict(start)
    while True:
        Reader.reads.append(dict(offsets))
        messages = [KafkaMessage(p, o, b"{oops", 1) for p, o in sorted(offsets.items())]
        offsets = self.process_batch(offsets, {p: o + 1 for p, o in offsets.items()}, messages).end
        if progress is not None:
            progress(self._report(offsets))


class RefusingPublisher:
    """Publishes the first batch, then refuses: a replica got the next range in first."""

    def __init__(self) -> None:
        self.streams = []

    def publish(self, descriptors, replace, stream=None):
        if self.streams:
            raise StrataError("publish failed: offsets of datasource 'wiki' moved since the task started",
                              kind=ErrorKind.CONFLICT)
        self.streams.append(stream)


def test_a_group_task_reads_its_partitions_and_ends_superseded_when_a_replica_wins(monkeypatch):
    monkeypatch.setattr(stream_task, "KafkaReader", Reader)
    monkeypatch.setattr(stream_task.StreamTask, "run", micro_batches)
    Reader.reads = []
    publisher = RefusingPublisher()
    progress = []
    report = stream_task.run_supervisor_task(
        None, "t1", {"supervisor": SPEC, "startOffsets": {"1": 40}, "taskGroup": 1, "partitions": [1]}, publisher,
        "file:///nowhere", "", threading.Event(), progress.append)
    assert Reader.reads == [{1: 40}, {1: 41}]  # partition 1 only, from its committed offset
    assert publisher.streams == [{"datasource": "wiki", "topic": "edits", "start": {1: 40}, "end": {1: 41}}]
    assert report["superseded"].startswith("publish failed: offsets of datasource 'wiki' moved")
    assert report["startOffsets"] == {"1": 40} and report["taskGroup"] == 1 and "endOffsets" not in report
    assert [(p["taskGroup"], p["startOffsets"], p["offsets"]) for p in progress] == [(1, {"1": 40}, {"1": 41})]


def test_other_publish_errors_still_fail_the_task(monkeypatch):
    monkeypatch.setattr(stream_task, "KafkaReader", Reader)
    monkeypatch.setattr(stream_task.StreamTask, "run", micro_batches)

    class Down:
        def publish(self, *args, **kwargs):
            raise StrataError("publish failed: coordinator unavailable", kind=ErrorKind.UNAVAILABLE)

    with pytest.raises(StrataError, match="coordinator unavailable"):
        stream_task.run_supervisor_task(None, "t2", {"supervisor": SPEC, "partitions": [0, 2]}, Down(),
                                        "file:///nowhere", "", threading.Event())
    assert stream_task.publish_refusal(ValueError("x")) is None
