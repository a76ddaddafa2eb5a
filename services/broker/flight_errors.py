"""Flight statuses for ClientErrors, with clean messages.

pyarrow's Flight server sends an exception of its own Flight types (FlightInternalError,
FlightTimedOutError, ...) as exactly its message. Any other exception becomes an Arrow status whose
"detail" pyarrow renders with ``traceback.format_exception`` and appends to the gRPC message: the
client would read the server's stack and file paths. Flight has no type of its own for
INVALID_ARGUMENT, NOT_FOUND or UNIMPLEMENTED, so those are sent as ValueError / KeyError /
NotImplementedError subclasses (what pyarrow maps to those codes) marked ``CleanStatus``, and
``traceback.format_exception`` is wrapped once so that, for a CleanStatus only, the detail is a
short label instead of a stack. Every other exception formats exactly as before.
"""

from __future__ import annotations

import threading
import traceback

import pyarrow.flight as flight

from common.errors import ErrorKind, status_of
from services import query_errors as qe


class CleanStatus(Exception):
    """A status whose text is its message alone; ``label`` is what Arrow appends as its detail."""

    label = "strata user error"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class FlightInvalidArgument(CleanStatus, ValueError):
    """-> INVALID_ARGUMENT"""


class FlightNotFound(CleanStatus, KeyError):
    """-> NOT_FOUND (KeyError's str() would quote the message; CleanStatus.__str__ does not)."""


class FlightUnimplemented(CleanStatus, NotImplementedError):
    """-> UNIMPLEMENTED"""

    label = "not supported by strata"


# Flight statuses (named in common/errors.STATUSES) as the exception types pyarrow sends them as.
_FLIGHT_TYPES_BY_STATUS = {
    "INVALID_ARGUMENT": FlightInvalidArgument,
    "NOT_FOUND": FlightNotFound,
    "UNIMPLEMENTED": FlightUnimplemented,
    "TIMED_OUT": flight.FlightTimedOutError,
    "CANCELLED": flight.FlightCancelledError,
    "UNAUTHORIZED": flight.FlightUnauthorizedError,
    "UNAUTHENTICATED": flight.FlightUnauthenticatedError,
    "UNAVAILABLE": flight.FlightUnavailableError,
    "INTERNAL": flight.FlightInternalError,
}
_FLIGHT_TYPES = {kind: _FLIGHT_TYPES_BY_STATUS[status_of(kind).flight] for kind in ErrorKind}


def flight_exception(error: qe.ClientError) -> Exception:
    """The exception a Flight method raises so the client gets ``error`` with the right status."""
    return _FLIGHT_TYPES[error.kind](error.message)


def to_flight_exception(exc: BaseException) -> Exception:
    """Whatever a Flight method raised, as the exception that sends its status cleanly."""
    if isinstance(exc, (flight.FlightError, CleanStatus)):
        return exc
    return flight_exception(qe.client_error(exc))


_install_lock = threading.Lock()


def install_clean_detail() -> None:
    """Wrap ``traceback.format_exception`` (idempotent): a CleanStatus formats as its label."""
    with _install_lock:
        current = traceback.format_exception
        if getattr(current, "_strata_clean_detail", False):
            return

        def format_exception(exc, *args, **kwargs):
            value = args[0] if args else kwargs.get("value", exc)
            if isinstance(value, CleanStatus):
                return [value.label]
            return current(exc, *args, **kwargs)

        format_exception._strata_clean_detail = True
        format_exception.__doc__ = current.__doc__
        traceback.format_exception = format_exception


install_clean_detail()
