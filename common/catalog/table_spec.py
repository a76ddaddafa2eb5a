"""The catalog's model: TableId, ColumnSpec, TableSpec and TableMetadata, and their JSON forms.

A TableSpec is what users write (type, properties, columns); TableMetadata wraps it with what the
system keeps (id, creation and update time, state). The update time doubles as the version for
optimistic locking.

The JSON form is the REST API's wire format and the stored form, and it round-trips: parsing
a spec and writing it back yields the same JSON, so a POST followed by a GET returns what was
sent. Only empty ``properties`` / ``columns`` / column ``sqlType`` are left out, as "absent" and
"empty" mean the same thing. Property values are kept as given; normalized readings (a
``Granularity``-ready period, cluster keys as pairs) are offered by the accessors below.

Parsing here checks only the shape (an object with the right keys and value kinds); what the
values may be, per table type, is ``validation``'s job.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from common.errors import ValidationError
from common.json.json_text import loads_json

DRUID_SCHEMA = "druid"  # datasources
EXT_SCHEMA = "ext"  # input (external) tables
SCHEMAS = (DRUID_SCHEMA, EXT_SCHEMA)

DATASOURCE = "datasource"
INLINE = "inline"
LOCAL = "local"
HTTP = "http"
INPUT_TYPES = (INLINE, LOCAL, HTTP)
# The schema each table type lives in: the schema decides the permission resource as well.
TABLE_TYPES = {DATASOURCE: DRUID_SCHEMA, INLINE: EXT_SCHEMA, LOCAL: EXT_SCHEMA, HTTP: EXT_SCHEMA}

ACTIVE = "ACTIVE"
# Dropped entries stay as rows in this state (tombstones) so delta sync can report deletions.
DELETED = "DELETED"

_SPEC_KEYS = ("type", "properties", "columns")
_COLUMN_KEYS = ("name", "sqlType", "properties")


def _where(where: str) -> str:
    return f"{where}: " if where else ""


@dataclass(frozen=True, order=True)
class TableId:
    schema: str
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"

    def to_json(self) -> dict:
        return {"schema": self.schema, "name": self.name}

    @staticmethod
    def from_json(obj) -> TableId:
        if not isinstance(obj, Mapping) or not isinstance(obj.get("schema"), str) or not isinstance(
                obj.get("name"), str):
            raise ValidationError(f'a table id must be {{"schema": "...", "name": "..."}}, got {obj!r}')
        return TableId(obj["schema"], obj["name"])

    @staticmethod
    def parse(text: str, default_schema: str = DRUID_SCHEMA) -> TableId:
        """``schema.name`` or a bare ``name`` (in ``default_schema``); only a known schema prefix
        splits, so datasource names containing dots stay whole."""
        head, dot, tail = text.partition(".")
        if dot and head in SCHEMAS and tail:
            return TableId(head, tail)
        return TableId(default_schema, text)


@dataclass(frozen=True)
class ColumnSpec:
    """A declared column. ``sql_type`` None means "whatever the segments hold" (datasources) or
    VARCHAR (input tables)."""

    name: str
    sql_type: str | None = None
    properties: dict = field(default_factory=dict, hash=False)

    def to_json(self) -> dict:
        out: dict = {"name": self.name}
        if self.sql_type is not None:
            out["sqlType"] = self.sql_type
        if self.properties:
            out["properties"] = copy.deepcopy(self.properties)
        return out

    @staticmethod
    def from_json(obj, where: str = "") -> ColumnSpec:
        if not isinstance(obj, Mapping):
            raise ValidationError(f'{_where(where)}a column must be an object such as {{"name": "x", '
                                  f'"sqlType": "BIGINT"}}, got {obj!r}')
        unknown = sorted(set(obj) - set(_COLUMN_KEYS))
        if unknown:
            raise ValidationError(f"{_where(where)}column {obj.get('name')!r} has unknown key(s) "
                                  f"{', '.join(unknown)}; valid keys: {', '.join(_COLUMN_KEYS)}")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{_where(where)}every column needs a non-empty \"name\", got {obj!r}")
        sql_type = obj.get("sqlType")
        if sql_type is not None and not isinstance(sql_type, str):
            raise ValidationError(f"{_where(where)}column '{name}': sqlType must be a string such as "
                                  f"'BIGINT', got {sql_type!r}")
        props = obj.get("properties")
        props = {} if props is None else props
        if not isinstance(props, Mapping):
            raise ValidationError(f"{_where(where)}column '{name}': properties must be an object, got {props!r}")
        return ColumnSpec(name, sql_type, copy.deepcopy(dict(props)))


@dataclass(frozen=True)
class TableSpec:
    type: str
    properties: dict = field(default_factory=dict, hash=False)
    columns: tuple[ColumnSpec, ...] = ()

    # ---- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict:
        out: dict = {"type": self.type}
        if self.properties:
            out["properties"] = copy.deepcopy(self.properties)
        if self.columns:
            out["columns"] = [c.to_json() for c in self.columns]
        return out

    def to_text(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(obj, where: str = "") -> TableSpec:
        if not isinstance(obj, Mapping):
            raise ValidationError(f'{_where(where)}a table spec must be a JSON object such as {{"type": '
                                  f'"datasource", "properties": {{...}}, "columns": [...]}}, got {obj!r}')
        unknown = sorted(set(obj) - set(_SPEC_KEYS))
        if unknown:
            raise ValidationError(f"{_where(where)}unknown table spec key(s) {', '.join(unknown)}; valid keys: "
                                  f"{', '.join(_SPEC_KEYS)} (table properties go inside \"properties\")")
        kind = obj.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValidationError(f"{_where(where)}the table spec needs a \"type\"; valid types: "
                                  f"{', '.join(TABLE_TYPES)}")
        props = obj.get("properties")
        props = {} if props is None else props
        if not isinstance(props, Mapping):
            raise ValidationError(f"{_where(where)}\"properties\" must be an object, got {props!r}")
        cols = obj.get("columns")
        cols = [] if cols is None else cols
        if not isinstance(cols, list):
            raise ValidationError(f"{_where(where)}\"columns\" must be a list of column objects, got {cols!r}")
        return TableSpec(kind, copy.deepcopy(dict(props)), tuple(ColumnSpec.from_json(c, where) for c in cols))

    @staticmethod
    def from_text(text: str | bytes, where: str = "") -> TableSpec:
        return TableSpec.from_json(parse_json(text, "table spec", where), where)

    # ---- columns ---------------------------------------------------------------------------
    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnSpec | None:
        return next((c for c in self.columns if c.name == name), None)

    # ---- readings of datasource properties (valid specs only) ------------------------------
    @property
    def is_input(self) -> bool:
        return self.type in INPUT_TYPES

    @property
    def description(self) -> str | None:
        return self.properties.get("description")

    @property
    def segment_granularity(self) -> str | None:
        """The declared segment granularity as ``Granularity.parse`` takes it ('PT1H', 'P1D',
        'all'), whichever spelling was stored."""
        from common.catalog.validation import canonical_granularity

        value = self.properties.get("segmentGranularity")
        return None if value is None else canonical_granularity(value)

    @property
    def target_segment_rows(self) -> int | None:
        return self.properties.get("targetSegmentRows")

    @property
    def cluster_keys(self) -> list[tuple[str, bool]]:
        """(column, descending) pairs, in order."""
        return [(k["column"], bool(k.get("desc", False))) for k in self.properties.get("clusterKeys") or []]

    @property
    def hidden_columns(self) -> list[str]:
        return list(self.properties.get("hiddenColumns") or [])

    @property
    def projections(self) -> list[dict]:
        """Projection definitions (Druid's aggregate projection JSON plus ``filter``), in order."""
        return list(self.properties.get("projections") or [])

    @property
    def sealed(self) -> bool:
        """A sealed datasource takes only its declared columns at ingestion."""
        return bool(self.properties.get("sealed", False))


@dataclass(frozen=True)
class TableMetadata:
    id: TableId
    creation_time: int
    update_time: int
    state: str
    spec: TableSpec

    @property
    def version(self) -> int:
        return self.update_time

    def to_json(self) -> dict:
        return {"id": self.id.to_json(), "creationTime": self.creation_time, "updateTime": self.update_time,
                "state": self.state, "spec": self.spec.to_json()}

    @staticmethod
    def from_json(obj) -> TableMetadata:
        if not isinstance(obj, Mapping) or not all(k in obj for k in ("id", "creationTime", "updateTime", "spec")):
            raise ValidationError("table metadata must have id, creationTime, updateTime, state and spec, got "
                                  f"{obj!r}")
        return TableMetadata(TableId.from_json(obj["id"]), int(obj["creationTime"]), int(obj["updateTime"]),
                             str(obj.get("state", ACTIVE)), TableSpec.from_json(obj["spec"], str(obj["id"])))


def parse_json(text: str | bytes, what: str, where: str = ""):
    """JSON text to a value, with a message that says which payload was malformed and where."""
    try:
        return loads_json(text, what)
    except ValidationError as exc:
        raise ValidationError(f"{_where(where)}{exc}") from None
