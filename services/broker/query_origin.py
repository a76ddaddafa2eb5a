"""Where a call came from, and how the id of the query it runs goes back to the client.

Each front door builds the call's ``CallOrigin`` (``core/call_origin``: protocol, remote address,
user, and what answers with the query id) and puts it, with the query id it fixed, on the
``QueryRequest`` it runs; the query registry records both when the query starts. Nothing here
is ambient: the origin travels with the request.

The id travels back as the ``x-strata-query-id`` response header: the gRPC edge sends it as
initial metadata before running (``announce_query_id``), and on Arrow Flight the call's identity
middleware (``flight_auth.CallIdentity``, registered under ``MIDDLEWARE_KEY``, the origin's
``reply``) adds it to the reply of the call that ran the query. Where Flight SQL plans in
GetFlightInfo and runs in DoGet (whose headers leave before it runs), ``announce_flight_query``
fixes the id at planning and DoGet runs the planned request under it.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

from common.sql.statement_kind import classify
from services.broker.core.call_origin import CallOrigin


QUERY_ID_HEADER = "x-strata-query-id"
MIDDLEWARE_KEY = "strata-query-id"


def flight_origin(context, user: str | None, reply=None) -> CallOrigin:
    """A Flight RPC's origin: its peer, user and the middleware that answers with the query id
    (``reply``, when the caller has it already)."""
    try:
        peer = context.peer()
    except Exception:  # noqa: BLE001 - a peer is nice to have, never worth failing a call
        peer = None
    if reply is None:
        reply = context.get_middleware(MIDDLEWARE_KEY)
    return CallOrigin("flight", peer, user, reply)


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
        context = json.loads(request.native_json).get("context") or {}
        return str(context["queryId"]) if context.get("queryId") else None
    except (ValueError, AttributeError, TypeError, RecursionError):
        return None  # reported when the query runs


def announce_query_id(grpc_context, request) -> str:
    """The gRPC edge: fix the query's id before it runs (the client's, else a new one) and send it
    as initial metadata; the caller runs the query under it."""
    query_id = requested_query_id(request) or uuid.uuid4().hex
    try:
        grpc_context.send_initial_metadata(((QUERY_ID_HEADER, query_id),))
    except ValueError:  # metadata already sent: the id still reaches sys.queries
        pass
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


__all__ = ["MIDDLEWARE_KEY", "QUERY_ID_HEADER", "announce_flight_query", "announce_query_id", "flight_origin",
           "requested_query_id", "sql_query_id"]
