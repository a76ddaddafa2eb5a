"""query_affinity: the key that sends every request about one query to the same broker.

A broker keeps what it knows of a query to itself: a running query in its registry (cancel with
``DELETE /druid/v2/sql/{id}`` or ``DELETE /druid/v2/{id}``), an asynchronous statement's state and
result pages (``/druid/v2/sql/statements/{id}[/results]``). Behind a router fronting several
brokers, each request naming a query id goes to the broker that id hashes to (Upstreams), and so
does the request that starts the query, by its ``sqlQueryId`` (SQL) or ``queryId`` (native). As
Druid's router does, a SQL request without a query id is given one, so that its cancel and its
statement's pages find it. A request with no id to follow (a listing, a text/plain SQL body)
has no key and goes to the next broker in turn.

Pure: no sockets.
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import unquote

from common.sql.statement_kind import classify

_SQL_POSTS = ("/druid/v2/sql", "/druid/v2/sql/", "/druid/v2/sql/statements")
_STATEMENTS = "/druid/v2/sql/statements/"
_NOT_IDS = ("statements", "task")


def _json_object(body: bytes, headers: dict) -> dict | None:
    media = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if media.split(";")[0].strip().lower() != "application/json":
        return None
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None  # the broker answers with the error
    return doc if isinstance(doc, dict) else None


def _set_query_id(sql) -> object:
    """``SET sqlQueryId = ...`` in the SQL, which wins over the context's (None: none)."""
    if not isinstance(sql, str) or "sqlqueryid" not in sql.lower():
        return None
    try:
        return classify(sql).settings.get("sqlQueryId")
    except Exception:  # noqa: BLE001 - SQL that does not parse is refused by the broker, not here
        return None


def query_affinity(method: str, path: str, body: bytes, headers: dict) -> tuple[str | None, bytes]:
    """(the query id the request is about or starts, or None; the body to forward). ``path`` is
    the upstream's path (after route_for)."""
    method = method.upper()
    if path.startswith(_STATEMENTS):
        parts = path[len(_STATEMENTS):].split("/")
        return (unquote(parts[0]) or None), body
    if method == "DELETE" and path.startswith("/druid/v2/"):
        parts = [p for p in path[len("/druid/v2/"):].split("/") if p]
        if len(parts) == 2 and parts[0] == "sql" and parts[1] not in _NOT_IDS:
            return unquote(parts[1]), body
        if len(parts) == 1 and parts[0] != "sql":
            return unquote(parts[0]), body
        return None, body
    if method != "POST":
        return None, body
    if path in _SQL_POSTS:
        doc = _json_object(body, headers)
        if doc is None:
            return None, body
        context = doc.get("context")
        if context is None:
            context = {}
        if not isinstance(context, dict):
            return None, body  # refused by the broker
        in_sql = _set_query_id(doc.get("query"))
        if in_sql is not None:
            return str(in_sql), body
        if context.get("sqlQueryId"):
            return str(context["sqlQueryId"]), body
        query_id = f"query-{uuid.uuid4()}"
        doc["context"] = {**context, "sqlQueryId": query_id}
        return query_id, json.dumps(doc).encode()
    if path in ("/druid/v2", "/druid/v2/"):
        doc = _json_object(body, headers)
        context = doc.get("context") if doc is not None else None
        if isinstance(context, dict) and context.get("queryId"):
            return str(context["queryId"]), body
    return None, body


__all__ = ["query_affinity"]
