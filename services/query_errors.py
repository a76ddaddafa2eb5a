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

from common.catalog.catalog_errors import (SchemaNotFoundError, TableExistsError, TableNotFoundError,
                                           VersionConflictError)
from common.errors import QueryTimeoutError, StrataError, UnsupportedError, ValidationError

log = logging.getLogger(__name__)

INVALID = "invalid"  # the request is wrong: bad SQL, unknown column, value out of range
NOT_FOUND = "not_found"  # a named thing (catalog table, statement or result handle) does not exist
ALREADY_EXISTS = "already_exists"  # CREATE of an existing table, a stale catalog version
UNSUPPORTED = "unsupported"  # valid, but strata does not do it
TIMEOUT = "timeout"
CANCELLED = "cancelled"
DENIED = "denied"  # authenticated, but without the grant
UNAUTHENTICATED = "unauthenticated"
INTERNAL = "internal"

USER_KINDS = frozenset({INVALID, NOT_FOUND, ALREADY_EXISTS, UNSUPPORTED, TIMEOUT, CANCELLED, DENIED,
                        UNAUTHENTICATED})

_GRPC_CODES = {INVALID: grpc.StatusCode.INVALID_ARGUMENT, NOT_FOUND: grpc.StatusCode.NOT_FOUND,
               ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS, UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
               TIMEOUT: grpc.StatusCode.DEADLINE_EXCEEDED, CANCELLED: grpc.StatusCode.CANCELLED,
               DENIED: grpc.StatusCode.PERMISSION_DENIED, UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
               INTERNAL: grpc.StatusCode.INTERNAL}


class UnknownHandleError(StrataError, KeyError):
    """A prepared-statement or result handle the server does not (or no longer) know."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class QueryCancelledError(StrataError):
    """The client went away or cancelled while the query ran."""


@dataclass(frozen=True)
class ClientError:
    kind: str
    message: str
    error_id: str | None = None  # internal errors only: the key of the server log entry

    @property
    def is_user_error(self) -> bool:
        return self.kind in USER_KINDS


class QueryFailed(StrataError):
    """A failure already classified (and, if internal, logged) by the front door: edges map
    ``error`` as it is instead of classifying (and logging) it again."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(error.message)
        self.error = error


def _kind_of(exc: BaseException) -> str:
    from services.security.authorizer import Unauthenticated

    if isinstance(exc, Unauthenticated):
        return UNAUTHENTICATED
    if isinstance(exc, PermissionError):
        return DENIED
    if isinstance(exc, QueryTimeoutError):
        return TIMEOUT
    if isinstance(exc, QueryCancelledError):
        return CANCELLED
    if isinstance(exc, (TableNotFoundError, SchemaNotFoundError, UnknownHandleError)):
        return NOT_FOUND
    if isinstance(exc, (TableExistsError, VersionConflictError)):
        return ALREADY_EXISTS
    if isinstance(exc, ValidationError):
        return INVALID
    if isinstance(exc, UnsupportedError):
        return UNSUPPORTED
    return INTERNAL


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


def grpc_status(error: ClientError) -> grpc.StatusCode:
    return _GRPC_CODES[error.kind]


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
    if kind != INTERNAL:
        return ClientError(kind, _bounded(str(exc) or type(exc).__name__))
    error_id = new_error_id()
    log.error("internal error %s", error_id, exc_info=exc)
    return ClientError(INTERNAL, internal_message(exc, error_id, where), error_id)


__all__ = ["ClientError", "QueryFailed", "QueryCancelledError", "UnknownHandleError", "client_error",
           "grpc_status", "USER_KINDS", "INVALID", "NOT_FOUND", "ALREADY_EXISTS", "UNSUPPORTED", "TIMEOUT",
           "CANCELLED", "DENIED", "UNAUTHENTICATED", "INTERNAL", "new_error_id", "internal_message"]
