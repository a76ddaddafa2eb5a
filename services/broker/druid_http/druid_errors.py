"""Druid's JSON error bodies and HTTP statuses for a ClientError.

Druid answers most failures with a DruidException: ``{"error": "druidException", "errorCode",
"persona", "category", "errorMessage", "context"}`` and a status by category; timeouts,
cancellations and capacity refusals keep the older QueryException shape (``error`` is the
code, plus ``errorClass`` and ``host``). ``error`` is always a string: Grafana's Druid plugin
shows it as the message and breaks on anything else. The mapping from strata's error kinds is
this one function, so it can move to a shared taxonomy later without touching the resources.
"""

from __future__ import annotations

import orjson

from services import query_errors as qe

# kind -> (HTTP status, DruidException category, errorCode, persona)
_CATEGORIES = {
    qe.INVALID: (400, "INVALID_INPUT", "invalidInput", "USER"),
    qe.NOT_FOUND: (404, "NOT_FOUND", "notFound", "USER"),
    qe.ALREADY_EXISTS: (409, "CONFLICT", "conflict", "USER"),
    qe.UNSUPPORTED: (501, "UNSUPPORTED", "unsupported", "USER"),
    qe.DENIED: (403, "FORBIDDEN", "forbidden", "USER"),
    qe.UNAUTHENTICATED: (401, "UNAUTHORIZED", "unauthorized", "USER"),
    qe.INTERNAL: (500, "RUNTIME_FAILURE", "internalServerError", "OPERATOR"),
}
# kind -> (HTTP status, legacy error code, errorClass), Druid's QueryException shape.
_LEGACY = {
    qe.TIMEOUT: (504, "Query timeout", "org.apache.druid.query.QueryTimeoutException"),
    qe.CANCELLED: (500, "Query cancelled", "org.apache.druid.query.QueryInterruptedException"),
    "capacity": (429, "Query capacity exceeded", "org.apache.druid.query.QueryCapacityExceededException"),
}

# Kinds the error taxonomy may define (common/errors.py): mapped when this strata has them.
for _name, _entry in (("CONFLICT", (409, "CONFLICT", "conflict", "USER")),
                      ("UNAVAILABLE", (503, "RUNTIME_FAILURE", "unavailable", "OPERATOR"))):
    if getattr(qe, _name, None) is not None:
        _CATEGORIES[getattr(qe, _name)] = _entry
if getattr(qe, "LIMIT", None) is not None:  # a configured limit reached: Druid's capacity answer
    _LEGACY[qe.LIMIT] = _LEGACY["capacity"]


def druid_error(error: qe.ClientError, host: str | None = None) -> tuple[int, bytes]:
    """(HTTP status, JSON body) of a classified failure."""
    legacy = _LEGACY.get(error.kind)
    if legacy is not None:
        status, code, error_class = legacy
        body = {"error": code, "errorMessage": error.message, "errorClass": error_class, "host": host}
        return status, orjson.dumps(body)
    status, category, code, persona = _CATEGORIES.get(error.kind, _CATEGORIES[qe.INTERNAL])
    context = {"errorId": error.error_id} if error.error_id else {}
    body = {"error": "druidException", "errorCode": code, "persona": persona, "category": category,
            "errorMessage": error.message, "context": context}
    return status, orjson.dumps(body)


def invalid_input(message: str) -> tuple[int, bytes]:
    """A request refused before it became a query (bad JSON, empty query, wrong body type)."""
    return druid_error(qe.ClientError(qe.INVALID, message))


__all__ = ["druid_error", "invalid_input"]
