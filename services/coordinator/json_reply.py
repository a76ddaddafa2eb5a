"""``json_reply`` and ``HttpError``: what the coordinator's Druid-compatible REST handlers
(catalog, rules, supervisors, segment lifecycle) answer with, and the header lookup they share.
A handler is ``(method, path, query, body, headers) -> (status, content type, body)`` as
services/http_endpoint.py routes it."""

from __future__ import annotations

import json

from common.errors import ValidationError
from services.security.authorizer import Unauthenticated

JSON_TYPE = "application/json"


class HttpError(Exception):
    """Answered as ``{"error": message, **extra}`` with ``status``."""

    def __init__(self, status: int, message: str, **extra) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def json_reply(status: int, value) -> tuple[int, str, bytes]:
    return status, JSON_TYPE, json.dumps(value).encode()


def request_header(headers: dict, name: str) -> str:
    """The value of header ``name`` (lower case), whatever case the client sent it in; "" if absent."""
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


# What every handler answers alike; a handler catches its own cases (404, 500) before these.
ANSWERED_ERRORS = (HttpError, Unauthenticated, PermissionError, ValidationError)


def error_reply(exc: Exception) -> tuple[int, str, bytes]:
    """One of ANSWERED_ERRORS as its reply: its own status, 401, 403 or 400."""
    if isinstance(exc, HttpError):
        return json_reply(exc.status, {"error": str(exc), **exc.extra})
    status = 401 if isinstance(exc, Unauthenticated) else 403 if isinstance(exc, PermissionError) else 400
    return json_reply(status, {"error": str(exc)})
