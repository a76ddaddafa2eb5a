"""Flight SQL metadata results: their fixed Arrow schemas and the tables answering them.

Clients check these shapes (the C++ ADBC driver compares the GetSqlInfo schema for equality), so
the schemas follow the Flight SQL specification field for field, with the nullability of the
reference implementation. Rows come from the SqlBackend's catalog calls.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from services.rpc.gen.arrow.flight import flight_sql_pb2 as fsql
from services.broker.core.sql_backend import TableInfo

_utf8 = pa.utf8()

CATALOGS_SCHEMA = pa.schema([pa.field("catalog_name", _utf8, nullable=False)])

DB_SCHEMAS_SCHEMA = pa.schema([
    pa.field("catalog_name", _utf8),
    pa.field("db_schema_name", _utf8, nullable=False),
])

TABLES_SCHEMA = pa.schema([
    pa.field("catalog_name", _utf8),
    pa.field("db_schema_name", _utf8),
    pa.field("table_name", _utf8, nullable=False),
    pa.field("table_type", _utf8, nullable=False),
])

TABLES_WITH_SCHEMA_SCHEMA = TABLES_SCHEMA.append(pa.field("table_schema", pa.binary(), nullable=False))

TABLE_TYPES_SCHEMA = pa.schema([pa.field("table_type", _utf8, nullable=False)])

PRIMARY_KEYS_SCHEMA = pa.schema([
    pa.field("catalog_name", _utf8),
    pa.field("db_schema_name", _utf8),
    pa.field("table_name", _utf8, nullable=False),
    pa.field("column_name", _utf8, nullable=False),
    pa.field("key_name", _utf8),
    pa.field("key_sequence", pa.int32(), nullable=False),
])

# Shared by exported keys, imported keys and cross references.
FOREIGN_KEYS_SCHEMA = pa.schema([
    pa.field("pk_catalog_name", _utf8),
    pa.field("pk_db_schema_name", _utf8),
    pa.field("pk_table_name", _utf8, nullable=False),
    pa.field("pk_column_name", _utf8, nullable=False),
    pa.field("fk_catalog_name", _utf8),
    pa.field("fk_db_schema_name", _utf8),
    pa.field("fk_table_name", _utf8, nullable=False),
    pa.field("fk_column_name", _utf8, nullable=False),
    pa.field("key_sequence", pa.int32(), nullable=False),
    pa.field("fk_key_name", _utf8),
    pa.field("pk_key_name", _utf8),
    pa.field("update_rule", pa.uint8(), nullable=False),
    pa.field("delete_rule", pa.uint8(), nullable=False),
])

# The union's member order *is* the type code: 0 string, 1 bool, 2 int64, 3 int32 bitmask,
# 4 string list, 5 int32 -> int32 list map.
_SQL_INFO_VALUE = pa.dense_union([
    pa.field("string_value", _utf8, nullable=False),
    pa.field("bool_value", pa.bool_(), nullable=False),
    pa.field("bigint_value", pa.int64(), nullable=False),
    pa.field("int32_bitmask", pa.int32(), nullable=False),
    pa.field("string_list", pa.list_(_utf8), nullable=False),
    pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32())), nullable=False),
])
SQL_INFO_SCHEMA = pa.schema([
    pa.field("info_name", pa.uint32(), nullable=False),
    pa.field("value", _SQL_INFO_VALUE, nullable=False),
])

_STRING, _BOOL, _BIGINT, _INT32 = 0, 1, 2, 3


def sql_info_values(server_version: str, statement_timeout_ms: int) -> dict[int, object]:
    """What strata reports, keyed by SqlInfo code. Python type picks the union member: str,
    bool, or int (int32 for the codes the specification types as int32, int64 otherwise)."""
    s = fsql
    return {
        s.FLIGHT_SQL_SERVER_NAME: "strata",
        s.FLIGHT_SQL_SERVER_VERSION: server_version,
        s.FLIGHT_SQL_SERVER_ARROW_VERSION: pa.__version__,
        s.FLIGHT_SQL_SERVER_READ_ONLY: True,
        s.FLIGHT_SQL_SERVER_SQL: True,
        s.FLIGHT_SQL_SERVER_SUBSTRAIT: False,
        s.FLIGHT_SQL_SERVER_TRANSACTION: s.SQL_SUPPORTED_TRANSACTION_NONE,
        s.FLIGHT_SQL_SERVER_CANCEL: False,
        s.FLIGHT_SQL_SERVER_STATEMENT_TIMEOUT: statement_timeout_ms,
        s.SQL_DDL_CATALOG: False,
        s.SQL_DDL_SCHEMA: False,
        s.SQL_DDL_TABLE: False,
        s.SQL_IDENTIFIER_QUOTE_CHAR: '"',
        s.SQL_ALL_TABLES_ARE_SELECTABLE: True,
        s.SQL_SUPPORTS_COLUMN_ALIASING: True,
        s.SQL_NULL_PLUS_NULL_IS_NULL: True,
        s.SQL_SUPPORTED_GRAMMAR: 1 << s.SQL_MINIMUM_GRAMMAR,
        s.SQL_ANSI92_SUPPORTED_LEVEL: 1 << s.ANSI92_ENTRY_SQL,
        s.SQL_SCHEMA_TERM: "schema",
        s.SQL_CATALOG_TERM: "catalog",
        s.SQL_TRANSACTIONS_SUPPORTED: False,
    }


# Codes whose value the specification defines as an int32 (enum ordinal or bitmask).
_INT32_CODES = {fsql.FLIGHT_SQL_SERVER_TRANSACTION, fsql.FLIGHT_SQL_SERVER_STATEMENT_TIMEOUT,
                fsql.SQL_SUPPORTED_GRAMMAR, fsql.SQL_ANSI92_SUPPORTED_LEVEL}


def sql_info_table(values: dict[int, object], requested: Iterable[int] = ()) -> pa.Table:
    """Rows for the requested codes (all when none are asked for); unknown codes are skipped."""
    codes = [c for c in requested if c in values] if requested else sorted(values)
    children: list[list] = [[], [], [], []]
    type_ids, offsets = [], []
    for code in codes:
        value = values[code]
        if isinstance(value, bool):
            member = _BOOL
        elif isinstance(value, int):
            member = _INT32 if code in _INT32_CODES else _BIGINT
        else:
            member = _STRING
        type_ids.append(member)
        offsets.append(len(children[member]))
        children[member].append(value)
    value_type = _SQL_INFO_VALUE
    child_arrays = [pa.array(children[i], value_type.field(i).type) for i in range(4)]
    child_arrays += [pa.array([], value_type.field(i).type) for i in (4, 5)]
    union = pa.Array.from_buffers(
        value_type, len(codes),
        [None, pa.array(type_ids, pa.int8()).buffers()[1], pa.array(offsets, pa.int32()).buffers()[1]],
        children=child_arrays)
    return pa.Table.from_arrays([pa.array(codes, pa.uint32()), union], schema=SQL_INFO_SCHEMA)


def catalogs_table(catalogs: Iterable[str]) -> pa.Table:
    return pa.Table.from_pydict({"catalog_name": sorted(catalogs)}, schema=CATALOGS_SCHEMA)


def db_schemas_table(pairs: Iterable[tuple[str, str]]) -> pa.Table:
    rows = sorted(pairs, key=lambda p: (p[0] or "", p[1]))
    return pa.Table.from_pydict({"catalog_name": [c for c, _ in rows], "db_schema_name": [s for _, s in rows]},
                                schema=DB_SCHEMAS_SCHEMA)


def tables_table(tables: Iterable[TableInfo], include_schema: bool) -> pa.Table:
    rows = sorted(tables, key=lambda t: (t.catalog or "", t.schema or "", t.name, t.table_type))
    data = {"catalog_name": [t.catalog for t in rows], "db_schema_name": [t.schema for t in rows],
            "table_name": [t.name for t in rows], "table_type": [t.table_type for t in rows]}
    if not include_schema:
        return pa.Table.from_pydict(data, schema=TABLES_SCHEMA)
    data["table_schema"] = [annotated_schema(t).serialize().to_pybytes() for t in rows]
    return pa.Table.from_pydict(data, schema=TABLES_WITH_SCHEMA_SCHEMA)


def table_types_table(types: Iterable[str]) -> pa.Table:
    return pa.Table.from_pydict({"table_type": sorted(set(types))}, schema=TABLE_TYPES_SCHEMA)


def annotated_schema(table: TableInfo) -> pa.Schema:
    """The table's schema with the column metadata Flight SQL defines, so tools can show where a
    column comes from and its SQL type name without a second round trip."""
    fields = []
    for f in table.arrow_schema:
        meta = dict(f.metadata or {})
        meta.setdefault(b"ARROW:FLIGHT:SQL:CATALOG_NAME", (table.catalog or "").encode())
        meta.setdefault(b"ARROW:FLIGHT:SQL:DB_SCHEMA_NAME", (table.schema or "").encode())
        meta.setdefault(b"ARROW:FLIGHT:SQL:TABLE_NAME", table.name.encode())
        meta.setdefault(b"ARROW:FLIGHT:SQL:TYPE_NAME", sql_type_name(f.type).encode())
        fields.append(f.with_metadata(meta))
    return pa.schema(fields, metadata=table.arrow_schema.metadata)


def sql_type_name(t: pa.DataType) -> str:
    """The Druid SQL name of an Arrow type, as the sys/INFORMATION_SCHEMA tables spell it."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_decimal(t):
        return "DECIMAL"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "ARRAY"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "VARBINARY"
    return "OTHER"
