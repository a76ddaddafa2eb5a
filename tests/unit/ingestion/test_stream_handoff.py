"""StreamHandoff's bookkeeping around the compaction job: which publishes count as realtime rows,
what a handoff's publish expects, and that a refused or failed handoff never fails the task. The
Spark job is scripted here (the real one runs against Tansu and Spark in
tests/integration/ingestion/test_kafka_stream_handoff.py). No sockets, no Spark."""

from __future__ import annotations

import pytest

from common.errors import ErrorKind, StrataError
from common.ingest.supervisor_spec import parse_supervisor_spec
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from common.types.interval import Interval
from services.ingestion import stream_handoff
from services.ingestion.compaction import compaction_sql

HOUR = 3_600_000
H0, H1 = Interval(0, HOUR), Interval(HOUR, 2 * HOUR)
SPEC = parse_supervisor_spec({"type": "kafka", "spec": {
    "dataSchema": {"dataSource": "wiki", "timestampSpec": {"column": "ts"}},
    "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "h:1"}},
    "tuningConfig": {"type": "kafka", "maxRowsPerSegment": 100}}})


def desc(iv: Interval, version: str, partition: int, rows: int) -> SegmentDescriptor:
    return SegmentDescriptor(SegmentId("wiki", iv, version, partition), 10, rows, f"wiki/{version}/{partition}", 1,
                             '{"columns": [{"name": "__time", "type": "TIMESTAMP"}]}')


class Coordinator:
    """The coordinator's publisher: stream publishes, a listing with realtime flags, replaces."""

    def __init__(self) -> None:
        self.used: list[tuple[SegmentDescriptor, bool]] = []
        self.replaces: list[tuple[list, list, list]] = []
        self.fail_stream = False
        self.fail_listing = False

    def allocate(self, datasource, intervals, mode, partitions=None):
        raise AssertionError("the scripted job does not allocate")

    def publish(self, descriptors, replace_intervals, stream=None, expected=None):
        if stream is not None:
            if self.fail_stream:
                raise StrataError("offsets moved", kind=ErrorKind.CONFLICT)
            self.used.extend((d, True) for d in descriptors)
        else:
            self.replaces.append((descriptors, replace_intervals, expected))

    def used_segments(self, datasource):
        if self.fail_listing:
            raise StrataError("coordinator unreachable", kind=ErrorKind.UNAVAILABLE)
        return list(self.used)


@pytest.fixture
def jobs(monkeypatch):
    """Scripted prepare + job: the job publishes its replace, or raises what ``outcome`` holds."""
    ran: list = []
    outcome: dict = {}

    def prepare(datasource, inputs, interval, pull, work_dir):
        ran.append(("inputs", sorted(str(d.id) for d in inputs)))
        return compaction_sql(datasource, [interval], {"__time": ColumnType.parse("TIMESTAMP")}, "/in.parquet",
                              "HOUR"), {}

    def run(spark, job, storage_url, storage_endpoint, publisher, cancel_event=None):
        ran.append(("job", job.settings.get("rowsPerSegment"), job.statement.mode))
        if "error" in outcome:
            raise outcome["error"]
        publisher.publish([], job.statement.replace_intervals)

    monkeypatch.setattr(stream_handoff, "prepare_compaction", prepare)
    monkeypatch.setattr(stream_handoff, "run_ingestion", run)
    return ran, outcome


def test_only_committed_stream_publishes_count_and_a_due_chunk_is_handed_off(jobs):
    ran, _ = jobs
    coordinator = Coordinator()
    handoff = stream_handoff.StreamHandoff(None, SPEC, "t1", coordinator, "/deep")
    handoff.publisher.publish([desc(H0, "v1", 0, 60), desc(H1, "v1", 0, 5)], None, stream={"start": {}})
    coordinator.fail_stream = True
    with pytest.raises(StrataError):  # refused: these rows are not realtime, nothing counts
        handoff.publisher.publish([desc(H0, "v1", 1, 60)], None, stream={"start": {}})
    handoff.after_batch()
    assert ran == [] and handoff.trigger.pending() == [H0, H1]
    coordinator.fail_stream = False
    handoff.publisher.publish([desc(H0, "v1", 1, 40)], None, stream={"start": {}})
    handoff.after_batch()  # H0 holds 100 realtime rows now: maxRowsPerSegment
    assert ran == [("inputs", [str(desc(H0, "v1", p, 0).id) for p in (0, 1)]), ("job", 100, "REPLACE")]
    [(_, intervals, expected)] = coordinator.replaces
    assert intervals == [H0] and sorted(map(str, expected)) == [str(desc(H0, "v1", p, 0).id) for p in (0, 1)]
    assert handoff.trigger.pending() == [H1]
    assert handoff.status() == {"handoffs": 1, "rowsHandedOff": 100, "handoffConflicts": 0}


def test_a_refused_or_failed_handoff_is_counted_and_the_task_goes_on(jobs):
    ran, outcome = jobs
    coordinator = Coordinator()
    handoff = stream_handoff.StreamHandoff(None, SPEC, "t2", coordinator, "/deep")
    handoff.publisher.publish([desc(H0, "v1", 0, 150)], None, stream={"start": {}})
    conflict = StrataError("the used segments changed", kind=ErrorKind.CONFLICT)
    try:
        raise RuntimeError("ingestion failed")
    except RuntimeError as exc:
        exc.__context__ = conflict  # as run_ingestion wraps the coordinator's refusal
        outcome["error"] = exc
    handoff.after_batch()
    assert handoff.status() == {"handoffs": 0, "rowsHandedOff": 0, "handoffConflicts": 1}
    assert handoff.trigger.due() == []  # not again after every micro-batch; at the end, or once more rows came
    outcome["error"] = ValueError("disk full")
    handoff.at_end()
    assert handoff.status()["handoffErrors"] == [f"handoff of {H0} failed: disk full"]
    coordinator.fail_listing = True
    handoff.at_end()
    assert "coordinator unreachable" in handoff.status()["handoffErrors"][-1]
    del outcome["error"]
    coordinator.fail_listing = False
    handoff.at_end()
    assert handoff.handoffs == 1 and len(coordinator.replaces) == 1
