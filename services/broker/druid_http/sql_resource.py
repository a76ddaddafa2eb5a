"""``POST /druid/v2/sql``: Druid SQL over HTTP, the way pydruid, Superset and Grafana send it, and
``DELETE /druid/v2/sql/{id}`` to cancel a running statement.

A statement takes the broker's one query path, the QueryFrontDoor Flight SQL uses: the same
planner, grants, query registry (an id in sys.queries, KILL QUERY, this DELETE) and timeouts.
Planning comes first, so a statement that cannot run is answered with an error status and
Druid's error JSON; then the rows are written as they come (a scan's straight from the
historicals, see ``QueryFrontDoor.stream``), coalesced into chunks of about CHUNK_BYTES. A
failure after the first bytes left cuts the body short, as Druid does: the status stays 200 and
the missing ending tells the client.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote_plus

import orjson

from common.errors import ValidationError
from common.sql.statement_kind import classify
from services import query_errors as qe
from services.broker.druid_http.druid_errors import druid_error, invalid_input
from services.broker.druid_http.result_format import ResultWriter, check_format
from services.broker.druid_http.task_resource import is_ingestion
from services.broker.core.call_origin import CallOrigin
from services.broker.front_door import QueryFrontDoor, QueryRequest
from services.broker.query_origin import sql_query_id
from services.http_endpoint import REMOTE_HEADER, USER_HEADER
from common.types.interval import parse_instant

log = logging.getLogger(__name__)

CHUNK_BYTES = 64 << 10
QUERY_ID_HEADER = "X-Druid-SQL-Query-Id"
_REQUEST_KEYS = {"query", "resultFormat", "header", "typesHeader", "sqlTypesHeader", "context", "parameters"}

# Druid's parameter types (Calcite's SQL type names) -> how the value is read.
_INTEGERS = {"BIGINT", "INTEGER", "INT", "SMALLINT", "TINYINT", "LONG"}
_FLOATS = {"DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC"}
_STRINGS = {"VARCHAR", "CHAR", "STRING"}
_TIMES = {"TIMESTAMP", "DATE"}


@dataclass
class SqlQuery:
    """One request to the SQL endpoint, as Druid's SqlQuery JSON holds it."""

    query: str
    result_format: str = "object"
    header: bool = False
    types_header: bool = False
    sql_types_header: bool = False
    context: dict | None = None
    parameters: tuple = ()


def header_value(headers: dict, name: str) -> str | None:
    name = name.lower()
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


class UnsupportedMediaType(ValidationError):
    pass


def parse_sql_request(body: bytes, content_type: str | None) -> SqlQuery:
    """The request, from a JSON body or SQL text (``text/plain``, ``application/x-www-form-urlencoded``)."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "application/json":
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ValidationError(f"the request body is not valid JSON ({exc}); send "
                                  f'{{"query": "SELECT ..."}} with Content-Type application/json') from None
        return _from_json(doc)
    if media in ("text/plain", "application/x-www-form-urlencoded"):
        try:
            text = body.decode("utf-8")
            if media == "application/x-www-form-urlencoded":
                text = unquote_plus(text, errors="strict")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"the request body is not UTF-8 text (byte {exc.start}); send the SQL as UTF-8 "
                                  f"(URL-encoded for application/x-www-form-urlencoded)") from None
        return SqlQuery(_query_text(text))
    shown = media or "none"
    raise UnsupportedMediaType(f"Content-Type {shown!r} is not accepted by /druid/v2/sql; use application/json, "
                               f"text/plain or application/x-www-form-urlencoded")


def _query_text(value) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"'query' must be a string of SQL, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError("the query is empty; send a SQL statement in 'query'")
    return value


def _flag(doc: dict, key: str) -> bool:
    value = doc.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValidationError(f"'{key}' must be true or false, got {value!r}")
    return value


def _from_json(doc) -> SqlQuery:
    if not isinstance(doc, dict):
        raise ValidationError(f"the request body must be a JSON object like {{\"query\": \"SELECT ...\"}}, "
                              f"got a JSON {type(doc).__name__}")
    unknown = sorted(set(doc) - _REQUEST_KEYS)
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)} in the request; the fields are "
                              f"{', '.join(sorted(_REQUEST_KEYS))}")
    context = doc.get("context")
    if context is not None and not isinstance(context, dict):
        raise ValidationError(f"'context' must be a JSON object, got {type(context).__name__}")
    params = doc.get("parameters")
    if params is not None and not isinstance(params, list):
        raise ValidationError(f"'parameters' must be a list of {{\"type\", \"value\"}} objects, got "
                              f"{type(params).__name__}")
    return SqlQuery(_query_text(doc.get("query")), check_format(doc.get("resultFormat")), _flag(doc, "header"),
                    _flag(doc, "typesHeader"), _flag(doc, "sqlTypesHeader"), dict(context or {}),
                    tuple(_parameter(p, i) for i, p in enumerate(params or ())))


def _parameter(param, index: int):
    """A Druid ``{"type": "BIGINT", "value": 1}`` parameter as the value the planner binds."""
    where = f"parameter {index + 1}"
    if not isinstance(param, dict) or "type" not in param:
        raise ValidationError(f"{where} must be an object with 'type' and 'value', e.g. "
                              f'{{"type": "VARCHAR", "value": "x"}}; got {param!r}')
    kind, value = str(param["type"]).upper(), param.get("value")
    if value is None:
        return None
    try:
        if kind in _INTEGERS:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if kind in _FLOATS:
            return float(value)
        if kind in _STRINGS:
            return str(value)
        if kind == "BOOLEAN":
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            if isinstance(value, bool):
                return value
            raise ValueError(value)
        if kind in _TIMES:

            millis = int(value) if isinstance(value, (int, float)) else parse_instant(str(value))
            return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=millis)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(f"{where}: {value!r} is not a {kind} value") from None
    raise ValidationError(f"{where}: type {param['type']!r} is not supported; use VARCHAR, BIGINT, INTEGER, "
                          f"DOUBLE, FLOAT, BOOLEAN, TIMESTAMP or DATE")


def time_zone(query: SqlQuery) -> str:
    zone = (query.context or {}).get("sqlTimeZone")
    try:
        zone = classify(query.query).settings.get("sqlTimeZone", zone)
    except Exception:  # noqa: BLE001 - a statement that does not parse fails in planning, with its message
        pass
    return str(zone) if zone else "UTC"


def chunks(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Pieces coalesced to about CHUNK_BYTES (a small batch per HTTP chunk would cost a write each).
    A failure of ``pieces`` sends what came before it, then propagates (the body is cut there)."""
    pending, size = [], 0
    try:
        for piece in pieces:
            pending.append(piece)
            size += len(piece)
            if size >= CHUNK_BYTES:
                yield b"".join(pending)
                pending, size = [], 0
    except Exception:
        if pending:
            yield b"".join(pending)
        raise
    if pending:
        yield b"".join(pending)


class DruidSqlResource:
    def __init__(self, front_door: QueryFrontDoor, queries=None, host: str | None = None, tasks=None) -> None:
        self.front_door = front_door
        self.tasks = tasks  # DruidTaskResource: INSERT/REPLACE answer with their task's id
        self.queries = queries  # the QueryRegistry: cancel by id
        self.host = host

    def _error(self, error: qe.ClientError, extra: dict | None = None):
        status, body = druid_error(error, self.host)
        return status, "application/json", body, dict(extra or {})

    @staticmethod
    def parsed(body: bytes, headers: dict):
        """The request's SqlQuery, or the error response refusing it."""
        try:
            return parse_sql_request(body, header_value(headers, "content-type"))
        except UnsupportedMediaType as exc:
            return 415, "application/json", invalid_input(str(exc))[1]
        except ValidationError as exc:
            status, payload = invalid_input(str(exc))
            return status, "application/json", payload

    def post(self, body: bytes, headers: dict, task: bool = False):
        query = self.parsed(body, headers)
        if isinstance(query, tuple):  # refused before it had an id: one anyway, as Druid always sends one
            return (*query, {QUERY_ID_HEADER: str(uuid.uuid4())})
        if self.tasks is not None and (task or is_ingestion(query.query)):
            return self.tasks.submit(query, headers)
        return self.run(query, headers)

    def run(self, query: SqlQuery, headers: dict):
        user = headers.get(USER_HEADER)
        context = dict(query.context or {})
        # The id goes to the query registry on the request, not in the context: the context is part
        # of the plan cache's key, and a fresh id in it would miss the cache every time.
        query_id = sql_query_id(query.query, context) or str(uuid.uuid4())
        reply = {QUERY_ID_HEADER: query_id}
        if query.header:
            reply["X-Druid-SQL-Header-Included"] = "yes"
        request = QueryRequest(user, sql=query.query, parameter_rows=(query.parameters,) if query.parameters else (),
                               context=context, query_id=query_id,
                               origin=CallOrigin("http", headers.get(REMOTE_HEADER), user))
        try:
            schema, request = self.front_door.planned(request)
            batches = self.front_door.stream(request, expected_schema=schema)
            if batches is None:
                table = self.front_door.run(request, expected_schema=schema).table
                schema = table.schema
                batches = iter(table.to_batches(max_chunksize=8192))
        except qe.QueryFailed as exc:
            return self._error(exc.error, reply)
        except Exception as exc:  # noqa: BLE001 - never a traceback: classified (and logged) once
            return self._error(qe.client_error(exc), reply)
        writer = ResultWriter(query.result_format, schema, query.header, query.types_header,
                              query.sql_types_header, time_zone(query))
        return 200, writer.content_type, chunks(writer.write_all(batches)), reply

    def cancel(self, query_id: str, headers: dict):
        """202 when the query is being cancelled; 404 for an unknown id or another user's query
        (one answer, so ids of other users' queries cannot be probed)."""
        if self.queries is None:
            return self._error(qe.ClientError(qe.UNSUPPORTED, "this broker keeps no query registry"))[:3]
        try:
            self.queries.kill(query_id, headers.get(USER_HEADER))
        except (ValidationError, PermissionError):
            error = qe.ClientError(qe.NOT_FOUND, f"no running query '{query_id}' of yours; sys.queries lists "
                                                 f"queries with status 'running'")
            return self._error(error)[:3]
        return 202, "application/json", b""


__all__ = ["DruidSqlResource", "SqlQuery", "parse_sql_request", "header_value"]
