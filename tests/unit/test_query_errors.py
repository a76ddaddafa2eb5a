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
    assert error.kind == qe.INTERNAL
    assert "segment s: cannot open <server path>: gone" in error.message and "/var/lib" not in error.message
    kept = qe.client_error(StrataError("no replica left for wiki_2015-09-12/2015-09-13 on grpc://h:1/x/y"))
    assert "wiki_2015-09-12/2015-09-13 on grpc://h:1/x/y" in kept.message


def test_a_classified_failure_passes_through_unchanged(caplog):
    error = qe.ClientError(qe.INTERNAL, "internal error 0123456789ab on the broker: x", "0123456789ab")
    with caplog.at_level(logging.ERROR, logger="services.query_errors"):
        assert qe.client_error(qe.QueryFailed(error)) is error
    assert caplog.records == []  # logged once, where it was classified
