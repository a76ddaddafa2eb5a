"""Parquet inputs through Spark's vectorized reader, when that gives exactly what row_parser gives.

row_parser reads Parquet in Python and converts values with Druid's rules, turning values that
do not fit their declared type into parse exceptions. Spark's own reader is many times faster
(no Python, Spark splits files by row group across tasks), so every file whose needed columns
convert losslessly -- the same value the Python path would produce, never a parse exception --
goes there, and the rest (unreadable files, strings declared as numbers, nanosecond or INT96
times, decimals other than up to 15 digits as DOUBLE, dates outside years 1-9999 or without
statistics, nested columns, unusual codecs, ...) keeps the Python path and its per-row
parse exceptions with file and row number. The decision is taken per file from its footer on
the driver, which also yields the row count, so no Spark pass is needed to count rows read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from common.types.column_type import ColumnType, TypeKind

# Codecs and encodings Spark's vectorized reader is known to decode; anything newer or rarer is
# left to pyarrow so a file pyarrow reads never fails the job in Spark instead.
_CODECS = {"UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD"}
_ENCODINGS = {"PLAIN", "RLE", "BIT_PACKED", "PLAIN_DICTIONARY", "RLE_DICTIONARY"}
# Spark treats paths as Hadoop globs and URIs; only plain names are handed over verbatim.
_PLAIN_PATH = re.compile(r"^/[\w/.\-+=,@~ ]*$")


@dataclass(frozen=True)
class NativeGroup:
    """Parquet files whose needed columns have the same Parquet types: one Spark read."""

    paths: tuple[str, ...]
    columns: tuple[tuple[str, str, bool], ...]  # (name, Spark source type, fits a double exactly); absent: missing
    row_groups: tuple[tuple[int, ...], ...]  # rows of each row group, per path

    @property
    def rows(self) -> int:
        return sum(sum(groups) for groups in self.row_groups)


@dataclass(frozen=True)
class ParquetPlan:
    groups: tuple[NativeGroup, ...]
    fallback: tuple[int, ...]  # positions (in the listing) of files row_parser reads

    @property
    def rows(self) -> int:
        return sum(g.rows for g in self.groups)


def _spark_source_type(column) -> tuple[str, bool] | None:
    """(Spark type name, fits a double exactly) of a top-level primitive Parquet column, or None
    when Spark's conversion is not one this module vouches for."""
    physical = column.physical_type
    logical = json.loads(column.logical_type.to_json())
    kind = logical.get("Type", "None")
    if physical == "BOOLEAN" and kind == "None":
        return "boolean", True
    if physical == "FLOAT" and kind == "None":
        return "float", True
    if physical == "DOUBLE" and kind == "None":
        return "double", True
    if physical == "BYTE_ARRAY" and kind == "String":
        return "string", False
    if physical == "INT32" and kind in ("None", "Int"):
        width, signed = logical.get("bitWidth", 32), logical.get("isSigned", True)
        if signed:
            return {8: "byte", 16: "short", 32: "int"}[width], True
        return {8: "short", 16: "int", 32: "long"}[width], True
    if physical == "INT64" and kind in ("None", "Int"):
        if not logical.get("isSigned", True):
            return None  # UINT64 is a DECIMAL(20, 0) in Spark
        return "long", False
    if physical == "INT64" and kind == "Timestamp" and logical.get("timeUnit") in ("milliseconds", "microseconds"):
        return ("timestamp" if logical.get("isAdjustedToUTC") else "timestamp_ntz"), False
    if physical == "INT32" and kind == "Date":
        return "date", False
    if kind == "Decimal" and physical in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
        # Up to 15 digits the unscaled value and the power of ten are exact doubles, so Spark's
        # division and row_parser's float(Decimal) are both the correctly rounded double.
        precision, scale = int(logical["precision"]), int(logical.get("scale", 0))
        return f"decimal({precision},{scale})", precision <= 15
    return None


# Dates Spark and row_parser print and convert alike: four-digit years (ISO-8601 without a sign),
# which are also the years a TIMESTAMP holds. Days since 1970-01-01.
_DATE_MIN, _DATE_MAX = -719_162, 2_932_896  # 0001-01-01, 9999-12-31


def _dates_in_range(meta, index: int) -> bool:
    """Whether every row group's statistics bound the DATE column ``index`` to four-digit years."""
    for r in range(meta.num_row_groups):
        chunk = meta.row_group(r).column(index)
        stats = chunk.statistics
        if chunk.num_values == 0 or (stats is not None and stats.null_count == chunk.num_values):
            continue
        if stats is None or not stats.has_min_max:
            return False
        # The physical INT32 days: the logical values of dates past 9999 are not Python dates.
        if stats.min_raw < _DATE_MIN or stats.max_raw > _DATE_MAX:
            return False
    return True


_INTEGERS = {"byte", "short", "int", "long"}


def native_cast(source: str, exact_double: bool, declared: ColumnType) -> bool:
    """Whether Spark's CAST(source AS declared) equals row_parser's conversion for every value.

    Arrow casts integers and booleans to text as Spark does ("12", "true"); integers wider than
    32 bits are left out of DOUBLE because row_parser then goes row by row, and floats are kept
    away from text because the two format them differently.
    """
    kind = declared.kind
    if kind is TypeKind.STRING:
        return source in _INTEGERS or source in ("string", "boolean", "date")
    if kind is TypeKind.LONG:
        return source in _INTEGERS or source == "boolean"
    if kind is TypeKind.DOUBLE:
        return (source in ("float", "double", "boolean")
                or ((source in _INTEGERS or source.startswith("decimal(")) and exact_double))
    if kind is TypeKind.FLOAT:
        return source == "float"
    if kind is TypeKind.TIMESTAMP:
        return source in ("timestamp", "timestamp_ntz", "date")
    return False  # arrays and COMPLEX<json> need row_parser's conversions


def _file_columns(path: str, signature) -> tuple[tuple, tuple[int, ...]] | None:
    """The needed columns' (name, Spark type, exact double) and the rows of each row group, or None
    to fall back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as pf:
            arrow = pf.schema_arrow
            meta = pf.metadata
            schema = pf.schema
    except (pa.ArrowException, OSError, ValueError):
        return None  # row_parser reports it as a parse exception naming the file
    names = arrow.names
    leaves: dict[str, list] = {}
    for i in range(len(schema)):
        col = schema.column(i)
        leaves.setdefault(col.path, []).append((i, col))
    columns = []
    needed = []
    for name, ctype in signature:
        if name not in names:
            continue  # absent columns are nulls on both paths
        if names.count(name) > 1 or len(leaves.get(name, ())) != 1:
            return None
        [(index, leaf)] = leaves[name]
        if leaf.max_repetition_level != 0 or pa.types.is_nested(arrow.field(name).type):
            return None
        source = _spark_source_type(leaf)
        if source is None or not native_cast(source[0], source[1], ctype):
            return None
        if source[0] == "date" and not _dates_in_range(meta, index):
            return None
        columns.append((name, *source))
        needed.append(index)
    for r in range(meta.num_row_groups):
        group = meta.row_group(r)
        for index in needed:
            chunk = group.column(index)
            if chunk.compression not in _CODECS or not set(chunk.encodings) <= _ENCODINGS:
                return None
    return tuple(columns), tuple(meta.row_group(r).num_rows for r in range(meta.num_row_groups))


def plan_parquet(paths: Sequence[str | None], signature, native_ok: bool) -> ParquetPlan:
    """Split a Parquet listing (None: not a local file) into Spark reads and row_parser files."""
    groups: dict[tuple, list] = {}
    fallback = []
    for i, path in enumerate(paths):
        found = _file_columns(path, signature) if native_ok and path and _PLAIN_PATH.match(path) else None
        if found is None:
            fallback.append(i)
            continue
        columns, row_groups = found
        entry = groups.setdefault(columns, ([], []))
        entry[0].append(path)
        entry[1].append(row_groups)
    return ParquetPlan(tuple(NativeGroup(tuple(p), c, tuple(r)) for c, (p, r) in groups.items()), tuple(fallback))


def read_native(spark, group: NativeGroup, signature):
    """A DataFrame of the signature's columns (Spark types as row_parser's Arrow types) over ``group``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from services.ingestion.source_reader import spark_type

    spark_types = {"boolean": T.BooleanType(), "byte": T.ByteType(), "short": T.ShortType(), "int": T.IntegerType(),
                   "long": T.LongType(), "float": T.FloatType(), "double": T.DoubleType(), "string": T.StringType(),
                   "timestamp": T.TimestampType(), "timestamp_ntz": T.TimestampNTZType(), "date": T.DateType()}
    present = {name: kind for name, kind, _ in group.columns}
    for kind in present.values():
        if kind.startswith("decimal("):
            precision, scale = kind[len("decimal("):-1].split(",")
            spark_types[kind] = T.DecimalType(int(precision), int(scale))
    # An explicit schema of the needed columns only: Spark infers nothing from footers, so a
    # column it cannot represent (nanosecond times, say) that the SELECT does not need is harmless.
    schema = T.StructType([T.StructField(name, spark_types[kind], True) for name, kind in present.items()])
    df = spark.read.schema(schema).parquet(*group.paths)
    cols = []
    for name, ctype in signature:
        target = spark_type(ctype)
        if name in present:
            col = F.col("`" + name.replace("`", "``") + "`")
            cols.append(col.cast(target).alias(name))
        else:
            cols.append(F.lit(None).cast(target).alias(name))
    return df.select(*cols)


__all__ = ["NativeGroup", "ParquetPlan", "native_cast", "plan_parquet", "read_native"]
