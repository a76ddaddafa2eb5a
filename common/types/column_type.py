"""ColumnType: strata's logical column types and their one-to-one mapping to Arrow and SQL.

Every other module asks this one how a logical type is stored in Arrow, how SQL spells it, and
how a name a user typed (``VARCHAR``, ``LONG``, ``ARRAY<BIGINT>``, ``COMPLEX<json>``) resolves.
Keeping the mapping in one place is what lets segments, the engine and SQL agree.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import pyarrow as pa

from common.errors import ValidationError


class TypeKind(enum.Enum):
    TIMESTAMP = "TIMESTAMP"
    STRING = "STRING"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    FLOAT = "FLOAT"
    ARRAY = "ARRAY"
    COMPLEX = "COMPLEX"


_SQL_NAMES = {
    TypeKind.TIMESTAMP: "TIMESTAMP",
    TypeKind.STRING: "VARCHAR",
    TypeKind.LONG: "BIGINT",
    TypeKind.DOUBLE: "DOUBLE",
    TypeKind.FLOAT: "FLOAT",
}

# Names users may type, in native-query (Druid) or SQL spelling, for scalar types.
_SCALAR_ALIASES = {
    "STRING": TypeKind.STRING,
    "VARCHAR": TypeKind.STRING,
    "CHAR": TypeKind.STRING,
    "TEXT": TypeKind.STRING,
    "LONG": TypeKind.LONG,
    "BIGINT": TypeKind.LONG,
    "INTEGER": TypeKind.LONG,
    "INT": TypeKind.LONG,
    "SMALLINT": TypeKind.LONG,
    "TINYINT": TypeKind.LONG,
    "BOOLEAN": TypeKind.LONG,
    "DOUBLE": TypeKind.DOUBLE,
    "DECIMAL": TypeKind.DOUBLE,
    "REAL": TypeKind.FLOAT,
    "FLOAT": TypeKind.FLOAT,
    "TIMESTAMP": TypeKind.TIMESTAMP,
}

ARRAY_ELEMENT_KINDS = (TypeKind.STRING, TypeKind.LONG, TypeKind.DOUBLE)

# Aggregator intermediates a segment may store (projections): Druid's complex type names and the
# Arrow form strata keeps them in. Sketches are serialized bytes; earliest/latest keep the time.
COMPLEX_INTERMEDIATES: dict[str, pa.DataType] = {
    "HLLSketch": pa.binary(),
    "serializablePairLongString": pa.struct([("t", pa.int64()), ("v", pa.string())]),
    "serializablePairLongLong": pa.struct([("t", pa.int64()), ("v", pa.int64())]),
    "serializablePairLongDouble": pa.struct([("t", pa.int64()), ("v", pa.float64())]),
    "serializablePairLongFloat": pa.struct([("t", pa.int64()), ("v", pa.float32())]),
}


@dataclass(frozen=True)
class ColumnType:
    """A logical type. ``element`` is set only for ARRAY; ``complex_name`` only for COMPLEX.

    ``multi_value`` marks Druid's multi-value string (a STRING dimension holding a list of values
    per row): stored and evaluated as ARRAY<STRING> (so it is an array to the engine), but SQL
    types it VARCHAR and filters and GROUP BY treat it value by value, as Druid does."""

    kind: TypeKind
    element: ColumnType | None = None
    complex_name: str | None = None
    multi_value: bool = False

    def __post_init__(self) -> None:
        if self.kind is TypeKind.ARRAY:
            # ARRAY<COMPLEX<json>> is what JSON_QUERY_ARRAY gives (documents, as their text), as in Druid.
            json_element = self.element is not None and self.element.complex_name == "json"
            if self.element is None or (self.element.kind not in ARRAY_ELEMENT_KINDS and not json_element):
                raise ValidationError(
                    f"ARRAY element type must be one of STRING, LONG, DOUBLE or COMPLEX<json>, got {self.element}"
                )
        elif self.element is not None:
            raise ValidationError(f"only ARRAY types have an element type, not {self.kind.value}")
        if self.kind is TypeKind.COMPLEX and not self.complex_name:
            raise ValidationError("COMPLEX types need a name, such as COMPLEX<json>")
        if self.multi_value and not (self.kind is TypeKind.ARRAY and self.element.kind is TypeKind.STRING):
            raise ValidationError(f"only strings can be multi-value, not {self.kind.value}")

    # ---- classification -------------------------------------------------------------------
    @property
    def is_numeric(self) -> bool:
        return self.kind in (TypeKind.LONG, TypeKind.DOUBLE, TypeKind.FLOAT, TypeKind.TIMESTAMP)

    @property
    def is_string(self) -> bool:
        return self.kind is TypeKind.STRING

    @property
    def is_array(self) -> bool:
        return self.kind is TypeKind.ARRAY

    # ---- mappings ------------------------------------------------------------------------
    @property
    def sql_name(self) -> str:
        if self.multi_value:
            return "VARCHAR"
        if self.kind is TypeKind.ARRAY:
            return f"ARRAY<{self.element.sql_name}>"
        if self.kind is TypeKind.COMPLEX:
            return f"COMPLEX<{self.complex_name}>"
        return _SQL_NAMES[self.kind]

    @functools.cached_property  # asked per column for every query sent to a historical
    def native_name(self) -> str:
        """The spelling used in native queries and manifests (Druid's ColumnType strings)."""
        if self.multi_value:
            return MULTI_VALUE_NAME
        if self.kind is TypeKind.ARRAY:
            return f"ARRAY<{self.element.native_name}>"
        if self.kind is TypeKind.COMPLEX:
            return f"COMPLEX<{self.complex_name}>"
        return self.kind.value

    def to_arrow(self) -> pa.DataType:
        kind = self.kind
        if kind is TypeKind.TIMESTAMP:
            return pa.timestamp("ms", tz="UTC")
        if kind is TypeKind.STRING:
            return pa.string()
        if kind is TypeKind.LONG:
            return pa.int64()
        if kind is TypeKind.DOUBLE:
            return pa.float64()
        if kind is TypeKind.FLOAT:
            return pa.float32()
        if kind is TypeKind.ARRAY:
            return pa.list_(self.element.to_arrow())
        stored = COMPLEX_INTERMEDIATES.get(self.complex_name or "")
        if stored is not None:
            return stored
        # COMPLEX<json> travels as its JSON text until nested columns give it real structure.
        return pa.string()

    @staticmethod
    def from_arrow(dtype: pa.DataType, column: str = "?") -> ColumnType:
        if pa.types.is_dictionary(dtype):
            return ColumnType.from_arrow(dtype.value_type, column)
        if pa.types.is_timestamp(dtype) or pa.types.is_date(dtype):
            return TIMESTAMP
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
            return STRING
        if pa.types.is_boolean(dtype) or pa.types.is_integer(dtype):
            return LONG
        if pa.types.is_float32(dtype) or pa.types.is_float16(dtype):
            return FLOAT
        if pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
            return DOUBLE
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            element = ColumnType.from_arrow(dtype.value_type, column)
            if element.kind is TypeKind.FLOAT:
                element = DOUBLE
            if element.kind not in ARRAY_ELEMENT_KINDS:
                raise ValidationError(
                    f"column '{column}': arrays of {dtype.value_type} are not supported; "
                    "array elements must be strings, integers or floating point numbers"
                )
            return ColumnType(TypeKind.ARRAY, element)
        if pa.types.is_null(dtype):
            return STRING
        raise ValidationError(
            f"column '{column}': Arrow type {dtype} has no strata type; supported are strings, "
            "integers, booleans, floating point, timestamps and lists of those"
        )

    @staticmethod
    def parse(name: str) -> ColumnType:
        """Parse a type name in SQL or native spelling: VARCHAR, LONG, ARRAY<BIGINT>, COMPLEX<json>."""
        text = name.strip()
        upper = text.upper()
        if upper == MULTI_VALUE_NAME:
            return MULTI_VALUE_STRING
        if upper.startswith("ARRAY<") and upper.endswith(">"):
            element = ColumnType.parse(text[6:-1])
            if element.kind is TypeKind.FLOAT:
                element = DOUBLE
            return ColumnType(TypeKind.ARRAY, element)
        if upper.startswith("COMPLEX<") and upper.endswith(">"):
            inner = text[8:-1].strip()
            if inner.lower() == "json":
                return JSON
            for known in COMPLEX_INTERMEDIATES:
                if inner.lower() == known.lower():
                    return ColumnType(TypeKind.COMPLEX, complex_name=known)
            raise ValidationError(f"unknown complex type '{text}'; the supported ones are COMPLEX<json> and the "
                                  f"aggregator intermediates {', '.join(COMPLEX_INTERMEDIATES)}")
        base = upper.split("(")[0].strip()
        if base in _SCALAR_ALIASES:
            return ColumnType(_SCALAR_ALIASES[base])
        valid = "VARCHAR/STRING, BIGINT/LONG, DOUBLE, FLOAT, TIMESTAMP, ARRAY<...>, COMPLEX<json>"
        raise ValidationError(f"unknown type '{name}'; valid types are {valid}")

    def __str__(self) -> str:
        return self.native_name


# The manifest / native spelling of a multi-value string (Druid says STRING and flags the column
# as having multiple values; one name keeps the flag through manifests and native queries).
MULTI_VALUE_NAME = "MULTI_VALUE_STRING"

TIMESTAMP = ColumnType(TypeKind.TIMESTAMP)
STRING = ColumnType(TypeKind.STRING)
LONG = ColumnType(TypeKind.LONG)
DOUBLE = ColumnType(TypeKind.DOUBLE)
FLOAT = ColumnType(TypeKind.FLOAT)
STRING_ARRAY = ColumnType(TypeKind.ARRAY, STRING)
LONG_ARRAY = ColumnType(TypeKind.ARRAY, LONG)
DOUBLE_ARRAY = ColumnType(TypeKind.ARRAY, DOUBLE)
JSON = ColumnType(TypeKind.COMPLEX, complex_name="json")
MULTI_VALUE_STRING = ColumnType(TypeKind.ARRAY, STRING, multi_value=True)
JSON_ARRAY = ColumnType(TypeKind.ARRAY, JSON)

TIME_COLUMN = "__time"


def least_restrictive(a: ColumnType, b: ColumnType) -> ColumnType:
    """The type both values fit in, as Druid resolves mixed inputs (numbers widen, else STRING)."""
    if a == b:
        return a
    if (a.multi_value or b.multi_value) and all(t.is_string or t.kind is TypeKind.ARRAY for t in (a, b)):
        return MULTI_VALUE_STRING  # a multi-value column holds single strings too, as Druid's do
    order = {TypeKind.LONG: 0, TypeKind.FLOAT: 1, TypeKind.DOUBLE: 2}
    if a.kind in order and b.kind in order:
        return DOUBLE if max(order[a.kind], order[b.kind]) >= 1 else LONG
    if a.is_array and b.is_array:
        return ColumnType(TypeKind.ARRAY, least_restrictive(a.element, b.element))
    if a.kind is TypeKind.COMPLEX or b.kind is TypeKind.COMPLEX:
        return JSON
    return STRING
