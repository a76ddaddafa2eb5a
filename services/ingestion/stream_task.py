"""StreamTask: a Kafka supervisor's task, as a Spark Structured Streaming query.

    readStream.format("strata_kafka") (kafka_stream_source.py): offsets planned on the driver
      from the task's start offsets (the ones committed with the segments) to the log end, at
      most maxRowsInMemory messages per micro-batch; each partition's range read IN THE
      EXECUTORS with assign + seek
    -> writeStream.foreachBatch, per micro-batch ONE Spark job (stream_segments.py), in the
       executors that read the messages:
      -> each message through the spec's rules (common/ingest/stream_rows.py: parse json/csv/tsv,
         timestamp, transforms, filter, late/early rejection; a parse exception names partition,
         offset and reason, a filtered or rejected row counts as thrownAway)
      -> typed as the INSERT path types a micro-batch's statement (schema discovery or the spec's
         dimensions, the catalog's declared types), rolled up, built into segments (the catalog's
         projections) and pushed to deep storage, for the chunks allocated before the job (the
         ones the task published to last); rows of a new chunk come back for the driver to build
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
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import orjson
import pyarrow as pa

from common.errors import ErrorKind, StrataError, ValidationError
from common.ingest.statement import parse_ingestion
from common.ingest.stream_insert import catalog_job_options, micro_batch_sql
from common.ingest.supervisor_spec import SupervisorSpec, parse_supervisor_spec
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.deep_storage import deep_storage_from_url
from services.deep_storage.upload_folder import ingest_root, new_run_token
from services.ingestion.core.kafka_offset_plan import bounded_end, decode_offsets
from services.ingestion.failure_message import failure_message
from services.ingestion.ingestion_report import IngestionCancelled, IngestionFailed, IngestionReport, SegmentReport
from services.ingestion.kafka_reader import KafkaReader, LogEnds, consumer_conf
from services.ingestion.kafka_stream_source import SOURCE_NAME, register, source_options
from services.ingestion.partitioning import chunk_interval
from services.ingestion.schema_discovery import check_sealed
from services.ingestion.spark_api import is_connect, spark_api
from services.ingestion.spark_job import IngestionJob
from services.ingestion.stream_handoff import StreamHandoff
from services.ingestion.stream_segments import (
    OUTPUT_DDL,
    ChunkAllocation,
    MicroBatchPlan,
    build_rows,
    micro_batch_outputs,
    outputs_of,
    partitions_needed,
)

log = logging.getLogger("strata.ingestion")

# How many parse exception samples a task keeps for its status (as Druid's maxSavedParseExceptions).
MAX_SAMPLES = 20
# How often the streaming query looks for new messages when it is idle (a busy query starts the
# next micro-batch as soon as one ends). Each look asks the broker for the partitions' offsets.
TRIGGER_INTERVAL = "200 milliseconds"
_IDLE_S = 0.2
# How often the task checks for a stop (cancel, taskDuration) while its query runs.
_WATCH_S = 0.2
# How many chunks a task allocates before each micro-batch (the ones it published to last).
_KNOWN_CHUNKS = 4


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


def _descriptor(datasource: str, info: dict) -> SegmentDescriptor:
    """A segment a micro-batch built (stream_segments' ``segment`` row)."""
    sid = SegmentId(datasource, Interval(info["start"], info["end"]), info["version"], info["partition"])
    return SegmentDescriptor(sid, int(info["size"]), int(info["rows"]), info["location"], int(info["core"]),
                             info["manifest"])


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
        # The catalog's projections/types for the datasource, as for an INSERT: what ``job_defaults``
        # sets on the micro-batch's statement's job.
        statement = parse_ingestion(micro_batch_sql(spec, "kafka"))
        self.granularity = statement.partitioned_by
        self.catalog = job_defaults(IngestionJob(task_id, statement)) if job_defaults is not None else None
        # Druid bounds late/early messages by when the task started (its creation).
        self.task_start_ms = task_start_ms if task_start_ms is not None else time.time_ns() // 1_000_000
        self.thrown_away = 0
        self.parse_exceptions = 0
        self.samples: list[StreamParseException] = []
        self.batches = 0
        self.rows = 0
        # Chunks this task published to, most recent last: allocated before each job, so their
        # rows are built in the executors that read them (stream_segments.py).
        self._chunks: dict[Interval, None] = {}
        self.timings: dict[str, float] = {}  # seconds of the last micro-batch by stage (job, build, publish)

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
        return self.process_frame(start, end, frame, cancel_event)

    # ---- one micro-batch ------------------------------------------------------------------------------------

    def plan(self, start: Mapping[int, int]) -> MicroBatchPlan:
        """What the micro-batch's Spark tasks need: the rules' inputs, where to upload, and an
        allocation of each chunk this task published to before (``stride`` partition numbers per
        Spark task, one task per Kafka partition, or one for all in a rollup)."""
        spec = self.spec
        # A rollup reads every partition in one Spark task (process_frame): one slot.
        slots = {p: 0 if spec.rollup else i for i, p in enumerate(sorted(int(p) for p in start))}
        stride = max(1, math.ceil(spec.max_rows_in_memory / spec.max_rows_per_segment))
        tasks = 1 if spec.rollup else max(1, len(slots))
        allocations = {}
        if self._chunks:
            chunks = list(self._chunks)
            got = self.publisher.allocate(spec.datasource, chunks, "insert", {iv: tasks * stride for iv in chunks})
            for iv, a in got.items():
                if a.core_partitions:  # an append; a new set is numbered by the driver (build_on_driver)
                    allocations[iv.start] = ChunkAllocation(iv.start, iv.end, a.version, a.first_partition,
                                                            a.core_partitions)
        catalog = self.catalog
        token = new_run_token(f"{self.task_id}-{self.batches}")
        return MicroBatchPlan(spec, self.task_start_ms, self.storage_url, self.storage_endpoint,
                              f"{ingest_root(spec.datasource)}{token}/", allocations, slots, stride,
                              projections=tuple(catalog.projections) if catalog else (),
                              column_options=dict(catalog.column_options) if catalog else {},
                              declared_types=dict(catalog.declared_types) if catalog else {})

    def process_frame(self, start: Mapping[int, int], end: Mapping[int, int], frame,
                      cancel_event: threading.Event | None = None) -> MicroBatchResult:
        """The micro-batch ``[start, end)`` whose messages ``frame`` (kafka_stream_source.SCHEMA)
        reads: rules and segments in ONE Spark job over it, then the publish with those offsets."""
        start = {int(p): int(o) for p, o in start.items()}
        end = {int(p): int(o) for p, o in end.items()}
        if end == start:
            return MicroBatchResult(start, end, 0, 0)
        began = time.monotonic()
        plan = self.plan(start)
        if self.spec.rollup:
            frame = frame.coalesce(1)  # a micro-batch rolls up across its partitions
        api = spark_api(self.spark)
        group = f"strata-stream-{plan.key_prefix.rstrip('/').rsplit('/', 1)[-1]}"
        api.start_jobs(group, f"strata stream {self.spec.datasource}, micro-batch {self.batches}")
        done = threading.Event()
        watcher = None
        if cancel_event is not None:
            def watch() -> None:
                while not done.is_set():
                    if cancel_event.wait(0.2):
                        api.cancel_jobs(group)
                        return
            watcher = threading.Thread(target=watch, name=f"cancel-{group}", daemon=True)
            watcher.start()
        try:
            table = frame.mapInArrow(outputs_of(plan), OUTPUT_DDL).toArrow()
        except BaseException as exc:
            self._discard(plan, api, group)
            cancelled = cancel_event is not None and cancel_event.is_set()
            if cancelled:
                raise IngestionCancelled(f"micro-batch {self.batches} of {self.task_id} was cancelled; nothing of "
                                         "it was published") from None
            if isinstance(exc, Exception):
                raise IngestionFailed(failure_message(exc) + "; nothing of this micro-batch was published") from exc
            raise
        finally:
            done.set()
            if watcher is not None:
                watcher.join(timeout=5)
            api.end_jobs(group)
        self.timings = {"job": time.monotonic() - began}
        blobs = table.column("blob")
        outputs = [(kind, orjson.loads(info), blobs[i].as_buffer() if blobs[i].is_valid else None)
                   for i, (kind, info) in enumerate(zip(table.column("kind").to_pylist(),
                                                        table.column("info").to_pylist()))]
        return self._finish(start, end, outputs, plan)

    def process_batch(self, start: Mapping[int, int], end: Mapping[int, int], messages: list,
                      cancel_event: threading.Event | None = None) -> MicroBatchResult:
        """``process_frame`` for messages already here (KafkaMessage-like: partition, offset,
        value), run in this process without Spark."""
        start = {int(p): int(o) for p, o in start.items()}
        end = {int(p): int(o) for p, o in end.items()}
        if not messages and end == start:
            return MicroBatchResult(start, end, 0, 0)
        plan = self.plan(start)
        batch = pa.RecordBatch.from_arrays([pa.array([m.partition for m in messages], pa.int32()),
                                            pa.array([m.offset for m in messages], pa.int64()),
                                            pa.array([m.value for m in messages], pa.binary())],
                                           names=["partition", "offset", "value"])
        try:
            rows = list(micro_batch_outputs([batch], plan))
        except BaseException:
            self._discard(plan)
            raise
        outputs = [(r.column(0)[0].as_py(), orjson.loads(r.column(1)[0].as_py()),
                    r.column(2)[0].as_buffer() if r.column(2)[0].is_valid else None) for r in rows]
        return self._finish(start, end, outputs, plan)

    def _finish(self, start: dict[int, int], end: dict[int, int], outputs: list, plan: MicroBatchPlan) -> MicroBatchResult:
        """Publishes what the tasks built (and the driver builds of chunks new to the task) with
        the micro-batch's offsets (the end moves past unparseable messages too, or every task
        would reread them). Anything refused or failed: the uploads are deleted, nothing moved."""
        began = time.monotonic()
        result = MicroBatchResult(start, end, 0, 0)
        seen_ms = time.time_ns() // 1_000_000
        descriptors: list[SegmentDescriptor] = []
        blobs: dict[int, list] = {}
        columns: set[str] = set()
        found = []
        for kind, info, blob in outputs:
            if kind == "stats":
                result.messages += info["messages"]
                result.thrown_away += info["thrownAway"]
                result.rows += info["rows"]
                columns.update(info["columns"])
                found.extend(info["parseExceptions"])
            elif kind == "segment":
                descriptors.append(_descriptor(self.spec.datasource, info))
            else:
                blobs.setdefault(info["start"], []).append((info, blob))
        result.parse_exceptions.extend(StreamParseException(p, o, reason, seen_ms) for p, o, reason in found)
        self.thrown_away += result.thrown_away
        stream = {"datasource": self.spec.datasource, "topic": self.spec.topic, "start": start, "end": end}
        try:
            self._count(result.parse_exceptions)
            if self.catalog is not None and self.catalog.sealed_columns is not None:
                check_sealed(self.spec.datasource, sorted(columns), set(self.catalog.sealed_columns))
            if blobs:
                descriptors += self._build_on_driver(blobs, plan)
            built = time.monotonic()
            # Only bad messages, or none kept (transaction markers, filtered): the offsets still move.
            self.publisher.publish(descriptors, None, stream=stream)
        except BaseException as exc:
            self._discard(plan)
            if isinstance(exc, (TooManyStreamParseExceptions, IngestionFailed)) or not isinstance(exc, Exception):
                raise
            raise IngestionFailed(failure_message(exc), None) from exc
        self.timings.update({"driverBuild": built - began, "publish": time.monotonic() - built})
        result.report = IngestionReport(
            job_id=f"{self.task_id}-{self.batches}", datasource=self.spec.datasource, mode="INSERT", status="SUCCESS",
            rows_read=result.messages, rows_written=sum(d.num_rows for d in descriptors),
            parse_exceptions=len(found),
            segments=tuple(SegmentReport(d.id, d.num_rows, d.size, d.location) for d in descriptors),
            phases=dict(self.timings))
        result.rows = result.report.rows_written
        self.rows += result.rows
        for d in descriptors:
            self._chunks.pop(d.id.interval, None)
            self._chunks[d.id.interval] = None
        while len(self._chunks) > _KNOWN_CHUNKS:
            del self._chunks[next(iter(self._chunks))]
        self.batches += 1
        return result

    def _build_on_driver(self, blobs: dict[int, list], plan: MicroBatchPlan) -> list[SegmentDescriptor]:
        """Segments of chunks new to the task (the tasks sent their rows back): allocated here,
        built and pushed here."""
        by_interval = {chunk_interval(start, self.granularity): rows for start, rows in sorted(blobs.items())}
        counts = {iv: partitions_needed(rows, plan.rows_per_segment) for iv, rows in by_interval.items()}
        allocations = self.publisher.allocate(self.spec.datasource, list(by_interval), "insert", counts)
        out = []
        work = tempfile.mkdtemp(prefix=f"strata-stream-{self.task_id}-")
        try:
            for iv, rows in by_interval.items():
                allocation = allocations.get(iv)
                if allocation is None:
                    raise StrataError(f"the coordinator allocated nothing for {iv}; nothing was published")
                out.extend(_descriptor(self.spec.datasource, info)
                           for info in build_rows(rows, allocation, plan, self.spec.datasource, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return out

    def _discard(self, plan: MicroBatchPlan, api=None, group: str | None = None) -> None:
        """Delete what a failed micro-batch uploaded, once its Spark tasks stopped pushing."""
        if api is not None and group is not None:
            try:
                api.cancel_jobs(group)
                api.wait_jobs_ended(group, time.monotonic() + 60)
            except Exception:  # noqa: BLE001 - the context may be gone; deleting still matters
                pass
        try:
            deep_storage_from_url(self.storage_url, self.storage_endpoint).delete_prefix(plan.key_prefix)
        except Exception as exc:  # noqa: BLE001 - the failure that got here is the one to report
            log.warning("stream task %s: cannot delete %s: %s", self.task_id, plan.key_prefix, exc)

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
                result = self.process_frame(begin, checkpointed_offsets(checkpoint, batch_id), frame,
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
