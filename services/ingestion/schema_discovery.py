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

from sqlglot import exp

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
from services.ingestion.external_source import COLUMNS_ARRAY, ExternalSource

DYNAMIC_COLUMN = "__dynamic"
CONFLICT_MODES = ("widen", "fail")
DEFAULT_CONFLICTS = "widen"
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


def conflict_mode(settings: Mapping) -> str:
    mode = str(settings.get("schemaConflicts", DEFAULT_CONFLICTS)).lower()
    if mode not in CONFLICT_MODES:
        raise ValidationError(f"context parameter 'schemaConflicts' must be 'widen' or 'fail', got "
                              f"{settings.get('schemaConflicts')!r}")
    return mode


# ---- scanning (executors and driver) -------------------------------------------------------------------


def _json_scan(batches):
    """Executor side: LISTING_DDL rows -> one row per listing row, its SchemaDiscovery as JSON."""
    import orjson
    import pyarrow as pa

    from services.ingestion.row_parser import decompressed
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
    from services.ingestion.row_parser import decompressed

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
                   declared: Mapping[str, ColumnType] | None = None) -> tuple[ExternalSource, list[TypeDecision]]:
    """``source`` with its signature resolved from ``files`` (an InputFile listing), and the type
    decisions made. ``declared`` are the catalog's declared column types (the provided schema)."""
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
    else:
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


def _is_star(e: exp.Expression) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))


def _source_of(select: exp.Select, sources: Mapping[str, ExternalSource]) -> str | None:
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None or select.args.get("joins") or not isinstance(from_.this, exp.Table):
        return None
    name = from_.this.name
    return name if name in sources else None


def expand_star(select: exp.Query, sources: Mapping[str, ExternalSource]) -> exp.Query:
    """``*`` over a discovered source -> the source columns not named elsewhere in the SELECT list
    (by reference or as an output name); in a rollup, one sorted struct ``__dynamic`` of them."""
    tree = select.copy()
    for node in list(tree.find_all(exp.Select)):
        name = _source_of(node, sources)
        if name is None or not sources[name].discover or not any(_is_star(e) for e in node.expressions):
            continue
        others = [e for e in node.expressions if not _is_star(e)]
        named = {c.name for e in others for c in e.find_all(exp.Column)} | {e.alias_or_name for e in others}
        columns = [n for n, _ in sources[name].signature if n not in named]
        rollup = node.args.get("group") is not None
        out: list[exp.Expression] = []
        for e in node.expressions:
            if not _is_star(e):
                out.append(e)
            elif rollup and columns:
                args: list[exp.Expression] = []
                for n in sorted(columns):
                    args += [exp.Literal.string(n), exp.column(n, quoted=True)]
                out.append(exp.alias_(exp.Anonymous(this="named_struct", expressions=args), DYNAMIC_COLUMN))
            else:
                out.extend(exp.column(n, quoted=True) for n in columns)
        node.set("expressions", out)
    return tree


def dynamic_columns(select: exp.Query) -> tuple[str, ...]:
    """The names ``__dynamic`` carries in ``select`` (after ``expand_star``)."""
    if not isinstance(select, exp.Select):
        return ()
    for e in select.expressions:
        if e.alias_or_name == DYNAMIC_COLUMN and isinstance(e.unalias(), exp.Anonymous):
            return tuple(a.name for a in e.unalias().expressions if isinstance(a, exp.Column))
    return ()


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




# ---- EXPLAIN -------------------------------------------------------------------------------------------


def explain_ingestion(statement) -> dict[str, str]:
    """PLAN / RESOURCES / ATTRIBUTES (JSON text) of an INSERT/REPLACE as the broker can know it: the
    columns the SELECT reads from each source with their types, where a discovered source's
    undeclared columns appear as one ``__dynamic`` COMPLEX<json> column (the columns to be named
    when the task reads the input), and the SELECT with ``*`` standing for them."""
    import dataclasses

    sources, signatures = {}, {}
    for name, src in statement.sources.items():
        if src.discover:
            cols = [{"name": n, "type": t.native_name, "declared": "PARTIAL"} for n, t in src.partial]
            cols.append({"name": DYNAMIC_COLUMN, "type": "COMPLEX<json>", "declared": "discovered at run time"})
            stand_in = (*src.partial, (DYNAMIC_COLUMN, ColumnType(TypeKind.COMPLEX, complex_name="json")))
            sources[name] = dataclasses.replace(src, signature=stand_in)
        else:
            cols = [{"name": n, "type": t.native_name, "declared": "EXTEND"} for n, t in src.signature]
            sources[name] = src
        signatures[name] = {"inputSource": src.input_source, "inputFormat": src.input_format, "columns": cols,
                            "exclude": list(src.exclude)}
    select = expand_star(statement.select, sources)
    if isinstance(select, exp.Select):  # the struct a rollup groups on is, to the planner, one column
        select.set("expressions", [exp.column(DYNAMIC_COLUMN) if e.alias_or_name == DYNAMIC_COLUMN else e
                                   for e in select.expressions])
    plan = {"mode": statement.mode, "dataSource": statement.datasource, "select": select.sql("druid"),
            "sources": signatures, "rollup": statement.is_rollup}
    resources = [{"name": statement.datasource, "type": "DATASOURCE"}]
    resources += [{"name": s.describe(), "type": "EXTERNAL"} for s in statement.sources.values()]
    attributes = {"statementType": statement.mode, "targetDataSource": statement.datasource,
                  "partitionedBy": statement.partitioned_by.to_json() if statement.partitioned_by else None,
                  "clusteredBy": list(statement.clustered_by) or None}
    return {"PLAN": json.dumps(plan), "RESOURCES": json.dumps(resources), "ATTRIBUTES": json.dumps(attributes)}


__all__ = ["CONFLICT_MODES", "DYNAMIC_COLUMN", "TypeDecision", "check_sealed", "conflict_mode", "dynamic_columns",
           "expand_dynamic", "expand_star", "explain_ingestion", "resolve_source"]
