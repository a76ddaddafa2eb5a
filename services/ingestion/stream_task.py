"""StreamTask: a Kafka supervisor's task, as a Spark batch per micro-batch over an offset range.

Each micro-batch:

    read the assigned partitions from the task's current offsets (KafkaReader: assign + seek)
      -> each message through the spec's rules (common/ingest/stream_rows.py: parse json/csv/tsv,
         timestamp, transforms, filter, late/early rejection; a parse exception names partition,
         offset and reason, a filtered or rejected row counts as thrownAway)
      -> the rows as JSON lines in a work file -> the ordinary INSERT path of spark_job
         (schema discovery or the spec's dimensions, the catalog's projections and types, segment
         builder, deep storage)
      -> publish the segments and the end offsets in ONE coordinator transaction, refused unless
         the committed offsets still equal the start offsets (SupervisorStore, exactly once)

So rows are neither lost nor duplicated whatever dies when: a task killed before the publish
leaves the committed offsets where they were and the next task reads that range again; a task
whose start offsets are stale (another task published that range) is refused and stops.

Messages are read on the driver, not by the executors: a micro-batch is small (bounded by
``maxRowsInMemory``) and reading it is cheap next to building segments; the Spark job that builds
them is the one batch ingestion runs.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import orjson

from common.errors import ErrorKind, ValidationError
from common.ingest.statement import parse_ingestion
from common.ingest.stream_insert import catalog_job_options, micro_batch_sql
from common.ingest.stream_rows import StreamRowRules
from common.ingest.supervisor_spec import SupervisorSpec, parse_supervisor_spec
from services.ingestion.ingestion_report import IngestionReport
from services.ingestion.kafka_reader import KafkaReader
from services.ingestion.spark_job import IngestionJob, run_ingestion

# How many parse exception samples a task keeps for its status (as Druid's maxSavedParseExceptions).
MAX_SAMPLES = 20


class TooManyStreamParseExceptions(ValidationError):
    """More unparseable messages than ioConfig/tuningConfig maxParseExceptions allow."""


class StreamTaskFailed(ValidationError):
    """The task ended on an error; ``report`` is its status then (parse exception samples
    included), so the supervisor's recentErrors can show why."""

    def __init__(self, message: str, report: dict) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class StreamParseException:
    partition: int
    offset: int
    reason: str
    seen_ms: int = 0  # when the task met it (wall clock), for the supervisor's recentErrors

    def to_json(self) -> dict:
        return {"partition": self.partition, "offset": self.offset, "reason": self.reason, "seenMs": self.seen_ms}


@dataclass
class MicroBatchResult:
    start: dict[int, int]
    end: dict[int, int]
    messages: int
    rows: int
    parse_exceptions: list[StreamParseException] = field(default_factory=list)
    report: IngestionReport | None = None
    thrown_away: int = 0  # filtered out by transformSpec, or rejected as late or early


class _StreamPublisher:
    """The coordinator publisher with the micro-batch's offsets attached to its publish."""

    def __init__(self, inner, stream: dict) -> None:
        self.inner = inner
        self.stream = stream
        self.published = False

    def allocate(self, datasource, intervals, mode, partitions=None):
        return self.inner.allocate(datasource, intervals, mode, partitions)

    def publish(self, descriptors, replace_intervals) -> None:
        if replace_intervals is not None:
            raise ValidationError("a stream task only appends; it never replaces intervals")
        self.inner.publish(list(descriptors), None, stream=self.stream)
        self.published = True


class StreamTask:
    """One task of a supervisor: micro-batches from ``start`` until stopped or refused."""

    def __init__(self, spark, spec: SupervisorSpec, task_id: str, publisher, storage_url: str,
                 storage_endpoint: str = "", reader: KafkaReader | None = None,
                 job_defaults: Callable[[IngestionJob], IngestionJob] | None = None,
                 task_start_ms: int | None = None) -> None:
        self.spark = spark
        self.spec = spec
        self.task_id = task_id
        self.publisher = publisher
        self.storage_url = storage_url
        self.storage_endpoint = storage_endpoint
        self.reader = reader or KafkaReader(spec.bootstrap_servers, spec.consumer_properties)
        self.job_defaults = job_defaults  # the catalog's projections/types for the datasource, as for INSERT
        # Druid bounds late/early messages by when the task started (its creation).
        self.rules = StreamRowRules(spec, task_start_ms if task_start_ms is not None else time.time_ns() // 1_000_000)
        self.thrown_away = 0
        self.parse_exceptions = 0
        self.samples: list[StreamParseException] = []
        self.batches = 0
        self.rows = 0

    def run_micro_batch(self, start: Mapping[int, int], idle_s: float = 0.5,
                        cancel_event: threading.Event | None = None) -> MicroBatchResult:
        """Reads from ``start`` and publishes what it read with its end offsets; returns them.
        Nothing read: nothing published, the end is the start."""
        start = {int(p): int(o) for p, o in start.items()}
        messages = self.reader.read(self.spec.topic, start, self.spec.max_rows_in_memory, idle_s=idle_s)
        end = dict(start)
        for m in messages:
            end[m.partition] = max(end[m.partition], m.offset + 1)
        result = MicroBatchResult(start, end, len(messages), 0)
        if not messages:
            return result
        seen_ms = time.time_ns() // 1_000_000
        decided = self.rules.decide(messages)
        result.parse_exceptions.extend(StreamParseException(e.partition, e.offset, e.reason, seen_ms)
                                       for e in decided.parse_exceptions)
        result.thrown_away = decided.thrown_away
        self.thrown_away += decided.thrown_away
        lines = [orjson.dumps(row) for row in decided.rows]
        self._count(result.parse_exceptions)
        stream = {"datasource": self.spec.datasource, "topic": self.spec.topic, "start": start, "end": end}
        publisher = _StreamPublisher(self.publisher, stream)
        if not lines:
            # Only bad messages: the offsets still move past them, or every task would reread them.
            self.publisher.publish([], None, stream=stream)
            self.batches += 1
            return result
        work = tempfile.mkdtemp(prefix=f"strata-stream-{self.task_id}-")
        try:
            path = os.path.join(work, f"batch-{self.batches}.json")
            with open(path, "wb") as f:
                f.write(b"\n".join(lines) + b"\n")
            statement = parse_ingestion(micro_batch_sql(self.spec, path))
            job = IngestionJob(f"{self.task_id}-{self.batches}", statement,
                               context={"rowsPerSegment": self.spec.max_rows_per_segment, "maxParseExceptions": -1})
            if self.job_defaults is not None:
                job = self.job_defaults(job)
            result.report = run_ingestion(self.spark, job, self.storage_url, self.storage_endpoint, publisher,
                                          cancel_event=cancel_event)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        result.rows = result.report.rows_written
        self.rows += result.rows
        # Rows the job itself could not parse (a timestamp TIME_PARSE refuses) count against the
        # limit too; they are known only after the publish, so the limit stops the next batch.
        self.parse_exceptions += result.report.parse_exceptions
        if not publisher.published:
            # Every row was dropped inside the job (none reached a segment): move the offsets alone.
            self.publisher.publish([], None, stream=stream)
        self.batches += 1
        return result

    def _count(self, found: list[StreamParseException]) -> None:
        self.parse_exceptions += len(found)
        self.samples = (self.samples + found)[-MAX_SAMPLES:]
        if self.parse_exceptions > self.spec.max_parse_exceptions:
            last = found[-1] if found else None
            raise TooManyStreamParseExceptions(
                f"supervisor '{self.spec.id}': {self.parse_exceptions} unparseable messages exceed "
                f"tuningConfig.maxParseExceptions ({self.spec.max_parse_exceptions})"
                + (f"; last at partition {last.partition}, offset {last.offset}: {last.reason}" if last else "")
                + ". Nothing of this micro-batch was published")

    def status(self) -> dict:
        """What the task reports (sys.tasks' report, the supervisor status)."""
        return {"type": "kafka", "supervisor": self.spec.id, "topic": self.spec.topic, "microBatches": self.batches,
                "rowsWritten": self.rows, "parseExceptions": self.parse_exceptions, "thrownAway": self.thrown_away,
                "parseExceptionSamples": [e.to_json() for e in self.samples]}

    def run(self, start: Mapping[int, int], stop: threading.Event, duration_s: float | None = None,
            progress: Callable[[dict], None] | None = None) -> dict[int, int]:
        """Micro-batches until ``stop`` is set or ``duration_s`` (taskDuration) passes; returns
        the offsets the last publish ended at. A refused publish raises (the task ends)."""
        until = time.monotonic() + (duration_s if duration_s is not None else self.spec.task_duration_ms / 1000)
        offsets = dict(start)
        while not stop.is_set() and time.monotonic() < until:
            result = self.run_micro_batch(offsets, cancel_event=stop)
            offsets = result.end
            if result.messages and progress is not None:
                progress({**self.status(), "offsets": {str(p): o for p, o in sorted(offsets.items())}})
        return offsets

    def close(self) -> None:
        self.reader.close()


def run_supervisor_task(spark, task_id: str, spec: Mapping, publisher, storage_url: str, storage_endpoint: str,
                        cancel_event: threading.Event, progress: Callable[[dict], None] | None = None,
                        catalog_table: dict | None = None, task_start_ms: int | None = None) -> dict:
    """A ``kafka`` task (services/coordinator/supervisor_manager.py) in its process: micro-batches
    from the committed offsets it was given until taskDuration or a cancel; returns its report.
    ``catalog_table``: the datasource's catalog entry (JSON), applied to every micro-batch as to
    an INSERT; ``task_start_ms``: when the supervisor created the task (late/early rejection)."""
    supervisor = parse_supervisor_spec(spec["supervisor"])
    options = catalog_job_options(supervisor, catalog_table)
    defaults = (lambda job: dataclasses.replace(job, **options)) if options else None
    task = StreamTask(spark, supervisor, task_id, publisher, storage_url, storage_endpoint, job_defaults=defaults,
                      task_start_ms=task_start_ms)
    try:
        committed = {int(p): int(o) for p, o in (spec.get("startOffsets") or {}).items()}
        start = task.reader.start_offsets(supervisor.topic, committed, supervisor.use_earliest_offset)
        if spec.get("partitions") is not None:  # its task group's share (supervisor_machine.py)
            mine = {int(p) for p in spec["partitions"]}
            start = {p: o for p, o in start.items() if p in mine}
            if not start:
                raise ValidationError(f"none of partitions {sorted(mine)} exist in topic '{supervisor.topic}'")
        started = {"startOffsets": {str(p): o for p, o in sorted(start.items())},
                   "taskGroup": int(spec.get("taskGroup", 0))}
        try:
            end = task.run(start, cancel_event,
                           progress=(lambda r: progress({**r, **started})) if progress is not None else None)
        except TooManyStreamParseExceptions as exc:
            raise StreamTaskFailed(str(exc), {**task.status(), **started}) from None
        except Exception as exc:
            refusal = publish_refusal(exc)
            if refusal is None:
                raise
            # A replica (or an older task) published this range first: what this one read is
            # loaded already, its own uploads are gone (run_ingestion), and the supervisor starts
            # the next task from the offsets now committed.
            return {**task.status(), **started, "superseded": str(refusal)}
        return {**task.status(), **started, "endOffsets": {str(p): o for p, o in sorted(end.items())}}
    finally:
        task.close()


def publish_refusal(exc: BaseException | None) -> BaseException | None:
    """The coordinator's refusal of a publish whose start offsets were no longer the committed
    ones (a CONFLICT, see SupervisorStore), however deep ``exc`` wraps it; else None."""
    seen = 0
    while exc is not None and seen < 10:
        if getattr(exc, "kind", None) == ErrorKind.CONFLICT:
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
