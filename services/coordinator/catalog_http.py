"""The catalog REST API on the coordinator's HTTP port, under ``/druid/coordinator/v1/catalog``.

    POST   tables/{schema}/{name}[?action=New|IfNew|Replace|Force][&version=n]   body TableSpec
    PUT    tables/{schema}/{name}[?version=n]             body: partial TableSpec, merged
    GET    tables/{schema}/{name}                          -> TableSpec
    DELETE tables/{schema}/{name}[?ifExists=true][&purge=true]
    POST   tables/{schema}/{name}/moveColumn[?version=n]   {"column", "where", "anchor"}
    POST   tables/{schema}/{name}/dropColumn[?version=n]   ["a", "b"]
    POST   tables/{schema}/{name}/hideColumns[?version=n]  {"hide": [...], "unhide": [...]}
    GET    tables/{schema}/{name}/sync                     -> TableMetadata
    GET    schemas/{schema}/table/{name}                   -> TableMetadata (updateTime = version)
    GET    schemas/{schema}/names                          -> ["name", ...]
    GET    schemas/{schema}/tables                         -> [TableMetadata, ...]
    GET    schemas/{schema}/sync                           -> [TableMetadata, ...]
    GET    list/schemas/names                              -> ["druid", "ext"]
    GET    list/tables/names                               -> [{"schema", "name"}, ...]
    POST   flush                                           -> {"version": n}
    GET    sync?since=n     -> {"tables": [TableMetadata], "deleted": [TableId], "version": n}

Writes answer ``{"version": n}``, the new update time to send as ``version`` next time.
Statuses: 400 with the reason for a bad spec or parameter, 401 / 403 from the authorizer, 404
for a missing entry, schema or route, 405 for a known path with another method, 409 with
``currentVersion`` for a stale version or an entry that already exists.

The schema-level listings return TableMetadata rather than bare specs: a list of specs would
not say which table each one is. The ``sync?since=`` delta is this API's form of the gRPC
``ListTables(since_update_time)``.
"""

from __future__ import annotations

from urllib.parse import unquote

from common.catalog.catalog_errors import TableExistsError, VersionConflictError
from common.catalog.operations import DropColumns, edit_from_json
from common.catalog.table_spec import TableId, TableSpec, parse_json
from common.errors import ValidationError
from services.coordinator.json_reply import HttpError, json_reply
from services.query_errors import http_error

BASE = "/druid/coordinator/v1/catalog"
_COLUMN_ACTIONS = ("moveColumn", "dropColumn", "hideColumns")


def _param(query: dict, name: str) -> str | None:
    values = query.get(name)
    if not values:
        return None
    return values[-1] if isinstance(values, list) else values


def _int_param(query: dict, name: str) -> int | None:
    raw = _param(query, name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(f"parameter '{name}' must be an integer (an updateTime), got {raw!r}") from None


def _bool_param(query: dict, name: str) -> bool:
    raw = _param(query, name)
    if raw is None or raw == "":
        return False
    if raw.lower() not in ("true", "false"):
        raise ValidationError(f"parameter '{name}' must be true or false, got {raw!r}")
    return raw.lower() == "true"


def _body(body: bytes, what: str):
    if not body:
        raise ValidationError(f"the request needs a JSON body: {what}")
    return parse_json(body, what)


class CatalogHttp:
    """The route handler: ``endpoint.route(BASE, CatalogHttp(manager))``; callers are identified
    and checked by the manager's authorizer."""

    def __init__(self, manager) -> None:
        self.manager = manager

    def __call__(self, method: str, path: str, query: dict, body: bytes, headers: dict) -> tuple[int, str, bytes]:
        try:
            user = self.manager.authorizer.user_from_headers(headers or {})
            return self._route(method, path, query or {}, body or b"", user)
        except HttpError as exc:
            return json_reply(exc.status, {"error": str(exc), **exc.extra})
        except Exception as exc:  # noqa: BLE001 - every failure answers with its kind's status (common/errors.py)
            status, reply = http_error(exc, "coordinator")  # an internal one is logged under its id
            if isinstance(exc, (VersionConflictError, TableExistsError)):
                reply["currentVersion"] = exc.current_version
            return json_reply(status, reply)

    # ---- routing ------------------------------------------------------------------------------
    def _route(self, method: str, path: str, query: dict, body: bytes, user):
        rest = path[len(BASE):] if path.startswith(BASE) else path
        parts = [unquote(p) for p in rest.strip("/").split("/")] if rest.strip("/") else []
        n = len(parts)
        if n >= 3 and parts[0] == "tables":
            table = TableId(parts[1], parts[2])
            if n == 3:
                return self._table(method, table, query, body, user)
            if n == 4 and parts[3] in _COLUMN_ACTIONS:
                self._allow(method, "POST")
                return self._column_action(parts[3], table, query, body, user)
            if n == 4 and parts[3] == "sync":
                self._allow(method, "GET")
                return json_reply(200, self.manager.get(user, table).to_json())
        if n >= 3 and parts[0] == "schemas":
            schema = parts[1]
            if n == 4 and parts[2] == "table":
                self._allow(method, "GET")
                return json_reply(200, self.manager.get(user, TableId(schema, parts[3])).to_json())
            if n == 3 and parts[2] == "names":
                self._allow(method, "GET")
                return json_reply(200, [t.id.name for t in self.manager.list(user, schema)])
            if n == 3 and parts[2] in ("tables", "sync"):
                self._allow(method, "GET")
                return json_reply(200, [t.to_json() for t in self.manager.list(user, schema)])
        if parts == ["list", "schemas", "names"]:
            self._allow(method, "GET")
            return json_reply(200, self.manager.schemas())
        if parts == ["list", "tables", "names"]:
            self._allow(method, "GET")
            return json_reply(200, [t.id.to_json() for t in self.manager.list(user)])
        if parts == ["flush"]:
            self._allow(method, "POST")
            return json_reply(200, {"version": self.manager.flush(user)})
        if parts == ["sync"]:
            self._allow(method, "GET")
            delta = self.manager.changes(user, _int_param(query, "since") or 0, _param(query, "schema"))
            return json_reply(200, {"tables": [t.to_json() for t in delta.tables],
                                     "deleted": [d.to_json() for d in delta.deleted], "version": delta.version})
        raise HttpError(404, f"no catalog route for {method} {path}; routes are under {BASE}: tables/{{schema}}/"
                             "{name}[/moveColumn|/dropColumn|/hideColumns|/sync], schemas/{schema}/table/{name}, "
                             "schemas/{schema}/names|tables|sync, list/schemas/names, list/tables/names, flush, sync")

    @staticmethod
    def _allow(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise HttpError(405, f"method {method} is not allowed here; use {' or '.join(allowed)}")

    def _table(self, method: str, table: TableId, query: dict, body: bytes, user):
        version = _int_param(query, "version")
        if method == "GET":
            return json_reply(200, self.manager.get(user, table).spec.to_json())
        if method == "POST":
            spec = TableSpec.from_json(_body(body, "a table spec"), str(table))
            stored, _ = self.manager.create(user, table, spec, _param(query, "action") or "New", version)
            return json_reply(200, {"version": stored.update_time})
        if method == "PUT":
            partial = _body(body, "a partial table spec to merge")
            if not isinstance(partial, dict):
                raise ValidationError(f"the update must be a JSON object (a partial table spec), got {partial!r}")
            return json_reply(200, {"version": self.manager.update(user, table, partial, version).update_time})
        if method == "DELETE":
            result = self.manager.drop(user, table, _bool_param(query, "ifExists"), _bool_param(query, "purge"),
                                       version)
            out = {"dropped": result.dropped is not None, "version": result.version}
            if _bool_param(query, "purge"):
                out["segmentsMarkedUnused"] = result.segments_marked_unused
            return json_reply(200, out)
        raise HttpError(405, f"method {method} is not allowed on a table; use GET, POST, PUT or DELETE")

    def _column_action(self, action: str, table: TableId, query: dict, body: bytes, user):
        version = _int_param(query, "version")
        if action == "moveColumn":
            obj = _body(body, '{"column": ..., "where": "first|last|before|after", "anchor": ...}')
            if not isinstance(obj, dict):
                raise ValidationError(f'moveColumn takes {{"column", "where", "anchor"}}, got {obj!r}')
            unknown = sorted(set(obj) - {"column", "where", "anchor"})
            if unknown:
                raise ValidationError(f"moveColumn: unknown field(s) {', '.join(unknown)}; valid: column, where, anchor")
            edit = edit_from_json({"op": "moveColumn", **obj})
        elif action == "dropColumn":
            names = _body(body, 'a list of column names such as ["a", "b"]')
            if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
                raise ValidationError(f'dropColumn takes a JSON list of column names such as ["a", "b"], got {names!r}')
            edit = DropColumns(tuple(names))
        else:
            obj = _body(body, '{"hide": [...], "unhide": [...]}')
            if not isinstance(obj, dict) or set(obj) - {"hide", "unhide"}:
                raise ValidationError(f'hideColumns takes {{"hide": [...], "unhide": [...]}}, got {obj!r}')
            edit = edit_from_json({"op": "hideColumns", **obj})
        return json_reply(200, {"version": self.manager.edit(user, table, [edit], version).update_time})


def register(endpoint, manager) -> CatalogHttp:
    """Adds the catalog routes to an HttpEndpoint."""
    handler = CatalogHttp(manager)
    endpoint.route(BASE, handler)
    return handler
