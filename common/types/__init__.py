"""Logical types and the time model: column types (with their Arrow and SQL names), intervals,
periods and granularities. Everything here is pure and shared by every layer."""

from common.types.column_type import (
    DOUBLE,
    DOUBLE_ARRAY,
    FLOAT,
    JSON,
    LONG,
    LONG_ARRAY,
    STRING,
    STRING_ARRAY,
    TIME_COLUMN,
    TIMESTAMP,
    ColumnType,
    TypeKind,
    least_restrictive,
)
from common.types.granularity import ALL, NONE, Granularity, Period
from common.types.interval import ETERNITY, Interval, format_instant, parse_instant

__all__ = [
    "ALL", "DOUBLE", "DOUBLE_ARRAY", "ETERNITY", "FLOAT", "JSON", "LONG", "LONG_ARRAY", "NONE",
    "STRING", "STRING_ARRAY", "TIMESTAMP", "TIME_COLUMN", "ColumnType", "Granularity", "Interval",
    "Period", "TypeKind", "format_instant", "least_restrictive", "parse_instant",
]
