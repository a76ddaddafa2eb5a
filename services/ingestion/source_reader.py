"""SourceReader: an ExternalSource as a Spark DataFrame of its signature's columns.

The driver lists the input (local files by baseDir + filter and/or explicit paths, inline data,
HTTP URIs downloaded first with a deadline and a size limit). Parquet files whose columns Spark
converts exactly as row_parser would are read by Spark's vectorized reader (parquet_source.py;
their row counts come from the footers). Everything else is read by row_parser, one task per file
or per line-aligned byte range of a big JSON or TSV file (text_splits.py), so every row keeps its
file and real line number: rows that do not parse are counted, sampled (file, line, raw text,
reason) and left out of the view; the caller decides whether their number is within
maxParseExceptions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from common.types.column_type import ColumnType, TypeKind
from common.ingest.external_source import ExternalSource
from common.ingest.input_files import InputFile, list_input
from services.ingestion.ingestion_report import ParseExceptionSample
from common.ingest.row_parser import META_ERROR, META_FILE, META_LINE, META_RAW, parse_file
from services.ingestion.spark_api import spark_api

MAX_SAMPLES = 10
LISTING_DDL = ("name STRING, path STRING, data STRING, spark_file STRING, start BIGINT, `end` BIGINT, "
               "first_line BIGINT")


@dataclass
class SourceRead:
    view: str
    dataframe: object  # the rows that parsed, signature columns only
    rows_read: int  # parse exceptions included
    parse_exceptions: int
    samples: list[ParseExceptionSample]
    files: int
    _cached: object = None
    native: tuple = ()  # parquet_source.NativeGroup of the files Spark's Parquet reader reads
    parsed_files: int = 0  # files read by row_parser

    def release(self) -> None:
        if self._cached is not None:
            self._cached.unpersist()
            self._cached = None


# ---- reading (Spark) ----------------------------------------------------------------------------------


def spark_type(ctype: ColumnType) -> str:
    if ctype.kind is TypeKind.ARRAY:
        return f"ARRAY<{spark_type(ctype.element)}>"
    return {TypeKind.STRING: "STRING", TypeKind.LONG: "BIGINT", TypeKind.DOUBLE: "DOUBLE", TypeKind.FLOAT: "FLOAT",
            TypeKind.TIMESTAMP: "TIMESTAMP", TypeKind.COMPLEX: "STRING"}[ctype.kind]


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def view_ddl(signature) -> str:
    """The Spark columns of a source's view (its signature)."""
    return ", ".join(f"{_quote(n)} {spark_type(t)}" for n, t in signature)


def reader_ddl(signature) -> str:
    cols = [view_ddl(signature)] if signature else []
    cols += [f"{META_FILE} STRING", f"{META_LINE} BIGINT", f"{META_ERROR} STRING", f"{META_RAW} STRING"]
    return ", ".join(cols)


def open_listed(row: dict):
    """The executor side: the byte stream of one LISTING_DDL row (inline text, a file, or a range)."""
    import io

    from services.ingestion.text_splits import open_range

    if row["data"] is not None:
        return io.BytesIO(row["data"].encode("utf-8"))
    if row["end"] is not None:
        return open_range(row["path"], row["start"], row["end"])
    path = row["path"]
    if row["spark_file"]:
        from pyspark import SparkFiles

        path = SparkFiles.get(row["spark_file"])
    return open(path, "rb")


def _file_reader(input_format: dict, signature):
    """The executor side: rows of LISTING_DDL -> parsed batches."""

    def read(batches):
        for batch in batches:
            for row in batch.to_pylist():
                with open_listed(row) as stream:
                    yield from parse_file(row["name"], stream, input_format, signature, first_line=row["first_line"])

    return read


def read_source(spark, source: ExternalSource, view: str, work_dir: str, context: dict | None = None,
                files: list[InputFile] | None = None) -> SourceRead:
    """Read ``source`` into the temp view ``view`` and count its parse exceptions; ``files`` is the
    listing when the caller has it already (schema discovery lists first)."""
    from services.ingestion.parquet_source import plan_parquet, read_native

    if files is None:
        files = list_input(source, os.path.join(work_dir, view), context)
    frames, rows_read, native = [], 0, ()
    parsed = SourceRead(view, None, 0, 0, [], len(files))
    python_files = files
    if source.format_type == "parquet":
        # Executors must see the path: local inputs are assumed shared (as for row_parser), and
        # downloads live on the driver, which runs the executors only in local mode.
        native_ok = source.source_type == "local" or spark_api(spark).master_is_local
        plan = plan_parquet([f.path if f.data is None else None for f in files], source.signature, native_ok)
        native = plan.groups
        frames = [read_native(spark, group, source.signature) for group in native]
        rows_read = plan.rows
        python_files = [files[i] for i in plan.fallback]
    if python_files or not frames:
        parsed = _parse_files(spark, source, python_files)
        frames.append(parsed.dataframe)
    good = frames[0]
    for frame in frames[1:]:
        good = good.unionByName(frame)
    good.createOrReplaceTempView(view)
    return SourceRead(view, good, rows_read + parsed.rows_read, parsed.parse_exceptions, parsed.samples, len(files),
                      parsed._cached, native, len(python_files))


def listing_rows(api, source: ExternalSource, files: list[InputFile]) -> list[tuple]:
    """LISTING_DDL rows of ``files``: one per file, or per line-aligned range of a big JSON/TSV file;
    ``api`` is the session's spark_api."""
    from services.ingestion.text_splits import text_ranges

    local = api.master_is_local
    rows = []
    for f in files:
        if f.path is not None and f.data is None and not local and source.source_type == "http":
            api.add_file(f.path)  # downloads live on the driver; ship them to executors
            rows.append((f.name, f.path, None, os.path.basename(f.path), None, None, 1))
        elif f.path is not None and f.data is None:
            # A big JSON/TSV file is parsed by several tasks, each from a line start on.
            ranges = text_ranges(f.path, source.input_format, api.default_parallelism)
            if len(ranges) == 1:
                rows.append((f.name, f.path, None, None, None, None, 1))
            else:
                rows.extend((f.name, f.path, None, None, r.start, r.end, r.first_line) for r in ranges)
        else:
            rows.append((f.name, f.path, f.data, None, None, None, 1))
    return rows


def _parse_files(spark, source: ExternalSource, files: list[InputFile]) -> SourceRead:
    """row_parser over ``files``, one task per file or range; the parsed rows stay cached for the
    SELECT, which runs more than once."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    api = spark_api(spark)
    listing = api.listing_frame(listing_rows(api, source, files), LISTING_DDL)
    parsed = listing.mapInArrow(_file_reader(source.input_format, source.signature), reader_ddl(source.signature))
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
    totals = parsed.agg(F.count(F.lit(1)).alias("n"), F.count(F.col(META_ERROR)).alias("bad")).collect()[0]
    samples: list[ParseExceptionSample] = []
    if totals["bad"]:
        bad = (parsed.where(F.col(META_ERROR).isNotNull()).orderBy(META_FILE, META_LINE)
               .select(META_FILE, META_LINE, META_RAW, META_ERROR).limit(MAX_SAMPLES).collect())
        samples = [ParseExceptionSample(r[META_FILE], int(r[META_LINE]), r[META_RAW] or "", r[META_ERROR])
                   for r in bad]
    good = parsed.where(F.col(META_ERROR).isNull()).select(*[F.col(_quote(n)) for n, _ in source.signature])
    return SourceRead("", good, int(totals["n"]), int(totals["bad"]), samples, len(files), parsed)


__all__ = ["DEFAULT_HTTP_MAX_BYTES", "DEFAULT_HTTP_TIMEOUT_S", "InputFile", "SourceRead", "download", "list_input",
           "listing_rows", "local_files", "open_listed", "read_source", "reader_ddl", "spark_type", "view_ddl"]
