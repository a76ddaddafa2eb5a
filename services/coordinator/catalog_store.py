"""CatalogStore: catalog entries in the coordinator's metadata DB (``strata_tables``).

One row per table id. ``update_time`` is the entry's version: every write gives the row a
new one, strictly greater than any update time in the table (the wall clock, or the newest
one plus 1 when the clock has not moved on or went back), so

- a version names exactly one state of one entry, even for writes in the same millisecond;
- ``changes(since)`` returns every entry written after ``since``: brokers keep the newest
  update time they have seen and ask only for what is newer.

Writes are serialized: SQLite's ``BEGIN IMMEDIATE`` (the SegmentStore's write transactions)
and, on PostgreSQL, a transaction-scoped advisory lock. That makes each read-check-write one
compare-and-set even across coordinators sharing the database, and it makes commit order equal
update-time order, without which a delta reader could see time 101 committed, move its cursor
past 100, and never see a slower writer's 100. The UPDATE still carries ``WHERE update_time =
<read version>``, so a writer that bypassed the lock is caught rather than overwritten.

Dropping an entry keeps its row as a DELETED tombstone with a new update time, so deltas carry
deletions; re-creating the table reuses the row. Tombstones are bounded by the number of
distinct table names ever dropped, so they are never pruned.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, func, insert, select, update

from common.catalog.catalog_errors import TableExistsError, TableNotFoundError, VersionConflictError
from common.catalog.operations import TableEdit, apply_edits, parse_action
from common.catalog.table_spec import ACTIVE, DELETED, TableId, TableMetadata, TableSpec
from common.catalog.validation import validate_table, validate_table_id
from common.errors import ValidationError
from services.coordinator.store import SegmentStore, catalog_tables_table

# pg_advisory_xact_lock key serializing catalog writes (distinct from the migration lock).
_CATALOG_LOCK = 0x5374726174610002
T = catalog_tables_table


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class CatalogDelta:
    """What changed after a version: live entries written since, ids dropped since, and the
    version to ask from next time."""

    tables: list[TableMetadata]
    deleted: list[TableId]
    version: int


def _metadata(row) -> TableMetadata:
    table = TableId(row.schema_name, row.name)
    return TableMetadata(table, row.creation_time, row.update_time, row.state,
                         TableSpec.from_json(json.loads(row.spec), str(table)))


class CatalogStore:
    """Thread-safe: every method is one transaction on the SegmentStore's engine."""

    def __init__(self, store: SegmentStore, clock: Callable[[], int] = _now_ms) -> None:
        self._store = store
        self._clock = clock

    # ---- transactions ---------------------------------------------------------------------------
    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        with self._store.transaction(write=True) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_CATALOG_LOCK)))
            yield conn

    def _next_time(self, conn: Connection) -> int:
        newest = conn.scalar(select(func.max(T.c.update_time))) or 0
        return max(self._clock(), newest + 1)

    @staticmethod
    def _row(conn: Connection, table: TableId):
        return conn.execute(select(T).where(T.c.schema_name == table.schema, T.c.name == table.name)).first()

    @staticmethod
    def _check_version(table: TableId, current: TableMetadata, version: int | None) -> None:
        if version is not None and version != current.update_time:
            raise VersionConflictError(table, version, current.update_time)

    def _replace(self, conn: Connection, current: TableMetadata, spec: TableSpec) -> TableMetadata:
        now = self._next_time(conn)
        result = conn.execute(
            update(T)
            .where(T.c.schema_name == current.id.schema, T.c.name == current.id.name,
                   T.c.update_time == current.update_time)
            .values(update_time=now, state=ACTIVE, spec=spec.to_text()))
        if result.rowcount != 1:
            # Only a writer that ignored the catalog lock can get here; refuse rather than overwrite.
            stored = self._row(conn, current.id)
            raise VersionConflictError(current.id, current.update_time, stored.update_time if stored else 0)
        return TableMetadata(current.id, current.creation_time, now, ACTIVE, spec)

    def _insert(self, conn: Connection, table: TableId, spec: TableSpec, tombstone) -> TableMetadata:
        now = self._next_time(conn)
        values = dict(creation_time=now, update_time=now, state=ACTIVE, spec=spec.to_text())
        if tombstone is None:
            conn.execute(insert(T).values(schema_name=table.schema, name=table.name, **values))
        else:
            result = conn.execute(update(T).where(T.c.schema_name == table.schema, T.c.name == table.name,
                                                  T.c.update_time == tombstone.update_time).values(**values))
            if result.rowcount != 1:
                raise VersionConflictError(table, tombstone.update_time, 0)
        return TableMetadata(table, now, now, ACTIVE, spec)

    # ---- writes ---------------------------------------------------------------------------------
    def create(self, table: TableId, spec: TableSpec, action: str = "New", version: int | None = None
               ) -> tuple[TableMetadata, bool]:
        """Creates or replaces per ``action`` (New, IfNew, Replace, Force); returns the stored
        entry and whether it was written (IfNew on an existing table writes nothing).
        ``version`` (Replace, Force) makes the replacement conditional on the stored version."""
        action = parse_action(action)
        if version is not None and action in ("New", "IfNew"):
            raise ValidationError(f"parameter 'version' applies to action Replace or Force, not {action}: a new "
                                  "table has no version yet")
        validate_table(table, spec)
        with self._writing() as conn:
            row = self._row(conn, table)
            current = _metadata(row) if row is not None and row.state == ACTIVE else None
            if current is None:
                if action == "Replace" or version is not None:
                    raise TableNotFoundError(table)
                return self._insert(conn, table, spec, row), True
            if action == "New":
                raise TableExistsError(table, current.update_time)
            if action == "IfNew":
                return current, False
            self._check_version(table, current, version)
            return self._replace(conn, current, spec), True

    def edit(self, table: TableId, edits: Sequence[TableEdit] | Callable[[TableSpec], TableSpec],
             version: int | None = None) -> TableMetadata:
        """Applies edits (or a spec -> spec function) to the stored spec and stores the result,
        all in one transaction; with ``version``, only if the entry is still at it."""
        validate_table_id(table)
        with self._writing() as conn:
            row = self._row(conn, table)
            if row is None or row.state != ACTIVE:
                raise TableNotFoundError(table)
            current = _metadata(row)
            self._check_version(table, current, version)
            spec = edits(current.spec) if callable(edits) else apply_edits(current.spec, edits)
            validate_table(table, spec)
            return self._replace(conn, current, spec)

    def drop(self, table: TableId, if_exists: bool = False, version: int | None = None) -> TableMetadata | None:
        """Turns the entry into a tombstone; returns it, or None when there was nothing to drop
        and ``if_exists``."""
        validate_table_id(table)
        with self._writing() as conn:
            row = self._row(conn, table)
            if row is None or row.state != ACTIVE:
                if if_exists:
                    return None
                raise TableNotFoundError(table)
            current = _metadata(row)
            self._check_version(table, current, version)
            now = self._next_time(conn)
            result = conn.execute(update(T).where(T.c.schema_name == table.schema, T.c.name == table.name,
                                                  T.c.update_time == current.update_time)
                                  .values(update_time=now, state=DELETED))
            if result.rowcount != 1:
                raise VersionConflictError(table, current.update_time, 0)
            return TableMetadata(table, current.creation_time, now, DELETED, current.spec)

    # ---- reads ----------------------------------------------------------------------------------
    def find(self, table: TableId) -> TableMetadata | None:
        with self._store.transaction(write=False) as conn:
            row = self._row(conn, table)
        return _metadata(row) if row is not None and row.state == ACTIVE else None

    def get(self, table: TableId) -> TableMetadata:
        found = self.find(table)
        if found is None:
            raise TableNotFoundError(table)
        return found

    def list(self, schema: str | None = None) -> list[TableMetadata]:
        """Live entries, by schema then name."""
        query = select(T).where(T.c.state == ACTIVE).order_by(T.c.schema_name, T.c.name)
        if schema is not None:
            query = query.where(T.c.schema_name == schema)
        with self._store.transaction(write=False) as conn:
            return [_metadata(row) for row in conn.execute(query)]

    def changes(self, since: int = 0, schema: str | None = None) -> CatalogDelta:
        """Entries written after version ``since`` (0: everything), in update order. A returned
        version below ``since`` means the catalog went back (a restored database): the caller
        should reload everything."""
        query = select(T).where(T.c.update_time > since).order_by(T.c.update_time)
        if schema is not None:
            query = query.where(T.c.schema_name == schema)
        with self._store.transaction(write=False) as conn:
            rows = list(conn.execute(query))
            newest = conn.scalar(select(func.max(T.c.update_time))) or 0
        live = [_metadata(r) for r in rows if r.state == ACTIVE]
        gone = [TableId(r.schema_name, r.name) for r in rows if r.state != ACTIVE]
        return CatalogDelta(live, gone, newest)

    def version(self) -> int:
        """The newest update time of any entry or tombstone (0 for an empty catalog)."""
        with self._store.transaction(write=False) as conn:
            return conn.scalar(select(func.max(T.c.update_time))) or 0
