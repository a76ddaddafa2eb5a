"""Schema discovery for ingestion: the schema commit point of a source without a declared schema.

Before any row is read for the SELECT, every discovering source resolves its signature once:

- JSON (and inline JSON): one Spark task per file or line-aligned range (the same listing the
  reader uses) walks its rows and returns what it saw (``SchemaDiscovery`` as JSON: per column,
  each observed type with the first file and line it appeared at); the driver merges the tasks'
  answers with the widening rules of ``common.types.type_discovery``. A Spark partition is a scan:
  it resolves its own schema, and the merge decides before any segment is built, so every segment
  of the statement agrees.
- Parquet: each file's footer gives names and types; files are merged with the same rules.
- CSV/TSV with a header: the header names, every column VARCHAR unless declared; without a header
  and without declared columns, one ``columns`` ARRAY<VARCHAR> column of every field.

Declared types win (the provided schema): PARTIAL first, then the catalog's declared columns.
Excluded columns are left out. With ``schemaConflicts = 'fail'`` a column whose values needed a
widening rule fails the task here, naming both types with a file and line for each. Then ``*`` in
the SELECT becomes the columns it stands for (every source column not named elsewhere in the
SELECT list); in a rollup they travel as one sorted struct column, ``__dynamic``, which groups as a
whole and is expanded into real columns before segments are built (``expand_dynamic``).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass

from common.errors import ValidationError
from common.types.column_type import STRING, TIMESTAMP, ColumnType, TypeKind
from common.types.type_discovery import (
    RULE_DECLARED,
    ColumnDiscovery,
    SchemaDiscovery,
    describe,
    observe,
    observed_of,
)
from common.ingest.discovered_schema import DYNAMIC_COLUMN, conflict_mode
from common.ingest.external_source import COLUMNS_ARRAY, ExternalSource
from common.ingest.row_parser import MAX_LINE_DEPTH
from common.json.document_text import depth_over

DEFAULT_MAX_COLUMNS = 1000  # a wide discovered schema is almost always keys that hold data


@dataclass(frozen=True)
class TypeDecision:
    """One column type the system chose (a row of ``sys.schema_decisions``)."""

    column: str
    types_seen: tuple[str, ...]
    chosen: str
    rule: str
    example: str = ""  # where the first value of the chosen type was seen

    def to_json(self) -> dict:
        return {"column": self.column, "typesSeen": list(self.types_seen), "chosen": self.chosen, "rule": self.rule,
                "example": self.example}


# ---- scanning (executors and driver) -------------------------------------------------------------------


def _json_scan(batches):
    """Executor side: LISTING_DDL rows -> one row per listing row, its SchemaDiscovery as JSON."""
    import orjson
    import pyarrow as pa

    from common.ingest.row_parser import decompressed
    from services.ingestion.source_reader import open_listed

    loads = orjson.loads

    for batch in batches:
        for row in batch.to_pylist():
            found = SchemaDiscovery()
            name = row["name"]
            with open_listed(row) as raw:
                text = io.TextIOWrapper(decompressed(name, raw), encoding="utf-8-sig", errors="replace", newline="")
                for line_no, line in enumerate(text, row["first_line"]):
                    line = line.strip()
                    if not line:
                        continue
                    if depth_over(line, MAX_LINE_DEPTH):
                        # The reader makes such a line its parse exception; whether json.loads would
                        # still read it depends on the interpreter's recursion limit, so ask the depth.
                        continue
                    try:
                        obj = loads(line)
                    except ValueError:
                        try:  # what orjson refuses but Python's json reads (NaN, integers past 64 bits)
                            obj = json.loads(line)
                        except (ValueError, RecursionError):  # RecursionError: nested past the stack
                            continue  # the reader reports it as a parse exception with its line
                    if isinstance(obj, dict):
                        found.add_row(obj, name, line_no)
                    elif isinstance(obj, list) and obj and all(isinstance(o, dict) for o in obj):
                        for o in obj:
                            found.add_row(o, name, line_no)
            yield pa.record_batch([pa.array([json.dumps(found.to_json())], pa.string())], names=["schema"])


def _scan_json(spark, source: ExternalSource, files) -> SchemaDiscovery:
    from services.ingestion.source_reader import LISTING_DDL, listing_rows
    from services.ingestion.spark_api import spark_api

    api = spark_api(spark)
    rows = listing_rows(api, source, files)
    if not rows:
        return SchemaDiscovery()
    listing = api.listing_frame(rows, LISTING_DDL)
    merged = SchemaDiscovery()
    for r in listing.mapInArrow(_json_scan, "schema STRING").collect():
        merged.merge(SchemaDiscovery.from_json(json.loads(r["schema"])))
    return merged


def _arrow_type(dtype, column: str) -> ColumnType:
    import pyarrow as pa

    t = pa.types
    if t.is_boolean(dtype) or t.is_integer(dtype):
        return ColumnType(TypeKind.LONG)
    if t.is_floating(dtype) or t.is_decimal(dtype):
        return ColumnType(TypeKind.DOUBLE)
    if t.is_timestamp(dtype) or t.is_date(dtype):
        return TIMESTAMP
    if t.is_string(dtype) or t.is_large_string(dtype) or t.is_binary(dtype) or t.is_large_binary(dtype):
        return STRING
    if t.is_dictionary(dtype):
        return _arrow_type(dtype.value_type, column)
    if t.is_list(dtype) or t.is_large_list(dtype):
        elem = dtype.value_type
        if not (t.is_nested(elem) or t.is_timestamp(elem) or t.is_date(elem)):
            return ColumnType(TypeKind.ARRAY, _arrow_type(elem, column))
    return ColumnType(TypeKind.COMPLEX, complex_name="json")


def _scan_parquet(files) -> tuple[SchemaDiscovery, set[str]]:
    """(discovery from the footers, columns that are times in every file)."""
    import pyarrow.parquet as pq

    found = SchemaDiscovery()
    times: dict[str, bool] = {}
    for f in files:
        if f.path is None:
            continue
        try:
            schema = pq.read_schema(f.path)
        except Exception as exc:  # noqa: BLE001 - a bad file is the reader's parse exception to report
            if isinstance(exc, (OSError, ValueError)) or type(exc).__name__.startswith("Arrow"):
                continue
            raise
        for field in schema:
            ctype = _arrow_type(field.type, field.name)
            is_time = ctype == TIMESTAMP
            times[field.name] = times.get(field.name, True) and is_time
            found.column(field.name).add(observed_of(ctype), f.name, 0)
    return found, {n for n, all_times in times.items() if all_times}


def _header(source: ExternalSource, f) -> list[str]:
    from common.ingest.row_parser import decompressed

    fmt = source.input_format
    raw = io.BytesIO(f.data.encode("utf-8")) if f.data is not None else open(f.path, "rb")
    with raw:
        lines = io.TextIOWrapper(decompressed(f.name, raw), encoding="utf-8-sig", errors="replace", newline="")
        skip = int(fmt.get("skipHeaderRows") or 0)
        for line in lines:
            if skip > 0:
                skip -= 1
                continue
            if fmt["type"] == "tsv":
                return [c.strip() for c in line.rstrip("\r\n").split(fmt["delimiter"])]
            return [c.strip() for c in next(csv.reader([line]))]
    return []


# ---- resolution (driver) -------------------------------------------------------------------------------


def _conflict_error(source: ExternalSource, col: ColumnDiscovery, datasource: str) -> ValidationError:
    (t1, (f1, l1)), (t2, (f2, l2)) = col.conflict()
    chosen = describe(col.observed)
    fix_type = col.column_type.sql_name if col.column_type.kind is not TypeKind.COMPLEX else "TYPE('COMPLEX<json>')"

    def at(file: str, line: int) -> str:
        return f"{file}, line {line}" if line else f"{file} (file schema)"

    return ValidationError(
        f"schema conflict in column '{col.name}' of {source.describe()}: it is {describe(t1)} at {at(f1, l1)} and "
        f"{describe(t2)} at {at(f2, l2)}; with schemaConflicts = 'fail' the task stops before publishing anything. "
        f"Declare its type: PARTIAL (\"{col.name}\" {fix_type}) after the table function (or in EXTEND or the "
        f"catalog: ALTER TABLE {datasource} ADD COLUMN \"{col.name}\" {fix_type}), or SET schemaConflicts = 'widen' "
        f"to take {chosen}")


def resolve_source(spark, source: ExternalSource, files, *, datasource: str, settings: Mapping,
                   declared: Mapping[str, ColumnType] | None = None,
                   found: SchemaDiscovery | None = None) -> tuple[ExternalSource, list[TypeDecision]]:
    """``source`` with its signature resolved from ``files`` (an InputFile listing), and the type
    decisions made. ``declared`` are the catalog's declared column types (the provided schema).
    ``found``: a JSON source's rows already walked (a Kafka micro-batch's, in its executor), so
    nothing is scanned and ``spark`` may be None."""
    mode = conflict_mode(settings)
    partial = dict(source.partial)
    provided = {**dict(declared or {}), **partial}
    fmt = dict(source.input_format)
    decisions: list[TypeDecision] = []
    times: set[str] = set()
    kind = source.format_type
    if kind in ("csv", "tsv"):
        if fmt.get("findColumnsFromHeader"):
            names: dict[str, None] = {}
            for f in files:
                names.update(dict.fromkeys(n for n in _header(source, f) if n))
            found = SchemaDiscovery()
            for n in names:
                found.column(n).add(observe(""), "header", 1)
            fmt["missingColumnsNull"] = True
        elif fmt.get("columns"):
            found = SchemaDiscovery()
            for n in fmt["columns"]:
                found.column(n).add(observe(""), "columns", 0)
        else:
            found = SchemaDiscovery()
            found.column(COLUMNS_ARRAY).add(("ARRAY", "STRING"), "no header", 0)
            fmt["columnsArray"] = True
            if set(partial) - {COLUMNS_ARRAY}:
                raise ValidationError(f"{source.where or source.describe()}: a {kind} input without a header and "
                                      "without 'columns' has one discovered column, 'columns' (ARRAY<VARCHAR>); name "
                                      "its columns with columns => ... or findColumnsFromHeader => TRUE to declare "
                                      "some in PARTIAL")
    elif kind == "parquet":
        found, times = _scan_parquet(files)
    elif found is None:
        found = _scan_json(spark, source, files)
    signature: list[tuple[str, ColumnType]] = []
    for name, ctype in source.partial:  # declared columns first, in their order; absent ones are null
        signature.append((name, ctype))
        seen = found.columns.get(name)
        decisions.append(TypeDecision(name, tuple(describe(t) for t in (seen.examples if seen else ())),
                                      ctype.native_name, f"{RULE_DECLARED} (PARTIAL)"))
    for name, col in found.columns.items():
        if name in partial or name in source.exclude:
            continue
        seen = tuple(describe(t) for t in col.examples)
        if name in provided:
            ctype = provided[name]
            signature.append((name, ctype))
            decisions.append(TypeDecision(name, seen, ctype.native_name, f"{RULE_DECLARED} (catalog)"))
            continue
        if mode == "fail" and col.conflict() is not None:
            raise _conflict_error(source, col, datasource)
        ctype = TIMESTAMP if name in times else col.column_type
        example = ""
        first = col.examples.get(col.observed)
        if first is not None:
            example = f"{first[0]}:{first[1]}"
        signature.append((name, ctype))
        decisions.append(TypeDecision(name, seen, ctype.native_name, col.rule, example))
    limit = int(settings.get("maxDiscoveredColumns", DEFAULT_MAX_COLUMNS))
    if len(signature) > limit:
        names = [n for n, _ in signature]
        raise ValidationError(
            f"{source.describe()} has {len(names)} distinct top-level keys ({', '.join(names[:5])}, ...), more than "
            f"maxDiscoveredColumns = {limit}: keys that are really data (ids, timestamps as keys) make one column "
            "each. Declare the columns you want (EXTEND, or PARTIAL plus exclude), nest the keys under one object "
            "to store it as a single COMPLEX<json> column, or raise SET maxDiscoveredColumns = N")
    if not signature:
        raise ValidationError(f"{source.where + ': ' if source.where else ''}no columns were found in "
                              f"{source.describe()} (every file is empty, or no row is a JSON object); check the "
                              "files, or declare the columns with EXTEND (col TYPE, ...)")
    resolved = dataclasses.replace(source, input_format=fmt, signature=tuple(signature))
    return resolved, decisions


# ---- the SELECT ----------------------------------------------------------------------------------------


def expand_dynamic(df):
    """The SELECT's Spark result with ``__dynamic`` expanded, in place, into its columns."""
    if DYNAMIC_COLUMN not in df.columns:
        return df
    from pyspark.sql import functions as F

    cols = []
    for name in df.columns:
        if name == DYNAMIC_COLUMN:
            cols.append(F.col(f"`{DYNAMIC_COLUMN}`.*"))
        else:
            cols.append(F.col("`" + name.replace("`", "``") + "`"))
    return df.select(*cols)





def check_sealed(datasource: str, output: list[str], declared: set[str]) -> None:
    undeclared = [n for n in output if n not in declared and n != "__time"]
    if undeclared:
        raise ValidationError(
            f"datasource {datasource} is sealed and does not declare {', '.join(undeclared)} (found in the input "
            f"through *); add them to its catalog entry (ALTER TABLE {datasource} ADD COLUMN ...), leave them out "
            "with exclude => ARRAY[...], or list the columns instead of *")


__all__ = ["TypeDecision", "check_sealed", "expand_dynamic", "resolve_source"]
