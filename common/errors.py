"""The error taxonomy every layer raises, so edges map errors to status codes in one place.

Each error carries a ``kind`` (an ErrorKind): whether the caller can fix it (a user error: bad
input, a missing or conflicting thing, a missing grant, a limit or a timeout they hit) or not
(unavailable, internal). ``STATUSES`` is the one table from kind to the gRPC status, the Flight
status and the HTTP status every edge answers with, and says which kinds another attempt may
cure (only unavailable and internal: a user error is never retried). Statuses are named here as
text; ``services/query_errors.py`` turns them into grpc and Flight objects, since ``common`` knows
no RPC library.

Messages name the thing that is wrong (column, file, segment, position) and what would be valid.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ErrorKind(str, enum.Enum):
    USER = "user"  # the request is wrong: bad SQL, unknown column, value out of range
    UNSUPPORTED = "unsupported"  # valid, but strata does not do it
    NOT_FOUND = "not_found"  # a named thing (table, task, statement or result handle) does not exist
    ALREADY_EXISTS = "already_exists"  # creating a thing that exists
    CONFLICT = "conflict"  # a stale version: another writer changed the thing since it was read
    UNAUTHENTICATED = "unauthenticated"  # no or wrong credentials
    UNAUTHORIZED = "unauthorized"  # authenticated, but without the grant
    LIMIT = "limit"  # a configured limit (rows, bytes, open streams, queue) was reached
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    UNAVAILABLE = "unavailable"  # a node or replica cannot answer now; another attempt may
    DATA_LOSS = "data_loss"  # a stored file failed an integrity check (a corrupt segment); another replica may serve it
    INTERNAL = "internal"  # a bug or a broken invariant; the log has it under an error id

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ErrorStatus:
    grpc: str  # a grpc.StatusCode member name
    flight: str  # a Flight status (pyarrow.flight.FlightStatusCode name, or a gRPC code Flight carries)
    http: int
    retryable: bool = False  # may another attempt (elsewhere, or later) succeed?
    user_error: bool = True  # the caller's to fix: the message is theirs, with no error id


STATUSES: dict[ErrorKind, ErrorStatus] = {
    ErrorKind.USER: ErrorStatus("INVALID_ARGUMENT", "INVALID_ARGUMENT", 400),
    ErrorKind.UNSUPPORTED: ErrorStatus("UNIMPLEMENTED", "UNIMPLEMENTED", 501),
    ErrorKind.NOT_FOUND: ErrorStatus("NOT_FOUND", "NOT_FOUND", 404),
    # Flight has no ALREADY_EXISTS or ABORTED of its own: those go as INVALID_ARGUMENT, the message says it.
    ErrorKind.ALREADY_EXISTS: ErrorStatus("ALREADY_EXISTS", "INVALID_ARGUMENT", 409),
    ErrorKind.CONFLICT: ErrorStatus("ABORTED", "INVALID_ARGUMENT", 409),
    ErrorKind.UNAUTHENTICATED: ErrorStatus("UNAUTHENTICATED", "UNAUTHENTICATED", 401),
    ErrorKind.UNAUTHORIZED: ErrorStatus("PERMISSION_DENIED", "UNAUTHORIZED", 403),
    ErrorKind.LIMIT: ErrorStatus("RESOURCE_EXHAUSTED", "UNAVAILABLE", 429),
    ErrorKind.TIMEOUT: ErrorStatus("DEADLINE_EXCEEDED", "TIMED_OUT", 504),
    ErrorKind.CANCELLED: ErrorStatus("CANCELLED", "CANCELLED", 499),  # 499: nginx's "client closed request"
    ErrorKind.UNAVAILABLE: ErrorStatus("UNAVAILABLE", "UNAVAILABLE", 503, retryable=True, user_error=False),
    ErrorKind.DATA_LOSS: ErrorStatus("DATA_LOSS", "INTERNAL", 500, retryable=True, user_error=False),
    ErrorKind.INTERNAL: ErrorStatus("INTERNAL", "INTERNAL", 500, retryable=True, user_error=False),
}


def status_of(kind: ErrorKind) -> ErrorStatus:
    return STATUSES[ErrorKind(kind)]


def kind_of(exc: BaseException) -> ErrorKind:
    """The kind of any exception: strata's errors say theirs; Python's PermissionError is a
    missing grant, TimeoutError a timeout; anything else is internal."""
    kind = getattr(exc, "kind", None)
    if isinstance(kind, ErrorKind):
        return kind
    if isinstance(exc, PermissionError):
        return ErrorKind.UNAUTHORIZED
    if isinstance(exc, TimeoutError):
        return ErrorKind.TIMEOUT
    return ErrorKind.INTERNAL


def cause_of_kind(exc: BaseException | None, kind: ErrorKind) -> BaseException | None:
    """The error of ``kind`` however deep ``exc`` wraps it (its causes and contexts), or None: a
    coordinator's CONFLICT reaches a task inside the job failure that carried it."""
    seen = 0
    while exc is not None and seen < 10:
        if getattr(exc, "kind", None) == kind:
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


class StrataError(Exception):
    """Base of every error strata raises on purpose. ``kind`` is the class's unless one is given
    (a failure relayed from another node keeps the kind that node reported)."""

    kind: ErrorKind = ErrorKind.INTERNAL

    def __init__(self, *args, kind: ErrorKind | None = None) -> None:
        super().__init__(*args)
        if kind is not None:
            self.kind = ErrorKind(kind)


class ValidationError(StrataError, ValueError):
    """The request is malformed: unknown column, wrong type, bad granularity or expression."""

    kind = ErrorKind.USER


class NotFoundError(ValidationError):
    """A named thing (a task, a query id, a handle) does not exist. A ValidationError too, so the
    callers that caught a bad name as one still do."""

    kind = ErrorKind.NOT_FOUND


class LimitError(StrataError):
    """A configured limit (result rows or bytes, open streams, a queue) was reached; the message
    names the limit and how to raise it or stay under it."""

    kind = ErrorKind.LIMIT


class UnavailableError(StrataError):
    """A node, replica or dependency cannot answer now; another attempt may succeed."""

    kind = ErrorKind.UNAVAILABLE


class SegmentCorruptError(StrataError):
    """A segment file failed an integrity check; it names the segment and the check. ``segment_id``
    is the SegmentId when it is known (after the manifest was read), so callers match it exactly
    instead of searching the message."""

    kind = ErrorKind.DATA_LOSS

    def __init__(self, message: str, segment_id=None) -> None:
        super().__init__(message)
        self.segment_id = segment_id


class UnsupportedError(StrataError):
    """A valid construct that strata does not implement; the message names it exactly."""

    kind = ErrorKind.UNSUPPORTED


class QueryTimeoutError(StrataError):
    """A query ran past its timeout."""

    kind = ErrorKind.TIMEOUT


def closest_names(name: str, candidates, limit: int = 3) -> list[str]:
    """Candidate names nearest to ``name``, for 'did you mean' hints in errors."""
    import difflib

    pool = list(candidates)
    hits = difflib.get_close_matches(name, pool, n=limit, cutoff=0.5)
    if not hits:
        lowered = {c.lower(): c for c in pool}
        hits = [lowered[h] for h in difflib.get_close_matches(name.lower(), list(lowered), n=limit, cutoff=0.5)]
    return hits


def unknown_name_message(kind: str, name: str, candidates) -> str:
    hints = closest_names(name, candidates)
    msg = f"unknown {kind} '{name}'"
    if hints:
        msg += "; did you mean " + ", ".join(f"'{h}'" for h in hints) + "?"
    else:
        pool = sorted(candidates)
        if pool:
            shown = ", ".join(pool[:20]) + (" ..." if len(pool) > 20 else "")
            msg += f"; available: {shown}"
    return msg
