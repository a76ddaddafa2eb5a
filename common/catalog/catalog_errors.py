"""The catalog's own failures, apart from ValidationError (a bad spec, HTTP 400), so the REST and
gRPC edges can map each to its status in one place: a missing table (404 / NOT_FOUND), a table
that already exists (409 / ALREADY_EXISTS) and a stale version (409 / ABORTED)."""

from __future__ import annotations

from common.errors import ErrorKind, StrataError


class TableNotFoundError(StrataError):
    """No catalog entry for the table (the datasource itself may still exist)."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, table) -> None:
        super().__init__(f"table {table} has no catalog entry; create it first (POST with action=New, "
                         "or CREATE TABLE)")
        self.table = table


class TableExistsError(StrataError):
    """action=New (or CREATE TABLE without IF NOT EXISTS) on a table that already has an entry."""

    kind = ErrorKind.ALREADY_EXISTS

    def __init__(self, table, current_version: int) -> None:
        super().__init__(f"table {table} already has a catalog entry (version {current_version}); use "
                         "action=IfNew to keep it, action=Replace or Force to overwrite it, or PUT to update it")
        self.table = table
        self.current_version = current_version


class VersionConflictError(StrataError):
    """Optimistic locking failed: the entry changed since the caller read ``expected``."""

    kind = ErrorKind.CONFLICT

    def __init__(self, table, expected: int, current_version: int) -> None:
        super().__init__(f"table {table} is at version {current_version}, not {expected}: another writer "
                         "changed it since it was read; read it again and reapply the change")
        self.table = table
        self.expected = expected
        self.current_version = current_version


class SchemaNotFoundError(StrataError):
    """A schema that holds no catalog entries (HTTP 404)."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, schema: str, valid) -> None:
        super().__init__(f"schema '{schema}' does not hold catalog entries; valid schemas: {', '.join(valid)}")
        self.schema = schema
