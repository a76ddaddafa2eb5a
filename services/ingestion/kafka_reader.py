"""KafkaReader: reads a topic's partitions from given offsets with assign + seek (confluent-kafka).

A Kafka supervisor's task never uses a consumer group's committed offsets: where to start is what
the metadata DB says its published segments end at (SupervisorStore), so the reader assigns the
partitions itself at those offsets and commits nothing to Kafka. What it returns carries each
message's partition and offset, so the task knows exactly which offsets a micro-batch covers and
a parse error can name where the bad message is.

Two readers serve the stream task (services/ingestion/kafka_stream_source.py):

- ``LogEnds`` (on the Spark driver, in the streaming source's planner process) finds each
  partition's log end: the high watermark, and, when the watermark moved, one read at watermark - 1
  so that a broker answering the last record batch's first offset + 1 (Tansu, the test broker, does
  after batched produce) still has its whole last batch read (``kafka_offset_plan.log_end``);
- ``read_range`` (in the executors) reads exactly ``[start, end)`` of one partition.

``KafkaReader.read`` reads from given offsets until ``max_messages`` or a poll brings nothing
within ``idle_s`` (a test and diagnostics helper; tasks plan exact ranges instead).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from common.errors import StrataError, ValidationError
from services.ingestion.core.kafka_offset_plan import initial_offsets, log_end

_METADATA_TIMEOUT_S = 30.0


class KafkaReadError(StrataError):
    """The broker could not be read (unreachable, unknown topic, a fetch error)."""


# How long an executor may take to read its planned range before the batch fails (the range was
# in the log when it was planned, so only an unreachable broker or a deleted log takes this long).
READ_RANGE_TIMEOUT_S = 120.0
# After the first message of a log-end probe, how long to wait for the rest of its record batch.
_PROBE_QUIET_S = 0.05


@dataclass(frozen=True)
class KafkaMessage:
    partition: int
    offset: int
    value: bytes | None
    timestamp_ms: int  # the record's timestamp (CreateTime or LogAppendTime), for lag in time
    key: bytes | None = None


def consumer_conf(bootstrap_servers: str, consumer_properties: Mapping[str, str] | None = None) -> dict:
    """A consumer that only assigns: the spec's consumerProperties, with commits off."""
    conf = {k: v for k, v in (consumer_properties or {}).items()}
    conf.update({
        "bootstrap.servers": bootstrap_servers,
        # librdkafka wants a group id even for a consumer that only assigns; a fresh one per
        # reader means no group state is ever shared or committed.
        "group.id": f"strata-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "isolation.level": conf.get("isolation.level", "read_committed"),
    })
    return conf


def _consumer(conf: dict) -> Consumer:
    try:
        return Consumer(conf)
    except KafkaException as exc:
        raise ValidationError(f"ioConfig.consumerProperties are not accepted by the Kafka client: {exc}") from None


# One idle range consumer per process, kept between reads: an executor's Python worker (reused
# from task to task) reads each micro-batch's range without connecting and fetching metadata
# again, which was a fixed cost of every micro-batch. A read takes it (or makes one) and gives it
# back unassigned when it ended well; one that failed is closed.
_IDLE: dict[str, Consumer] = {}
_IDLE_LOCK = threading.Lock()


def _take_consumer(conf: dict) -> tuple[str, Consumer]:
    key = json.dumps(conf, sort_keys=True)
    with _IDLE_LOCK:
        consumer = _IDLE.pop(key, None)
    return key, consumer if consumer is not None else _consumer(conf)


def _give_back(key: str, consumer: Consumer) -> None:
    try:
        consumer.unassign()
    except KafkaException:
        consumer.close()
        return
    with _IDLE_LOCK:
        stale = [_IDLE.pop(k) for k in list(_IDLE)]  # one kept: the conf of the latest read
        _IDLE[key] = consumer
    for c in stale:
        c.close()


def read_range(conf: dict, topic: str, partition: int, start: int, end: int,
               timeout_s: float = READ_RANGE_TIMEOUT_S) -> Iterator[list[KafkaMessage]]:
    """Offsets ``[start, end)`` of one partition, in chunks, with assign + seek (no group, no
    commit). Done when a message at ``end - 1`` or later arrived, or the consumer's position
    reached ``end`` (offsets a read_committed consumer never sees: transaction markers, aborted
    records). Raises KafkaReadError, naming the range, when that takes longer than ``timeout_s``."""
    if end <= start:
        return
    key, consumer = _take_consumer(conf)
    tp = TopicPartition(topic, partition, start)
    done = False
    try:
        consumer.assign([tp])
        deadline = time.monotonic() + timeout_s
        next_offset = start
        while next_offset < end:
            if time.monotonic() > deadline:
                raise KafkaReadError(f"reading {topic}[{partition}] offsets {start}..{end - 1} took over "
                                     f"{timeout_s:.0f} s; it stopped at offset {next_offset} (is the broker up, "
                                     "and was the log truncated?)")
            batch = consumer.consume(min(end - next_offset, 10_000), timeout=0.2)
            chunk = []
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaReadError(f"reading {topic}[{partition}] failed: {err}")
                o = m.offset()
                if o < next_offset or o >= end:
                    continue  # a refetch, or past the planned end (the next micro-batch's)
                next_offset = o + 1
                chunk.append(KafkaMessage(partition, o, m.value(), m.timestamp()[1], m.key()))
            if chunk:
                yield chunk
            elif not batch:
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                if position >= end:
                    break
        done = True
    finally:
        if done:
            _give_back(key, consumer)
        else:  # an error, or the reader stopped early (a generator closed): not reused
            consumer.close()


class LogEnds:
    """Each partition's log end (``kafka_offset_plan.log_end``), with one consumer kept open. On
    Kafka a partition is probed only when its high watermark moved (the same watermark is the same
    end). Where a probe found more than the watermark said (a broker reporting the last batch's
    first offset + 1), the next probe starts at the last end found - 1: a probe that stopped
    before the end of a batch (its messages are handed over in chunks) goes on from there."""

    def __init__(self, conf: dict) -> None:
        self._consumer = _consumer(conf)
        self._known: dict[tuple[str, int], tuple[int, int]] = {}  # (topic, partition) -> (watermark, end)

    def close(self) -> None:
        self._consumer.close()

    def watermarks(self, topic: str, partitions) -> dict[int, tuple[int, int]]:
        out = {}
        for p in partitions:
            try:
                out[p] = self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=_METADATA_TIMEOUT_S)
            except KafkaException as exc:
                raise KafkaReadError(f"cannot read the offsets of {topic}[{p}]: {exc}") from None
        return out

    def ends(self, topic: str, partitions) -> dict[int, int]:
        marks = self.watermarks(topic, partitions)
        out, probe = {}, {}
        for p, (low, high) in marks.items():
            known = self._known.get((topic, p))
            if known is not None and known == (high, high):
                out[p] = high
            elif known is not None and known[0] == high:
                probe[p] = known[1] - 1
            elif high > low:
                probe[p] = high - 1
            else:
                out[p] = high
        if probe:
            seen = self._probe(topic, probe)
            for p, offset in probe.items():
                out[p] = log_end(max(offset + 1, marks[p][1]), seen.get(p, ()))
        for p, (_, high) in marks.items():
            self._known[(topic, p)] = (high, out[p])
        return out

    def _probe(self, topic: str, at: dict[int, int]) -> dict[int, list[int]]:
        """The offsets a read from ``at`` returns per partition: the rest of its record batch."""
        seen: dict[int, list[int]] = {p: [] for p in at}
        self._consumer.assign([TopicPartition(topic, p, o) for p, o in at.items()])
        try:
            deadline = time.monotonic() + 5.0
            # The record at watermark - 1 exists (unless a transaction marker: then the watermark is the end).
            while time.monotonic() < deadline and not all(seen.values()):
                m = self._consumer.poll(0.1)
                if m is not None and m.error() is None:
                    seen[m.partition()].append(m.offset())
            while True:
                m = self._consumer.poll(_PROBE_QUIET_S)
                if m is None:
                    break
                if m.error() is None:
                    seen[m.partition()].append(m.offset())
        finally:
            self._consumer.unassign()
        return seen


class KafkaReader:
    def __init__(self, bootstrap_servers: str, consumer_properties: Mapping[str, str] | None = None) -> None:
        self._consumer = _consumer(consumer_conf(bootstrap_servers, consumer_properties))

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> KafkaReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def partitions(self, topic: str) -> list[int]:
        try:
            meta = self._consumer.list_topics(topic, timeout=_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaReadError(f"cannot read the metadata of topic '{topic}': {exc}") from None
        t = meta.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            reason = t.error if t is not None and t.error is not None else "it does not exist"
            raise KafkaReadError(f"topic '{topic}' cannot be read ({reason}); create it or fix ioConfig.topic")
        return sorted(t.partitions)

    def start_offsets(self, topic: str, committed: Mapping[int, int], earliest: bool) -> dict[int, int]:
        """Where each partition starts: the committed offset, else the earliest or latest one."""
        partitions = self.partitions(topic)
        marks = {}
        for p in partitions:
            if p in committed:
                continue
            try:
                marks[p] = self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=_METADATA_TIMEOUT_S)
            except KafkaException as exc:
                raise KafkaReadError(f"cannot read the offsets of {topic}[{p}]: {exc}") from None
        return initial_offsets(partitions, committed, marks, earliest)

    def read(self, topic: str, start: Mapping[int, int], max_messages: int, idle_s: float = 0.5,
             deadline_s: float = 30.0) -> list[KafkaMessage]:
        """Messages from ``start`` (partition -> first offset), in offset order per partition."""
        if not start:
            return []
        self._consumer.assign([TopicPartition(topic, p, o if o >= 0 else OFFSET_BEGINNING) for p, o in start.items()])
        out: list[KafkaMessage] = []
        expected = dict(start)
        stop_at = time.monotonic() + deadline_s
        try:
            while len(out) < max_messages and time.monotonic() < stop_at:
                batch = self._consumer.consume(min(max_messages - len(out), 10_000), timeout=idle_s)
                if not batch:
                    break
                for m in batch:
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise KafkaReadError(f"reading {topic}[{m.partition()}] failed: {err}")
                    p, o = m.partition(), m.offset()
                    if o < expected.get(p, 0):
                        continue  # a refetch of what this read already returned
                    expected[p] = o + 1
                    out.append(KafkaMessage(p, o, m.value(), m.timestamp()[1]))
        finally:
            self._consumer.unassign()
        return out


__all__ = ["KafkaMessage", "KafkaReader", "KafkaReadError", "LogEnds", "OFFSET_END", "consumer_conf", "read_range"]
