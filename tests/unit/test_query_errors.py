"""query_errors: every failure is classified once, as a user error of a kind or as an internal
error whose id the log has; the client's text never carries a traceback or a server path."""

import logging
import re

import grpc
import pytest

from common.catalog.catalog_errors import TableExistsError, TableNotFoundError
from common.catalog.table_spec import TableId
from common.errors import QueryTimeoutError, SegmentCorruptError, StrataError, UnsupportedError, ValidationError
from services import query_errors as qe
from services.security.authorizer import Unauthenticated

TABLE = TableId("druid", "t")


@pytest.mark.parametrize("exc,kind,code", [
    (ValidationError("unknown column 'x'"), qe.INVALID, grpc.StatusCode.INVALID_ARGUMENT),
    (UnsupportedError("JOIN is not supported"), qe.UNSUPPORTED, grpc.StatusCode.UNIMPLEMENTED),
    (QueryTimeoutError("timed out"), qe.TIMEOUT, grpc.StatusCode.DEADLINE_EXCEEDED),
    (qe.QueryCancelledError("cancelled"), qe.CANCELLED, grpc.StatusCode.CANCELLED),
    (PermissionError("may not READ"), qe.DENIED, grpc.StatusCode.PERMISSION_DENIED),
    (Unauthenticated("who are you"), qe.UNAUTHENTICATED, grpc.StatusCode.UNAUTHENTICATED),
    (TableNotFoundError(TABLE), qe.NOT_FOUND, grpc.StatusCode.NOT_FOUND),
    (qe.UnknownHandleError("no such handle"), qe.NOT_FOUND, grpc.StatusCode.NOT_FOUND),
    (TableExistsError(TABLE, 3), qe.ALREADY_EXISTS, grpc.StatusCode.ALREADY_EXISTS),
])
def test_user_errors_keep_their_message(exc, kind, code):
    error = qe.client_error(exc)
    assert (error.kind, error.message, error.error_id) == (kind, str(exc), None)
    assert error.is_user_error and qe.grpc_status(error) == code


def test_internal_errors_get_an_id_the_log_has(caplog):
    with caplog.at_level(logging.ERROR, logger="services.query_errors"):
        try:
            raise RuntimeError("secret detail at /srv/strata/engine.py")
        except RuntimeError as exc:
            error = qe.client_error(exc, where="historical h1")
    assert error.kind == qe.INTERNAL and not error.is_user_error
    assert qe.grpc_status(error) == grpc.StatusCode.INTERNAL
    assert re.fullmatch(r"[0-9a-f]{12}", error.error_id)
    assert error.message == (f"internal error {error.error_id} on the historical h1: RuntimeError "
                             f"(the historical h1 log has the details under this id)")
    (record,) = caplog.records
    assert error.error_id in record.getMessage() and "secret detail" in str(record.exc_info[1])


def test_strata_internal_errors_keep_their_words_without_server_paths():
    error = qe.client_error(SegmentCorruptError("segment s: cannot open /var/lib/strata/cache/s.sseg: gone"))
    assert error.kind == qe.DATA_LOSS and error.error_id is not None  # logged under an id, as internal ones
    assert "segment s: cannot open <server path>: gone" in error.message and "/var/lib" not in error.message
    kept = qe.client_error(StrataError("no replica left for wiki_2015-09-12/2015-09-13 on grpc://h:1/x/y"))
    assert "wiki_2015-09-12/2015-09-13 on grpc://h:1/x/y" in kept.message


def test_a_classified_failure_passes_through_unchanged(caplog):
    error = qe.ClientError(qe.INTERNAL, "internal error 0123456789ab on the broker: x", "0123456789ab")
    with caplog.at_level(logging.ERROR, logger="services.query_errors"):
        assert qe.client_error(qe.QueryFailed(error)) is error
    assert caplog.records == []  # logged once, where it was classified


# ---- the taxonomy: one table from kind to gRPC, Flight and HTTP status ---------------------------

from common.errors import (STATUSES, ErrorKind, LimitError, NotFoundError, SegmentCorruptError,  # noqa: E402
                           UnavailableError,
                           kind_of, status_of)
from common.catalog.catalog_errors import SchemaNotFoundError, VersionConflictError  # noqa: E402


def test_every_kind_has_one_status_of_each_protocol():
    assert set(STATUSES) == set(ErrorKind)
    codes = [qe.grpc_code(k) for k in ErrorKind]
    assert len(set(codes)) == len(codes), "two kinds share a gRPC code: a peer could not tell them apart"
    for kind in ErrorKind:
        assert qe.kind_of_code(qe.grpc_code(kind)) is kind  # a relayed status keeps its kind
        assert 400 <= status_of(kind).http < 600


@pytest.mark.parametrize("kind,grpc_code,http", [
    (ErrorKind.USER, "INVALID_ARGUMENT", 400), (ErrorKind.NOT_FOUND, "NOT_FOUND", 404),
    (ErrorKind.ALREADY_EXISTS, "ALREADY_EXISTS", 409), (ErrorKind.CONFLICT, "ABORTED", 409),
    (ErrorKind.UNAUTHENTICATED, "UNAUTHENTICATED", 401), (ErrorKind.UNAUTHORIZED, "PERMISSION_DENIED", 403),
    (ErrorKind.LIMIT, "RESOURCE_EXHAUSTED", 429), (ErrorKind.TIMEOUT, "DEADLINE_EXCEEDED", 504),
    (ErrorKind.UNSUPPORTED, "UNIMPLEMENTED", 501), (ErrorKind.UNAVAILABLE, "UNAVAILABLE", 503),
    (ErrorKind.DATA_LOSS, "DATA_LOSS", 500), (ErrorKind.INTERNAL, "INTERNAL", 500),
])
def test_the_status_table(kind, grpc_code, http):
    assert (status_of(kind).grpc, status_of(kind).http) == (grpc_code, http)


def test_only_unavailable_data_loss_and_internal_are_retried_and_they_are_not_user_errors():
    server_side = {ErrorKind.UNAVAILABLE, ErrorKind.DATA_LOSS, ErrorKind.INTERNAL}
    assert {k for k in ErrorKind if status_of(k).retryable} == server_side
    assert {k for k in ErrorKind if not status_of(k).user_error} == server_side


@pytest.mark.parametrize("exc,kind", [
    (NotFoundError("no task 'x'"), ErrorKind.NOT_FOUND), (LimitError("too many rows"), ErrorKind.LIMIT),
    (UnavailableError("no replica"), ErrorKind.UNAVAILABLE), (SchemaNotFoundError("x", ["druid"]), ErrorKind.NOT_FOUND),
    (VersionConflictError(TABLE, 1, 2), ErrorKind.CONFLICT), (TimeoutError("slow"), ErrorKind.TIMEOUT),
    (KeyError("k"), ErrorKind.INTERNAL), (SegmentCorruptError("seg x: checksum"), ErrorKind.DATA_LOSS), (StrataError("relayed", kind=ErrorKind.NOT_FOUND), ErrorKind.NOT_FOUND),
])
def test_each_error_says_its_kind(exc, kind):
    assert kind_of(exc) is kind


def test_a_not_found_is_still_caught_as_a_validation_error():
    with pytest.raises(ValidationError):
        raise NotFoundError("no task 'x'")


class Failed(grpc.RpcError):
    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


def test_a_peers_status_keeps_its_kind():
    err = qe.error_from_rpc(Failed(grpc.StatusCode.NOT_FOUND, "no task 'x'"), "coordinator GetTask")
    assert err.kind is ErrorKind.NOT_FOUND and str(err) == "coordinator GetTask failed: no task 'x'"
    assert qe.client_error(err).kind is ErrorKind.NOT_FOUND
    refused = qe.error_from_rpc(Failed(grpc.StatusCode.INVALID_ARGUMENT, "bad interval"), "publish")
    assert isinstance(refused, ValidationError) and refused.kind is ErrorKind.USER
    down = qe.error_from_rpc(Failed(grpc.StatusCode.UNAVAILABLE, "connection refused"), "publish")
    assert down.kind is ErrorKind.UNAVAILABLE and status_of(down.kind).retryable


def test_http_error_carries_the_kinds_status_and_an_id_only_when_internal():
    assert qe.http_error(VersionConflictError(TABLE, 1, 2), "coordinator") == (409, {"error": str(VersionConflictError(TABLE, 1, 2))})
    status, body = qe.http_error(RuntimeError("boom at /srv/x.py"), "coordinator")
    assert status == 500 and body["errorId"] in body["error"] and "/srv" not in body["error"]


def test_flight_statuses_follow_the_table():
    import pyarrow.flight as flight

    from services.broker import flight_errors

    expect = {ErrorKind.USER: ValueError, ErrorKind.NOT_FOUND: KeyError, ErrorKind.UNSUPPORTED: NotImplementedError,
              ErrorKind.TIMEOUT: flight.FlightTimedOutError, ErrorKind.CANCELLED: flight.FlightCancelledError,
              ErrorKind.UNAUTHORIZED: flight.FlightUnauthorizedError,
              ErrorKind.UNAUTHENTICATED: flight.FlightUnauthenticatedError,
              ErrorKind.LIMIT: flight.FlightUnavailableError, ErrorKind.UNAVAILABLE: flight.FlightUnavailableError,
              ErrorKind.INTERNAL: flight.FlightInternalError}
    for kind, cls in expect.items():
        assert isinstance(flight_errors.flight_exception(qe.ClientError(kind, "m")), cls), kind
