"""A Kafka micro-batch's executor side (stream_segments.py) and the task's driver side around it
(StreamTask.process_batch runs it in-process): rules, typing and segments in one pass, chunks the
task published to built under the allocation made before the batch, new chunks built on the
driver, and a failed publish leaving nothing behind. No Spark, no broker: messages are given, the
coordinator is a real metadata store (SQLite)."""

from __future__ import annotations

import json
import os

import pytest

from common.ingest.supervisor_spec import parse_supervisor_spec
from common.query import execute
from common.segment import Segment
from services.coordinator.store import SegmentStore
from services.deep_storage import LocalDeepStorage
from services.ingestion.ingestion_report import IngestionFailed
from services.ingestion.kafka_reader import KafkaMessage
from services.ingestion.stream_segments import MicroBatchPlan, micro_batch_outputs
from services.ingestion.stream_task import StreamTask
from tests.integration.ingestion.stream_tasks import StorePublisher, expected_rows, stored_rows

HOUR = 3_600_000
T0 = 1_714_557_600_000  # 2024-05-01T10:00:00Z


class NoReader:
    def close(self) -> None:
        pass


def spec(**tuning) -> object:
    return parse_supervisor_spec({"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "ds", "timestampSpec": {"column": "ts", "format": "millis"},
                       "dimensionsSpec": {"useSchemaDiscovery": True},
                       "granularitySpec": {"segmentGranularity": "HOUR"}},
        "ioConfig": {"topic": "t", "consumerProperties": {"bootstrap.servers": "h:1"}},
        "tuningConfig": {"type": "kafka", **tuning}}})


def mean(i: int, hour: int = 0) -> dict:
    """NULLs, fractions beside integers, -0.0, non-ASCII; ``id`` and ``page`` as stored_rows reads them."""
    return {"ts": T0 + hour * HOUR + i * 1000, "id": i, "page": None if i % 7 == 0 else f"Seite-ü{i % 3}",
            "added": -0.0 if i % 5 == 0 else (i / 4 if i % 2 else i)}


def messages(rows: list[dict], partitions: int, first: dict[int, int] | None = None) -> list[KafkaMessage]:
    at = dict(first or {p: 0 for p in range(partitions)})
    out = []
    for r in rows:
        p = r["id"] % partitions
        out.append(KafkaMessage(p, at[p], json.dumps(r).encode(), 0))
        at[p] += 1
    return sorted(out, key=lambda m: (m.partition, m.offset))


def ends(msgs, start):
    end = dict(start)
    for m in msgs:
        end[m.partition] = max(end[m.partition], m.offset + 1)
    return end


@pytest.fixture
def store(tmp_path):
    with SegmentStore(f"sqlite:///{tmp_path / 'metadata.db'}") as s:
        yield s


def test_new_chunks_on_the_driver_then_known_chunks_in_the_executor(store, tmp_path):
    deep = LocalDeepStorage(str(tmp_path / "deep"))
    publisher = StorePublisher(store)
    task = StreamTask(None, spec(), "t1", publisher, deep.root, reader=NoReader())
    first = [mean(i, hour=i % 2) for i in range(40)]
    msgs = messages(first, 2)
    start = {0: 0, 1: 0}
    result = task.process_batch(start, ends(msgs, start), msgs)
    assert result.rows == 40 and not result.parse_exceptions
    # Two chunks new to the task: allocated and built on the driver, a complete set each.
    assert sorted((r.id.partition, r.num_partitions) for r in store.list("ds")) == [(0, 1), (0, 1)]

    # The next micro-batch: both chunks allocated before it, so the rows' own pass builds them
    # as appended partitions of the same version (numbers after the reserved ones, no collision).
    more = [mean(i, hour=i % 2) for i in range(40, 100)]
    msgs2 = messages(more, 2, result.end)
    plan = task.plan(result.end)
    assert sorted(plan.allocations) == [T0, T0 + HOUR] and plan.slots == {0: 0, 1: 1}
    result2 = task.process_batch(result.end, ends(msgs2, result.end), msgs2)
    assert result2.rows == 60
    records = store.list("ds")
    assert len({r.id for r in records}) == len(records) == 4
    for iv in {r.id.interval for r in records}:
        assert len({r.id.version for r in records if r.id.interval == iv}) == 1  # appended, not a new version
    assert stored_rows(store, deep, "ds") == expected_rows(first + more)
    assert publisher.supervisors.offsets("ds").offsets == result2.end


def test_bad_rows_are_parse_exceptions_in_read_order_and_counted():
    plan = MicroBatchPlan(spec(), T0, "file:///nowhere", "", "ingest/ds/x/")
    values = [b'{"ts": 1714557600000, "id": 1}', b"{oops", b'{"id": 2}', b'{"ts": "noon", "id": 3}', b""]
    import pyarrow as pa

    batch = pa.RecordBatch.from_arrays([pa.array([0] * 5, pa.int32()), pa.array(range(10, 15), pa.int64()),
                                        pa.array(values, pa.binary())], names=["partition", "offset", "value"])
    out = [r.to_pylist()[0] for r in micro_batch_outputs([batch], plan)]
    kinds = [o["kind"] for o in out]
    assert kinds == ["rows", "stats"]  # nothing allocated: the one good row goes back to the driver
    stats = json.loads(out[-1]["info"])
    assert stats["messages"] == 5 and stats["rows"] == 1 and stats["columns"] == ["__time", "id"]
    assert [(p, o) for p, o, _ in stats["parseExceptions"]] == [(0, 11), (0, 12), (0, 13), (0, 14)]
    assert stats["parseExceptions"][0][2].startswith("not JSON")
    assert "no timestamp" in stats["parseExceptions"][1][2]


def test_rollup_groups_the_whole_micro_batch(store, tmp_path):
    deep = LocalDeepStorage(str(tmp_path / "deep"))
    s = parse_supervisor_spec({"type": "kafka", "spec": {
        "dataSchema": {"dataSource": "ds", "timestampSpec": {"column": "ts", "format": "millis"},
                       "dimensionsSpec": {"useSchemaDiscovery": True},
                       "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "HOUR"},
                       "metricsSpec": [{"type": "count", "name": "n"},
                                       {"type": "longSum", "name": "a_sum", "fieldName": "a"},
                                       {"type": "doubleMax", "name": "a_max", "fieldName": "a"}]},
        "ioConfig": {"topic": "t", "consumerProperties": {"bootstrap.servers": "h:1"}}}})
    rows = [{"ts": T0 + i * 60_000, "page": [None, "x", "y"][i % 3], "tags": ["a", "b"] if i % 2 else None,
             "a": None if i % 4 == 0 else i / 2} for i in range(90)]
    msgs = [KafkaMessage(i % 3, i // 3, json.dumps(r).encode(), 0) for i, r in enumerate(rows)]
    msgs.sort(key=lambda m: (m.partition, m.offset))
    task = StreamTask(None, s, "t1", StorePublisher(store), deep.root, reader=NoReader())
    assert set(task.plan({0: 0, 1: 0, 2: 0}).slots.values()) == {0}  # one Spark task reads them all
    task.process_batch({0: 0, 1: 0, 2: 0}, {0: 30, 1: 30, 2: 30}, msgs)
    [record] = store.list("ds")
    segment = Segment.open(os.path.join(deep.root, *record.location.split("/")))
    try:
        assert segment.manifest.metrics == {"n": "count", "a_sum": "longSum", "a_max": "doubleMax"}
        got = execute({"queryType": "scan", "dataSource": "ds", "intervals": ["2024/2025"],
                       "columns": ["__time", "page", "tags", "n", "a_sum", "a_max"]}, [segment]).table.to_pylist()
    finally:
        segment.close()
    want: dict = {}
    for r in rows:
        key = (T0 + (r["ts"] - T0) // HOUR * HOUR, r["page"], json.dumps(r["tags"]))
        n, total, top = want.get(key, (0, None, None))
        a = r["a"]
        want[key] = (n + 1, total if a is None else (total or 0) + int(a), top if a is None else max(top or a, a))
    assert len(got) == len(want)
    for g in got:
        key = (round(g["__time"].timestamp() * 1000), g["page"], json.dumps(g["tags"]))
        assert (g["n"], g["a_sum"], g["a_max"]) == want[key]


def test_a_refused_publish_deletes_the_uploads(store, tmp_path):
    deep = LocalDeepStorage(str(tmp_path / "deep"))
    rows = [mean(i) for i in range(10)]
    msgs = messages(rows, 1)
    task = StreamTask(None, spec(), "t1", StorePublisher(store, fail_publish=True), deep.root, reader=NoReader())
    with pytest.raises(IngestionFailed, match="died before its publish"):
        task.process_batch({0: 0}, {0: 10}, msgs)
    assert [f for _, _, fs in os.walk(deep.root) for f in fs] == [] and store.list("ds") == []
