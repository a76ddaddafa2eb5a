"""Arrow Flight and Flight SQL on the broker (default port 8815), one server for both.

Plain Flight: a ticket, or a CMD descriptor for GetFlightInfo, holds one of
  - a native Druid query as JSON (starts with ``{``) -> ``run_native``;
  - ``{"sql": "...", "context": {...}, "parameters": [...]}`` -> the SqlBackend with that context;
  - anything else is SQL text (``SET key = value;`` prefixes allowed) -> the SqlBackend.
Flight SQL: commands packed in ``google.protobuf.Any`` (what the ADBC/JDBC drivers send):
statements, prepared statements with ``?`` parameters bound by DoPut, and the catalog calls.
Flight SQL has no per-call query context; clients put ``SET key = value;`` before the SQL.

GetFlightInfo runs the statement and keeps its result under a random ticket (see ResultCache), so
the schema it announces is exactly the schema DoGet streams; DoGet streams it in record batches of
at most 65,536 rows and a few MiB, whatever the client's message-size limit.

Errors keep strata's message and map to status codes clients understand: ValidationError ->
INVALID_ARGUMENT, UnsupportedError -> UNIMPLEMENTED, QueryTimeoutError -> DEADLINE_EXCEEDED,
PermissionError -> PERMISSION_DENIED, unknown statement/result handle -> NOT_FOUND, missing or bad
credentials -> UNAUTHENTICATED, anything else -> INTERNAL.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from common.errors import QueryTimeoutError, StrataError, UnsupportedError, ValidationError
from common.rpc.gen.arrow.flight import flight_session_pb2 as fsession
from common.rpc.gen.arrow.flight import flight_sql_pb2 as fsql
from services.broker.core.prepared_statements import PreparedStatement, PreparedStatements
from services.broker.core.result_cache import CachedResult, ResultCache
from services.broker.core.sql_backend import SqlBackend
from services.broker.flight_auth import (Authenticate, BasicAuthMiddlewareFactory, BearerTokens, CallIdentity,
                                         HeaderAuthHandler)
from services.broker.query_executor import Cancelled
from services.broker.query_origin import note_flight_call
from services.broker.flight_sql_metadata import (CATALOGS_SCHEMA, DB_SCHEMAS_SCHEMA, FOREIGN_KEYS_SCHEMA,
                                                 PRIMARY_KEYS_SCHEMA, SQL_INFO_SCHEMA, TABLE_TYPES_SCHEMA,
                                                 TABLES_SCHEMA, TABLES_WITH_SCHEMA_SCHEMA, catalogs_table,
                                                 db_schemas_table, sql_info_table, sql_info_values,
                                                 table_types_table, tables_table)

log = logging.getLogger(__name__)

MAX_BATCH_ROWS = 65_536
# Clients refuse messages over 16 MiB by default (the ADBC driver among them); wide rows are cut
# into batches well under that.
MAX_BATCH_BYTES = 8 << 20

_SQL_TYPE_URL = "type.googleapis.com/arrow.flight.protocol.sql."
_AUTH = "strata-auth"
_COMMANDS = {cls.DESCRIPTOR.name: cls for cls in (
    fsql.CommandStatementQuery, fsql.CommandPreparedStatementQuery, fsql.CommandGetSqlInfo,
    fsql.CommandGetCatalogs, fsql.CommandGetDbSchemas, fsql.CommandGetTables, fsql.CommandGetTableTypes,
    fsql.CommandGetPrimaryKeys, fsql.CommandGetExportedKeys, fsql.CommandGetImportedKeys,
    fsql.CommandStatementUpdate, fsql.CommandPreparedStatementUpdate, fsql.TicketStatementQuery)}
_ACTIONS = {
    "CreatePreparedStatement": "Prepare SQL (with ? parameters); returns a handle and the result schema.",
    "ClosePreparedStatement": "Free a prepared statement.",
    "CloseSession": "Close the caller's session: its prepared statements and bearer token.",
}
_READ_ONLY = ("strata SQL is read-only (SELECT only); load data through ingestion, not INSERT/UPDATE "
              "or Flight SQL bulk ingest")


class UnknownHandleError(StrataError, KeyError):
    """A prepared-statement or result handle the server does not (or no longer) know."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def flight_error(exc: BaseException) -> Exception:
    """The Flight/Arrow exception pyarrow turns into the right gRPC status, keeping the message."""
    if isinstance(exc, flight.FlightError):
        return exc
    message = str(exc)
    if isinstance(exc, UnknownHandleError):
        return pa.ArrowKeyError(message)
    if isinstance(exc, ValidationError):
        return pa.ArrowInvalid(message)
    if isinstance(exc, UnsupportedError):
        return pa.ArrowNotImplementedError(message)
    if isinstance(exc, QueryTimeoutError):
        return flight.FlightTimedOutError(message)
    if isinstance(exc, PermissionError):
        return flight.FlightUnauthorizedError(message)
    if isinstance(exc, Cancelled):  # KILL QUERY
        return flight.FlightCancelledError(message)
    log.error("Flight call failed", exc_info=exc)
    text = message if isinstance(exc, StrataError) else f"{type(exc).__name__}: {message}"
    return flight.FlightInternalError(f"{text} (internal error; the broker log has the details)")


def _rpc(method):
    """Map whatever a Flight method raises to its status. The error is raised outside the except
    block, with a fresh traceback and no chained cause: pyarrow appends the formatted traceback
    of Arrow errors to the status message, and the client should not read the server's stack."""

    @functools.wraps(method)
    def call(self, *args):
        try:
            return method(self, *args)
        except Exception as exc:  # noqa: BLE001 - every failure must become a status
            error = flight_error(exc)
        error.__cause__ = None
        error.__suppress_context__ = True
        raise error.with_traceback(None)

    return call


def _guarded(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same mapping for failures while a DoGet stream is being produced."""
    try:
        yield from batches
        return
    except Exception as exc:  # noqa: BLE001
        error = flight_error(exc)
    error.__cause__ = None
    error.__suppress_context__ = True
    raise error.with_traceback(None)


def _batch_stream(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> flight.RecordBatchStream:
    # A reader, not GeneratorStream: GeneratorStream cannot send dictionary-encoded columns.
    return flight.RecordBatchStream(pa.RecordBatchReader.from_batches(schema, _guarded(batches)))


def record_batches(table: pa.Table, max_rows: int = MAX_BATCH_ROWS,
                   max_bytes: int = MAX_BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """The table's rows as batches of at most ``max_rows`` rows and (unless one row alone is
    bigger) ``max_bytes`` bytes."""
    for batch in table.to_batches():
        yield from _split(batch, max_rows, max_bytes)


def _split(batch: pa.RecordBatch, max_rows: int, max_bytes: int) -> Iterator[pa.RecordBatch]:
    n = batch.num_rows
    if n == 0:
        return
    per_row = batch.nbytes / n
    step = min(max_rows, n)
    if per_row:
        step = max(1, min(step, int(max_bytes // per_row)))
    for start in range(0, n, step):
        piece = batch.slice(start, step)
        # Row widths vary (long strings): an over-budget slice is split again on its own average.
        if piece.num_rows > 1 and piece.nbytes > max_bytes:
            yield from _split(piece, max_rows, max_bytes)
        else:
            yield piece


def _strata_version() -> str:
    try:
        return importlib.metadata.version("strata")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def _pack(message: Message) -> bytes:
    wrapper = any_pb2.Any()
    wrapper.Pack(message)
    return wrapper.SerializeToString()


def _flight_sql_command(raw: bytes) -> Message | None:
    """The Flight SQL message packed in ``raw``, or None when ``raw`` is not one (native JSON or
    SQL text, which never parse as an Any of this package)."""
    if not raw.startswith(b"\n"):  # an Any starts with its type_url, field 1
        return None
    wrapper = any_pb2.Any()
    try:
        wrapper.ParseFromString(raw)
    except DecodeError:
        return None
    if not wrapper.type_url.startswith(_SQL_TYPE_URL):
        return None
    name = wrapper.type_url[len(_SQL_TYPE_URL):]
    cls = _COMMANDS.get(name)
    if cls is None:
        if name == "CommandStatementIngest":
            raise UnsupportedError(_READ_ONLY)
        raise UnsupportedError(f"Flight SQL command '{name}' is not supported by strata; supported: "
                               + ", ".join(sorted(_COMMANDS)))
    message = cls()
    if not wrapper.Unpack(message):
        raise ValidationError(f"could not decode Flight SQL command '{name}'")
    return message


def _unpack_action(body: bytes, cls: type[Message]) -> Message:
    wrapper = any_pb2.Any()
    message = cls()
    try:
        wrapper.ParseFromString(body)
    except DecodeError:
        wrapper = None
    if wrapper is None or not wrapper.Unpack(message):
        raise ValidationError(f"action body must be a google.protobuf.Any holding "
                              f"arrow.flight.protocol.sql.{cls.DESCRIPTOR.name}")
    return message


def _parameter_rows(params: pa.Table) -> list[tuple]:
    if params.num_columns == 0:
        return []
    columns = [column.to_pylist() for column in params.columns]
    return list(zip(*columns))


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    if table.schema.equals(schema):
        return table
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise StrataError(f"the re-run result no longer matches the schema announced by GetFlightInfo "
                          f"({exc}); call GetFlightInfo again") from None


def _no_transaction(message: Message) -> None:
    if message.HasField("transaction_id"):
        raise UnsupportedError("strata has no transactions; send the statement without a transaction id")


class BrokerFlightServer(flight.FlightServerBase):
    """Flight + Flight SQL front end of the broker.

    ``run_native(query: dict) -> pa.Table`` runs native queries; ``sql_backend`` (a SqlBackend)
    runs SQL and answers catalog calls; either may be None, and requests needing the missing one
    fail with UNIMPLEMENTED. ``auth`` is ``authenticate(user, password) -> bool``; None lets
    everyone in as user None. Other keyword arguments go to ``pyarrow.flight.FlightServerBase``.
    """

    def __init__(self, location: str, run_native: Callable[[dict], pa.Table] | None = None,
                 sql_backend: SqlBackend | None = None, auth: Authenticate | None = None, *,
                 server_version: str | None = None, result_cache_bytes: int = 512 << 20,
                 result_ttl_s: float = 300.0, statement_idle_timeout_s: float = 1800.0,
                 token_ttl_s: float = 3600.0, **kwargs) -> None:
        self.tokens = BearerTokens(token_ttl_s)
        middleware = dict(kwargs.pop("middleware", None) or {})
        middleware[_AUTH] = BasicAuthMiddlewareFactory(auth, self.tokens)
        kwargs.setdefault("auth_handler", HeaderAuthHandler())
        super().__init__(location, middleware=middleware, **kwargs)
        self._run_native = run_native
        self._backend = sql_backend
        self.results = ResultCache(max_bytes=result_cache_bytes, ttl_s=result_ttl_s)
        self.statements = PreparedStatements(idle_timeout_s=statement_idle_timeout_s)
        self._sql_info = sql_info_values(server_version or _strata_version(),
                                         int(statement_idle_timeout_s * 1000))

    # ---- Flight RPCs ----

    @_rpc
    def get_flight_info(self, context, descriptor):
        who = self._caller(context)
        command = self._command(descriptor)
        if command is None:
            table, rerun = self._run_plain(descriptor.command, who)
        else:
            table, rerun = self._run_command(command, who)
        handle = self.results.put(table, rerun, who.user)
        ticket = _pack(fsql.TicketStatementQuery(statement_handle=handle))
        return flight.FlightInfo(table.schema, descriptor, [flight.FlightEndpoint(ticket, [])],
                                 table.num_rows, table.nbytes)

    @_rpc
    def get_schema(self, context, descriptor):
        who = self._caller(context)
        command = self._command(descriptor)
        if command is None:
            schema = self._plain_schema(descriptor.command, who)
        else:
            schema = self._command_schema(command, who)
        return flight.SchemaResult(schema)

    @_rpc
    def do_get(self, context, ticket):
        who = self._caller(context)
        command = _flight_sql_command(ticket.ticket)
        if command is None:
            table, _ = self._run_plain(ticket.ticket, who)
            return _batch_stream(table.schema, record_batches(table))
        if not isinstance(command, fsql.TicketStatementQuery):
            raise ValidationError(f"a DoGet ticket must be the TicketStatementQuery from GetFlightInfo, "
                                  f"not {command.DESCRIPTOR.name}")
        handle = command.statement_handle
        entry = self.results.get(handle)
        if entry is None:
            raise UnknownHandleError(
                f"result ticket unknown or expired: results are kept {self.results.ttl_s:g} s and for one "
                f"DoGet; call GetFlightInfo again")
        if entry.user != who.user:
            raise PermissionError("this result ticket was issued to another user")
        return _batch_stream(entry.schema, self._stream(handle, entry))

    @_rpc
    def do_put(self, context, descriptor, reader, writer):
        who = self._caller(context)
        command = self._command(descriptor)
        if isinstance(command, (fsql.CommandStatementUpdate, fsql.CommandPreparedStatementUpdate)):
            raise UnsupportedError(_READ_ONLY)
        if not isinstance(command, fsql.CommandPreparedStatementQuery):
            raise UnsupportedError("DoPut only binds '?' parameters to a Flight SQL prepared statement "
                                   "(descriptor: CommandPreparedStatementQuery)")
        stmt = self._statement(command.prepared_statement_handle, who)
        rows = _parameter_rows(reader.read_all())
        width = len(rows[0]) if rows else 0
        if rows and width != stmt.parameter_count:
            raise ValidationError(f"the statement has {stmt.parameter_count} '?' parameter(s) but "
                                  f"{width} value(s) were bound per row")
        stmt.parameters = rows
        result = fsql.DoPutPreparedStatementResult(prepared_statement_handle=stmt.handle)
        writer.write(pa.py_buffer(result.SerializeToString()))

    @_rpc
    def do_action(self, context, action):
        who = self._caller(context)
        body = action.body.to_pybytes() if action.body is not None else b""
        if action.type == "CreatePreparedStatement":
            request = _unpack_action(body, fsql.ActionCreatePreparedStatementRequest)
            return [flight.Result(_pack(self._prepare(request, who)))]
        if action.type == "ClosePreparedStatement":
            request = _unpack_action(body, fsql.ActionClosePreparedStatementRequest)
            # Closing is idempotent: a statement that already timed out is as closed as can be.
            self.statements.close(request.prepared_statement_handle)
            return []
        if action.type == "CloseSession":
            if who.token is not None:
                self.statements.close_session(who.token)
                self.tokens.revoke(who.token)
            result = fsession.CloseSessionResult(status=fsession.CloseSessionResult.CLOSED)
            return [flight.Result(result.SerializeToString())]
        raise UnsupportedError(f"unknown action '{action.type}'; strata supports: {', '.join(_ACTIONS)}")

    def list_actions(self, context):
        return [flight.ActionType(kind, doc) for kind, doc in _ACTIONS.items()]

    # ---- requests ----

    def _caller(self, context) -> CallIdentity:
        who = context.get_middleware(_AUTH)
        who = who if who is not None else CallIdentity(None, None, False)
        note_flight_call(context, who.user)  # query log: the caller's address, and the query id header
        return who

    def _command(self, descriptor) -> Message | None:
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            raise ValidationError("use a command (CMD) descriptor holding SQL text, a native JSON query "
                                  "or a Flight SQL command; path descriptors are not served")
        return _flight_sql_command(descriptor.command)

    def _sql(self) -> SqlBackend:
        if self._backend is None:
            raise UnsupportedError("this Flight server has no SQL backend; send native JSON queries")
        return self._backend

    def _native(self) -> Callable[[dict], pa.Table]:
        if self._run_native is None:
            raise UnsupportedError("this Flight server does not run native queries; send SQL")
        return self._run_native

    def _plain_request(self, payload: bytes, who: CallIdentity) -> Callable[[], pa.Table]:
        """What a plain-Flight command or ticket asks for, as a call that runs it."""
        if payload.lstrip()[:1] == b"{":
            try:
                doc = json.loads(payload)
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValidationError(f"the command starts with '{{' but is not valid JSON: {exc}") from None
            if isinstance(doc, dict) and "sql" in doc and "queryType" not in doc:
                sql, parameters, query_context = _envelope(doc)
                return lambda: self._sql().execute(sql, parameters=parameters, context=query_context, user=who.user)
            native = self._native()
            return lambda: native(doc)
        try:
            sql = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError("the command is neither a Flight SQL command, a native JSON query "
                                  "nor UTF-8 SQL text") from None
        if not sql.strip():
            raise ValidationError("empty command: send SQL text, a native JSON query or a Flight SQL command")
        return lambda: self._sql().execute(sql, parameters=(), context=None, user=who.user)

    def _run_plain(self, payload: bytes, who: CallIdentity) -> tuple[pa.Table, Callable[[], pa.Table]]:
        run = self._plain_request(payload, who)
        return run(), run

    def _plain_schema(self, payload: bytes, who: CallIdentity) -> pa.Schema:
        if payload.lstrip()[:1] == b"{":
            return self._run_plain(payload, who)[0].schema  # native queries are only known by running
        return self._described(payload.decode("utf-8", errors="replace"), who)

    def _described(self, sql: str, who: CallIdentity) -> pa.Schema:
        info = self._sql().describe(sql, context=None, user=who.user)
        if info.dataset_schema is None:
            raise ValidationError("the result schema depends on parameter values; prepare the statement, "
                                  "bind its '?' parameters, then ask again")
        return info.dataset_schema

    def _run_command(self, command: Message, who: CallIdentity) -> tuple[pa.Table, Callable[[], pa.Table] | None]:
        if isinstance(command, fsql.CommandStatementQuery):
            _no_transaction(command)
            sql = command.query

            def run() -> pa.Table:
                return self._sql().execute(sql, parameters=(), context=None, user=who.user)
            return run(), run
        if isinstance(command, fsql.CommandPreparedStatementQuery):
            stmt = self._statement(command.prepared_statement_handle, who)
            if stmt.parameter_count and not stmt.parameters:
                raise ValidationError(f"the statement has {stmt.parameter_count} '?' parameter(s) and none "
                                      "are bound; bind values (DoPut) before executing")
            sql, rows = stmt.sql, list(stmt.parameters) or [()]

            def run_prepared() -> pa.Table:
                return self._execute_rows(sql, rows, who.user)
            return run_prepared(), run_prepared
        return self._metadata(command, who), None

    def _metadata(self, command: Message, who: CallIdentity) -> pa.Table:
        def opt(field: str) -> str | None:
            return getattr(command, field) if command.HasField(field) else None

        if isinstance(command, fsql.CommandGetSqlInfo):
            return sql_info_table(self._sql_info, list(command.info))
        if isinstance(command, fsql.CommandGetCatalogs):
            return catalogs_table(self._sql().catalogs())
        if isinstance(command, fsql.CommandGetDbSchemas):
            return db_schemas_table(self._sql().db_schemas(opt("catalog"), opt("db_schema_filter_pattern")))
        if isinstance(command, fsql.CommandGetTables):
            found = self._sql().tables(opt("catalog"), opt("db_schema_filter_pattern"),
                                       opt("table_name_filter_pattern"), list(command.table_types), user=who.user)
            return tables_table(found, command.include_schema)
        if isinstance(command, fsql.CommandGetTableTypes):
            return table_types_table(self._sql().table_types())
        if isinstance(command, fsql.CommandGetPrimaryKeys):
            return PRIMARY_KEYS_SCHEMA.empty_table()
        if isinstance(command, (fsql.CommandGetExportedKeys, fsql.CommandGetImportedKeys)):
            return FOREIGN_KEYS_SCHEMA.empty_table()
        if isinstance(command, (fsql.CommandStatementUpdate, fsql.CommandPreparedStatementUpdate)):
            raise UnsupportedError(_READ_ONLY)
        raise ValidationError(f"{command.DESCRIPTOR.name} is not a command GetFlightInfo answers")

    def _command_schema(self, command: Message, who: CallIdentity) -> pa.Schema:
        fixed = {fsql.CommandGetSqlInfo: SQL_INFO_SCHEMA, fsql.CommandGetCatalogs: CATALOGS_SCHEMA,
                 fsql.CommandGetDbSchemas: DB_SCHEMAS_SCHEMA, fsql.CommandGetTableTypes: TABLE_TYPES_SCHEMA,
                 fsql.CommandGetPrimaryKeys: PRIMARY_KEYS_SCHEMA, fsql.CommandGetExportedKeys: FOREIGN_KEYS_SCHEMA,
                 fsql.CommandGetImportedKeys: FOREIGN_KEYS_SCHEMA}
        if type(command) in fixed:
            return fixed[type(command)]
        if isinstance(command, fsql.CommandGetTables):
            return TABLES_WITH_SCHEMA_SCHEMA if command.include_schema else TABLES_SCHEMA
        if isinstance(command, fsql.CommandStatementQuery):
            _no_transaction(command)
            return self._described(command.query, who)
        if isinstance(command, fsql.CommandPreparedStatementQuery):
            stmt = self._statement(command.prepared_statement_handle, who)
            if stmt.dataset_schema is not None and not stmt.parameters:
                return stmt.dataset_schema
            return self._run_command(command, who)[0].schema  # bound values decide: run to know
        raise ValidationError(f"GetSchema does not describe {command.DESCRIPTOR.name}")

    def _statement(self, handle: bytes, who: CallIdentity) -> PreparedStatement:
        stmt = self.statements.get(handle)
        if stmt is None:
            raise UnknownHandleError(
                f"prepared statement handle unknown, closed or idle longer than "
                f"{self.statements.idle_timeout_s:g} s; prepare the statement again")
        if stmt.user != who.user:
            raise PermissionError("this prepared statement belongs to another user")
        return stmt

    def _prepare(self, request, who: CallIdentity) -> fsql.ActionCreatePreparedStatementResult:
        _no_transaction(request)
        info = self._sql().describe(request.query, context=None, user=who.user)
        stmt = self.statements.create(request.query, who.user, who.token, info.parameter_count,
                                      info.dataset_schema)
        result = fsql.ActionCreatePreparedStatementResult(prepared_statement_handle=stmt.handle)
        if info.dataset_schema is not None:
            result.dataset_schema = info.dataset_schema.serialize().to_pybytes()
        if info.parameter_count:
            # Types are unknown until values arrive: null-typed fields say "any", per ADBC.
            params = pa.schema([pa.field(str(i), pa.null()) for i in range(info.parameter_count)])
            result.parameter_schema = params.serialize().to_pybytes()
        return result

    def _execute_rows(self, sql: str, rows: Sequence[tuple], user: str | None) -> pa.Table:
        """One execution per bound parameter row, concatenated (the rows run as one statement)."""
        tables = [self._sql().execute(sql, parameters=row, context=None, user=user) for row in rows]
        if len(tables) == 1:
            return tables[0]
        first = tables[0].schema
        for i, table in enumerate(tables[1:], start=2):
            if not table.schema.equals(first):
                raise ValidationError(f"parameter row {i} gives result columns {table.schema.types} but row 1 "
                                      f"gave {first.types}; bind rows whose results share one schema")
        return pa.concat_tables(tables)

    def _stream(self, handle: bytes, entry: CachedResult) -> Iterator[pa.RecordBatch]:
        try:
            table = entry.table
            if table is None:
                table = _conform(entry.rerun(), entry.schema)
            yield from record_batches(table)
        finally:
            # The ticket is spent once its stream ends, however it ends.
            self.results.discard(handle)


def _envelope(doc: dict) -> tuple[str, list, dict | None]:
    unknown = sorted(set(doc) - {"sql", "context", "parameters"})
    if unknown:
        raise ValidationError(f"unknown key(s) {unknown} in the SQL envelope; allowed: sql, context, parameters")
    sql, context, parameters = doc.get("sql"), doc.get("context"), doc.get("parameters")
    if not isinstance(sql, str) or not sql.strip():
        raise ValidationError("'sql' in the SQL envelope must be a non-empty string")
    if context is not None and not isinstance(context, dict):
        raise ValidationError("'context' in the SQL envelope must be an object of query context keys")
    if parameters is not None and not isinstance(parameters, list):
        raise ValidationError("'parameters' in the SQL envelope must be a list of values for the '?' markers")
    return sql, list(parameters or []), context
