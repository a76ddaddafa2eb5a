"""Helpers for tests of Kafka stream tasks without a cluster: the coordinator's allocate and
stream publish over a real metadata store (SupervisorStore, what PublishSegments with a
StreamCommit calls), mean events, and the rows the published segments hold (strata's engine).

Run as a module it is a stream task in a process of its own, for a test to SIGKILL:

    python -m tests.integration.ingestion.stream_tasks SUPERVISOR_JSON METADATA_URL DEEP_ROOT

It starts from the offsets the store committed and prints ``PUBLISHED {offsets}`` after each
micro-batch it published. With ``STRATA_TEST_DIE_AFTER_HANDOFF=1`` in its environment it SIGKILLs
itself the moment its first handoff's publish has committed (before the task learns of it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

import pytest

from common.query import execute
from common.segment import Segment
from common.segment.timeline import Timeline, TimelineSegment
from services.coordinator.core.allocation import PartitionLedger
from services.coordinator.store import SegmentRecord, SegmentStore
from services.coordinator.supervisor_store import SupervisorStore
from services.deep_storage import LocalDeepStorage


class StorePublisher:
    """The coordinator's allocate and stream publish, over a real metadata store."""

    def __init__(self, store: SegmentStore, fail_publish: bool = False, die_after_handoff: bool = False) -> None:
        self.store = store
        self.supervisors = SupervisorStore(store)
        self.ledger = PartitionLedger()
        self.fail_publish = fail_publish
        self.die_after_handoff = die_after_handoff
        self.versions = 0

    def allocate(self, datasource, intervals, mode, partitions=None):
        existing = [TimelineSegment(r.id, r.num_partitions) for r in self.store.list(datasource)]
        # Versions ascend across publishers (another process's, a dead task's), as the coordinator's do.
        stored = [int(r.id.version[1:]) for r in self.store.list(datasource, include_unused=True)
                  if r.id.version[:1] == "v" and r.id.version[1:].isdigit()]
        self.versions = max([self.versions, *stored]) + 1
        return {a.interval: a for a in self.ledger.allocate(existing, intervals, mode, f"v{self.versions:04d}",
                                                            partitions)}

    def publish(self, descriptors, replace_intervals, stream=None, expected=None):
        if self.fail_publish:
            raise RuntimeError("the task died before its publish reached the coordinator")
        records = [SegmentRecord.from_descriptor(d) for d in descriptors]
        if stream is None:  # a handoff: the REPLACE of a chunk, conditional on what it read
            assert replace_intervals is not None and expected is not None
            self.store.publish(records, replace=(records[0].id.datasource, replace_intervals), expected=expected)
            if self.die_after_handoff:
                os.kill(os.getpid(), signal.SIGKILL)
            return
        assert replace_intervals is None
        self.supervisors.publish_with_offsets(records, stream["datasource"], stream["topic"], stream["start"],
                                              stream["end"])

    def used_segments(self, datasource):
        return [(r.descriptor(), r.realtime) for r in self.store.list(datasource)]


def supervisor(topic: str, bootstrap: str, ds: str, **tuning) -> dict:
    return {"type": "kafka", "spec": {
        "dataSchema": {"dataSource": ds, "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"useSchemaDiscovery": True},
                       "granularitySpec": {"segmentGranularity": "HOUR"}},
        "ioConfig": {"topic": topic, "consumerProperties": {"bootstrap.servers": bootstrap},
                     "useEarliestOffset": True, "taskDuration": "PT1H"},
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 200, **tuning}}}


def events(n: int, start: int = 0) -> list[dict]:
    """Mean data: NULLs, fractions next to integers, -0.0, non-ASCII, far-apart hours."""
    out = []
    for i in range(start, start + n):
        out.append({"ts": f"2024-0{1 + i % 3}-0{1 + i % 7}T{i % 24:02d}:{i % 60:02d}:00.{i % 1000:03d}Z",
                    "id": i, "page": None if i % 11 == 0 else f"Seite-ü{i % 5}",
                    "added": -0.0 if i % 13 == 0 else (i / 4 if i % 2 else i)})
    return out


@pytest.fixture
def store(tmp_path):
    with SegmentStore(f"sqlite:///{tmp_path / 'metadata.db'}") as s:
        yield s


@pytest.fixture
def deep(tmp_path):
    return LocalDeepStorage(str(tmp_path / "deep"))


def produce(broker, topic: str, rows: list[dict], partitions: int) -> dict[int, int]:
    sent = [(r["id"] % partitions, json.dumps(r).encode()) for r in rows]
    broker.produce(topic, sent)
    counts: dict[int, int] = {}
    for p, _ in sent:
        counts[p] = counts.get(p, 0) + 1
    return counts


def stored_rows(store: SegmentStore, deep, ds: str) -> list[tuple]:
    segments = [Segment.open(os.path.join(deep.root, *r.location.split("/"))) for r in store.list(ds)]
    if not segments:
        return []
    try:
        table = execute({"queryType": "scan", "dataSource": ds, "intervals": ["1000-01-01/3000-01-01"],
                         "columns": ["id", "page", "added"]}, segments).table
    finally:
        for segment in segments:  # polled many times a test: each poll's files close now, not at a GC
            segment.close()
    return sorted(((r["id"], r["page"], r["added"]) for r in table.to_pylist()), key=repr)


def visible(store: SegmentStore, ds: str) -> list:
    """The used segments a query reads: those no newer used version overshadows (the coordinator
    marks them unused only once the newer version is served)."""
    records = store.list(ds)
    hidden = Timeline(segments=[TimelineSegment(r.id, r.num_partitions) for r in records]).overshadowed() \
        if records else set()
    return [r for r in records if r.id not in hidden]


def visible_rows(store: SegmentStore, deep, ds: str) -> list[tuple]:
    segments = [Segment.open(os.path.join(deep.root, *r.location.split("/"))) for r in visible(store, ds)]
    if not segments:
        return []
    try:
        table = execute({"queryType": "scan", "dataSource": ds, "intervals": ["1000-01-01/3000-01-01"],
                         "columns": ["id", "page", "added"]}, segments).table
    finally:
        for segment in segments:
            segment.close()
    return sorted(((r["id"], r["page"], r["added"]) for r in table.to_pylist()), key=repr)


def expected_rows(rows: list[dict]) -> list[tuple]:
    return sorted(((r["id"], r["page"], float(r["added"])) for r in rows), key=repr)


def main(argv: list[str]) -> int:
    from common.ingest.supervisor_spec import parse_supervisor_spec  # only the process needs these
    from services.ingestion.spark_session import get_or_create_session  # start-up cost: pyspark
    from services.ingestion.stream_task import run_supervisor_task  # start-up cost: pyspark, confluent-kafka

    spec_json, metadata_url, deep_root = argv
    spec = json.loads(spec_json)
    datasource = parse_supervisor_spec(spec).datasource
    spark = get_or_create_session("strata-stream-task-process", "local[2]", {"spark.sql.shuffle.partitions": "2",
                                                                             "spark.driver.memory": "1g"})
    with SegmentStore(metadata_url) as store:
        publisher = StorePublisher(store, die_after_handoff=os.environ.get("STRATA_TEST_DIE_AFTER_HANDOFF") == "1")
        committed = publisher.supervisors.offsets(datasource)
        start = {str(p): o for p, o in (committed.offsets if committed is not None else {}).items()}

        def progress(report: dict) -> None:
            print("PUBLISHED", json.dumps(report["offsets"]), flush=True)

        run_supervisor_task(spark, "task-process", {"supervisor": spec, "startOffsets": start}, publisher, deep_root,
                            "", threading.Event(), progress)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
