"""SupervisorStore: Kafka supervisors and their committed stream offsets in the metadata DB.

A supervisor's spec and desired state (RUNNING, SUSPENDED, TERMINATED) live in
``strata_supervisors``, so supervisors survive a coordinator restart or a leader change.

Exactly once, as Druid's ``druid_dataSource`` commit metadata: per datasource one row holds the
offset to read next in each partition of its topic. ``publish_with_offsets`` inserts a task's
segments and moves that row from the task's start offsets to its end offsets in ONE transaction,
and only if the stored offsets still equal the start offsets the task read from (compare and
swap). A task that read a range another task already published (a replica, a task restarted from
stale offsets, one that published before it was declared dead) is refused and publishes nothing,
so no row is lost or loaded twice whatever process dies when.

The segments a micro-batch publishes are *realtime* (``strata_segments.realtime``,
sys.segments.is_realtime) until the task's handoff rewrites them into full-size segments of a
newer version (services/ingestion/stream_handoff.py). A micro-batch whose segments were allocated
in a version that a handoff has since overshadowed would publish rows nobody can see: it is
refused like a stale offset (the next task reads that range again into the new version).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, true, update
from sqlalchemy.exc import IntegrityError

from common.errors import ErrorKind, ValidationError
from common.ingest.supervisor_spec import SupervisorSpec, parse_supervisor_spec
from services.coordinator.store import (SegmentRecord, SegmentStore, segments_table, stream_offsets_table,
                                       supervisors_table)

RUNNING, SUSPENDED, TERMINATED = "RUNNING", "SUSPENDED", "TERMINATED"


class OffsetsConflictError(ValidationError):
    """The stored offsets are not the ones a task started from: its publish was refused. A
    CONFLICT (gRPC ABORTED), so the task can tell it lost the range to another task (a replica)
    from a publish that failed."""

    kind = ErrorKind.CONFLICT


class SupervisorNotFoundError(ValidationError):
    """No supervisor has that id."""


@dataclass(frozen=True)
class SupervisorRecord:
    id: str
    spec: SupervisorSpec
    state: str
    created_ms: int
    updated_ms: int

    @property
    def suspended(self) -> bool:
        return self.state == SUSPENDED


@dataclass(frozen=True)
class StreamOffsets:
    topic: str
    offsets: Mapping[int, int]  # partition -> next offset to read


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _encode(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(p): int(o) for p, o in sorted(offsets.items())})


def _decode(text: str) -> dict[int, int]:
    return {int(p): int(o) for p, o in json.loads(text).items()}


class SupervisorStore:
    def __init__(self, store: SegmentStore, clock: Callable[[], int] = _now_ms) -> None:
        self.store = store
        self._clock = clock

    # --- supervisors ------------------------------------------------------------------------

    def upsert(self, spec: SupervisorSpec) -> SupervisorRecord:
        """Creates the supervisor or replaces its spec (Druid's POST). A new or terminated one
        starts RUNNING (or SUSPENDED when the spec says ``"suspended": true``); an update keeps
        the state unless the spec says otherwise."""
        now = self._clock()
        payload = json.dumps(spec.to_json())
        asked = spec.raw.get("suspended")
        t = supervisors_table
        with self.store.transaction() as conn:
            row = conn.execute(select(t.c.state).where(t.c.id == spec.id)).first()
            if row is None:
                state = SUSPENDED if asked else RUNNING
                conn.execute(insert(t).values(id=spec.id, spec=payload, state=state, created_ms=now, updated_ms=now))
            else:
                state = row.state
                if asked is not None or state == TERMINATED:
                    state = SUSPENDED if asked else RUNNING
                conn.execute(update(t).where(t.c.id == spec.id).values(spec=payload, state=state, updated_ms=now))
        return self.get(spec.id)

    def get(self, supervisor_id: str) -> SupervisorRecord | None:
        t = supervisors_table
        with self.store.transaction(write=False) as conn:
            row = conn.execute(select(t).where(t.c.id == supervisor_id)).first()
        return _record(row) if row is not None else None

    def require(self, supervisor_id: str) -> SupervisorRecord:
        record = self.get(supervisor_id)
        if record is None:
            raise SupervisorNotFoundError(f"no supervisor '{supervisor_id}'; GET /druid/indexer/v1/supervisor lists them")
        return record

    def list(self, include_terminated: bool = False) -> list[SupervisorRecord]:
        t = supervisors_table
        query = select(t).order_by(t.c.id)
        if not include_terminated:
            query = query.where(t.c.state != TERMINATED)
        with self.store.transaction(write=False) as conn:
            rows = conn.execute(query).all()
        return [_record(r) for r in rows]

    def set_state(self, supervisor_id: str, state: str) -> SupervisorRecord:
        if state not in (RUNNING, SUSPENDED, TERMINATED):
            raise ValueError(f"unknown supervisor state {state}")
        t = supervisors_table
        with self.store.transaction() as conn:
            current = conn.scalar(select(t.c.state).where(t.c.id == supervisor_id))
            if current is None or current == TERMINATED:
                raise SupervisorNotFoundError(
                    f"no running or suspended supervisor '{supervisor_id}'"
                    + ("; it was terminated, POST its spec to start it again" if current == TERMINATED else ""))
            conn.execute(update(t).where(t.c.id == supervisor_id).values(state=state, updated_ms=self._clock()))
        return self.require(supervisor_id)

    # --- committed offsets ------------------------------------------------------------------

    def offsets(self, datasource: str) -> StreamOffsets | None:
        t = stream_offsets_table
        with self.store.transaction(write=False) as conn:
            row = conn.execute(select(t.c.topic, t.c.offsets).where(t.c.datasource == datasource)).first()
        return StreamOffsets(row.topic, _decode(row.offsets)) if row is not None else None

    def reset_offsets(self, datasource: str, partitions: Mapping[int, int] | None = None,
                      topic: str | None = None) -> None:
        """``partitions=None`` forgets every committed offset (Druid's reset: tasks start again
        from useEarliestOffset); otherwise sets the given partitions' offsets (resetOffsets)."""
        t = stream_offsets_table
        with self.store.transaction() as conn:
            if partitions is None:
                conn.execute(delete(t).where(t.c.datasource == datasource))
                return
            row = conn.execute(select(t.c.topic, t.c.offsets).where(t.c.datasource == datasource)
                               .with_for_update()).first()
            if row is None:
                if topic is None:
                    raise ValidationError(f"datasource '{datasource}' has no committed offsets; name the topic")
                conn.execute(insert(t).values(datasource=datasource, topic=topic, offsets=_encode(partitions),
                                              updated_ms=self._clock()))
                return
            merged = {**_decode(row.offsets), **{int(p): int(o) for p, o in partitions.items()}}
            conn.execute(update(t).where(t.c.datasource == datasource)
                         .values(offsets=_encode(merged), updated_ms=self._clock()))

    def publish_with_offsets(self, records: Iterable[SegmentRecord], datasource: str, topic: str,
                             start: Mapping[int, int], end: Mapping[int, int], task_id: str | None = None) -> int:
        """Publishes the segments and moves the committed offsets from ``start`` to ``end`` in one
        transaction; returns how many segments were new. Raises OffsetsConflictError (and
        publishes nothing) unless every partition in ``start`` is stored at exactly that offset,
        or not stored at all (never committed: the task started from the spec's earliest or
        latest)."""
        records = [dataclasses.replace(r, realtime=True) for r in records]
        bad = sorted(p for p in end if p not in start or end[p] < start[p])
        if bad:
            raise ValidationError(f"end offsets of partitions {bad} are missing a start offset or lie before it "
                                  f"(start {dict(start)}, end {dict(end)})")
        for r in records:
            if r.id.datasource != datasource:
                raise ValidationError(f"segment {r.id} is not of datasource '{datasource}'; nothing was published")
        t = stream_offsets_table
        try:
            with self.store.transaction() as conn:
                row = conn.execute(select(t.c.topic, t.c.offsets).where(t.c.datasource == datasource)
                                   .with_for_update()).first()
                stored = _decode(row.offsets) if row is not None else {}
                if row is not None and row.topic != topic:
                    raise OffsetsConflictError(
                        f"datasource '{datasource}' has offsets committed for topic '{row.topic}', not '{topic}'; "
                        "nothing was published. Reset the supervisor to read another topic")
                stale = {p: (o, stored[p]) for p, o in start.items() if p in stored and stored[p] != o}
                if stale:
                    detail = ", ".join(f"partition {p}: started at {o}, committed {c}" for p, (o, c) in sorted(stale.items()))
                    raise OffsetsConflictError(
                        f"offsets of datasource '{datasource}' moved since the task started ({detail}); nothing "
                        "was published (another task published that range)")
                _refuse_overshadowed(conn, records)
                new = self.store.publish_in(conn, records, task_id=task_id)
                merged = {**stored, **{int(p): int(o) for p, o in end.items()}}
                if row is None:
                    conn.execute(insert(t).values(datasource=datasource, topic=topic, offsets=_encode(merged),
                                                  updated_ms=self._clock()))
                else:
                    conn.execute(update(t).where(t.c.datasource == datasource)
                                 .values(offsets=_encode(merged), updated_ms=self._clock()))
                return new
        except IntegrityError:
            # Two first publishers both found no row and raced to insert it (PostgreSQL; SQLite
            # serializes writers): the loser's start offsets are stale by definition.
            raise OffsetsConflictError(f"offsets of datasource '{datasource}' were committed by another task at the "
                                       "same moment; nothing was published") from None


def _refuse_overshadowed(conn, records: list[SegmentRecord]) -> None:
    """Refuses segments whose (interval, version) a used newer version covers: a handoff published
    that version after the micro-batch was allocated, and its rows would never be visible."""
    t = segments_table
    for key in sorted({(r.id.datasource, r.id.interval, r.id.version) for r in records}, key=str):
        datasource, interval, version = key
        newer = conn.scalar(select(t.c.id).where(t.c.datasource == datasource, t.c.used == true(),
                                                 t.c.version > version, t.c.start_ms <= interval.start,
                                                 t.c.end_ms >= interval.end).limit(1))
        if newer is not None:
            raise OffsetsConflictError(
                f"segments of {datasource} {interval} version {version} would be hidden by {newer} (a handoff "
                "rewrote that interval after this micro-batch was allocated); nothing was published, the next "
                "task reads the range again")


def _record(row) -> SupervisorRecord:
    return SupervisorRecord(row.id, parse_supervisor_spec(json.loads(row.spec)), row.state, row.created_ms,
                            row.updated_ms)
