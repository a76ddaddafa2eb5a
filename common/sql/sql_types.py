"""SqlType: the types SQL expressions have while they are planned, and how they map to native
column types (for virtual columns and aggregators) and to Arrow (for results).

SQL has two types the native layer lacks: BOOLEAN, which native expressions carry as LONG 1/0 and
results carry as Arrow ``bool``, and INTERVAL, which only exists inside timestamp arithmetic and
is folded away before anything runs. NULL is the type of a bare ``NULL`` literal; it fits anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from common.types.column_type import DOUBLE as NATIVE_DOUBLE
from common.types.column_type import FLOAT as NATIVE_FLOAT
from common.types.column_type import LONG as NATIVE_LONG
from common.types.column_type import STRING as NATIVE_STRING
from common.types.column_type import TIMESTAMP as NATIVE_TIMESTAMP
from common.types.column_type import ColumnType, TypeKind


@dataclass(frozen=True)
class SqlType:
    name: str  # BIGINT, DOUBLE, FLOAT, VARCHAR, TIMESTAMP, BOOLEAN, NULL, INTERVAL, or ARRAY<..>/COMPLEX<..>
    column_type: ColumnType | None = None  # the native type; None for NULL and INTERVAL

    @property
    def is_numeric(self) -> bool:
        return self.name in ("BIGINT", "DOUBLE", "FLOAT")

    @property
    def is_exact(self) -> bool:
        return self.name == "BIGINT"

    @property
    def is_scalar(self) -> bool:
        """Single values the expression language handles (not arrays, JSON or intervals)."""
        return self.name in ("BIGINT", "DOUBLE", "FLOAT", "VARCHAR", "TIMESTAMP", "BOOLEAN", "NULL")

    @property
    def native(self) -> ColumnType:
        """The native column type values of this type travel as inside native queries."""
        return self.column_type if self.column_type is not None else NATIVE_STRING

    @property
    def native_output_name(self) -> str:
        """outputType of virtual columns and dimensions, as Druid writes it (TIMESTAMP is LONG)."""
        if self.name in ("TIMESTAMP", "BOOLEAN"):
            return "LONG"
        return self.native.native_name

    def to_arrow(self) -> pa.DataType:
        if self.name == "BOOLEAN":
            return pa.bool_()
        if self.name in ("NULL", "INTERVAL"):
            return pa.string()
        return self.native.to_arrow()

    def __str__(self) -> str:
        return self.name


BIGINT = SqlType("BIGINT", NATIVE_LONG)
DOUBLE = SqlType("DOUBLE", NATIVE_DOUBLE)
FLOAT = SqlType("FLOAT", NATIVE_FLOAT)
VARCHAR = SqlType("VARCHAR", NATIVE_STRING)
TIMESTAMP = SqlType("TIMESTAMP", NATIVE_TIMESTAMP)
BOOLEAN = SqlType("BOOLEAN", NATIVE_LONG)
NULL = SqlType("NULL")
INTERVAL = SqlType("INTERVAL")

_BY_KIND = {TypeKind.LONG: BIGINT, TypeKind.DOUBLE: DOUBLE, TypeKind.FLOAT: FLOAT, TypeKind.STRING: VARCHAR,
            TypeKind.TIMESTAMP: TIMESTAMP}


def is_multi_value(t: SqlType) -> bool:
    """A multi-value string: VARCHAR to SQL, a list of strings per row underneath."""
    return t.column_type is not None and t.column_type.multi_value


def from_column_type(ctype: ColumnType) -> SqlType:
    return _BY_KIND.get(ctype.kind) or SqlType(ctype.sql_name, ctype)


def from_arrow(dtype: pa.DataType) -> SqlType:
    if pa.types.is_boolean(dtype):
        return BOOLEAN
    if pa.types.is_null(dtype):
        return VARCHAR
    return from_column_type(ColumnType.from_arrow(dtype))


# Names CAST accepts, as sqlglot spells its data types.
CAST_TARGETS = {
    "BIGINT": BIGINT, "INT": BIGINT, "INTEGER": BIGINT, "SMALLINT": BIGINT, "TINYINT": BIGINT, "LONG": BIGINT,
    "DOUBLE": DOUBLE, "DECIMAL": DOUBLE, "NUMERIC": DOUBLE, "FLOAT": FLOAT, "REAL": FLOAT,
    "VARCHAR": VARCHAR, "CHAR": VARCHAR, "TEXT": VARCHAR, "NVARCHAR": VARCHAR, "NCHAR": VARCHAR, "STRING": VARCHAR,
    "TIMESTAMP": TIMESTAMP, "TIMESTAMPTZ": TIMESTAMP, "DATETIME": TIMESTAMP, "DATE": TIMESTAMP,
    "BOOLEAN": BOOLEAN,
}


def common_type(a: SqlType, b: SqlType) -> SqlType | None:
    """The type two values (CASE branches, COALESCE arguments, UNION columns) unify to, or None
    when they do not: numbers widen, NULL fits anything, other types must match."""
    if a == b or b == NULL:
        return a
    if a == NULL:
        return b
    if a.is_numeric and b.is_numeric:
        return BIGINT if a.is_exact and b.is_exact else DOUBLE
    return None


# java.sql.Types codes, for INFORMATION_SCHEMA.COLUMNS.JDBC_TYPE
JDBC_TYPES = {"BIGINT": -5, "DOUBLE": 8, "FLOAT": 6, "VARCHAR": 12, "TIMESTAMP": 93, "BOOLEAN": 16}
JDBC_OTHER = 1111
JDBC_ARRAY = 2003
