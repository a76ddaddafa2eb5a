"""KafkaReader against a real Kafka-protocol broker (Tansu): assign + seek from given offsets."""

from __future__ import annotations

import pytest

from services.ingestion.kafka_reader import KafkaReader, KafkaReadError
from tests.fixtures.kafka_broker import kafka_broker  # noqa: F401


def test_reads_each_partition_from_its_offset(kafka_broker):  # noqa: F811
    kafka_broker.create_topic("reader", 3)
    sent = [(i % 3, f'{{"n": {i}}}'.encode()) for i in range(60)]
    kafka_broker.produce("reader", sent)
    with KafkaReader(kafka_broker.bootstrap) as reader:
        assert reader.partitions("reader") == [0, 1, 2]
        start = reader.start_offsets("reader", {}, earliest=True)
        assert start == {0: 0, 1: 0, 2: 0}
        got = reader.read("reader", start, max_messages=1000)
        assert sorted((m.partition, m.value) for m in got) == sorted(sent)
        for p in range(3):
            assert [m.offset for m in got if m.partition == p] == list(range(20))
        # From committed offsets: only what follows them, and a bounded batch.
        again = reader.read("reader", {0: 15, 1: 20, 2: 19}, max_messages=1000)
        assert sorted((m.partition, m.offset) for m in again) == [(0, o) for o in range(15, 20)] + [(2, 19)]
        assert len(reader.read("reader", start, max_messages=7)) == 7
        assert reader.start_offsets("reader", {1: 4}, earliest=True)[1] == 4


def test_unknown_topic_is_named(kafka_broker):  # noqa: F811
    with KafkaReader(kafka_broker.bootstrap) as reader, pytest.raises(KafkaReadError, match="topic 'nope'"):
        reader.partitions("nope")
