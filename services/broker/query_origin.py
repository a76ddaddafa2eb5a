"""Who sent the query being run on this thread, and how its id goes back to them.

Front doors say where a call comes from (``note_call``: protocol, remote address, user, and a
query id the client chose or the front door already announced); the query registry reads it when
a query starts. The id travels back as the ``x-strata-query-id`` response header: the gRPC edge
sends it as initial metadata before running, and on Arrow Flight the call's identity middleware
(``flight_auth.CallIdentity``, registered under ``MIDDLEWARE_KEY``) adds it to the reply of the
call that ran the query. Where Flight SQL plans in
GetFlightInfo and runs in DoGet (whose headers leave before it runs), ``announce_flight_query``
fixes the id at planning and ``note_query_id`` makes DoGet run under it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import uuid
from dataclasses import dataclass

from common.sql.statement_kind import classify


QUERY_ID_HEADER = "x-strata-query-id"
MIDDLEWARE_KEY = "strata-query-id"


@dataclass
class CallOrigin:
    protocol: str
    remote_address: str | None = None
    user: str | None = None
    query_id: str | None = None  # fixed by the client or the front door before the query ran
    reply: object | None = None  # something with a ``query_id`` attribute to answer with


_ORIGIN: contextvars.ContextVar[CallOrigin | None] = contextvars.ContextVar("strata_call_origin", default=None)


def note_call(protocol: str, remote_address: str | None = None, user: str | None = None,
              query_id: str | None = None, reply=None) -> CallOrigin:
    """Record the current call's origin for the queries it runs (until the next call on this thread)."""
    origin = CallOrigin(protocol, remote_address, user, query_id or None, reply)
    _ORIGIN.set(origin)
    return origin


def note_query_id(query_id: str | None) -> None:
    """The id the current call's query runs under, fixed earlier (Flight: by GetFlightInfo)."""
    origin = _ORIGIN.get()
    if origin is not None and query_id:
        origin.query_id = query_id
        if origin.reply is not None:  # the call's own reply names it too (a prefetched run answers elsewhere)
            origin.reply.query_id = query_id


def current_origin() -> CallOrigin | None:
    return _ORIGIN.get()


def note_flight_call(context, user: str | None, reply=None) -> None:
    """Every Flight RPC starts here: its peer, user and the middleware that answers with the id
    (``reply``, when the caller has it already)."""
    try:
        peer = context.peer()
    except Exception:  # noqa: BLE001 - a peer is nice to have, never worth failing a call
        peer = None
    if reply is None:
        reply = context.get_middleware(MIDDLEWARE_KEY)
    _ORIGIN.set(CallOrigin("flight", peer, user, None, reply))


def sql_query_id(sql: str, context: dict | None) -> str | None:
    """The id a client chose for a SQL statement: context ``sqlQueryId``, or ``SET sqlQueryId = ..``."""
    wanted = (context or {}).get("sqlQueryId")
    if wanted in (None, ""):
        try:
            wanted = classify(sql).settings.get("sqlQueryId")
        except Exception:  # noqa: BLE001 - a bad statement is reported when it runs
            wanted = None
    return str(wanted) if wanted not in (None, "") else None


def requested_query_id(request) -> str | None:
    """The id a gRPC QueryRequest asks for: ``query_id``, else the statement's own choice."""
    if request.query_id:
        return request.query_id
    if request.WhichOneof("statement") == "sql":
        return sql_query_id(request.sql, dict(request.context))
    try:
        import json

        context = json.loads(request.native_json).get("context") or {}
        return str(context["queryId"]) if context.get("queryId") else None
    except (ValueError, AttributeError, TypeError, RecursionError):
        return None  # reported when the query runs


def announce_query_id(grpc_context, request, user: str | None) -> str:
    """The gRPC edge: fix the query's id before it runs (the client's, else a new one), send it as
    initial metadata, and note the call's origin."""
    query_id = requested_query_id(request) or uuid.uuid4().hex
    try:
        grpc_context.send_initial_metadata(((QUERY_ID_HEADER, query_id),))
    except ValueError:  # metadata already sent: the id still reaches sys.queries
        pass
    note_call("grpc", grpc_context.peer(), user, query_id)
    return query_id


def announce_flight_query(context, request, reply=None):
    """Flight SQL plans in GetFlightInfo and runs in DoGet, whose headers leave before it runs: the
    statement gets its id when planned (the client's choice, else a new one), announced then
    (through ``reply``, the call's middleware, when the caller has it already)."""
    wanted = request.query_id
    if not wanted and request.sql is not None:
        wanted = sql_query_id(request.sql, request.context)
    if not wanted and isinstance(request.native, dict):
        wanted = (request.native.get("context") or {}).get("queryId")
    wanted = str(wanted) if wanted else uuid.uuid4().hex
    if reply is None:
        reply = context.get_middleware(MIDDLEWARE_KEY)
    if reply is not None:
        reply.query_id = wanted
    rebuild = getattr(request, "with_query_id", None)
    return rebuild(wanted) if rebuild is not None else dataclasses.replace(request, query_id=wanted)


__all__ = ["MIDDLEWARE_KEY", "QUERY_ID_HEADER", "CallOrigin", "announce_flight_query",
           "announce_query_id", "current_origin", "note_call", "note_flight_call", "note_query_id"]
