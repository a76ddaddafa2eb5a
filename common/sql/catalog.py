"""The catalog SQL plans against: the ``SqlCatalog`` protocol the broker implements, table name
resolution over the three schemas (``druid``, ``sys``, ``INFORMATION_SCHEMA``), and the
INFORMATION_SCHEMA tables, which are built here from the catalog alone (no I/O of their own).

``druid`` is the default schema, so ``wiki`` and ``druid.wiki`` name the same datasource. Schema
names match case-insensitively (tools spell INFORMATION_SCHEMA either way); datasource and column
names are case-sensitive, as in Druid.
"""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa

from common.errors import ValidationError, unknown_name_message
from common.sql import sql_types
from common.sql.logical_plan import Field, TableRef
from common.sql.sql_types import BIGINT, VARCHAR, SqlType
from common.types.column_type import TIME_COLUMN, ColumnType

CATALOG_NAME = "druid"
DRUID = "druid"
SYS = "sys"
INFORMATION_SCHEMA = "INFORMATION_SCHEMA"
EXT = "ext"  # input (external) tables defined in the catalog
SCHEMAS = (DRUID, SYS, INFORMATION_SCHEMA, EXT)


class SqlCatalog(Protocol):
    """Everything SQL planning, INFORMATION_SCHEMA and ingestion preparation ask of a catalog. Callers
    call these methods directly (no probing for optional ones), so wrappers such as the broker's
    per-user SecureSqlCatalog can check each one; a catalog without a table catalog or input tables
    inherits SegmentsOnlyCatalog's answers for those."""

    # ---- datasources (schema druid) ----
    def datasource_names(self) -> list[str]:
        """Datasources that have served segments or a catalog definition."""

    def datasource_schema(self, name: str) -> dict[str, ColumnType] | None:
        """Union of the datasource's segment schemas (newest type wins); None when unknown."""

    def declared_order(self, name: str) -> bool:
        """Whether the datasource's columns come in the order the table catalog declares."""

    def table_properties(self, name: str) -> dict | None:
        """The datasource's catalog properties (segmentGranularity, clusterKeys, ...), or None."""

    def datasource_spec(self, name: str) -> dict | None:
        """The datasource's whole catalog entry (properties and columns), or None."""

    def segment_manifests(self, name: str) -> list[str]:
        """Manifests (JSON text) of the datasource's served segments, for EXPLAIN's per-segment
        account of projections; empty when the catalog does not know segments' insides."""

    def segment_datasources(self) -> dict[str, str]:
        """The datasource of each segment the sys tables name, by segment id text, as the typed
        SegmentId says (an id's text alone is ambiguous: datasource names may hold '_')."""

    # ---- system tables (schema sys) ----
    def system_table_names(self) -> list[str]:
        """Names of the tables under ``sys``."""

    def system_table(self, schema: str, name: str) -> pa.Table | None:
        """A materialized sys table (segments, servers, server_segments, tasks); None when unknown."""

    # ---- input tables (schema ext) ----
    def external_table_names(self) -> list[str]:
        """Input tables the table catalog defines."""

    def external_table_schema(self, name: str) -> dict[str, ColumnType]:
        """An input table's columns; ValidationError when there is no such table."""

    def external_source(self, name: str, args: dict) -> object:
        """The input table ``name`` called with ``args``, as an ingestion ExternalSource."""

    def external_table(self, name: str, args: dict) -> pa.Table:
        """The rows of the input table ``name`` called with ``args``, read where the query plans."""


class SegmentsOnlyCatalog:
    """Base of a SqlCatalog that knows served segments and sys tables only (subclasses implement
    those four methods): no table catalog, so no declared order, properties or specs, and no input
    tables."""

    def declared_order(self, name: str) -> bool:
        return False

    def table_properties(self, name: str) -> dict | None:
        return None

    def datasource_spec(self, name: str) -> dict | None:
        return None

    def segment_manifests(self, name: str) -> list[str]:
        return []

    def segment_datasources(self) -> dict[str, str]:
        return {}

    def external_table_names(self) -> list[str]:
        return []

    def external_table_schema(self, name: str) -> dict[str, ColumnType]:
        raise ValidationError(f"no input table {EXT}.{name}: this catalog has no input tables")

    def external_source(self, name: str, args: dict) -> object:
        raise ValidationError(f"no input table {EXT}.{name}: this catalog has no input tables")

    def external_table(self, name: str, args: dict) -> pa.Table:
        raise ValidationError(f"no input table {EXT}.{name}: this catalog has no input tables")


def _fields(*pairs: tuple[str, SqlType]) -> tuple[Field, ...]:
    return tuple(Field(n, t) for n, t in pairs)


INFORMATION_SCHEMA_FIELDS: dict[str, tuple[Field, ...]] = {
    "SCHEMATA": _fields(("CATALOG_NAME", VARCHAR), ("SCHEMA_NAME", VARCHAR), ("SCHEMA_OWNER", VARCHAR),
                        ("DEFAULT_CHARACTER_SET_CATALOG", VARCHAR), ("DEFAULT_CHARACTER_SET_SCHEMA", VARCHAR),
                        ("DEFAULT_CHARACTER_SET_NAME", VARCHAR), ("SQL_PATH", VARCHAR)),
    # Besides the standard columns, the catalog's datasource properties, as the catalog proposal suggests.
    "TABLES": _fields(("TABLE_CATALOG", VARCHAR), ("TABLE_SCHEMA", VARCHAR), ("TABLE_NAME", VARCHAR),
                      ("TABLE_TYPE", VARCHAR), ("IS_JOINABLE", VARCHAR), ("IS_BROADCAST", VARCHAR),
                      ("SEGMENT_GRANULARITY", VARCHAR), ("TARGET_SEGMENT_ROWS", BIGINT), ("CLUSTER_KEYS", VARCHAR),
                      ("SEALED", VARCHAR), ("DESCRIPTION", VARCHAR)),
    "COLUMNS": _fields(("TABLE_CATALOG", VARCHAR), ("TABLE_SCHEMA", VARCHAR), ("TABLE_NAME", VARCHAR),
                       ("COLUMN_NAME", VARCHAR), ("ORDINAL_POSITION", BIGINT), ("COLUMN_DEFAULT", VARCHAR),
                       ("IS_NULLABLE", VARCHAR), ("DATA_TYPE", VARCHAR), ("CHARACTER_MAXIMUM_LENGTH", BIGINT),
                       ("CHARACTER_OCTET_LENGTH", BIGINT), ("NUMERIC_PRECISION", BIGINT),
                       ("NUMERIC_PRECISION_RADIX", BIGINT), ("NUMERIC_SCALE", BIGINT), ("DATETIME_PRECISION", BIGINT),
                       ("CHARACTER_SET_NAME", VARCHAR), ("COLLATION_NAME", VARCHAR), ("JDBC_TYPE", BIGINT),
                       # Druid's DATA_TYPE of an array column is just ARRAY; its element type is here.
                       ("ELEMENT_TYPE", VARCHAR)),
    # The functions SQL accepts, as Druid lists them (tools build their function pickers from it).
    "ROUTINES": _fields(("ROUTINE_CATALOG", VARCHAR), ("ROUTINE_SCHEMA", VARCHAR), ("ROUTINE_NAME", VARCHAR),
                        ("ROUTINE_TYPE", VARCHAR), ("IS_AGGREGATOR", VARCHAR), ("SIGNATURES", VARCHAR)),
}


def _routines() -> list[tuple]:
    # cycle: the planner's modules import this catalog
    from common.sql.logical_plan import AGGREGATE_FUNCTIONS
    from common.sql.scalar_translator import _AGGREGATE_NAMES, KNOWN_FUNCTIONS  # cycle, as above

    aggregates = set(AGGREGATE_FUNCTIONS) | set(_AGGREGATE_NAMES)
    names = sorted((set(KNOWN_FUNCTIONS) | aggregates) - {"CAST"})
    return [(CATALOG_NAME, INFORMATION_SCHEMA, name, "FUNCTION", "YES" if name in aggregates else "NO", None)
            for name in names]


def _schema_name(name: str) -> str | None:
    for s in SCHEMAS:
        if s.lower() == name.lower():
            return s
    return None


def datasource_fields(schema: dict[str, ColumnType], declared_order: bool = False) -> tuple[Field, ...]:
    """Columns in the catalog's order when it declares one (declared columns first, as listed),
    else with __time first, as Druid lists them."""
    if declared_order:
        names = list(schema)
    else:
        names = ([TIME_COLUMN] if TIME_COLUMN in schema else []) + [n for n in schema if n != TIME_COLUMN]
    return tuple(Field(n, sql_types.from_column_type(schema[n])) for n in names)


def arrow_fields(schema: pa.Schema) -> tuple[Field, ...]:
    return tuple(Field(f.name, sql_types.from_arrow(f.type)) for f in schema)


def resolve_table(catalog: SqlCatalog, parts: list[str], fetched: dict | None = None, args: tuple = ()) -> TableRef:
    """A table named ``name`` or ``schema.name`` (``catalog.schema.name`` with catalog 'druid').
    A sys table is materialized to learn its columns; it is kept in ``fetched`` so the first run
    of the plan need not ask the catalog again."""
    if len(parts) == 3:
        if parts[0].lower() != CATALOG_NAME:
            raise ValidationError(f"unknown catalog '{parts[0]}'; the only catalog is '{CATALOG_NAME}'")
        parts = parts[1:]
    if len(parts) == 1:
        schema, name = DRUID, parts[0]
    else:
        schema = _schema_name(parts[0])
        name = parts[1]
        if schema is None:
            raise ValidationError(unknown_name_message("schema", parts[0], SCHEMAS))
    if args and schema != EXT:
        raise ValidationError(f"only input tables (schema '{EXT}') take arguments; '{'.'.join(parts)}' does not")
    if schema == EXT:
        names = catalog.external_table_names()
        match = name if name in names else next((n for n in names if n.lower() == name.lower()), None)
        if match is None:
            raise ValidationError(unknown_name_message("input table", f"{EXT}.{name}", [f"{EXT}.{n}" for n in names]))
        columns = catalog.external_table_schema(match)
        return TableRef(EXT, match, "external", datasource_fields(columns, declared_order=True), tuple(args))
    if schema == DRUID:
        columns = catalog.datasource_schema(name)
        if columns is None:
            candidates = list(catalog.datasource_names())
            if len(parts) == 1:
                candidates += [f"sys.{t}" for t in catalog.system_table_names()]
                candidates += [f"{INFORMATION_SCHEMA}.{t}" for t in INFORMATION_SCHEMA_FIELDS]
            raise ValidationError(unknown_name_message("table", name, candidates))
        return TableRef(DRUID, name, "datasource", datasource_fields(columns, bool(catalog.declared_order(name))))
    if schema == INFORMATION_SCHEMA:
        for t in INFORMATION_SCHEMA_FIELDS:
            if t.lower() == name.lower():
                return TableRef(INFORMATION_SCHEMA, t, "information_schema", INFORMATION_SCHEMA_FIELDS[t])
        raise ValidationError(unknown_name_message("table", f"{INFORMATION_SCHEMA}.{name}",
                                                   [f"{INFORMATION_SCHEMA}.{t}" for t in INFORMATION_SCHEMA_FIELDS]))
    names = list(catalog.system_table_names())
    match = name if name in names else next((n for n in names if n.lower() == name.lower()), None)
    table = catalog.system_table(SYS, match) if match is not None else None
    if table is None:
        raise ValidationError(unknown_name_message("table", f"{SYS}.{name}", [f"{SYS}.{n}" for n in names]))
    if fetched is not None:
        fetched[(SYS, match)] = table
    return TableRef(SYS, match, "system", arrow_fields(table.schema))


def table_data(catalog: SqlCatalog, ref: TableRef, fetched: dict | None = None) -> pa.Table:
    """The rows of a sys or INFORMATION_SCHEMA table, typed as ``ref.fields`` say."""
    if ref.kind == "information_schema":
        return information_schema_table(catalog, ref.name)
    if ref.kind == "external":
        return catalog.external_table(ref.name, dict(ref.args))
    if fetched and (ref.schema, ref.name) in fetched:
        return fetched[(ref.schema, ref.name)]
    table = catalog.system_table(SYS, ref.name)
    if table is None:
        raise ValidationError(f"system table sys.{ref.name} is no longer available")
    return table


# ---- INFORMATION_SCHEMA ---------------------------------------------------------------------------
def _table_of(fields: tuple[Field, ...], rows: list[tuple]) -> pa.Table:
    columns = list(zip(*rows)) if rows else [[] for _ in fields]
    return pa.table({f.name: pa.array(list(col), f.type.to_arrow()) for f, col in zip(fields, columns)})


def _all_tables(catalog: SqlCatalog) -> list[tuple[str, str, str, tuple[Field, ...] | None]]:
    """(schema, name, type, fields or None when they cost a materialization) of every table."""
    out = []
    for name in sorted(catalog.datasource_names()):
        out.append((DRUID, name, "TABLE", None))
    for name in sorted(INFORMATION_SCHEMA_FIELDS):
        out.append((INFORMATION_SCHEMA, name, "SYSTEM_TABLE", INFORMATION_SCHEMA_FIELDS[name]))
    for name in sorted(catalog.system_table_names()):
        out.append((SYS, name, "SYSTEM_TABLE", None))
    for name in sorted(catalog.external_table_names()):
        out.append((EXT, name, "EXTERNAL", None))
    return out


def _column_facts(t: SqlType) -> tuple:
    """(NUMERIC_PRECISION, NUMERIC_PRECISION_RADIX, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME,
    JDBC_TYPE) of a column type."""
    other = sql_types.JDBC_ARRAY if t.name.startswith("ARRAY") else sql_types.JDBC_OTHER
    jdbc = sql_types.JDBC_TYPES.get(t.name, other)
    if t.name == "BIGINT":
        return 19, 10, 0, None, None, jdbc
    if t.name == "DOUBLE":
        return 15, 10, None, None, None, jdbc
    if t.name == "FLOAT":
        return 7, 10, None, None, None, jdbc
    if t.name == "TIMESTAMP":
        return None, None, None, 3, None, jdbc
    if t.name == "VARCHAR":
        return None, None, None, None, "UTF-8", jdbc
    return None, None, None, None, None, jdbc


def information_schema_table(catalog: SqlCatalog, name: str) -> pa.Table:
    fields = INFORMATION_SCHEMA_FIELDS[name]
    if name == "SCHEMATA":
        return _table_of(fields, [(CATALOG_NAME, s, None, None, None, None, None) for s in SCHEMAS])
    if name == "ROUTINES":
        return _table_of(fields, _routines())
    tables = _all_tables(catalog)
    if name == "TABLES":
        rows = []
        for s, n, kind, _ in tables:
            p = (catalog.table_properties(n) if s == DRUID else None) or {}
            keys = p.get("clusterKeys")
            cluster = ", ".join(k["column"] + (" DESC" if k.get("desc") else "") for k in keys) if keys else None
            sealed = None if "sealed" not in p else ("YES" if p["sealed"] else "NO")
            rows.append((CATALOG_NAME, s, n, kind, "NO", "NO", p.get("segmentGranularity"), p.get("targetSegmentRows"),
                         cluster, sealed, p.get("description")))
        return _table_of(fields, rows)
    rows = []
    for schema, table, _, known in tables:
        if known is not None:
            cols = known
        elif schema == DRUID:
            columns = catalog.datasource_schema(table)
            cols = datasource_fields(columns, bool(catalog.declared_order(table))) if columns is not None else ()
        elif schema == EXT:
            cols = datasource_fields(catalog.external_table_schema(table), declared_order=True)
        else:
            data = catalog.system_table(SYS, table)
            cols = arrow_fields(data.schema) if data is not None else ()
        for i, f in enumerate(cols):
            precision, radix, scale, dt_precision, charset, jdbc = _column_facts(f.type)
            nullable = "NO" if schema == DRUID and f.name == TIME_COLUMN else "YES"
            ctype = f.type.column_type
            is_array = ctype is not None and ctype.is_array and not ctype.multi_value
            data_type = "ARRAY" if is_array else f.type.name
            element = sql_types.from_column_type(ctype.element).name if is_array else None
            rows.append((CATALOG_NAME, schema, table, f.name, i + 1, None, nullable, data_type, None, None,
                         precision, radix, scale, dt_precision, charset, None, jdbc, element))
    return _table_of(fields, rows)
