"""Catalog column properties that are storage settings of a column (segment column options), and
the type a catalog column declares: shared by the catalog, the broker and ingestion jobs, which
may not import one another."""

from __future__ import annotations

from collections.abc import Mapping

from common.types.column_type import MULTI_VALUE_STRING, ColumnType

# Properties that only a COMPLEX<json> column takes (its nested storage options).
JSON_COLUMN_PROPERTIES = ("maxFields", "skipPaths", "typedPaths", "keepRaw")
# A VARCHAR column with this property is a multi-value string (Druid's multi-value dimension), its
# values kept per row as the property says: SORTED_ARRAY, SORTED_SET or ARRAY.
MULTI_VALUE_PROPERTY = "multiValueHandling"
MULTI_VALUE_HANDLING = ("SORTED_ARRAY", "SORTED_SET", "ARRAY")
STORAGE_PROPERTIES = (*JSON_COLUMN_PROPERTIES, MULTI_VALUE_PROPERTY)


def storage_options(column: Mapping) -> dict:
    """The segment column options a catalog column (its JSON form) asks for."""
    return {k: v for k, v in (column.get("properties") or {}).items() if k in STORAGE_PROPERTIES}


def declared_column_type(column: Mapping) -> ColumnType | None:
    """The type a catalog column (its JSON form) declares: its sqlType, or a multi-value string
    when it has multiValueHandling; None when it declares neither."""
    if (column.get("properties") or {}).get(MULTI_VALUE_PROPERTY) is not None:
        return MULTI_VALUE_STRING
    text = column.get("sqlType")
    return ColumnType.parse(text) if text else None


__all__ = ["JSON_COLUMN_PROPERTIES", "MULTI_VALUE_HANDLING", "MULTI_VALUE_PROPERTY", "STORAGE_PROPERTIES",
           "declared_column_type", "storage_options"]
