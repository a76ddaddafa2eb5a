"""CatalogManager: the coordinator's catalog operations as one user asks for them, shared by the
REST API and the gRPC service so both authorize, purge and announce changes the same way.

- Authorization follows the table: reading an entry needs READ on it, changing it needs WRITE,
  on the DATASOURCE of that name (schema druid) or the EXTERNAL of that name (schema ext); the
  check comes before the lookup so a missing entry and a forbidden one are not told apart to
  someone without access. Listings show only what the user may READ.
- Every change ends by writing the catalog's newest update time to the discovery key
  ``/strata/catalog/version``; brokers watch it and fetch the delta. The value is read back
  from the database under a lock, so concurrent writers in this process never move it
  backwards. If discovery is down, the change stands (it is committed) and the next change or
  a flush announces it.
- DROP TABLE ... PURGE also marks every segment of the datasource unused.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from common.catalog.catalog_errors import SchemaNotFoundError
from common.catalog.operations import CatalogOperation, CreateTable, DropTable, EditTable, MergeUpdate, TableEdit
from common.catalog.table_spec import DRUID_SCHEMA, EXT_SCHEMA, SCHEMAS, TableId, TableMetadata, TableSpec
from common.catalog.validation import validate_table_id
from common.errors import ValidationError
from common.types.interval import ETERNITY
from services.coordinator.catalog_store import CatalogDelta, CatalogStore
from services.discovery.keys import CATALOG_VERSION_KEY
from services.security.authorizer import ALLOW_ALL, Authorizer

log = logging.getLogger(__name__)

_RESOURCE = {DRUID_SCHEMA: "DATASOURCE", EXT_SCHEMA: "EXTERNAL"}


@dataclass(frozen=True)
class DropResult:
    dropped: TableMetadata | None  # the tombstone, or None when there was no entry
    segments_marked_unused: int
    version: int


@dataclass(frozen=True)
class OperationResult:
    """What a DDL statement did, for the SQL client: a message and the entry as stored."""

    message: str
    table: TableMetadata | None = None
    segments_marked_unused: int = 0


class CatalogManager:
    def __init__(self, store: CatalogStore, segments=None, discovery=None,
                 authorizer: Authorizer | None = None) -> None:
        self.store = store
        self.segments = segments  # SegmentStore, for PURGE
        self.discovery = discovery
        self.authorizer = authorizer if authorizer is not None else ALLOW_ALL
        self._announce_lock = threading.Lock()

    # ---- authorization ----------------------------------------------------------------------
    def _require(self, user: str | None, action: str, table: TableId) -> None:
        self._schema(table.schema)
        validate_table_id(table)
        self.authorizer.require(user, action, _RESOURCE[table.schema], table.name)

    def _can_read(self, user: str | None, table: TableId) -> bool:
        return table.schema in _RESOURCE and self.authorizer.can(user, "READ", _RESOURCE[table.schema], table.name)

    @staticmethod
    def _schema(schema: str | None) -> str | None:
        if schema is not None and schema not in SCHEMAS:
            raise SchemaNotFoundError(schema, SCHEMAS)
        return schema

    # ---- announcing changes -----------------------------------------------------------------
    def announce(self) -> int:
        """Writes the newest update time to the discovery key (also when unchanged: every write
        is a watch event, which is what makes flush reload brokers). Returns it."""
        with self._announce_lock:
            version = self.store.version()
            if self.discovery is not None:
                try:
                    self.discovery.put(CATALOG_VERSION_KEY, str(version).encode())
                except Exception as exc:  # the change is committed; the next one announces both
                    log.warning("catalog version %d not announced in discovery (%s); brokers catch up on the "
                                "next catalog change or flush", version, exc)
            return version

    # ---- writes -----------------------------------------------------------------------------
    def create(self, user: str | None, table: TableId, spec: TableSpec, action: str = "New",
               version: int | None = None) -> tuple[TableMetadata, bool]:
        self._require(user, "WRITE", table)
        stored, written = self.store.create(table, spec, action, version)
        if written:
            self.announce()
        return stored, written

    def update(self, user: str | None, table: TableId, partial: dict, version: int | None = None) -> TableMetadata:
        return self.edit(user, table, [MergeUpdate(partial)], version)

    def edit(self, user: str | None, table: TableId, edits: list[TableEdit], version: int | None = None
             ) -> TableMetadata:
        self._require(user, "WRITE", table)
        stored = self.store.edit(table, edits, version)
        self.announce()
        return stored

    def drop(self, user: str | None, table: TableId, if_exists: bool = False, purge: bool = False,
             version: int | None = None) -> DropResult:
        self._require(user, "WRITE", table)
        if purge and table.schema != DRUID_SCHEMA:
            raise ValidationError(f"purge applies to datasources (schema druid); {table} is an input table with no "
                                  "segments")
        has_segments = purge and self.segments is not None and table.name in self.segments.datasources()
        # PURGE of a datasource that was never in the catalog still removes its data.
        dropped = self.store.drop(table, if_exists=if_exists or has_segments, version=version)
        marked = self.segments.mark_unused_in_interval(table.name, ETERNITY) if has_segments else 0
        version_now = self.announce() if dropped is not None else self.store.version()
        return DropResult(dropped, marked, version_now)

    def execute(self, user: str | None, op: CatalogOperation) -> OperationResult:
        """Runs an operation from ``common.catalog.ddl.translate_ddl`` (or built by hand)."""
        if isinstance(op, CreateTable):
            stored, written = self.create(user, op.table, op.spec, op.action)
            message = op.describe() if written else f"table {op.table} already exists; left unchanged"
            return OperationResult(message, stored)
        if isinstance(op, EditTable):
            return OperationResult(op.describe(), self.edit(user, op.table, list(op.edits)))
        if isinstance(op, DropTable):
            result = self.drop(user, op.table, op.if_exists, op.purge)
            if result.dropped is None and not result.segments_marked_unused:
                return OperationResult(f"table {op.table} does not exist; nothing dropped")
            message = op.describe()
            if op.purge:
                message += f" ({result.segments_marked_unused} segments)"
            return OperationResult(message, result.dropped, result.segments_marked_unused)
        raise ValidationError(f"unknown catalog operation {type(op).__name__}; valid: CreateTable, EditTable, "
                              "DropTable")

    def flush(self, user: str | None) -> int:
        """The coordinator caches nothing: flushing re-announces the version so brokers reload."""
        return self.announce()

    # ---- reads ------------------------------------------------------------------------------
    def get(self, user: str | None, table: TableId) -> TableMetadata:
        self._require(user, "READ", table)
        return self.store.get(table)

    def list(self, user: str | None, schema: str | None = None) -> list[TableMetadata]:
        self._schema(schema)
        return [t for t in self.store.list(schema) if self._can_read(user, t.id)]

    def changes(self, user: str | None, since: int = 0, schema: str | None = None) -> CatalogDelta:
        self._schema(schema)
        delta = self.store.changes(since, schema)
        return CatalogDelta([t for t in delta.tables if self._can_read(user, t.id)],
                            [d for d in delta.deleted if self._can_read(user, d)], delta.version)

    @staticmethod
    def schemas() -> list[str]:
        # Not filtered: there are no schema-level permissions, only per-table ones.
        return list(SCHEMAS)
