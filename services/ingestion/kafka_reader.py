"""KafkaReader: reads a topic's partitions from given offsets with assign + seek (confluent-kafka).

A Kafka supervisor's task never uses a consumer group's committed offsets: where to start is what
the metadata DB says its published segments end at (SupervisorStore), so the reader assigns the
partitions itself at those offsets and commits nothing to Kafka. What it returns carries each
message's partition and offset, so the task knows exactly which offsets a micro-batch covers and
a parse error can name where the bad message is.

A read stops at ``max_messages`` or when a poll brings nothing within ``idle_s``: the end of a
micro-batch is whatever was consumed, never the broker's high watermark (Tansu, the test broker,
reports it wrongly after batched produce, and on any broker it moves while we read).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from common.errors import StrataError, ValidationError

_METADATA_TIMEOUT_S = 30.0


class KafkaReadError(StrataError):
    """The broker could not be read (unreachable, unknown topic, a fetch error)."""


@dataclass(frozen=True)
class KafkaMessage:
    partition: int
    offset: int
    value: bytes | None
    timestamp_ms: int  # the record's timestamp (CreateTime or LogAppendTime), for lag in time


class KafkaReader:
    def __init__(self, bootstrap_servers: str, consumer_properties: Mapping[str, str] | None = None) -> None:
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
        try:
            self._consumer = Consumer(conf)
        except KafkaException as exc:
            raise ValidationError(f"ioConfig.consumerProperties are not accepted by the Kafka client: {exc}") from None

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
        out = {}
        for p in self.partitions(topic):
            if p in committed:
                out[p] = int(committed[p])
                continue
            try:
                low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                                 timeout=_METADATA_TIMEOUT_S)
            except KafkaException as exc:
                raise KafkaReadError(f"cannot read the offsets of {topic}[{p}]: {exc}") from None
            out[p] = low if earliest else high
        return out

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


__all__ = ["KafkaMessage", "KafkaReader", "KafkaReadError", "OFFSET_END"]
