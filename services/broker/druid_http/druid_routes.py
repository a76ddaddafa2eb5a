"""DruidHttpApi: Druid's HTTP API on the broker's HTTP port, routed to its resources.

- ``POST /druid/v2/sql`` (and ``/druid/v2/sql/``, pydruid's path), ``DELETE /druid/v2/sql/{id}``
  (sql_resource);
- ``/druid/v2/sql/statements``, asynchronous SQL with paged results (statements_resource);
- ``POST /druid/v2/sql/task`` and the task API under ``/druid/indexer/v1`` (task_resource);
- ``POST /druid/v2`` native JSON queries, ``DELETE /druid/v2/{id}`` (native_resource);
- ``GET /druid/v2/datasources``, ``/druid/v2/datasources/{ds}``, ``.../dimensions``, ``.../metrics``;
- ``GET /status``, ``/status/properties``, ``/status/selfDiscovered/status`` (``/status/health``,
  Druid's bare ``true``, and strata's ``/status/ready`` are the HttpEndpoint's, on every role).

Users, grants and TLS are the HTTP endpoint's (Basic auth, 401/403), the same as Flight SQL's.
"""

from __future__ import annotations

import importlib.metadata
import os
from urllib.parse import unquote

import orjson

from services import query_errors as qe
from services.broker.druid_http.druid_errors import druid_error
from services.broker.druid_http.native_resource import DruidNativeResource
from services.broker.core.segment_facts import dimensions_and_metrics
from services.broker.druid_http.sql_resource import DruidSqlResource
from services.broker.druid_http.statements_resource import DruidStatementsResource
from services.broker.druid_http.task_resource import DruidTaskResource
from services.http_endpoint import USER_HEADER
from services.security.secure_catalog import SecureSqlCatalog

JSON = "application/json"


def strata_version() -> str:
    try:
        return importlib.metadata.version("strata")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def _json(value, status: int = 200):
    return status, JSON, orjson.dumps(value)


class DruidHttpApi:
    """``front_door``: the broker's QueryFrontDoor; ``catalog``/``authorizer``: what a user may see
    (datasource listings); ``queries``: the QueryRegistry (cancel by id); ``properties``: what
    ``/status/properties`` shows (no secrets)."""

    def __init__(self, front_door, catalog, authorizer, queries=None, host: str | None = None,
                 properties: dict | None = None, coordinator=None) -> None:
        self.tasks = DruidTaskResource(front_door, coordinator, authorizer, host)
        self.sql = DruidSqlResource(front_door, queries, host, self.tasks)
        self.statements = DruidStatementsResource(front_door, queries, authorizer, self.tasks, host)
        self.native = DruidNativeResource(front_door, queries, host, self._segments, authorizer)
        self.catalog = catalog
        self.authorizer = authorizer
        self.host = host
        self.properties = dict(properties or {})

    def install(self, endpoint) -> None:
        endpoint.route("/druid/v2", self.handle)
        endpoint.route("/status", self.status)
        endpoint.route("/druid/indexer/v1/", self.tasks.handle)

    # ---- /druid/v2 ----------------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        parts = [unquote(p) for p in path.split("/") if p]  # druid, v2, ...
        if parts[:2] != ["druid", "v2"]:
            return self._not_found(method, path)
        rest = parts[2:]
        if rest[:1] == ["sql"]:
            if len(rest) == 1 and method == "POST":
                return self.sql.post(body, headers)
            if rest == ["sql", "task"] and method == "POST":
                return self.sql.post(body, headers, task=True)
            if rest == ["sql", "statements"] and method == "POST":
                parsed = self.sql.parsed(body, headers)
                return parsed if isinstance(parsed, tuple) else self.statements.submit(parsed, headers)
            if rest[1:2] == ["statements"] and method in ("GET", "DELETE"):
                return self.statements.handle(method, rest[2:], query, headers)
            if len(rest) == 2 and method == "DELETE":
                return self.sql.cancel(rest[1], headers)
        elif rest[:1] == ["datasources"] and method == "GET":
            return self._datasources(rest[1:], headers)
        elif not rest and method == "POST":
            return self.native.post(body, headers, query)
        elif len(rest) == 1 and method == "DELETE":
            return self.native.cancel(rest[0], headers)
        return self._not_found(method, path)

    def _segments(self, datasource: str) -> list:
        node = getattr(getattr(self.catalog, "base", self.catalog), "node", None)
        if node is None:
            return []
        with node.lock:
            return [d for sid, d in node.view.descriptors.items() if sid.datasource == datasource]

    def _not_found(self, method: str, path: str):
        status, body = druid_error(qe.ClientError(qe.NOT_FOUND, f"no Druid API at {method} {path}"), self.host)
        return status, JSON, body

    def _visible(self, headers: dict) -> SecureSqlCatalog:
        return SecureSqlCatalog(self.catalog, self.authorizer, headers.get(USER_HEADER))

    def _datasources(self, rest: list[str], headers: dict):
        visible = self._visible(headers)
        names = sorted(visible.datasource_names())
        if not rest:
            return _json(names)
        name = rest[0]
        if name not in names or len(rest) > 2 or (len(rest) == 2 and rest[1] not in ("dimensions", "metrics")):
            status, body = druid_error(qe.ClientError(qe.NOT_FOUND, f"datasource '{name}' is not served (or not "
                                                                    f"yours to read); GET /druid/v2/datasources "
                                                                    f"lists the ones you may query"), self.host)
            return status, JSON, body
        schema = visible.datasource_schema(name) or {}
        dimensions, metrics = dimensions_and_metrics(schema, (d.metrics() for d in self._segments(name)))
        shape = {"dimensions": dimensions, "metrics": metrics}
        return _json(shape[rest[1]] if len(rest) == 2 else shape)

    # ---- /status ------------------------------------------------------------------------------------
    def status(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        if method != "GET":
            return self._not_found(method, path)
        if path in ("/status", "/status/"):
            return _json({"version": strata_version(), "modules": [], "memory": _memory()})
        if path == "/status/properties":
            return _json({k: str(v) for k, v in self.properties.items()})
        if path == "/status/selfDiscovered/status":
            return _json({"selfDiscovered": True})
        if path == "/status/selfDiscovered":
            return 200, JSON, b"{}"
        return self._not_found(method, path)


def _memory() -> dict:
    """The process's memory as Druid's /status reports the JVM's (bytes)."""
    used = 0
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            used = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    total = 0
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        pass
    return {"maxMemory": total, "totalMemory": total, "freeMemory": max(total - used, 0), "usedMemory": used,
            "directMemory": 0}


__all__ = ["DruidHttpApi", "strata_version"]
