"""StreamTask: a Kafka supervisor's task, as a Spark Structured Streaming query.

    readStream.format("strata_kafka") (kafka_stream_source.py): offsets planned on the driver
      from the task's start offsets (the ones committed with the segments) to the log end, at
      most maxRowsInMemory messages per micro-batch; each partition's range read IN THE
      EXECUTORS with assign + seek
    -> writeStream.foreachBatch, per micro-batch:
      -> each message through the spec's rules (common/ingest/stream_rows.py: parse json/csv/tsv,
         timestamp, transforms, filter, late/early rejection; a parse exception names partition,
         offset and reason, a filtered or rejected row counts as thrownAway)
      -> the rows as JSON lines in a work file -> the ordinary INSERT path of spark_job
         (schema discovery or the spec's dimensions, the catalog's projections and types, segment
         builder, deep storage)
      -> publish the segments and the batch's end offsets in ONE coordinator transaction, refused
         unless the committed offsets still equal its start offsets (SupervisorStore, exactly once)

So rows are neither lost nor duplicated whatever dies when: a task killed before the publish
leaves the committed offsets where they were and the next task reads that range again; a task
whose start offsets are stale (another task published that range) is refused and stops. Spark's
checkpoint is not the source of truth: each query gets a fresh temporary one, so a restarted task
starts from the committed offsets the coordinator gave it, never from Spark's.

A micro-batch's range is Spark's: its end is what Spark's offset log holds for the batch (written
before the batch runs), its start the previous batch's end. A Spark Connect client cannot run a
Python foreachBatch in this process, so there the task plans each range itself and reads it with
the same source as a batch read (``run_micro_batch``): the same executors' reads, the same publish.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import orjson

from common.errors import ErrorKind, StrataError, ValidationError
from common.ingest.statement import parse_ingestion
from common.ingest.stream_insert import catalog_job_options, micro_batch_sql
from common.ingest.stream_rows import StreamRowRules
from common.ingest.supervisor_spec import SupervisorSpec, parse_supervisor_spec
from services.ingestion.core.kafka_offset_plan import bounded_end, decode_offsets
from services.ingestion.ingestion_report import IngestionReport
from services.ingestion.kafka_reader import KafkaMessage, KafkaReader, LogEnds, consumer_conf
from services.ingestion.kafka_stream_source import SOURCE_NAME, register, source_options
from services.ingestion.spark_api import is_connect
from services.ingestion.spark_job import IngestionJob, run_ingestion
from services.ingestion.stream_handoff import StreamHandoff

# How many parse exception samples a task keeps for its status (as Druid's maxSavedParseExceptions).
MAX_SAMPLES = 20
# How often the streaming query looks for new messages when it is idle (a busy query starts the
# next micro-batch as soon as one ends). Each look asks the broker for the partitions' offsets.
TRIGGER_INTERVAL = "200 milliseconds"
_IDLE_S = 0.2
# How often the task checks for a stop (cancel, taskDuration) while its query runs.
_WATCH_S = 0.2


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


def messages_of(frame) -> list[KafkaMessage]:
    """A micro-batch's rows (kafka_stream_source.SCHEMA) on the driver, in offset order per partition."""
    table = frame.toArrow()
    columns = [table.column(c).to_pylist() for c in ("partition", "offset", "timestamp", "key", "value")]
    messages = [KafkaMessage(p, o, v, t, k) for p, o, t, k, v in zip(*columns)]
    messages.sort(key=lambda m: (m.partition, m.offset))
    return messages


def checkpointed_offsets(checkpoint: str, batch_id: int) -> dict[int, int]:
    """The end offsets Spark planned for micro-batch ``batch_id``: its offset log entry (written
    before the batch runs; "v1", the batch metadata, then one line per source, here one)."""
    path = os.path.join(checkpoint, "offsets", str(batch_id))
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        return decode_offsets(json.loads(lines[-1]), f"Spark's offset log entry {path}")
    except (OSError, ValueError, IndexError) as exc:
        raise StrataError(f"cannot read the offsets of micro-batch {batch_id} from Spark's offset log {path}: "
                          f"{exc}; nothing of it was published") from None


class _BatchGate:
    """Lets micro-batches run until ``close``, which waits for the one under way to end."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._closed = False
        self._busy = False
        self.error: BaseException | None = None

    def enter(self) -> bool:
        with self._cond:
            if self._closed or self.error is not None:
                return False
            self._busy = True
            return True

    def leave(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: not self._busy)


def _query_failure(exc: BaseException) -> str:
    """Why a streaming query failed: a Python error in the source (the broker unreachable, a topic
    gone) arrives inside Spark's message; its last ``...Error: ...`` line is the cause."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b:", ln):
            return ln[:1000]
    return (lines[0] if lines else type(exc).__name__)[:1000]


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
        # The driver's reader finds partitions and start offsets; messages are read by executors.
        self.reader = reader or KafkaReader(spec.bootstrap_servers, spec.consumer_properties)
        self.conf = consumer_conf(spec.bootstrap_servers, spec.consumer_properties)
        self._ends: LogEnds | None = None  # log ends for run_micro_batch, opened on first use
        self.job_defaults = job_defaults  # the catalog's projections/types for the datasource, as for INSERT
        # Druid bounds late/early messages by when the task started (its creation).
        self.rules = StreamRowRules(spec, task_start_ms if task_start_ms is not None else time.time_ns() // 1_000_000)
        self.thrown_away = 0
        self.parse_exceptions = 0
        self.samples: list[StreamParseException] = []
        self.batches = 0
        self.rows = 0

    def log_ends(self, partitions) -> dict[int, int]:
        if self._ends is None:
            self._ends = LogEnds(self.conf)
        return self._ends.ends(self.spec.topic, partitions)

    def run_micro_batch(self, start: Mapping[int, int],
                        cancel_event: threading.Event | None = None) -> MicroBatchResult:
        """One micro-batch planned here (from ``start`` to the log end, at most maxRowsInMemory
        messages), read by the executors and published with its end offsets; returns them.
        Nothing new: nothing published, the end is the start."""
        start = {int(p): int(o) for p, o in start.items()}
        end = bounded_end(start, self.log_ends(sorted(start)), self.spec.max_rows_in_memory)
        if end == start:
            return MicroBatchResult(start, end, 0, 0)
        register(self.spark)
        frame = self.spark.read.format(SOURCE_NAME).options(**source_options(self.spec.topic, self.conf, start,
                                                                             end)).load()
        return self.process_batch(start, end, messages_of(frame), cancel_event)

    def process_batch(self, start: Mapping[int, int], end: Mapping[int, int], messages: list[KafkaMessage],
                      cancel_event: threading.Event | None = None) -> MicroBatchResult:
        """Publishes what was read of ``[start, end)`` with those offsets (the end moves past
        unparseable messages too, or every task would reread them)."""
        start = {int(p): int(o) for p, o in start.items()}
        end = {int(p): int(o) for p, o in end.items()}
        result = MicroBatchResult(start, end, len(messages), 0)
        if not messages and end == start:
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
            # Only bad messages (or none: transaction markers): the offsets still move past them.
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
        start = {int(p): int(o) for p, o in start.items()}
        if stop.is_set() or time.monotonic() >= until:
            return start
        if is_connect(self.spark):
            return self._run_planned(start, stop, until, progress)
        return self._run_streaming(start, stop, until, progress)

    def _report(self, offsets: Mapping[int, int]) -> dict:
        return {**self.status(), "offsets": {str(p): o for p, o in sorted(offsets.items())}}

    def _run_streaming(self, start: dict[int, int], stop: threading.Event, until: float,
                       progress: Callable[[dict], None] | None) -> dict[int, int]:
        register(self.spark)
        checkpoint = tempfile.mkdtemp(prefix=f"strata-stream-{self.task_id}-checkpoint-")
        gate = _BatchGate()
        offsets = dict(start)

        def on_batch(frame, batch_id: int) -> None:
            nonlocal offsets
            if not gate.enter():
                return  # the task is stopping: this range is the next task's
            try:
                begin = start if batch_id == 0 else checkpointed_offsets(checkpoint, batch_id - 1)
                if begin != offsets:
                    raise StrataError(f"micro-batch {batch_id} starts at {begin}, but the task's last publish ended "
                                      f"at {offsets}; nothing of it was published")
                result = self.process_batch(begin, checkpointed_offsets(checkpoint, batch_id), messages_of(frame),
                                            cancel_event=stop)
                offsets = result.end
                if result.messages and progress is not None:
                    progress(self._report(offsets))
            except BaseException as exc:
                gate.error = exc
                raise
            finally:
                gate.leave()

        options = source_options(self.spec.topic, self.conf, start, max_rows=self.spec.max_rows_in_memory)
        query = (self.spark.readStream.format(SOURCE_NAME).options(**options).load()
                 .writeStream.foreachBatch(on_batch).trigger(processingTime=TRIGGER_INTERVAL)
                 .option("checkpointLocation", checkpoint).start())
        failure = None
        try:
            while not stop.is_set() and time.monotonic() < until and gate.error is None:
                try:
                    if query.awaitTermination(_WATCH_S):
                        break
                except Exception as exc:  # noqa: BLE001 - the query failed; gate.error says why when it was ours
                    failure = exc
                    break
            gate.close()  # no new micro-batch starts; the one under way ends (a cancel stops its job)
        finally:
            try:
                query.stop()
            finally:
                shutil.rmtree(checkpoint, ignore_errors=True)
        if gate.error is not None:
            raise gate.error
        if failure is not None:
            raise StrataError(f"the Kafka task's streaming query failed: {_query_failure(failure)}") from None
        return offsets

    def _run_planned(self, start: dict[int, int], stop: threading.Event, until: float,
                     progress: Callable[[dict], None] | None) -> dict[int, int]:
        offsets = dict(start)
        while not stop.is_set() and time.monotonic() < until:
            result = self.run_micro_batch(offsets, cancel_event=stop)
            offsets = result.end
            if result.messages and progress is not None:
                progress(self._report(offsets))
            elif not result.messages:
                stop.wait(_IDLE_S)
        return offsets

    def close(self) -> None:
        self.reader.close()
        if self._ends is not None:
            self._ends.close()
            self._ends = None


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
    # The task publishes through the handoff's recording publisher (realtime rows per chunk);
    # the handoff runs between micro-batches (after each one's progress) and at taskDuration.
    handoff = StreamHandoff(spark, supervisor, task_id, publisher, storage_url, storage_endpoint, defaults,
                            cancel_event)
    task = StreamTask(spark, supervisor, task_id, handoff.publisher, storage_url, storage_endpoint,
                      job_defaults=defaults, task_start_ms=task_start_ms)
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

        def after_batch(report: dict) -> None:
            if progress is not None:
                progress({**report, **started, **handoff.status()})
            handoff.after_batch()

        try:
            end = task.run(start, cancel_event, progress=after_batch)
            if not cancel_event.is_set():
                handoff.at_end()  # taskDuration: a cancel (suspend, terminate) leaves it to a later task
        except TooManyStreamParseExceptions as exc:
            raise StreamTaskFailed(str(exc), {**task.status(), **started, **handoff.status()}) from None
        except Exception as exc:
            refusal = publish_refusal(exc)
            if refusal is None:
                raise
            # A replica (or an older task) published this range first: what this one read is
            # loaded already, its own uploads are gone (run_ingestion), and the supervisor starts
            # the next task from the offsets now committed.
            return {**task.status(), **started, **handoff.status(), "superseded": str(refusal)}
        return {**task.status(), **started, **handoff.status(),
                "endOffsets": {str(p): o for p, o in sorted(end.items())}}
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
