"""The end of a segment's life, as Druid's coordinator has it: mark segments unused (no longer
served; still in deep storage and the metadata store), mark them used again, and kill (delete
unused segments from deep storage and the metadata store).

A kill never deletes anything used: each row is deleted only while it is unused (in the same
statement that checks it), and a segment's file is deleted only after its row was, so a segment
marked used again while a kill runs keeps both its row and its file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.segment.timeline import Timeline, TimelineSegment
from common.types.interval import Interval
from services.coordinator.core.kill_plan import KillSpec, kill_batches, segments_to_kill
from services.coordinator.store import SegmentRecord, SegmentStore

log = logging.getLogger("strata.coordinator")


@dataclass(frozen=True)
class KillReport:
    killed: tuple[SegmentId, ...]  # rows and files deleted
    skipped_used: int  # candidates found used at deletion time (marked used meanwhile): kept
    file_errors: tuple[str, ...] = ()  # files whose deletion failed (their rows are gone: orphans)


def _names(records: Iterable[SegmentRecord]) -> dict[str, SegmentRecord]:
    """A segment's id as strata spells it, and as Druid does (partition 0 without its suffix)."""
    out = {}
    for r in records:
        out[str(r.id)] = r
        if r.id.partition == 0:
            out[str(r.id).removesuffix("_0")] = r
    return out


class SegmentLifecycle:
    def __init__(self, store: SegmentStore, storage_factory: Callable[[], object]) -> None:
        self.store = store
        self._storage_factory = storage_factory  # deep storage, made on first kill

    def _select(self, datasource: str, records: list[SegmentRecord], interval: Interval | None,
                segment_ids: Iterable[str] | None) -> list[SegmentRecord]:
        if interval is not None:
            # As Druid: only segments wholly inside the interval.
            return [r for r in records if interval.start <= r.id.interval.start and r.id.interval.end <= interval.end]
        names = _names(records)
        unknown = sorted(s for s in segment_ids if s not in names)
        if unknown:
            raise ValidationError(f"datasource '{datasource}' has no segment {unknown[0]!r}"
                                  f"{f' (and {len(unknown) - 1} more unknown ids)' if len(unknown) > 1 else ''}")
        return list({names[s].id: names[s] for s in segment_ids}.values())

    def mark_unused(self, datasource: str, interval: Interval | None = None,
                    segment_ids: Iterable[str] | None = None) -> int:
        chosen = self._select(datasource, self.store.list(datasource), interval, segment_ids)
        return self.store.mark_unused([r.id for r in chosen])

    def mark_used(self, datasource: str, interval: Interval | None = None,
                  segment_ids: Iterable[str] | None = None) -> int:
        """Marks unused segments used again, except those a used segment set overshadows (as
        Druid's markUsed: they would only be marked unused again)."""
        records = self.store.list(datasource, include_unused=True)
        unused = [r for r in records if not r.used]
        chosen = self._select(datasource, unused if interval is not None else records, interval, segment_ids)
        chosen = [r for r in chosen if not r.used]
        timeline = Timeline(datasource)
        for r in [r for r in records if r.used] + chosen:
            timeline.add(TimelineSegment(r.id, r.num_partitions))
        hidden = timeline.overshadowed()
        return self.store.mark_used([r.id for r in chosen if r.id not in hidden])

    def kill(self, datasource: str, interval: Interval) -> KillReport:
        """Deletes the unused segments of ``datasource`` wholly inside ``interval``."""
        candidates = self._select(datasource, [r for r in self.store.list(datasource, include_unused=True)
                                               if not r.used], interval, None)
        report = self._delete(candidates)
        log.info("killed %d unused segments of %s in %s (%d kept: used again)", len(report.killed), datasource,
                 interval, report.skipped_used)
        return report

    def run_kill_task(self, spec: KillSpec, should_stop: Callable[[], bool] = lambda: False
                      ) -> tuple[dict, str | None]:
        """A ``kill`` task: deletes the spec's unused segments a batch at a time, checking
        ``should_stop`` (a cancel) between batches. Returns Druid's kill report (plus strata's
        ``numSegmentsKeptUsed`` and ``fileErrors``) and an error when files could not be deleted."""
        records = {r.id: r for r in self.store.list(spec.datasource, include_unused=True) if not r.used}
        batches = kill_batches(spec, ((r.id, r.used_status_updated_ms) for r in records.values()))
        killed, kept, errors, done = 0, 0, [], 0
        for batch in batches:
            if should_stop():
                break
            report = self._delete([records[s] for s in batch])
            killed, kept, done = killed + len(report.killed), kept + report.skipped_used, done + 1
            errors.extend(report.file_errors)
        log.info("kill task on %s %s: deleted %d unused segments in %d of %d batches (%d kept: used again)",
                 spec.datasource, spec.interval, killed, done, len(batches), kept)
        out = {"numSegmentsKilled": killed, "numBatchesProcessed": done, "numSegmentsMarkedAsUnused": 0,
               "numSegmentsKeptUsed": kept, "fileErrors": errors}
        error = None
        if errors:
            error = (f"{len(errors)} segment file(s) could not be deleted from deep storage (their metadata rows are "
                     f"gone; delete the files by hand): {errors[0]}")
        return out, error

    def kill_unused(self, now_ms: int, after_ms: int, limit: int) -> KillReport:
        """Automatic kill: segments unused for at least ``after_ms``, at most ``limit`` of them."""
        unused = [r for r in self.store.list(include_unused=True) if not r.used]
        chosen = set(segments_to_kill(((r.id, r.used_status_updated_ms) for r in unused), now_ms, after_ms, limit))
        report = self._delete([r for r in unused if r.id in chosen])
        if report.killed or report.skipped_used:
            log.info("automatic kill deleted %d segments unused for %d ms or more (%d kept: used again)",
                     len(report.killed), after_ms, report.skipped_used)
        return report

    def _delete(self, candidates: list[SegmentRecord]) -> KillReport:
        if not candidates:
            return KillReport((), 0)
        storage = self._storage_factory()
        killed, skipped, errors = [], 0, []
        for r in sorted(candidates, key=lambda r: r.id):
            if self.store.delete_unused([r.id]) == 0:
                skipped += 1  # used again since we listed it: keep it
                continue
            killed.append(r.id)
            try:
                storage.delete(r.location)
            except Exception as exc:  # the row is gone; report the orphaned file, go on
                log.warning("kill of %s deleted its metadata row but not its file %s: %s", r.id, r.location, exc)
                errors.append(f"{r.location}: {exc}")
        return KillReport(tuple(killed), skipped, tuple(errors))


class AutoKill:
    """The leader's automatic-kill duty (one of DutyRunner.extra_duties): every ``period_ms`` at
    most, kills up to ``limit`` segments unused for ``after_ms`` or more."""

    def __init__(self, lifecycle: SegmentLifecycle, after_ms: int, limit: int, period_ms: int,
                 clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        if after_ms <= 0 or limit < 1 or period_ms < 0:
            raise ValidationError(f"[coordinator] automatic kill needs kill_unused_after_ms > 0 (got {after_ms}), "
                                  f"max_kill_per_run >= 1 (got {limit}) and kill_period_ms >= 0 (got {period_ms})")
        self.lifecycle, self.after_ms, self.limit, self.period_ms = lifecycle, after_ms, limit, period_ms
        self._clock = clock
        self._last_ms: int | None = None

    def __call__(self) -> KillReport | None:
        now = self._clock()
        if self._last_ms is not None and now - self._last_ms < self.period_ms:
            return None
        self._last_ms = now
        return self.lifecycle.kill_unused(now, self.after_ms, self.limit)
