"""``strata catalog ...``: the table catalog from the command line, over the coordinator's REST API.

    strata catalog create druid.wiki --spec spec.json [--action Force] [--version N]
    strata catalog get druid.wiki [--metadata]
    strata catalog list [--schema druid]
    strata catalog update druid.wiki --spec '{"properties": {"targetSegmentRows": 1000000}}'
    strata catalog drop druid.wiki [--if-exists] [--purge]
    strata catalog move druid.wiki channel after page
    strata catalog hide druid.wiki colA colB [--unhide colC]
    strata catalog drop-column druid.wiki colA colB
    strata catalog schemas | flush
    strata catalog ddl "ALTER TABLE wiki ADD COLUMN x BIGINT"

A bare table name is in schema ``druid``. The coordinator is ``--coordinator-http URL`` or the
one of the cluster in ``--dir``; credentials come from ``--user`` / STRATA_USER and
STRATA_PASSWORD. ``ddl`` translates the statement here and applies it as a read, edit locally,
``Replace`` at the read version: a concurrent change makes it fail with 409 instead of being lost.

``register(subparsers)`` adds the command to strata's parser; ``CatalogRestClient`` is the
reusable part.
"""

from __future__ import annotations

import argparse
from urllib.parse import quote

from common.catalog.ddl import translate_ddl
from common.catalog.operations import CreateTable, DropTable, EditTable, apply_edits
from common.catalog.table_spec import TableId, TableMetadata, TableSpec
from common.errors import StrataError
from services.cli.coordinator_rest_client import (
    DEFAULT_TIMEOUT_S,
    CoordinatorRequestError,
    CoordinatorRestClient,
    add_coordinator_arguments,
    coordinator_from_args,
    print_json,
    read_json_argument,
)

BASE = "/druid/coordinator/v1/catalog"

# The name the catalog's callers and tests know; the error is the coordinator REST client's.
CatalogRequestError = CoordinatorRequestError


class CatalogRestClient(CoordinatorRestClient):
    def __init__(self, base_url: str, authorization: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(base_url, BASE, authorization, timeout_s)

    @staticmethod
    def _path(table: TableId, *rest: str) -> str:
        return "/".join(["tables", quote(table.schema, safe=""), quote(table.name, safe=""), *rest])

    # ---- the proposal's endpoints -------------------------------------------------------------
    def create(self, table: TableId, spec: dict, action: str | None = None, version: int | None = None) -> int:
        return self.request("POST", self._path(table), {"action": action, "version": version}, spec)["version"]

    def update(self, table: TableId, partial: dict, version: int | None = None) -> int:
        return self.request("PUT", self._path(table), {"version": version}, partial)["version"]

    def get_spec(self, table: TableId) -> dict:
        return self.request("GET", self._path(table))

    def get_metadata(self, table: TableId) -> TableMetadata:
        path = f"schemas/{quote(table.schema, safe='')}/table/{quote(table.name, safe='')}"
        return TableMetadata.from_json(self.request("GET", path))

    def drop(self, table: TableId, if_exists: bool = False, purge: bool = False) -> dict:
        return self.request("DELETE", self._path(table), {"ifExists": if_exists or None, "purge": purge or None})

    def move_column(self, table: TableId, column: str, where: str, anchor: str | None = None,
                    version: int | None = None) -> int:
        body = {"column": column, "where": where, **({"anchor": anchor} if anchor else {})}
        return self.request("POST", self._path(table, "moveColumn"), {"version": version}, body)["version"]

    def drop_columns(self, table: TableId, columns: list[str], version: int | None = None) -> int:
        return self.request("POST", self._path(table, "dropColumn"), {"version": version}, columns)["version"]

    def hide_columns(self, table: TableId, hide: list[str] = (), unhide: list[str] = (),
                     version: int | None = None) -> int:
        return self.request("POST", self._path(table, "hideColumns"), {"version": version},
                            {"hide": list(hide), "unhide": list(unhide)})["version"]

    def schemas(self) -> list[str]:
        return self.request("GET", "list/schemas/names")

    def table_names(self) -> list[TableId]:
        return [TableId.from_json(t) for t in self.request("GET", "list/tables/names")]

    def tables(self, schema: str) -> list[TableMetadata]:
        return [TableMetadata.from_json(t) for t in self.request("GET", f"schemas/{quote(schema, safe='')}/tables")]

    def flush(self) -> int:
        return self.request("POST", "flush")["version"]

    def ddl(self, sql: str) -> str:
        """Applies a CREATE / ALTER / DROP TABLE statement; returns what was done."""
        op = translate_ddl(sql)
        if isinstance(op, CreateTable):
            version = self.create(op.table, op.spec.to_json(), op.action)
            return f"{op.describe()} (version {version})"
        if isinstance(op, DropTable):
            out = self.drop(op.table, op.if_exists, op.purge)
            if not out.get("dropped") and not out.get("segmentsMarkedUnused"):
                return f"table {op.table} does not exist; nothing dropped"
            extra = f" ({out.get('segmentsMarkedUnused', 0)} segments)" if op.purge else ""
            return op.describe() + extra
        if not isinstance(op, EditTable):
            raise StrataError(f"unknown catalog operation {type(op).__name__}")
        current = self.get_metadata(op.table)
        spec = apply_edits(current.spec, op.edits)
        version = self.create(op.table, spec.to_json(), "Replace", current.update_time)
        return f"{op.describe()} (version {version})"


# ---- command line ------------------------------------------------------------------------------


def _read_spec(text: str) -> dict:
    value = read_json_argument(text, "--spec")
    if not isinstance(value, dict):
        raise StrataError(f"--spec must be a JSON object (a table spec), got {value!r}")
    return value


def client_from_args(args) -> CatalogRestClient:
    return CatalogRestClient(*coordinator_from_args(args))


def run_catalog(client: CatalogRestClient, args) -> int:
    action = args.action
    table = TableId.parse(args.table) if getattr(args, "table", None) else None
    if action == "create":
        TableSpec.from_json(spec := _read_spec(args.spec))  # shape errors before the round trip
        print(f"created {table} version {client.create(table, spec, args.action_name, args.version)}")
    elif action == "update":
        print(f"updated {table} version {client.update(table, _read_spec(args.spec), args.version)}")
    elif action == "get":
        print_json(client.get_metadata(table).to_json() if args.metadata else client.get_spec(table))
    elif action == "list":
        schemas = [args.schema] if args.schema else client.schemas()
        for schema in schemas:
            for t in client.tables(schema):
                cols = ", ".join(f"{c.name} {c.sql_type or ''}".strip() for c in t.spec.columns)
                print(f"{t.id}\t{t.spec.type}\tversion {t.update_time}\t{cols}")
    elif action == "drop":
        out = client.drop(table, args.if_exists, args.purge)
        what = "dropped" if out.get("dropped") else "no entry for"
        extra = f"; {out['segmentsMarkedUnused']} segments marked unused" if "segmentsMarkedUnused" in out else ""
        print(f"{what} {table}{extra}")
    elif action == "move":
        version = client.move_column(table, args.column, args.where, args.anchor, args.version)
        print(f"moved {args.column} {args.where}{' ' + args.anchor if args.anchor else ''} in {table}: version "
              f"{version}")
    elif action == "hide":
        version = client.hide_columns(table, args.columns, args.unhide or [], args.version)
        print(f"hid {', '.join(args.columns) or 'nothing'} in {table}: version {version}")
    elif action == "drop-column":
        print(f"dropped {', '.join(args.columns)} from {table}: version "
              f"{client.drop_columns(table, args.columns, args.version)}")
    elif action == "schemas":
        print("\n".join(client.schemas()))
    elif action == "flush":
        print(f"catalog version {client.flush()} re-announced")
    elif action == "ddl":
        print(client.ddl(args.sql))
    return 0


def cmd_catalog(args) -> int:
    return run_catalog(client_from_args(args), args)


def register(subparsers, default_dir: str = "var/cluster") -> argparse.ArgumentParser:
    """Adds ``catalog`` and its actions to strata's argparse subparsers."""
    p = subparsers.add_parser("catalog", help="the table catalog: create, get, list, update, drop tables and columns")
    add_coordinator_arguments(p, default_dir)
    actions = p.add_subparsers(dest="action", required=True)

    def table_action(name: str, help_: str) -> argparse.ArgumentParser:
        a = actions.add_parser(name, help=help_)
        a.add_argument("table", help="schema.name (druid.wiki, ext.input) or a datasource name")
        return a

    a = table_action("create", "create (or replace) a table entry from a JSON spec")
    a.add_argument("--spec", required=True, help="the TableSpec as JSON text, a file, or - for stdin")
    a.add_argument("--action", dest="action_name", default=None, help="New (default), IfNew, Replace or Force")
    a.add_argument("--version", type=int, help="Replace/Force only if the entry is at this version")
    a = table_action("update", "merge a partial spec into a table entry")
    a.add_argument("--spec", required=True)
    a.add_argument("--version", type=int)
    a = table_action("get", "print a table's spec")
    a.add_argument("--metadata", action="store_true", help="the full metadata, with updateTime (the version)")
    a = actions.add_parser("list", help="list table entries")
    a.add_argument("--schema", help="druid or ext (default: both)")
    a = table_action("drop", "drop a table entry")
    a.add_argument("--if-exists", action="store_true")
    a.add_argument("--purge", action="store_true", help="also mark every segment of the datasource unused")
    a = table_action("move", "move a column: first, last, before or after another")
    a.add_argument("column")
    a.add_argument("where", choices=["first", "last", "before", "after"])
    a.add_argument("anchor", nargs="?")
    a.add_argument("--version", type=int)
    a = table_action("hide", "hide datasource columns (or --unhide them)")
    a.add_argument("columns", nargs="*")
    a.add_argument("--unhide", nargs="+")
    a.add_argument("--version", type=int)
    a = table_action("drop-column", "remove column entries")
    a.add_argument("columns", nargs="+")
    a.add_argument("--version", type=int)
    actions.add_parser("schemas", help="list the catalog's schemas")
    actions.add_parser("flush", help="make every broker reload the catalog")
    a = actions.add_parser("ddl", help="run CREATE / ALTER / DROP TABLE against the catalog")
    a.add_argument("sql")
    p.set_defaults(func=cmd_catalog)
    return p
