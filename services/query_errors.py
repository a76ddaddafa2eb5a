"""ClientError: what a client is told when a request fails, decided in one place for every front
end of the broker (Arrow Flight / Flight SQL, the gRPC BrokerService) and for the historicals'
RunQuery, whose status tells the broker whether another replica may succeed (internal errors are
retried elsewhere, user errors never).

An error is either the caller's to fix (a bad statement, an unknown table, a denied grant, a
timeout they set; the message names the thing and the fix) or internal. An internal error gets
an error id; the full exception, with its traceback, is logged under that id, and the client
reads only the id and a short description: never a traceback or a server path. gRPC edges send
``grpc_status(error)``; the Flight edge's statuses live in ``services/broker/flight_errors``.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass

import grpc

from common.errors import ErrorKind, StrataError, ValidationError, kind_of, status_of

log = logging.getLogger(__name__)

# The kinds under the names the edges used before the taxonomy moved to common/errors.py.
INVALID = ErrorKind.USER
NOT_FOUND = ErrorKind.NOT_FOUND
ALREADY_EXISTS = ErrorKind.ALREADY_EXISTS
CONFLICT = ErrorKind.CONFLICT
UNSUPPORTED = ErrorKind.UNSUPPORTED
TIMEOUT = ErrorKind.TIMEOUT
CANCELLED = ErrorKind.CANCELLED
DENIED = ErrorKind.UNAUTHORIZED
UNAUTHENTICATED = ErrorKind.UNAUTHENTICATED
LIMIT = ErrorKind.LIMIT
UNAVAILABLE = ErrorKind.UNAVAILABLE
DATA_LOSS = ErrorKind.DATA_LOSS
INTERNAL = ErrorKind.INTERNAL

USER_KINDS = frozenset(k for k in ErrorKind if status_of(k).user_error)


class UnknownHandleError(StrataError, KeyError):
    """A prepared-statement or result handle the server does not (or no longer) know."""

    kind = ErrorKind.NOT_FOUND

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class QueryCancelledError(StrataError):
    """The client went away or cancelled while the query ran."""

    kind = ErrorKind.CANCELLED


@dataclass(frozen=True)
class ClientError:
    kind: ErrorKind
    message: str
    error_id: str | None = None  # internal errors only: the key of the server log entry

    @property
    def is_user_error(self) -> bool:
        return status_of(self.kind).user_error


class QueryFailed(StrataError):
    """A failure already classified (and, if internal, logged) by the front door: edges map
    ``error`` as it is instead of classifying (and logging) it again."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(error.message, kind=error.kind)
        self.error = error


def _kind_of(exc: BaseException) -> ErrorKind:
    return kind_of(exc)


def new_error_id() -> str:
    return uuid.uuid4().hex[:12]


# An absolute file path (two or more segments), not part of a URL or an interval.
_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.@+-]+/)+[\w.@+-]*")


def internal_message(exc: BaseException, error_id: str, where: str = "broker") -> str:
    """What a client reads about an internal error: strata's own errors keep their message (it
    was written for people) with server paths blanked; anything else shows only its type, since
    its text is not written for clients."""
    what = _PATH.sub("<server path>", str(exc)) if isinstance(exc, StrataError) and str(exc) else type(exc).__name__
    return f"internal error {error_id} on the {where}: {what} (the {where} log has the details under this id)"


def grpc_code(kind: ErrorKind) -> grpc.StatusCode:
    return grpc.StatusCode[status_of(kind).grpc]


def grpc_status(error: ClientError) -> grpc.StatusCode:
    return grpc_code(error.kind)


_KIND_OF_CODE = {grpc_code(k): k for k in reversed(list(ErrorKind))}
_KIND_OF_CODE[grpc.StatusCode.OUT_OF_RANGE] = ErrorKind.USER


def kind_of_code(code: grpc.StatusCode | None) -> ErrorKind:
    """The kind a peer's gRPC status stands for (UNKNOWN and anything unmapped: internal)."""
    return _KIND_OF_CODE.get(code, ErrorKind.INTERNAL)


def error_from_rpc(exc: grpc.RpcError, what: str) -> StrataError:
    """A failed call to another node as a StrataError of the kind the node reported, so it maps to
    the same status again at this node's edge (a user error stays one, and is never retried).
    ``what`` names the call, e.g. "coordinator AllocateSegments"."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    kind = kind_of_code(code)
    if kind is ErrorKind.USER:  # callers catch a refused request as one
        return ValidationError(f"{what} failed: {details or code}")
    return StrataError(f"{what} failed: {details or code}", kind=kind)


# gRPC sends a status message in a header, and clients refuse headers over 8 KiB (the message is
# lost as RESOURCE_EXHAUSTED "received metadata size exceeds soft limit"): a message quoting a huge
# value from the request is cut.
MAX_MESSAGE_CHARS = 2000


def _bounded(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[:MAX_MESSAGE_CHARS] + f"... ({len(message) - MAX_MESSAGE_CHARS} more characters)"


def client_error(exc: BaseException, where: str = "broker") -> ClientError:
    """Classify ``exc``; an internal one is logged here, with its traceback, under a new id."""
    if isinstance(exc, QueryFailed):
        return exc.error
    kind = _kind_of(exc)
    if status_of(kind).user_error:
        return ClientError(kind, _bounded(str(exc) or type(exc).__name__))
    error_id = new_error_id()
    log.error("%s error %s", kind, error_id, exc_info=exc)
    return ClientError(kind, internal_message(exc, error_id, where), error_id)


def http_error(exc: BaseException, where: str) -> tuple[int, dict]:
    """The HTTP status and JSON body (``{"error": message}``, with ``errorId`` for an internal
    error) an HTTP edge answers ``exc`` with."""
    error = client_error(exc, where)
    body = {"error": error.message}
    if error.error_id is not None:
        body["errorId"] = error.error_id
    return status_of(error.kind).http, body


def abort(context, exc: BaseException, where: str = "broker", prefix: str = "") -> ClientError:
    """End the gRPC call with ``exc``'s status and client message (never a traceback)."""
    error = client_error(exc, where)
    context.abort(grpc_status(error), prefix + error.message if error.is_user_error else error.message)
    return error  # not reached: abort raises


__all__ = ["ClientError", "QueryFailed", "QueryCancelledError", "UnknownHandleError", "client_error",
           "grpc_status", "grpc_code", "http_error", "kind_of_code", "error_from_rpc", "abort", "CONFLICT", "LIMIT", "UNAVAILABLE", "USER_KINDS", "INVALID", "NOT_FOUND", "ALREADY_EXISTS", "UNSUPPORTED", "TIMEOUT",
           "CANCELLED", "DENIED", "UNAUTHENTICATED", "INTERNAL", "new_error_id", "internal_message"]
