"""SegmentStore: the metadata store of published segments, in SQLite or PostgreSQL.

As Druid's metadata store, one row per segment with its descriptor and a ``used`` flag:
publishing inserts used rows, dropping marks them unused, and only a kill deletes rows, so the
history of what was served survives until it is deliberately removed.

SQLAlchemy Core keeps one code path for both databases. SQLite (the default, one file) gets
WAL so readers never block the writer, a busy timeout so writers queue instead of failing,
and ``BEGIN IMMEDIATE`` for writes so two writers cannot both read and then deadlock on the
upgrade to a write lock. The few lock waits SQLite refuses to hand to the busy handler (it
answers "database is locked" at once where waiting could deadlock: two connections switching a
new file to WAL, or a WAL file being recovered) are retried with bounded, jittered backoff. On
PostgreSQL, inserts use ``ON CONFLICT DO NOTHING`` and then
compare what is stored, so concurrent publishers of the same segment need no retry, and
migrations take an advisory lock so concurrently starting coordinators migrate once.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    and_,
    create_engine,
    delete,
    event,
    false,
    func,
    inspect,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from common.errors import ErrorKind, StrataError, ValidationError
from common.segment.descriptor import SegmentDescriptor
from common.segment.manifest import SegmentManifest
from common.segment.segment_id import SegmentId
from common.types.interval import Interval

# Keeps IN lists and multi-row inserts well under SQLite's bound-parameter limit.
_CHUNK = 500
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Backoff for the lock waits SQLite does not queue by itself: first pause, cap.
_BUSY_RETRY_FIRST_S = 0.002
_BUSY_RETRY_MAX_S = 0.1
# pg_advisory_xact_lock key for migrations: any constant other tools are unlikely to use.
_MIGRATION_LOCK = 0x5374726174610001


class PublishConflictError(ValidationError):
    """A segment id is already published with a different descriptor."""


class ReplaceConflictError(ValidationError):
    """A replace built from a set of segments found others used in its intervals (one appended
    after it read them): nothing was published. A CONFLICT, so a stream task's handoff can tell
    it lost the race from a failure and simply tries again later."""

    kind = ErrorKind.CONFLICT


class MetadataSchemaError(StrataError):
    """The metadata database's schema cannot be used by this version of strata."""


@dataclass(frozen=True)
class SegmentRecord:
    """One row of ``strata_segments``. ``used``, ``created_ms`` and ``used_status_updated_ms``
    are set by the store; the values given to ``publish`` are ignored."""

    id: SegmentId
    size_bytes: int
    num_rows: int
    location: str
    payload: str  # the segment manifest as JSON text
    num_partitions: int = 1
    used: bool = True
    created_ms: int = 0
    used_status_updated_ms: int = 0
    # Published by a stream task's micro-batch (sys.segments.is_realtime) and not yet rewritten
    # into full-size segments by its handoff; how it was published, not part of its descriptor.
    realtime: bool = False

    @staticmethod
    def from_manifest(manifest: SegmentManifest, location: str, num_partitions: int = 1) -> SegmentRecord:
        return SegmentRecord(manifest.segment_id, manifest.size, manifest.num_rows, location,
                             manifest.to_bytes().decode(), num_partitions)

    @staticmethod
    def from_descriptor(d: SegmentDescriptor) -> SegmentRecord:
        return SegmentRecord(d.id, d.size, d.num_rows, d.location, d.manifest_json, d.num_partitions)

    def descriptor(self) -> SegmentDescriptor:
        return SegmentDescriptor(id=self.id, size=self.size_bytes, num_rows=self.num_rows, location=self.location,
                                 num_partitions=self.num_partitions, manifest_json=self.payload)

    def same_descriptor(self, other: SegmentRecord) -> bool:
        return (self.id, self.size_bytes, self.num_rows, self.location, self.payload, self.num_partitions) == (
            other.id, other.size_bytes, other.num_rows, other.location, other.payload, other.num_partitions)


metadata = MetaData()

segments_table = Table(
    "strata_segments", metadata,
    Column("id", Text, primary_key=True),  # str(SegmentId)
    Column("datasource", Text, nullable=False),
    Column("start_ms", BigInteger, nullable=False),
    Column("end_ms", BigInteger, nullable=False),
    Column("version", Text, nullable=False),
    Column("partition_num", Integer, nullable=False),
    Column("num_partitions", Integer, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("num_rows", BigInteger, nullable=False),
    Column("location", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("used", Boolean, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("used_status_updated_ms", BigInteger, nullable=False),
    Column("realtime", Boolean, nullable=False, server_default=false()),  # migration 6
    Index("strata_segments_datasource_used", "datasource", "used"),
    Index("strata_segments_datasource_interval", "datasource", "start_ms", "end_ms"),
)

schema_version_table = Table(
    "strata_schema_version", metadata,
    Column("version", Integer, primary_key=True),
    Column("description", Text, nullable=False),
    Column("applied_ms", BigInteger, nullable=False),
)


@dataclass(frozen=True)
class Migration:
    """One schema step. Steps run in ``version`` order, each at most once, all missing ones in
    one transaction (DDL is transactional in both PostgreSQL and SQLite)."""

    version: int
    description: str
    apply: Callable[[Connection], None]


tasks_table = Table(
    "strata_tasks", metadata,
    Column("id", Text, primary_key=True),
    Column("datasource", Text, nullable=False),
    Column("type", Text, nullable=False),  # insert | replace
    Column("state", Text, nullable=False),  # PENDING RUNNING SUCCESS FAILED CANCELED
    Column("statement", Text, nullable=False),
    Column("spec", Text, nullable=False),  # JSON
    Column("report", Text, nullable=False),  # JSON
    Column("error", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("started_ms", BigInteger, nullable=False),
    Column("finished_ms", BigInteger, nullable=False),
    Index("strata_tasks_state", "state"),
)


# The table catalog (common/catalog): one row per table id, spec as JSON; update_time is the
# version. Dropped tables stay as DELETED rows (tombstones) so brokers syncing deltas see drops.
catalog_tables_table = Table(
    "strata_tables", metadata,
    Column("schema_name", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("creation_time", BigInteger, nullable=False),
    Column("update_time", BigInteger, nullable=False),
    Column("state", Text, nullable=False),  # ACTIVE | DELETED
    Column("spec", Text, nullable=False),  # TableSpec JSON
    Index("strata_tables_update_time", "update_time"),
)


# Retention rules (services/coordinator/rule_store.py): the current list per datasource
# (``_default`` the cluster's), and an audit row per change, as Druid's druid_rules/druid_audit.
rules_table = Table(
    "strata_rules", metadata,
    Column("datasource", Text, primary_key=True),
    Column("payload", Text, nullable=False),  # the rule list as Druid JSON
    Column("updated_ms", BigInteger, nullable=False),
)

audit_table = Table(
    "strata_audit", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("audit_key", Text, nullable=False),  # the datasource, for rules
    Column("type", Text, nullable=False),  # "rules"
    Column("author", Text, nullable=False),
    Column("comment", Text, nullable=False),
    Column("ip", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Index("strata_audit_type_key_time", "type", "audit_key", "created_ms"),
)


# Kafka supervisors (services/coordinator/supervisor_store.py): the spec and desired state of each,
# and per datasource the stream offsets its published segments end at, as Druid's
# druid_supervisors and druid_dataSource. The offsets row is only written in the transaction that
# publishes the segments, with compare-and-swap on the previous offsets (exactly once).
supervisors_table = Table(
    "strata_supervisors", metadata,
    Column("id", Text, primary_key=True),
    Column("spec", Text, nullable=False),  # the spec as given, JSON
    Column("state", Text, nullable=False),  # RUNNING | SUSPENDED | TERMINATED
    Column("created_ms", BigInteger, nullable=False),
    Column("updated_ms", BigInteger, nullable=False),
)

stream_offsets_table = Table(
    "strata_stream_offsets", metadata,
    Column("datasource", Text, primary_key=True),
    Column("topic", Text, nullable=False),
    Column("offsets", Text, nullable=False),  # {"partition": next offset to read} as JSON
    Column("updated_ms", BigInteger, nullable=False),
)


def _create_segments(conn: Connection) -> None:
    segments_table.create(conn)  # with its indexes (and the columns later migrations add)


def _add_realtime(conn: Connection) -> None:
    # A database made before migration 6 lacks the column; one made since got it from migration 1.
    if "realtime" not in {c["name"] for c in inspect(conn).get_columns("strata_segments")}:
        conn.execute(text("ALTER TABLE strata_segments ADD COLUMN realtime BOOLEAN NOT NULL DEFAULT FALSE"))


def _create_tasks(conn: Connection) -> None:
    tasks_table.create(conn)


def _create_catalog_tables(conn: Connection) -> None:
    catalog_tables_table.create(conn)


def _create_rules(conn: Connection) -> None:
    rules_table.create(conn)
    audit_table.create(conn)


def _create_supervisors(conn: Connection) -> None:
    supervisors_table.create(conn)
    stream_offsets_table.create(conn)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "create strata_segments", _create_segments),
    Migration(2, "create strata_tasks", _create_tasks),
    Migration(3, "create strata_tables (table catalog)", _create_catalog_tables),
    Migration(4, "create strata_rules and strata_audit (retention rules)", _create_rules),
    Migration(5, "create strata_supervisors and strata_stream_offsets (Kafka supervisors)", _create_supervisors),
    Migration(6, "add strata_segments.realtime (segments of stream micro-batches)", _add_realtime),
)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _chunks(items: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


class SegmentStore:
    """Published segments in ``strata_segments``; opening one applies missing migrations.

    Thread-safe: every method runs in its own transaction on a pooled connection."""

    def __init__(self, url: str, *, migrations: Sequence[Migration] = MIGRATIONS,
                 clock: Callable[[], int] = _now_ms, migrate: bool = True) -> None:
        self.url = url
        self._clock = clock
        self._migrations = tuple(migrations)
        self._engine = _create_engine(url)
        self._dialect = self._engine.dialect.name
        # A separate engine view whose transactions begin with a write lock on SQLite.
        self._write_engine = self._engine.execution_options(strata_write=True)
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self._engine.dispose()
                raise

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> SegmentStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._write_engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.begin() as conn:
            yield conn

    # --- schema -----------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Applies the missing migrations in one transaction; returns the versions applied."""
        versions = [m.version for m in self._migrations]
        if versions != sorted(set(versions)):
            raise MetadataSchemaError(f"migration versions must be unique and ascending, got {versions}")
        with self._write() as conn:
            if self._dialect == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            schema_version_table.create(conn, checkfirst=True)
            applied = set(conn.scalars(select(schema_version_table.c.version)))
            unknown = sorted(applied - set(versions))
            if unknown:
                raise MetadataSchemaError(
                    f"metadata database {self._safe_url()} has schema versions {unknown} that this strata "
                    f"does not know (it knows up to {max(versions, default=0)}); upgrade strata or point "
                    "[metadata] url at another database"
                )
            done = []
            for m in self._migrations:
                if m.version in applied:
                    continue
                m.apply(conn)
                conn.execute(schema_version_table.insert().values(
                    version=m.version, description=m.description, applied_ms=self._clock()))
                done.append(m.version)
        return done

    def schema_versions(self) -> list[int]:
        with self._read() as conn:
            return sorted(conn.scalars(select(schema_version_table.c.version)))

    # --- writes -----------------------------------------------------------------------------

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[Connection]:
        """A transaction on the metadata DB, for other tables of the coordinator (tasks)."""
        with (self._write() if write else self._read()) as conn:
            yield conn

    def publish(self, records: Iterable[SegmentRecord], replace: tuple[str, Sequence[Interval]] | None = None,
                task_id: str | None = None, expected: Iterable[SegmentId] | None = None) -> int:
        """Publishes all records as used, or none. Returns how many were new: re-publishing an
        identical segment is a no-op (and leaves its used flag as it is), while publishing an
        id that is stored with a different descriptor raises ``PublishConflictError`` and rolls
        back the whole batch.

        ``replace=(datasource, intervals)`` is REPLACE ... OVERWRITE: in the same transaction,
        used segments inside the intervals that no new segment covers are marked unused (they
        hold replaced rows and nothing newer hides them). Segments the new ones cover stay used
        until the new version is served and the coordinator marks them overshadowed, so queries
        never see a gap. An old segment that only partly overlaps the intervals and is not covered
        would keep replaced rows visible: that is refused, naming the segment.

        ``task_id`` names the ingestion task publishing: a task already in a final state (its
        process was declared dead and its uploads are being removed) publishes nothing. The task
        row is locked for the transaction, so this and the coordinator settling a dead task
        (``TaskStore.settle_exited``) happen one after the other, never interleaved.

        ``expected`` (with ``replace``): the used segments inside the intervals when the new ones
        were built from them, as a stream task's handoff rewrites them. Any other used segment
        there (one a micro-batch appended after the handoff read the list) would be hidden by the
        new version with its rows, so the publish is refused (``ReplaceConflictError``) instead."""
        batch = self._dedupe(records)
        if not batch and replace is None:
            return 0
        with self._write() as conn:
            return self.publish_in(conn, batch.values(), replace, task_id, expected)

    def publish_in(self, conn: Connection, records: Iterable[SegmentRecord],
                   replace: tuple[str, Sequence[Interval]] | None = None, task_id: str | None = None,
                   expected: Iterable[SegmentId] | None = None) -> int:
        """``publish`` inside the caller's write transaction (which commits it or rolls it back),
        so other metadata, such as a supervisor's stream offsets, changes with the segments."""
        batch = self._dedupe(records)
        if expected is not None:
            if replace is None:
                raise ValidationError("expected segments are only checked by a replace; give its intervals")
            self._check_expected(conn, replace[0], list(replace[1]), {str(i) for i in expected}, set(batch))
        now = self._clock()
        rows = [self._row(r, now) for r in batch.values()]
        insert = (postgresql.insert if self._dialect == "postgresql" else sqlite.insert)(segments_table)
        stmt = insert.on_conflict_do_nothing(index_elements=["id"]).returning(segments_table.c.id)
        if task_id:
            self._check_task_open(conn, task_id)
        inserted: set[str] = set()
        for part in _chunks(rows):
            inserted.update(conn.scalars(stmt, list(part)))
        clashes = [key for key in batch if key not in inserted]
        for key, stored in self._fetch(conn, clashes).items():
            if not stored.same_descriptor(batch[key]):
                raise PublishConflictError(
                    f"segment {key} is already published with a different descriptor "
                    f"({_difference(stored, batch[key])}); nothing in this batch of {len(batch)} was "
                    "published. Publish changed data under a new version instead of reusing the id"
                )
        self._check_partition_counts(conn, batch.values())
        if replace is not None:
            self._retire_replaced(conn, replace[0], list(replace[1]), list(batch.values()))
        return len(inserted)

    @staticmethod
    def _check_expected(conn: Connection, datasource: str, intervals: list[Interval], expected: set[str],
                        new: set[str]) -> None:
        t = segments_table
        found: set[str] = set()
        for iv in intervals:
            found.update(conn.scalars(select(t.c.id).where(t.c.datasource == datasource, t.c.used == true(),
                                                          t.c.start_ms < iv.end, t.c.end_ms > iv.start)))
        # Only a segment that appeared matters: one of the expected going unused meanwhile is the
        # coordinator dropping an overshadowed segment (or a second handoff, whose own new
        # segments then appeared and refuse this one).
        appeared = sorted(found - new - expected)
        if appeared:
            raise ReplaceConflictError(
                f"the used segments of {datasource} in {', '.join(str(iv) for iv in intervals)} changed since this "
                f"replace read them (new: {', '.join(appeared[:3])}); nothing was published. Build the replace "
                "again from what is used now")

    @staticmethod
    def _check_task_open(conn: Connection, task_id: str) -> None:
        t = tasks_table
        state = conn.scalar(select(t.c.state).where(t.c.id == task_id).with_for_update())
        if state in ("SUCCESS", "FAILED", "CANCELED"):
            raise ValidationError(
                f"task {task_id} is already {state}; its segments were not published. Submit the statement again"
            )

    def _retire_replaced(self, conn: Connection, datasource: str, intervals: list[Interval],
                         new: list[SegmentRecord]) -> None:
        t = segments_table
        new_ids = {str(r.id) for r in new}
        covered = [r.id.interval for r in new]
        retire = []
        for iv in intervals:
            rows = conn.execute(select(t.c.id, t.c.start_ms, t.c.end_ms).where(
                t.c.datasource == datasource, t.c.used == true(), t.c.start_ms < iv.end, t.c.end_ms > iv.start))
            for key, start, end in rows:
                if key in new_ids or any(c.start <= start and end <= c.end for c in covered):
                    continue  # overshadowed by the new version once it serves
                if iv.start <= start and end <= iv.end:
                    retire.append(key)
                else:
                    raise ValidationError(
                        f"REPLACE over {iv} would leave rows of segment {key} ({Interval(start, end)}) visible "
                        "inside the replaced interval; align OVERWRITE WHERE with the existing segment "
                        "granularity or replace a wider interval. Nothing was published"
                    )
        now = self._clock()
        for part in _chunks(sorted(set(retire))):
            conn.execute(update(t).where(t.c.id.in_(part)).values(used=False, used_status_updated_ms=now))

    def mark_unused(self, ids: Iterable[SegmentId]) -> int:
        """Marks used segments unused; returns how many changed."""
        return self._set_used(ids, False)

    def mark_used(self, ids: Iterable[SegmentId]) -> int:
        """Marks unused segments used again (they must still be in deep storage: not killed);
        returns how many changed."""
        return self._set_used(ids, True)

    def _set_used(self, ids: Iterable[SegmentId], used: bool) -> int:
        # Only rows in the other state change, so the count (and used_status_updated_ms) says what moved.
        keys = sorted({str(i) for i in ids})
        changed = 0
        with self._write() as conn:
            now = self._clock()
            for part in _chunks(keys):
                result = conn.execute(update(segments_table)
                                      .where(segments_table.c.id.in_(part),
                                             segments_table.c.used == (false() if used else true()))
                                      .values(used=used, used_status_updated_ms=now))
                changed += result.rowcount
        return changed

    def mark_unused_in_interval(self, datasource: str, interval: Interval) -> int:
        """Marks unused every used segment of ``datasource`` lying wholly inside ``interval``
        (as Druid: a segment that only overlaps it keeps serving its other part)."""
        t = segments_table
        with self._write() as conn:
            result = conn.execute(
                update(t)
                .where(t.c.datasource == datasource, t.c.used == true(),
                       t.c.start_ms >= interval.start, t.c.end_ms <= interval.end)
                .values(used=False, used_status_updated_ms=self._clock()))
            return result.rowcount

    def delete_unused(self, ids: Iterable[SegmentId]) -> int:
        """Deletes the rows of the given segments that are unused; used ones are left alone, so
        a kill racing with a re-publish cannot remove a serving segment. Returns rows deleted."""
        keys = sorted({str(i) for i in ids})
        deleted = 0
        with self._write() as conn:
            for part in _chunks(keys):
                result = conn.execute(delete(segments_table).where(
                    segments_table.c.id.in_(part), segments_table.c.used == false()))
                deleted += result.rowcount
        return deleted

    # --- reads ------------------------------------------------------------------------------

    def list(self, datasource: str | None = None, include_unused: bool = False) -> list[SegmentRecord]:
        """Segments in (datasource, start, end, version, partition) order."""
        t = segments_table
        query = select(t)
        if datasource is not None:
            query = query.where(t.c.datasource == datasource)
        if not include_unused:
            query = query.where(t.c.used == true())
        query = query.order_by(t.c.datasource, t.c.start_ms, t.c.end_ms, t.c.version, t.c.partition_num)
        with self._read() as conn:
            return [_record(row) for row in conn.execute(query).mappings()]

    def used_segments(self) -> list[SegmentRecord]:
        return self.list()

    def get(self, segment_id: SegmentId) -> SegmentRecord | None:
        with self._read() as conn:
            return self._fetch(conn, [str(segment_id)]).get(str(segment_id))

    def datasources(self, include_unused: bool = False) -> list[str]:
        """Datasources with at least one used segment (or any segment, with include_unused)."""
        t = segments_table
        query = select(t.c.datasource).distinct().order_by(t.c.datasource)
        if not include_unused:
            query = query.where(t.c.used == true())
        with self._read() as conn:
            return list(conn.scalars(query))

    def usage(self) -> dict[tuple[str, bool], tuple[int, int]]:
        """(datasource, used) -> (segments, bytes) of every segment the metadata store knows: all
        of them are in deep storage until killed, used or not."""
        t = segments_table
        query = select(t.c.datasource, t.c.used, func.count(), func.coalesce(func.sum(t.c.size_bytes), 0)) \
            .group_by(t.c.datasource, t.c.used)
        with self._read() as conn:
            return {(ds, bool(used)): (int(n), int(size)) for ds, used, n, size in conn.execute(query)}

    # --- internals --------------------------------------------------------------------------

    @staticmethod
    def _dedupe(records: Iterable[SegmentRecord]) -> dict[str, SegmentRecord]:
        batch: dict[str, SegmentRecord] = {}
        for r in records:
            _validate(r)
            key = str(r.id)
            seen = batch.get(key)
            if seen is not None and not seen.same_descriptor(r):
                raise PublishConflictError(
                    f"segment {key} appears twice in one publish batch with different descriptors "
                    f"({_difference(seen, r)}); send each segment once"
                )
            batch[key] = r
        return batch

    @staticmethod
    def _row(r: SegmentRecord, now: int) -> dict:
        return {
            "id": str(r.id), "datasource": r.id.datasource, "start_ms": r.id.interval.start,
            "end_ms": r.id.interval.end, "version": r.id.version, "partition_num": r.id.partition,
            "num_partitions": r.num_partitions, "size_bytes": r.size_bytes, "num_rows": r.num_rows,
            "location": r.location, "payload": r.payload, "used": True, "created_ms": now,
            "used_status_updated_ms": now, "realtime": r.realtime,
        }

    @staticmethod
    def _fetch(conn: Connection, keys: Sequence[str]) -> dict[str, SegmentRecord]:
        out: dict[str, SegmentRecord] = {}
        for part in _chunks(list(keys)):
            for row in conn.execute(select(segments_table).where(segments_table.c.id.in_(part))).mappings():
                out[row["id"]] = _record(row)
        return out

    @staticmethod
    def _check_partition_counts(conn: Connection, records: Iterable[SegmentRecord]) -> None:
        # The timeline needs one num_partitions per (datasource, interval, version) set; a batch
        # that disagrees with itself or with what is stored would make the set never complete.
        t = segments_table
        sets: dict[tuple, SegmentRecord] = {}
        for r in records:
            sets.setdefault((r.id.datasource, r.id.interval.start, r.id.interval.end, r.id.version), r)
        for (ds, start, end, version), r in sets.items():
            counts = sorted(conn.scalars(
                select(t.c.num_partitions).distinct().where(and_(
                    t.c.datasource == ds, t.c.start_ms == start, t.c.end_ms == end, t.c.version == version))))
            if len(counts) > 1:
                raise PublishConflictError(
                    f"segment {r.id}: partitions of ({ds}, {r.id.interval}, {version}) would disagree on "
                    f"num_partitions ({counts}); nothing was published. Publish every partition of a "
                    "version with the same num_partitions"
                )

    def _safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)


def _validate(r: SegmentRecord) -> None:
    sid = r.id
    if sid.interval.start >= sid.interval.end:
        raise ValidationError(f"segment {sid} has an empty interval; it cannot be published")
    if r.num_partitions < 1:
        raise ValidationError(
            f"segment {sid}: num_partitions must be >= 1, got {r.num_partitions}; partitions 0..n-1 are the "
            "core set and higher ones are appended"
        )
    if r.size_bytes < 0 or r.num_rows < 0:
        raise ValidationError(f"segment {sid}: size_bytes and num_rows must be >= 0, "
                              f"got {r.size_bytes} and {r.num_rows}")


def _difference(stored: SegmentRecord, given: SegmentRecord) -> str:
    fields = ("size_bytes", "num_rows", "location", "num_partitions", "payload")
    diff = [f for f in fields if getattr(stored, f) != getattr(given, f)]
    return "differs in " + ", ".join(diff)


def _record(row) -> SegmentRecord:
    sid = SegmentId(row["datasource"], Interval(row["start_ms"], row["end_ms"]), row["version"], row["partition_num"])
    return SegmentRecord(sid, row["size_bytes"], row["num_rows"], row["location"], row["payload"],
                         row["num_partitions"], bool(row["used"]), row["created_ms"], row["used_status_updated_ms"],
                         bool(row["realtime"]))


def _create_engine(url: str) -> Engine:
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return create_engine(url, pool_pre_ping=True)
    if backend != "sqlite":
        raise ValidationError(
            f"metadata url '{parsed.render_as_string(hide_password=True)}' is not supported; use "
            "sqlite:///path/metadata.db or postgresql+psycopg://user:password@host/database"
        )
    database = parsed.database or ""
    memory = database in ("", ":memory:")
    if not memory:
        directory = os.path.dirname(os.path.abspath(database))
        os.makedirs(directory, exist_ok=True)
    kwargs: dict = {"connect_args": {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}}
    if memory:
        # Every connection to :memory: is a new empty database, so keep exactly one.
        kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        # Take transaction control from pysqlite, which would otherwise begin late (after
        # reads) and commit DDL implicitly; the "begin" hook below emits BEGIN itself.
        dbapi_conn.isolation_level = None
        dbapi_conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if not memory:
            _retry_busy(lambda: dbapi_conn.execute("PRAGMA journal_mode = WAL").fetchall())
            dbapi_conn.execute("PRAGMA synchronous = NORMAL")  # durable enough under WAL, much faster

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        begin = "BEGIN IMMEDIATE" if conn.get_execution_options().get("strata_write") else "BEGIN"
        dbapi_conn = conn.connection.driver_connection
        _retry_busy(lambda: dbapi_conn.execute(begin))

    return engine


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "database is locked" in text or "database table is locked" in text


def _retry_busy(statement: Callable[[], object]) -> None:
    """Runs one SQLite statement, retrying "database is locked" until the busy timeout.

    The busy handler already queues ordinary lock waits; this covers those SQLite answers at
    once, chiefly ``PRAGMA journal_mode = WAL`` on a new file, which takes the exclusive lock
    from inside a read transaction: two connections doing so at the same moment would each wait
    for the other, so SQLite fails one immediately. The mode is stored in the file, so once one
    connection has switched it the retry finds it done."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = _BUSY_RETRY_FIRST_S
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause * random.uniform(0.5, 1.5))  # jitter: colliding connections spread out
        pause = min(pause * 2, _BUSY_RETRY_MAX_S)
