"""``strata_kafka``: a Python data source (Spark's ``pyspark.sql.datasource``) over confluent-kafka,
for Structured Streaming and for one-off batch reads of planned offset ranges.

Spark's JVM Kafka connector cannot be installed here, and a stream task must never use a consumer
group's committed offsets (where to start is what the metadata DB committed with the segments), so
the source reads with assign + seek:

- ``initialOffset``: the task's start offsets (option ``startOffsets``, resolved by the task from
  the coordinator's committed offsets). Spark's checkpoint is never the source of truth: a task's
  query gets a fresh checkpoint directory and so always starts here;
- ``latestOffset(start, limit)``: each partition's log end (``kafka_reader.LogEnds``), cut to
  ``maxRowsPerBatch`` messages in all (``getDefaultReadLimit``; ``kafka_offset_plan.bounded_end``);
- ``partitions(start, end)``: one input partition per Kafka partition with offsets in the range;
- ``read(partition)``: in the executors, exactly that range (``kafka_reader.read_range``), as
  Arrow batches of (partition, offset, timestamp, key, value);
- ``commit``: nothing. Offsets are committed by the coordinator with the segments, exactly once.

The batch reader reads given ranges (options ``startOffsets`` and ``endOffsets``) with the same
executor code, for a session where a streaming query with a Python ``foreachBatch`` cannot run
(a Spark Connect client).

Options: ``topic``, ``consumerConf`` (a JSON object: what ``kafka_reader.consumer_conf`` returns),
``startOffsets`` and ``endOffsets`` (JSON objects partition -> offset), ``maxRowsPerBatch``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from common.errors import ValidationError
from services.ingestion.core.kafka_offset_plan import bounded_end, decode_offsets, encode_offsets, offset_ranges
from services.ingestion.kafka_reader import LogEnds, read_range

SOURCE_NAME = "strata_kafka"
SCHEMA = "partition INT, offset BIGINT, timestamp BIGINT, key BINARY, value BINARY"
_ARROW_SCHEMA = pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()),
                           ("key", pa.binary()), ("value", pa.binary())])


class KafkaRangePartition(InputPartition):
    """Offsets ``[start, end)`` of one Kafka partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


def _option_json(options, key: str, default=None):
    text = options.get(key)
    if text is None:
        if default is None:
            raise ValidationError(f"the {SOURCE_NAME} source needs option '{key}'")
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"{SOURCE_NAME} option '{key}' is not JSON ({exc}): {text[:200]}") from None


def _read(conf: dict, partition: KafkaRangePartition) -> Iterator[pa.RecordBatch]:
    for chunk in read_range(conf, partition.topic, partition.partition, partition.start, partition.end):
        yield pa.RecordBatch.from_arrays(
            [pa.array([m.partition for m in chunk], pa.int32()), pa.array([m.offset for m in chunk], pa.int64()),
             pa.array([m.timestamp_ms for m in chunk], pa.int64()), pa.array([m.key for m in chunk], pa.binary()),
             pa.array([m.value for m in chunk], pa.binary())], schema=_ARROW_SCHEMA)


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options) -> None:
        self.topic = options["topic"]
        self.conf = _option_json(options, "consumerConf")
        self.start = decode_offsets(_option_json(options, "startOffsets"), "option startOffsets")
        max_rows = options.get("maxRowsPerBatch")
        self.max_rows = int(max_rows) if max_rows is not None else None
        self._ends: LogEnds | None = None  # opened on first use, on the driver only

    def __getstate__(self) -> dict:
        # Executors get the reader pickled; the driver's consumer stays behind.
        return {**self.__dict__, "_ends": None}

    def initialOffset(self) -> dict:
        return encode_offsets(self.start)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows is not None else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = decode_offsets(start, "start offset")
        if self._ends is None:
            self._ends = LogEnds(self.conf)
        latest = self._ends.ends(self.topic, sorted(begin))
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return encode_offsets(bounded_end(begin, latest, max_rows))

    def partitions(self, start: dict, end: dict) -> list[KafkaRangePartition]:
        ranges = offset_ranges(decode_offsets(start, "start offset"), decode_offsets(end, "end offset"))
        return [KafkaRangePartition(self.topic, r.partition, r.start, r.end) for r in ranges]

    def read(self, partition: KafkaRangePartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.conf, partition)

    def commit(self, end: dict) -> None:
        """Nothing: the coordinator commits offsets with the segments (exactly once)."""

    def stop(self) -> None:
        if self._ends is not None:
            self._ends.close()
            self._ends = None


class KafkaRangeReader(DataSourceReader):
    """A batch read of given ranges: options ``startOffsets`` and ``endOffsets``."""

    def __init__(self, options) -> None:
        self.topic = options["topic"]
        self.conf = _option_json(options, "consumerConf")
        self.ranges = offset_ranges(decode_offsets(_option_json(options, "startOffsets"), "option startOffsets"),
                                    decode_offsets(_option_json(options, "endOffsets"), "option endOffsets"))

    def partitions(self) -> list[KafkaRangePartition]:
        return [KafkaRangePartition(self.topic, r.partition, r.start, r.end) for r in self.ranges]

    def read(self, partition: KafkaRangePartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.conf, partition)


class KafkaStreamSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> KafkaStreamReader:
        return KafkaStreamReader(self.options)

    def reader(self, schema) -> KafkaRangeReader:
        return KafkaRangeReader(self.options)


def source_options(topic: str, conf: dict, start: dict[int, int], end: dict[int, int] | None = None,
                   max_rows: int | None = None) -> dict[str, str]:
    """The options of a read of ``topic``: from ``start``, to ``end`` (a batch read) or streaming
    with at most ``max_rows`` messages per micro-batch."""
    out = {"topic": topic, "consumerConf": json.dumps(conf), "startOffsets": json.dumps(encode_offsets(start))}
    if end is not None:
        out["endOffsets"] = json.dumps(encode_offsets(end))
    if max_rows is not None:
        out["maxRowsPerBatch"] = str(max_rows)
    return out


def register(spark) -> None:
    """Makes ``spark.read/readStream.format("strata_kafka")`` available (idempotent)."""
    spark.dataSource.register(KafkaStreamSource)


__all__ = ["KafkaRangePartition", "KafkaStreamSource", "SCHEMA", "SOURCE_NAME", "register", "source_options"]
