"""StreamHandoff: a Kafka stream task's realtime segments rewritten into full-size ones.

Each micro-batch of a stream task is published at once as small realtime segments
(``strata_segments.realtime``, sys.segments.is_realtime = 1), so rows are queryable within a
second. As Druid's task hands its data off at ``taskDuration`` or ``maxRowsPerSegment``, this
rewrites a time chunk holding realtime segments with the compaction machinery
(services/ingestion/compaction.py: the chunk's visible segments pulled from deep storage, their
rows exported, and a REPLACE of the chunk built by the ordinary ingestion: full-size segments,
compressed, with the catalog's projections and the rollup's metric types), then publishes it in
ONE metadata transaction. The new version overshadows the small segments in that transaction, so
every query sees either the small segments or the new ones (the broker switches once the new set
is served whole), never both or neither; the coordinator then drops the small ones.

Exactly once: a handoff reads rows that are already committed and moves no offsets. A task killed
before the publish leaves the realtime segments as they were (a later handoff takes them); killed
after it, the new version holds every row once. The publish names the segments it was built from
(``expected``): one a micro-batch of another task group appended to the chunk meanwhile makes the
coordinator refuse it (CONFLICT) rather than hide that segment's rows, and a micro-batch allocated
in the old version that publishes after the handoff is refused (SupervisorStore), so its range is
read again into the new version. A refused or failed handoff leaves the chunk realtime and is
tried again after the next micro-batch or at the task's end; it never fails the task.

The task hands off between micro-batches (its streaming query does not start the next one
meanwhile), so its own appends never race its handoff.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable

from common.errors import ErrorKind, cause_of_kind
from common.ingest.statement import parse_ingestion
from common.ingest.supervisor_spec import SupervisorSpec
from common.segment.descriptor import SegmentDescriptor
from services.deep_storage import deep_storage_from_url
from services.ingestion.compaction import compaction_metrics, prepare_compaction
from services.ingestion.coordinator_publisher import ConditionalReplacePublisher
from services.ingestion.core.handoff_plan import Handoff, HandoffTrigger, UsedSegment, plan_handoffs
from services.ingestion.ingestion_report import IngestionCancelled
from services.ingestion.spark_job import IngestionJob, run_ingestion

log = logging.getLogger("strata.stream.handoff")
_MAX_ERRORS = 5  # the handoff failures a task's status keeps


class _RecordingPublisher:
    """The task's publisher, counting the realtime rows each stream publish committed per chunk."""

    def __init__(self, inner, trigger: HandoffTrigger) -> None:
        self.inner = inner
        self.trigger = trigger

    def allocate(self, datasource, intervals, mode, partitions=None):
        return self.inner.allocate(datasource, intervals, mode, partitions)

    def publish(self, descriptors, replace_intervals, stream=None) -> None:
        descriptors = list(descriptors)
        self.inner.publish(descriptors, replace_intervals, stream=stream)
        if stream is not None:  # committed: these rows are realtime now
            for d in descriptors:
                self.trigger.published(d.id.interval, d.num_rows)


class StreamHandoff:
    """Hands off one stream task's realtime segments. ``publisher`` (the coordinator's, with
    ``used_segments(datasource)`` and a publish taking ``expected``) is wrapped: give the task
    ``self.publisher`` so the rows it publishes are counted."""

    def __init__(self, spark, spec: SupervisorSpec, task_id: str, publisher, storage_url: str,
                 storage_endpoint: str = "", job_defaults: Callable[[IngestionJob], IngestionJob] | None = None,
                 cancel_event: threading.Event | None = None) -> None:
        self.spark = spark
        self.spec = spec
        self.task_id = task_id
        self.inner = publisher
        self.storage_url = storage_url
        self.storage_endpoint = storage_endpoint
        self.job_defaults = job_defaults
        self.cancel_event = cancel_event
        self.trigger = HandoffTrigger(spec.max_rows_per_segment)
        self.publisher = _RecordingPublisher(publisher, self.trigger)
        self.handoffs = 0  # chunks handed off
        self.rows_handed_off = 0
        self.conflicts = 0  # handoffs refused because the chunk changed meanwhile (tried again later)
        self.errors: list[str] = []

    def after_batch(self) -> None:
        """After a micro-batch's publish: hand off the chunks whose realtime rows reached
        maxRowsPerSegment."""
        due = self.trigger.due()
        if due:
            self.hand_off(due)

    def at_end(self) -> None:
        """At taskDuration: hand off every chunk of the datasource holding realtime segments
        (this task's, and what tasks that died or were suspended left)."""
        self.hand_off(None)

    def hand_off(self, intervals: list | None) -> None:
        try:
            listed = self.inner.used_segments(self.spec.datasource)
        except Exception as exc:  # noqa: BLE001 - a handoff never fails the task; it is tried again later
            self._failed(f"listing the used segments of {self.spec.datasource} failed: {exc}")
            return
        descriptors = {d.id: d for d, _ in listed}
        used = [UsedSegment(d.id, d.num_partitions, d.num_rows, realtime) for d, realtime in listed]
        plans, skipped = plan_handoffs(used, intervals)
        for reason in skipped:
            log.warning("task %s: no handoff of %s", self.task_id, reason)
        handed = {p.interval for p in plans}
        for iv in intervals or ():
            if iv not in handed:
                self.trigger.handed_off(iv)  # nothing realtime left there (a replica handed it off)
        for plan in plans:
            if self.cancel_event is not None and self.cancel_event.is_set():
                return
            self._run(plan, [descriptors[i] for i in plan.inputs])

    def _run(self, plan: Handoff, inputs: list[SegmentDescriptor]) -> None:
        storage = deep_storage_from_url(self.storage_url, self.storage_endpoint)
        work = tempfile.mkdtemp(prefix=f"strata-handoff-{self.task_id}-")
        try:
            sql, column_options = prepare_compaction(self.spec.datasource, inputs, plan.interval,
                                                     lambda d, local: storage.pull(d.location, local), work)
            job = IngestionJob(f"{self.task_id}-handoff-{self.handoffs + self.conflicts + len(self.errors)}",
                               parse_ingestion(sql), context={"rowsPerSegment": self.spec.max_rows_per_segment},
                               kept_metrics=compaction_metrics(inputs, plan.interval))
            if self.job_defaults is not None:
                job = self.job_defaults(job)  # the catalog's projections, column options and types
            # The segments' own column settings (multi-value handling) unless the catalog says otherwise.
            job = dataclasses.replace(job, column_options={**column_options, **job.column_options})
            publisher = ConditionalReplacePublisher(self.inner, list(plan.expected))
            run_ingestion(self.spark, job, self.storage_url, self.storage_endpoint, publisher,
                          cancel_event=self.cancel_event)
        except IngestionCancelled:
            return  # the task is stopping; the chunk stays realtime for a later handoff
        except Exception as exc:  # noqa: BLE001 - see the module docstring: tried again later
            # Tried again once another maxRowsPerSegment rows arrive there, or at the task's end,
            # not after every micro-batch (each try is a Spark job).
            self.trigger.handed_off(plan.interval)
            refusal = cause_of_kind(exc, ErrorKind.CONFLICT)
            if refusal is not None:
                self.conflicts += 1
                log.info("task %s: handoff of %s refused, tried again later: %s", self.task_id, plan.interval, refusal)
            else:
                self._failed(f"handoff of {plan.interval} failed: {exc}")
            return
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self.handoffs += 1
        self.rows_handed_off += plan.realtime_rows
        self.trigger.handed_off(plan.interval)
        log.info("task %s: handed off %d realtime segments (%d rows) of %s", self.task_id, plan.realtime_segments,
                 plan.realtime_rows, plan.interval)

    def _failed(self, message: str) -> None:
        log.warning("task %s: %s", self.task_id, message)
        self.errors = (self.errors + [message[:1000]])[-_MAX_ERRORS:]

    def status(self) -> dict:
        """What the task's report adds (sys.tasks, the supervisor status)."""
        out = {"handoffs": self.handoffs, "rowsHandedOff": self.rows_handed_off, "handoffConflicts": self.conflicts}
        if self.errors:
            out["handoffErrors"] = list(self.errors)
        return out


__all__ = ["StreamHandoff"]
