"""Arrow Flight and Flight SQL on the broker (default port 8815), one server for both.

Plain Flight: a ticket, or a CMD descriptor for GetFlightInfo, holds one of
  - a native Druid query as JSON (starts with ``{``);
  - ``{"sql": "...", "context": {...}, "parameters": [...]}``: SQL with that context;
  - anything else is SQL text (``SET key = value;`` prefixes allowed).
Flight SQL: commands packed in ``google.protobuf.Any`` (what the ADBC/JDBC drivers send):
statements, prepared statements with ``?`` parameters bound by DoPut, and the catalog calls.
Flight SQL has no per-call query context; clients put ``SET key = value;`` before the SQL.

GetFlightInfo plans (through the QueryFrontDoor, shared with the gRPC BrokerService): the
FlightInfo carries the plan's result schema and a ticket naming what was planned (FlightTickets).
DoGet runs the query through the front door and streams the result in record batches of at most
65,536 rows and a few MiB, whatever the client's message-size limit. Two exceptions:
statements with effects (DDL, INSERT/REPLACE) run at GetFlightInfo, because drivers fetch in the
background and a client's next statement must see them done; and a read query whose result is
not streamed is started at GetFlightInfo on a small bounded pool (``prefetch_workers``; see
core/result_prefetch), so the historicals work while the FlightInfo travels to the client and its
DoGet comes back. DoGet then waits for that run and raises or sends what it gave, as if it had
run it; the prefetched result holds one of the caller's stream slots (flight_limits), and a
ticket dropped unfetched stops its query. When the pool or the caller's slots are full, the query
runs in DoGet as before.

Errors are classified by the front door (``query_errors``) and sent with clean messages
(``flight_errors``): user errors as INVALID_ARGUMENT (NOT_FOUND for unknown handles and catalog
tables, UNIMPLEMENTED for what strata does not do, DEADLINE_EXCEEDED, PERMISSION_DENIED,
UNAUTHENTICATED), anything else as INTERNAL with an error id the broker log also has.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import threading
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from common.errors import UnsupportedError, ValidationError
from common.json.json_text import loads_json
from common.sql.statement_kind import classify
from services.rpc.gen.arrow.flight import flight_session_pb2 as fsession
from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql
from services.broker.call_liveness import CallLiveness
from services.broker.core.call_origin import CallOrigin
from services.broker.core.flight_tickets import FlightTicket, FlightTickets
from services.broker.core.result_prefetch import Prefetch, Prefetcher
from services.broker.core.prepared_statements import PreparedStatement, PreparedStatements
from services.broker.core.sql_backend import SqlBackend
from services.broker.flight_auth import (Authenticate, BasicAuthMiddlewareFactory, BearerTokens, CallIdentity,
                                         HeaderAuthHandler)
from services.broker.query_origin import MIDDLEWARE_KEY, announce_flight_query, flight_origin
from services.broker.flight_sql_metadata import (CATALOGS_SCHEMA, DB_SCHEMAS_SCHEMA, FOREIGN_KEYS_SCHEMA,
                                                 PRIMARY_KEYS_SCHEMA, SQL_INFO_SCHEMA, TABLE_TYPES_SCHEMA,
                                                 TABLES_SCHEMA, TABLES_WITH_SCHEMA_SCHEMA, catalogs_table,
                                                 db_schemas_table, sql_info_table, sql_info_values,
                                                 table_types_table, tables_table)
from services.broker.flight_errors import to_flight_exception
from services.broker.flight_limits import StreamSlots, check_size, read_bounded, stream_owner
from services.broker.front_door import QueryFrontDoor, QueryRequest
from services.query_errors import UnknownHandleError

log = logging.getLogger(__name__)

MAX_BATCH_ROWS = 65_536
# Clients refuse messages over 16 MiB by default (the ADBC driver among them); wide rows are cut
# into batches well under that.
MAX_BATCH_BYTES = 8 << 20
# DoGet waits for a prefetched run at most the query's timeout plus this (the run enforces the
# timeout itself; this is only a backstop).
PREFETCH_GRACE_S = 30.0

_SQL_TYPE_URL = "type.googleapis.com/arrow.flight.protocol.sql."
# One middleware answers both: who calls (flight_auth) and the query id header (query_origin).
_AUTH = MIDDLEWARE_KEY
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


def _rpc(method):
    """Whatever a Flight method raises leaves as its clean status (see flight_errors)."""

    @functools.wraps(method)
    def call(self, *args):
        try:
            return method(self, *args)
        except Exception as exc:  # noqa: BLE001 - every failure must become a status
            raise to_flight_exception(exc) from None

    return call


def _guarded(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same mapping for failures while a DoGet stream is being produced."""
    try:
        yield from batches
    except Exception as exc:  # noqa: BLE001
        raise to_flight_exception(exc) from None


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
    try:
        unpacked = wrapper.Unpack(message)
    except (DecodeError, ValueError):  # the right type_url around bytes that are not that message
        unpacked = False
    if not unpacked:
        raise ValidationError(f"could not decode Flight SQL command '{name}': its bytes are not a "
                              f"arrow.flight.protocol.sql.{name}")
    return message


# Parsed GetFlightInfo commands by their bytes: a client re-running a statement (a dashboard, a
# driver executing a prepared statement again) sends the same bytes each time. Only statements
# are kept, never errors; the messages are only read.
_PARSED: dict[bytes, Message] = {}
_PARSED_MAX = 1024
_PARSED_MAX_BYTES = 64 << 10
_KEPT_COMMANDS = (fsql.CommandStatementQuery, fsql.CommandPreparedStatementQuery)


def _descriptor_command(raw: bytes) -> Message | None:
    """``_flight_sql_command`` for a GetFlightInfo/GetSchema command, remembered per bytes."""
    command = _PARSED.get(raw)
    if command is not None:
        return command
    command = _flight_sql_command(raw)
    if isinstance(command, _KEPT_COMMANDS) and len(raw) <= _PARSED_MAX_BYTES:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[raw] = command
    return command


# The tickets GetFlightInfo hands out: an Any holding a TicketStatementQuery with a 16-byte
# handle. Bytes of exactly that layout are read without protobuf (the handle is the last 16).
_HANDLE_BYTES = 16
_TICKET_PREFIX = None  # set below, once _pack is defined


def _ticket_bytes(handle: bytes) -> bytes:
    """``_pack(TicketStatementQuery(statement_handle=handle))``, for the handles tickets have."""
    if len(handle) == _HANDLE_BYTES:
        return _TICKET_PREFIX + handle
    return _pack(fsql.TicketStatementQuery(statement_handle=handle))


def _ticket_command(raw: bytes) -> Message | None:
    """``_flight_sql_command`` for a DoGet ticket, without protobuf for the broker's own tickets."""
    if len(raw) == len(_TICKET_PREFIX) + _HANDLE_BYTES and raw.startswith(_TICKET_PREFIX):
        return fsql.TicketStatementQuery(statement_handle=raw[-_HANDLE_BYTES:])
    return _flight_sql_command(raw)


def _unpack_action(body: bytes, cls: type[Message]) -> Message:
    wrapper = any_pb2.Any()
    message = cls()
    try:
        wrapper.ParseFromString(body)
        unpacked = wrapper.Unpack(message)
    except (DecodeError, ValueError):
        unpacked = False
    if not unpacked:
        raise ValidationError(f"action body must be a google.protobuf.Any holding "
                              f"arrow.flight.protocol.sql.{cls.DESCRIPTOR.name}")
    return message


_TICKET_PREFIX = _pack(fsql.TicketStatementQuery(statement_handle=bytes(_HANDLE_BYTES)))[:-_HANDLE_BYTES]


def _parameter_rows(params: pa.Table) -> list[tuple]:
    if params.num_columns == 0:
        return []
    columns = [column.to_pylist() for column in params.columns]
    return list(zip(*columns))


def _no_transaction(message: Message) -> None:
    if message.HasField("transaction_id"):
        raise UnsupportedError("strata has no transactions; send the statement without a transaction id")


class BrokerFlightServer(flight.FlightServerBase):
    """Flight + Flight SQL front end of the broker.

    ``front_door`` (a QueryFrontDoor) plans and runs every statement and native query; its SQL
    backend also answers the catalog calls. ``auth`` is ``authenticate(user, password) -> bool``;
    None lets everyone in as user None. ``prefetch_workers``: how many read queries may run ahead of
    their DoGet at once (0: none, every query runs in DoGet). Other keyword arguments go to
    ``pyarrow.flight.FlightServerBase``.
    """

    def __init__(self, location: str, front_door: QueryFrontDoor, auth: Authenticate | None = None, *,
                 server_version: str | None = None, ticket_ttl_s: float = 300.0,
                 statement_idle_timeout_s: float = 1800.0, token_ttl_s: float = 3600.0,
                 prefetch_workers: int = 0, **kwargs) -> None:
        self.tokens = BearerTokens(token_ttl_s)
        middleware = dict(kwargs.pop("middleware", None) or {})
        middleware[_AUTH] = BasicAuthMiddlewareFactory(auth, self.tokens)  # also sends the query id header
        kwargs.setdefault("auth_handler", HeaderAuthHandler())
        super().__init__(location, middleware=middleware, **kwargs)
        self.front_door = front_door
        self.tickets = FlightTickets(ttl_s=ticket_ttl_s, on_drop=_drop_ticket)
        self.statements = PreparedStatements(idle_timeout_s=statement_idle_timeout_s)
        self.streams = StreamSlots()  # open DoGet results per caller (flight_limits)
        self.prefetcher = Prefetcher(prefetch_workers)
        # (user, id) of prefetched runs not yet over: a second ticket of the user with the same
        # client-chosen id runs in its DoGet, as without prefetch (two runs at once under one id
        # would be refused). Per user, as the query registry keeps ids: others' ids change nothing.
        self._prefetch_ids: set[tuple[str | None, str]] = set()
        self._prefetch_ids_lock = threading.Lock()
        self._sql_info = sql_info_values(server_version or _strata_version(),
                                         int(statement_idle_timeout_s * 1000))

    # ---- Flight RPCs ----

    def shutdown(self):
        super().shutdown()
        self.tickets.clear()  # unfetched prefetches stop
        self.prefetcher.shutdown()

    @_rpc
    def get_flight_info(self, context, descriptor):
        """Plan: the FlightInfo's schema is the plan's; DoGet runs it (or collects its prefetch)."""
        with CallLiveness(context) as is_active:  # the context is not asked once this returns
            return self._get_flight_info(context, descriptor, is_active)

    def _get_flight_info(self, context, descriptor, is_active: CallLiveness):
        who = self._caller(context)
        request = self._request(descriptor, who, flight_origin(context, who.user, who))
        if isinstance(request, QueryRequest):
            # The id, sent back now: the statement is registered under it while it plans (KILL
            # QUERY finds it), one with effects runs under it here, and DoGet runs the rest under it.
            request = announce_flight_query(context, request, who)
        if isinstance(request, QueryRequest) and _has_effects(request):
            # CREATE/ALTER/DROP TABLE, INSERT/REPLACE run now: a client's execute() returns once
            # they are done (drivers fetch the stream in the background); their one-row answer
            # waits under the ticket.
            table = self.front_door.run(request, is_active).table
            handle = self.tickets.put(table, table.schema, who.user)
            ticket = _pack(fsql.TicketStatementQuery(statement_handle=handle))
            return flight.FlightInfo(table.schema, descriptor, [flight.FlightEndpoint(ticket, [])],
                                     table.num_rows, table.nbytes)
        if isinstance(request, QueryRequest):
            schema, request = self._planned(request)  # DoGet runs the plan described here
            # Kept for DoGet (or run ahead by a prefetch) without this call's reply: DoGet's answers.
            request = request.with_origin(request.origin.without_reply())
        else:
            schema = self._command_schema(request)
        prefetch = self._prefetch(context, request, schema, who) if isinstance(request, QueryRequest) else None
        handle = self.tickets.put(request, schema, who.user, prefetch)
        return flight.FlightInfo(schema, descriptor, [flight.FlightEndpoint(_ticket_bytes(handle), [])], -1, -1)

    @_rpc
    def get_schema(self, context, descriptor):
        who = self._caller(context)
        return flight.SchemaResult(self._schema(self._request(descriptor, who, flight_origin(context, who.user, who)),
                                                who))

    @_rpc
    def do_get(self, context, ticket):
        # The context is not asked once this returns: the stream is sent after, and a client gone
        # mid-stream ends its reader instead (see call_liveness).
        with CallLiveness(context) as is_active:
            return self._do_get(context, ticket, is_active)

    def _do_get(self, context, ticket, is_active: CallLiveness):
        who = self._caller(context)
        check_size(ticket.ticket, "DoGet ticket")
        owner = stream_owner(context, who.user)
        try:  # parsed once: the prefetch check below and the statement both need it
            command, bad_ticket = _ticket_command(ticket.ticket), None
        except Exception as exc:  # noqa: BLE001 - a bad ticket is reported after the stream limit, as before
            command, bad_ticket = None, exc
        # A prefetch already holds its slot (there are none when prefetch is off).
        if not (self.prefetcher.enabled and self._prefetched_for(command, owner, who)):
            self.streams.check(owner)  # a caller with too many unread results is refused before it runs
        if bad_ticket is not None:
            raise bad_ticket
        origin = flight_origin(context, who.user, who)
        if command is None:  # plain Flight: the ticket itself is the statement
            request = self._plain_request(ticket.ticket, who, origin)
            result = self.front_door.run(request, is_active)
            return _batch_stream(result.table.schema, self.streams.hold(owner, record_batches(result.table)))
        if not isinstance(command, fsql.TicketStatementQuery):
            raise ValidationError(f"a DoGet ticket must be the TicketStatementQuery from GetFlightInfo, "
                                  f"not {command.DESCRIPTOR.name}")
        entry = self.tickets.take_for(command.statement_handle, who.user)  # only its user's DoGet spends it
        if entry is None:
            raise UnknownHandleError(f"result ticket unknown, expired or already fetched: a ticket serves one DoGet "
                                     f"within {self.tickets.ttl_s:g} s; call GetFlightInfo again")
        if entry.user != who.user:
            raise PermissionError("this result ticket was issued to another user")
        if isinstance(entry.request, QueryRequest):
            who.query_id = entry.request.query_id  # this call answers with the id GetFlightInfo announced
            if entry.prefetch is not None:
                return self._collect(entry, is_active, owner)
            request = entry.request.with_origin(origin)  # run (and logged) as this call's
            # An unordered scan streams: rows go out as historicals send them (front_door.stream).
            streamed = self.front_door.stream(request, expected_schema=entry.schema, is_active=is_active)
            if streamed is not None:
                return _batch_stream(entry.schema, (piece for batch in streamed
                                                    for piece in _split(batch, MAX_BATCH_ROWS, MAX_BATCH_BYTES)))
            table = self.front_door.run(request, is_active, expected_schema=entry.schema).table
        elif isinstance(entry.request, pa.Table):  # a statement with effects, already run
            table = entry.request
        else:
            table = self._metadata(entry.request, who)
        return _batch_stream(entry.schema, self.streams.hold(owner, record_batches(table)))

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
        rows = _parameter_rows(read_bounded(reader))
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
        check_size(body, "DoAction body")
        if action.type == "CreatePreparedStatement":
            request = _unpack_action(body, fsql.ActionCreatePreparedStatementRequest)
            return [flight.Result(_pack(self._prepare(request, who, flight_origin(context, who.user, who))))]
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

    # ---- prefetch ----

    def _prefetch(self, context, request: QueryRequest, schema: pa.Schema, who: CallIdentity) -> Prefetch | None:
        """Start a read query now, ahead of its DoGet; None when it runs in DoGet instead: prefetch
        off or its pool full, a statement with effects (ran already), a result DoGet streams, or
        the caller without a free stream slot."""
        if not self.prefetcher.enabled or self.front_door.streams(request):
            return None
        owner = stream_owner(context, who.user)
        with self._prefetch_ids_lock:
            if (request.user, request.query_id) in self._prefetch_ids:
                return None
            self._prefetch_ids.add((request.user, request.query_id))
        if not self.streams.try_acquire(owner):
            self._prefetch_ids.discard((request.user, request.query_id))
            return None
        prefetch = Prefetch(owner, functools.partial(self.streams.release, owner))

        def run(is_active):
            # Logged as this call's (its caller, the id GetFlightInfo announced, on ``request``);
            # the DoGet that collects it answers with the id.
            return self._run_prefetched(request, schema, is_active)

        if not self.prefetcher.start(prefetch, run):
            prefetch.release_slot()
            self._prefetch_ids.discard((request.user, request.query_id))
            return None
        return prefetch

    def _run_prefetched(self, request: QueryRequest, schema: pa.Schema, is_active):
        try:
            return self.front_door.run(request, is_active, expected_schema=schema)
        finally:
            with self._prefetch_ids_lock:
                self._prefetch_ids.discard((request.user, request.query_id))

    def _prefetched_for(self, command: Message | None, owner: str, who: CallIdentity) -> bool:
        """Whether the ticket's parsed ``command`` names a prefetch holding ``owner``'s slot."""
        if not isinstance(command, fsql.TicketStatementQuery):
            return False
        entry = self.tickets.get(command.statement_handle)
        return (entry is not None and entry.prefetch is not None and entry.user == who.user
                and entry.prefetch.owner == owner)

    def _collect(self, entry: FlightTicket, is_active: CallLiveness, owner: str) -> flight.RecordBatchStream:
        """DoGet of a prefetched query: its outcome, raised or streamed as DoGet's own run's."""
        prefetch = entry.prefetch
        timeout_s = entry.request.timeout_s if entry.request.timeout_s is not None else self.front_door.default_timeout_s
        try:
            result = prefetch.wait(is_active, timeout_s + PREFETCH_GRACE_S)
        except BaseException:
            prefetch.release_slot()
            raise
        batches = record_batches(result.table)
        if prefetch.owner == owner and prefetch.hand_over():
            return _batch_stream(entry.schema, self.streams.adopt(owner, batches))
        prefetch.release_slot()  # fetched by another connection (anonymous callers count per connection)
        return _batch_stream(entry.schema, self.streams.hold(owner, batches))

    # ---- requests ----

    def _caller(self, context) -> CallIdentity:
        """Who calls, and the middleware that sends the query id header (a stand-in that sends
        nothing when the server runs without it)."""
        who = context.get_middleware(_AUTH)
        return CallIdentity(None, None, False) if who is None else who

    def _command(self, descriptor) -> Message | None:
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            raise ValidationError("use a command (CMD) descriptor holding SQL text, a native JSON query "
                                  "or a Flight SQL command; path descriptors are not served")
        raw = descriptor.command
        check_size(raw, "command")
        return _descriptor_command(raw)

    def _sql(self) -> SqlBackend:
        if self.front_door.sql is None:
            raise UnsupportedError("this Flight server has no SQL backend; send native JSON queries")
        return self.front_door.sql

    def _request(self, descriptor, who: CallIdentity, origin: CallOrigin) -> QueryRequest | Message:
        """What a descriptor asks for: a query for the front door, or a Flight SQL catalog command."""
        command = self._command(descriptor)
        if command is None:
            return self._plain_request(descriptor.command, who, origin)
        if isinstance(command, fsql.CommandStatementQuery):
            _no_transaction(command)
            return QueryRequest(who.user, sql=command.query, origin=origin)
        if isinstance(command, fsql.CommandPreparedStatementQuery):
            stmt = self._statement(command.prepared_statement_handle, who)
            if stmt.parameter_count and not stmt.parameters:
                raise ValidationError(f"the statement has {stmt.parameter_count} '?' parameter(s) and none "
                                      "are bound; bind values (DoPut) before executing")
            return QueryRequest(who.user, sql=stmt.sql, parameter_rows=tuple(tuple(r) for r in stmt.parameters),
                                origin=origin)
        if isinstance(command, (fsql.CommandStatementUpdate, fsql.CommandPreparedStatementUpdate)):
            raise UnsupportedError(_READ_ONLY)
        if isinstance(command, fsql.TicketStatementQuery):
            raise ValidationError("TicketStatementQuery is a DoGet ticket, not a GetFlightInfo command")
        return command

    def _plain_request(self, payload: bytes, who: CallIdentity, origin: CallOrigin) -> QueryRequest:
        """A plain-Flight command or ticket: native JSON, the SQL JSON envelope, or SQL text."""
        if payload.lstrip()[:1] == b"{":
            doc = loads_json(payload, "command (it starts with '{' but is not a JSON query)")
            if isinstance(doc, dict) and "sql" in doc and "queryType" not in doc:
                sql, parameters, query_context = _envelope(doc)
                return QueryRequest(who.user, sql=sql, parameter_rows=(tuple(parameters),) if parameters else (),
                                    context=query_context, origin=origin)
            return QueryRequest(who.user, native=doc, origin=origin)
        try:
            sql = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError("the command is neither a Flight SQL command, a native JSON query "
                                  "nor UTF-8 SQL text") from None
        if not sql.strip():
            raise ValidationError("empty command: send SQL text, a native JSON query or a Flight SQL command")
        return QueryRequest(who.user, sql=sql, origin=origin)

    def _schema(self, request: QueryRequest | Message, who: CallIdentity) -> pa.Schema:
        if not isinstance(request, QueryRequest):
            return self._command_schema(request)
        return self._planned(request)[0]

    def _planned(self, request: QueryRequest) -> tuple[pa.Schema, QueryRequest]:
        schema, request = self.front_door.planned(request)
        if schema is None:
            raise ValidationError("the result schema depends on parameter values; prepare the statement, "
                                  "bind its '?' parameters, then ask again")
        return schema, request

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
        raise ValidationError(f"{command.DESCRIPTOR.name} is not a command GetFlightInfo answers")

    def _command_schema(self, command: Message) -> pa.Schema:
        fixed = {fsql.CommandGetSqlInfo: SQL_INFO_SCHEMA, fsql.CommandGetCatalogs: CATALOGS_SCHEMA,
                 fsql.CommandGetDbSchemas: DB_SCHEMAS_SCHEMA, fsql.CommandGetTableTypes: TABLE_TYPES_SCHEMA,
                 fsql.CommandGetPrimaryKeys: PRIMARY_KEYS_SCHEMA, fsql.CommandGetExportedKeys: FOREIGN_KEYS_SCHEMA,
                 fsql.CommandGetImportedKeys: FOREIGN_KEYS_SCHEMA}
        if type(command) in fixed:
            return fixed[type(command)]
        if isinstance(command, fsql.CommandGetTables):
            return TABLES_WITH_SCHEMA_SCHEMA if command.include_schema else TABLES_SCHEMA
        raise ValidationError(f"{command.DESCRIPTOR.name} is not a command GetFlightInfo or GetSchema answers")

    def _statement(self, handle: bytes, who: CallIdentity) -> PreparedStatement:
        stmt = self.statements.get(handle)
        if stmt is None:
            raise UnknownHandleError(
                f"prepared statement handle unknown, closed or idle longer than "
                f"{self.statements.idle_timeout_s:g} s; prepare the statement again")
        if stmt.user != who.user:
            raise PermissionError("this prepared statement belongs to another user")
        return stmt

    def _prepare(self, request, who: CallIdentity, origin: CallOrigin) -> fsql.ActionCreatePreparedStatementResult:
        _no_transaction(request)
        info = self.front_door.prepare(request.query, who.user, origin)
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


def _has_effects(request: QueryRequest) -> bool:
    if request.sql is None:
        return False
    try:
        head = classify(request.sql)
    except Exception:  # noqa: BLE001 - not a statement we can classify: planning will say why
        return False
    return head.is_ddl or head.is_ingestion


def _drop_ticket(entry: FlightTicket) -> None:
    if entry.prefetch is not None:
        entry.prefetch.cancel()


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
