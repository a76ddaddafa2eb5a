"""SqlBackend: what the broker's SQL front ends (Arrow Flight SQL, the gRPC BrokerService) need
from the SQL layer. A protocol only: the Flight SQL server is tested against a DuckDB-backed
fake, and the broker provides the real one (SQL planned onto native queries).

Errors are raised as strata errors (ValidationError for bad SQL, an unknown table or column, a
type error; UnsupportedError; QueryTimeoutError; PermissionError); the front door
(``services/broker/query_errors``) turns them into status codes, and anything else into an
internal error with an id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa

from services.broker.core.call_origin import CallOrigin


@dataclass(frozen=True)
class TableInfo:
    catalog: str
    schema: str
    name: str
    table_type: str  # "TABLE" for datasources, "SYSTEM_TABLE" for INFORMATION_SCHEMA and sys
    arrow_schema: pa.Schema = field(default_factory=lambda: pa.schema([]))


@dataclass(frozen=True)
class StatementInfo:
    """What planning (without running) tells about a statement."""

    parameter_count: int
    dataset_schema: pa.Schema | None  # None when it depends on parameter values not yet bound
    # The backend's plan of a statement without parameters that may be run again as it is (the
    # broker's SqlPlan, when reusable): Flight's DoGet runs the plan GetFlightInfo described.
    plan: object | None = field(default=None, compare=False, repr=False)


class SqlBackend(Protocol):
    def execute(self, sql: str, parameters: Sequence = (), context: dict | None = None,
                user: str | None = None, is_active: Callable[[], bool] = lambda: True, *,
                origin: CallOrigin | None = None, query_id: str | None = None) -> pa.Table:
        """Run one SQL statement (SET statements before it are allowed) and return its result;
        stop early once ``is_active()`` is false (the client went away). ``origin`` (who sent it)
        and ``query_id`` (the id its front door fixed, if any) are for a backend that logs
        queries (the broker's ``LoggedSql``); others ignore them."""

    def describe(self, sql: str, context: dict | None = None, user: str | None = None,
                 parameters: Sequence | None = None, *, origin: CallOrigin | None = None,
                 query_id: str | None = None) -> StatementInfo:
        """Plan without running: the number of ``?`` parameters and, when known, the result schema
        (with ``parameters``, the schema for those values). ``origin`` and ``query_id`` as for
        ``execute``."""

    def catalogs(self) -> list[str]:
        """Catalog names (Druid has one: 'druid')."""

    def db_schemas(self, catalog: str | None = None, schema_pattern: str | None = None) -> list[tuple[str, str]]:
        """(catalog, schema) pairs; patterns use SQL LIKE syntax (% and _)."""

    def tables(self, catalog: str | None = None, schema_pattern: str | None = None,
               table_pattern: str | None = None, table_types: Sequence[str] = (),
               user: str | None = None) -> list[TableInfo]:
        """Tables visible to ``user``, filtered by LIKE patterns and types."""

    def table_types(self) -> list[str]:
        """Table types in use, e.g. TABLE and SYSTEM_TABLE."""
