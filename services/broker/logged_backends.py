"""The broker's front doors' view of SQL and native queries: the same services, each statement run
as a tracked query (an id, KILL-able, logged). Every front door (Flight SQL, plain Flight, gRPC)
calls these, so no query path is left out of the log.

``LoggedSql`` wraps the SqlService (KILL QUERY is answered here); ``LoggedNative`` wraps the
scatter/gather executor for native JSON queries. Each method the front doors call is written out
(no ``__getattr__``), as in the secure catalog: a method added to a backend is unreachable
through these until it is added here, deciding whether it is tracked, so none silently skips the
log and KILL. Each call carries the statement's ``origin`` (``core/call_origin``: who sent it,
from where, through which front door) and the id its front door fixed, if any, explicitly: the
registry records them. Without a fixed id a client picks its own with the context key
``sqlQueryId`` (SQL: ``SET sqlQueryId = 'x'; SELECT ..``) or ``queryId`` (native), as in Druid.

A statement is registered before it is planned, so KILL QUERY also stops one that is still
planning (the planner checks the kill flag where it checks its deadline: the statement's
``RunningQuery`` is passed to the service, ``tracked``, and its native queries report to it):
``execute`` plans inside ``track``, and ``describe`` (Flight SQL plans when a statement is prepared
and in GetFlightInfo, then runs it in DoGet) inside ``registry.planning``.
"""

from __future__ import annotations

import pyarrow as pa

from common.query.model import query_from_json
from common.sql.kill_statement import kill_target
from services.broker.core.call_origin import CallOrigin
from services.broker.core.sql_backend import StatementInfo
from services.broker.query_origin import sql_query_id


class LoggedSql:
    def __init__(self, inner, registry) -> None:
        self.inner = inner
        self.registry = registry
        streams = getattr(inner, "streams", None)
        if streams is not None:  # a backend without it runs every statement the ordinary way
            self.streams = streams  # asked for every DoGet: the bound method, not a wrapper call

    def execute(self, sql: str, parameters=(), context: dict | None = None, user: str | None = None,
                is_active=lambda: True, emit=None, *, origin: CallOrigin | None = None, query_id: str | None = None,
                **pinned) -> pa.Table:
        # The id the call fixed (Flight: announced at GetFlightInfo) wins; else the statement's own.
        wanted = query_id or sql_query_id(sql, context)
        with self.registry.track("sql", sql=sql, user=user, query_id=wanted, is_active=is_active,
                                 origin=origin) as running:
            running.stop_if_killed_pending()  # killed after GetFlightInfo planned it, before this run
            target = kill_target(sql)
            sent = [0]
            if target is not None:
                table = pa.table({"result": [self.registry.kill(target, running.record.user)]})
            elif emit is not None:  # streamed rows: counted as they go; KILL QUERY stops a waiting send
                def counted(piece: pa.Table) -> None:
                    sent[0] += piece.num_rows
                    running.record.result_rows = sent[0]
                    emit(piece, running.is_active)

                table = self.inner.execute(sql, parameters, context, running.record.user, running.is_active,
                                           emit=counted, tracked=running, **pinned)
            else:
                table = self.inner.execute(sql, parameters, context, running.record.user, running.is_active,
                                           tracked=running, **pinned)
            running.record.result_rows = sent[0] + table.num_rows
            return table

    def describe(self, sql: str, context: dict | None = None, user: str | None = None, *,
                 origin: CallOrigin | None = None, query_id: str | None = None, **options):
        """Preparing plans the statement (Flight SQL: CreatePreparedStatement, GetFlightInfo): it is
        registered while it plans, under the id its call announced or it chose (else a new one,
        shown in sys.queries), so KILL QUERY stops it; logged here only when planning fails (one
        that fails here never runs), else by its run."""
        try:
            if kill_target(sql) is not None:
                return StatementInfo(0, pa.schema([("result", pa.string())]))
        except Exception as exc:
            self.registry.log_failed("sql", sql, user, exc, origin)
            raise
        wanted = query_id or sql_query_id(sql, context)
        with self.registry.planning("sql", sql, user, wanted, origin) as running:
            return self.inner.describe(sql, context, running.record.user, stop=running.stop_if_killed, **options)

    # Flight SQL's catalog calls (GetCatalogs, GetDbSchemas, GetTables, GetTableTypes) read no
    # data: they are not queries, so they are not tracked.
    def catalogs(self) -> list[str]:
        return self.inner.catalogs()

    def db_schemas(self, catalog: str | None = None, schema_pattern: str | None = None) -> list[tuple[str, str]]:
        return self.inner.db_schemas(catalog, schema_pattern)

    def tables(self, catalog: str | None = None, schema_pattern: str | None = None, table_pattern: str | None = None,
               table_types=(), user: str | None = None):
        return self.inner.tables(catalog, schema_pattern, table_pattern, table_types, user)

    def table_types(self) -> list[str]:
        return self.inner.table_types()


class LoggedNative:
    def __init__(self, inner, registry) -> None:
        self.inner = inner
        self.registry = registry

    def execute(self, query, timeout_s: float, query_id: str | None = None, is_active=lambda: True, *,
                origin: CallOrigin | None = None):
        context = query.get("context") if isinstance(query, dict) else getattr(query, "context", None)
        wanted = query_id or (context.get("queryId") if isinstance(context, dict) else None)
        with self.registry.track("native", query_id=str(wanted) if wanted else None, is_active=is_active,
                                 origin=origin) as running:
            result = self.inner.execute(query, timeout_s, running.query_id, running.is_active, tracked=running)
            running.record.result_rows = result.table.num_rows
            return result

    def streams(self, query) -> bool:
        """Whether ``execute_stream`` takes the query (a scan of a datasource); a query that does
        not parse is not streamed, so ``execute`` reports what is wrong with it."""
        try:
            return bool(self.inner.streams(query_from_json(query) if isinstance(query, dict) else query))
        except Exception:  # noqa: BLE001 - refused by execute, with its message
            return False

    def execute_stream(self, query, timeout_s: float, emit, query_id: str | None = None, is_active=lambda: True, *,
                       origin: CallOrigin | None = None):
        """A scan's rows handed to ``emit`` as the historicals send them, tracked (KILL, the log) as
        ``execute`` is; rows counted as they go."""
        context = query.get("context") if isinstance(query, dict) else getattr(query, "context", None)
        wanted = query_id or (context.get("queryId") if isinstance(context, dict) else None)
        with self.registry.track("native", query_id=str(wanted) if wanted else None, is_active=is_active,
                                 origin=origin) as running:
            sent = [0]

            def counted(piece: pa.Table) -> None:
                sent[0] += piece.num_rows
                running.record.result_rows = sent[0]
                emit(piece, running.is_active)

            return self.inner.execute_stream(query, timeout_s, counted, running.query_id, running.is_active)

    def result_schema(self, query):
        """Planning only (GetFlightInfo's schema): nothing runs, so nothing is tracked."""
        return self.inner.result_schema(query)


__all__ = ["LoggedNative", "LoggedSql"]
