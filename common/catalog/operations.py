"""Changes to a catalog entry, as pure functions from one TableSpec to the next, and the
operations (create, edit, drop) that the REST API, gRPC, the CLI and SQL DDL all reduce to.

PUT merge rules (``merge_update``):

- ``type``, if given, must equal the stored type: changing a table's kind is a drop and create.
- properties: a key set to null is removed; ``hiddenColumns`` is appended to (the common case
  is hiding one more column; ``hide_columns`` can also unhide); every other key is replaced.
- columns of a datasource merge by name: a known column takes the given sqlType (an explicit
  null clears it) and merges its properties the same way; a new column is appended. Order can
  change only through ``move_column`` and removal only through ``drop_columns``.
- columns of an input table are replaced as a whole when given, since they must follow the
  order of the fields in the input files and a by-name merge could not express that.

Every function returns a new spec; the caller validates the result before storing it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from common.catalog.table_spec import DATASOURCE, ColumnSpec, TableId, TableSpec
from common.errors import ValidationError, unknown_name_message

ACTIONS = ("New", "IfNew", "Replace", "Force")
MOVE_WHERE = ("first", "last", "before", "after")


def parse_action(text: str | None) -> str:
    """A POST ``action`` (case-insensitive); the default is New."""
    if text is None or text == "":
        return "New"
    for action in ACTIONS:
        if text.lower() == action.lower():
            return action
    raise ValidationError(f"action {text!r} is not valid; valid actions: {', '.join(ACTIONS)} (New: create, fail "
                          "if it exists; IfNew: create unless it exists; Replace: overwrite an existing entry; "
                          "Force: create or overwrite)")


def _columns_text(spec: TableSpec) -> str:
    return ", ".join(spec.column_names) or "none"


def _known_column(spec: TableSpec, name: str, what: str) -> None:
    if spec.column(name) is None:
        raise ValidationError(f"{what} '{name}' is not a declared column of the table; declared columns: "
                              f"{_columns_text(spec)}")


# ---- PUT merge -----------------------------------------------------------------------------------


def _merge_properties(old: Mapping, update: Mapping, list_merge: Sequence[str] = ()) -> dict:
    out = copy.deepcopy(dict(old))
    for key, value in update.items():
        if value is None:
            out.pop(key, None)
        elif key in list_merge and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = out[key] + [v for v in value if v not in out[key]]
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_column(old: ColumnSpec, update: Mapping) -> ColumnSpec:
    sql_type = update["sqlType"] if "sqlType" in update else old.sql_type
    props = _merge_properties(old.properties, update.get("properties") or {})
    return ColumnSpec(old.name, sql_type, props)


def merge_update(spec: TableSpec, update) -> TableSpec:
    """``spec`` with a partial spec (PUT body, as JSON) merged in; see the module notes."""
    if not isinstance(update, Mapping):
        raise ValidationError(f"an update must be a JSON object (a partial table spec), got {update!r}")
    if "type" in update and update["type"] != spec.type:
        raise ValidationError(f"an update cannot change the table type from '{spec.type}' to {update['type']!r}; "
                              "drop the table and create it again")
    partial = TableSpec.from_json({**update, "type": spec.type}, "update")  # checks the shape of every part
    props = _merge_properties(spec.properties, update.get("properties") or {},
                              ("hiddenColumns",) if spec.type == DATASOURCE else ())
    if "columns" not in update:
        columns = spec.columns
    elif spec.type == DATASOURCE:
        merged = list(spec.columns)
        index = {c.name: i for i, c in enumerate(merged)}
        for raw, col in zip(update["columns"] or [], partial.columns):
            if col.name in index:
                merged[index[col.name]] = _merge_column(merged[index[col.name]], raw)
            else:
                index[col.name] = len(merged)
                merged.append(ColumnSpec(col.name, col.sql_type, _merge_properties({}, col.properties)))
        columns = tuple(merged)
    else:
        columns = partial.columns
    return TableSpec(spec.type, props, columns)


# ---- column edits ------------------------------------------------------------------------------


def move_column(spec: TableSpec, column: str, where: str, anchor: str | None = None) -> TableSpec:
    """Moves ``column`` first, last, or before / after ``anchor``."""
    place = (where or "").lower()
    if place not in MOVE_WHERE:
        raise ValidationError(f"moveColumn 'where' is {where!r}; valid: {', '.join(MOVE_WHERE)}")
    _known_column(spec, column, "column")
    rest = [c for c in spec.columns if c.name != column]
    moving = spec.column(column)
    if place == "first":
        cols = [moving, *rest]
    elif place == "last":
        cols = [*rest, moving]
    else:
        if not anchor:
            raise ValidationError(f"moveColumn '{place}' needs an 'anchor' column")
        if anchor == column:
            raise ValidationError(f"column '{column}' cannot move {place} itself")
        _known_column(spec, anchor, "anchor column")
        at = next(i for i, c in enumerate(rest) if c.name == anchor) + (1 if place == "after" else 0)
        cols = [*rest[:at], moving, *rest[at:]]
    return TableSpec(spec.type, copy.deepcopy(spec.properties), tuple(cols))


def drop_columns(spec: TableSpec, names: Sequence[str]) -> TableSpec:
    """Removes the columns' catalog entries (not their data, and not from hiddenColumns)."""
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise ValidationError(f'dropColumn takes a JSON list of column names such as ["a", "b"], got {names!r}')
    for name in names:
        _known_column(spec, name, "column")
    gone = set(names)
    return TableSpec(spec.type, copy.deepcopy(spec.properties), tuple(c for c in spec.columns if c.name not in gone))


def add_columns(spec: TableSpec, columns: Sequence[ColumnSpec]) -> TableSpec:
    """Appends new columns; naming an existing one is an error (SQL's ADD COLUMN)."""
    for col in columns:
        old = spec.column(col.name)
        if old is not None:
            raise ValidationError(f"column '{col.name}' already exists (sqlType {old.sql_type or 'unset'}); drop it "
                                  "first or change it with an update")
    return TableSpec(spec.type, copy.deepcopy(spec.properties), (*spec.columns, *columns))


def hide_columns(spec: TableSpec, hide: Sequence[str] = (), unhide: Sequence[str] = ()) -> TableSpec:
    """Adds ``hide`` to and removes ``unhide`` from the datasource's hiddenColumns."""
    if spec.type != DATASOURCE:
        raise ValidationError(f"only datasources hide columns; this is a '{spec.type}' table, whose columns can be "
                              "dropped instead")
    for what, names in (("hide", hide), ("unhide", unhide)):
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise ValidationError(f"hideColumns '{what}' must be a list of column names, got {names!r}")
    hidden = [c for c in spec.properties.get("hiddenColumns") or [] if c not in set(unhide)]
    hidden += [c for c in dict.fromkeys(hide) if c not in hidden and c not in set(unhide)]
    props = copy.deepcopy(spec.properties)
    if hidden:
        props["hiddenColumns"] = hidden
    else:
        props.pop("hiddenColumns", None)
    return TableSpec(spec.type, props, spec.columns)


def set_properties(spec: TableSpec, properties: Mapping) -> TableSpec:
    """Sets (or with a null value removes) properties, replacing lists instead of appending."""
    return TableSpec(spec.type, _merge_properties(spec.properties, properties), spec.columns)


# ---- edits: one change, in a form that travels (REST body, gRPC JSON, DDL) ------------------------


@dataclass(frozen=True)
class MergeUpdate:
    update: dict = field(hash=False)
    op = "update"

    def apply(self, spec: TableSpec) -> TableSpec:
        return merge_update(spec, self.update)

    def to_json(self) -> dict:
        return {"op": self.op, "update": copy.deepcopy(self.update)}


@dataclass(frozen=True)
class SetProperties:
    properties: dict = field(hash=False)
    op = "setProperties"

    def apply(self, spec: TableSpec) -> TableSpec:
        return set_properties(spec, self.properties)

    def to_json(self) -> dict:
        return {"op": self.op, "properties": copy.deepcopy(self.properties)}


@dataclass(frozen=True)
class AddColumns:
    columns: tuple[ColumnSpec, ...]
    op = "addColumns"

    def apply(self, spec: TableSpec) -> TableSpec:
        return add_columns(spec, self.columns)

    def to_json(self) -> dict:
        return {"op": self.op, "columns": [c.to_json() for c in self.columns]}


@dataclass(frozen=True)
class DropColumns:
    names: tuple[str, ...]
    op = "dropColumns"

    def apply(self, spec: TableSpec) -> TableSpec:
        return drop_columns(spec, self.names)

    def to_json(self) -> dict:
        return {"op": self.op, "columns": list(self.names)}


@dataclass(frozen=True)
class HideColumns:
    hide: tuple[str, ...] = ()
    unhide: tuple[str, ...] = ()
    op = "hideColumns"

    def apply(self, spec: TableSpec) -> TableSpec:
        return hide_columns(spec, self.hide, self.unhide)

    def to_json(self) -> dict:
        return {"op": self.op, "hide": list(self.hide), "unhide": list(self.unhide)}


@dataclass(frozen=True)
class MoveColumn:
    column: str
    where: str
    anchor: str | None = None
    op = "moveColumn"

    def apply(self, spec: TableSpec) -> TableSpec:
        return move_column(spec, self.column, self.where, self.anchor)

    def to_json(self) -> dict:
        out = {"op": self.op, "column": self.column, "where": self.where}
        if self.anchor is not None:
            out["anchor"] = self.anchor
        return out


@dataclass(frozen=True)
class AddProjection:
    """Add a projection definition. From DDL it first carries the SELECT text (``select_sql``),
    which the broker plans against the table into the definition before the edit is applied."""

    projection: dict | None = field(default=None, hash=False)
    name: str = ""
    select_sql: str | None = None
    op = "addProjection"

    def apply(self, spec: TableSpec) -> TableSpec:
        if self.projection is None:
            raise ValidationError(f"projection '{self.name}' is still SQL text; plan it against the table first")
        name = self.projection.get("name")
        if spec.type != DATASOURCE:
            raise ValidationError(f"projection '{name}': only datasources have projections, not {spec.type} tables")
        existing = spec.projections
        if any(p.get("name") == name for p in existing):
            raise ValidationError(f"projection '{name}' already exists; drop it first (ALTER TABLE .. DROP "
                                  f"PROJECTION {name}) or choose another name")
        props = dict(spec.properties)
        props["projections"] = [*existing, copy.deepcopy(self.projection)]
        return TableSpec(spec.type, props, spec.columns)

    def to_json(self) -> dict:
        return {"op": self.op, "projection": copy.deepcopy(self.projection)}


@dataclass(frozen=True)
class DropProjection:
    name: str
    op = "dropProjection"

    def apply(self, spec: TableSpec) -> TableSpec:
        existing = spec.projections
        kept = [p for p in existing if p.get("name") != self.name]
        if len(kept) == len(existing):
            raise ValidationError(unknown_name_message("projection", self.name, [p.get("name") for p in existing]))
        props = dict(spec.properties)
        if kept:
            props["projections"] = kept
        else:
            props.pop("projections", None)
        return TableSpec(spec.type, props, spec.columns)

    def to_json(self) -> dict:
        return {"op": self.op, "name": self.name}


TableEdit = MergeUpdate | SetProperties | AddColumns | DropColumns | HideColumns | MoveColumn | AddProjection | DropProjection
EDIT_OPS = ("update", "setProperties", "addColumns", "dropColumns", "hideColumns", "moveColumn", "addProjection",
            "dropProjection")


def _names(obj: Mapping, key: str) -> tuple[str, ...]:
    value = obj.get(key) or []
    if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"edit '{obj.get('op')}': '{key}' must be a list of column names, got {value!r}")
    return tuple(value)


def edit_from_json(obj) -> TableEdit:
    if not isinstance(obj, Mapping) or obj.get("op") not in EDIT_OPS:
        got = obj.get("op") if isinstance(obj, Mapping) else obj
        raise ValidationError(f"unknown table edit {got!r}; valid ops: {', '.join(EDIT_OPS)}")
    op = obj["op"]
    if op == "update":
        if not isinstance(obj.get("update"), Mapping):
            raise ValidationError("edit 'update' needs an 'update' object (a partial table spec)")
        return MergeUpdate(dict(obj["update"]))
    if op == "setProperties":
        if not isinstance(obj.get("properties"), Mapping):
            raise ValidationError("edit 'setProperties' needs a 'properties' object")
        return SetProperties(dict(obj["properties"]))
    if op == "addColumns":
        cols = obj.get("columns")
        if not isinstance(cols, list) or not cols:
            raise ValidationError("edit 'addColumns' needs a non-empty 'columns' list")
        return AddColumns(tuple(ColumnSpec.from_json(c) for c in cols))
    if op == "dropColumns":
        return DropColumns(_names(obj, "columns"))
    if op == "hideColumns":
        return HideColumns(_names(obj, "hide"), _names(obj, "unhide"))
    if op == "addProjection":
        if not isinstance(obj.get("projection"), Mapping):
            raise ValidationError("edit 'addProjection' needs a 'projection' object (an aggregate projection spec)")
        return AddProjection(dict(obj["projection"]), str(obj["projection"].get("name", "")))
    if op == "dropProjection":
        if not isinstance(obj.get("name"), str) or not obj["name"]:
            raise ValidationError("edit 'dropProjection' needs the projection's 'name'")
        return DropProjection(obj["name"])
    if not isinstance(obj.get("column"), str):
        raise ValidationError('edit \'moveColumn\' needs {"column": ..., "where": "first|last|before|after", '
                              '"anchor": ...}')
    return MoveColumn(obj["column"], str(obj.get("where", "")), obj.get("anchor"))


def apply_edits(spec: TableSpec, edits: Sequence[TableEdit]) -> TableSpec:
    for edit in edits:
        spec = edit.apply(spec)
    return spec


# ---- whole operations --------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateTable:
    """POST tables/{schema}/{name}?action=..., or CREATE [OR REPLACE] [EXTERNAL] TABLE."""

    table: TableId
    spec: TableSpec
    action: str = "New"

    def describe(self) -> str:
        return f"{'replaced' if self.action in ('Replace', 'Force') else 'created'} table {self.table}"


@dataclass(frozen=True)
class EditTable:
    """Edits applied together, under one version check (ALTER TABLE with several actions)."""

    table: TableId
    edits: tuple[TableEdit, ...]

    def describe(self) -> str:
        return f"altered table {self.table}"


@dataclass(frozen=True)
class DropTable:
    """DELETE tables/{schema}/{name}, or DROP TABLE. ``purge`` also marks every segment of the
    datasource unused (DROP TABLE ... PURGE)."""

    table: TableId
    if_exists: bool = False
    purge: bool = False

    def describe(self) -> str:
        return f"dropped table {self.table}" + (" and marked its segments unused" if self.purge else "")


CatalogOperation = CreateTable | EditTable | DropTable
