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

import base64
import fnmatch
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from common.errors import ValidationError
from common.types.column_type import ColumnType, TypeKind
from services.ingestion.external_source import ExternalSource
from services.ingestion.ingestion_report import ParseExceptionSample
from services.ingestion.row_parser import META_ERROR, META_FILE, META_LINE, META_RAW, parse_file
from services.ingestion.spark_api import spark_api

DEFAULT_HTTP_TIMEOUT_S = 60.0
DEFAULT_HTTP_MAX_BYTES = 1 << 30
MAX_SAMPLES = 10
_CHUNK = 1 << 20
LISTING_DDL = ("name STRING, path STRING, data STRING, spark_file STRING, start BIGINT, `end` BIGINT, "
               "first_line BIGINT")


@dataclass(frozen=True)
class InputFile:
    name: str  # what messages show: the path, the URI, or "inline data"
    path: str | None = None  # readable by executors
    data: str | None = None  # inline text
    spark_file: str | None = None  # registered with SparkContext.addFile (downloads on a cluster)


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


# ---- listing (driver) ---------------------------------------------------------------------------------


def local_files(source: dict) -> list[str]:
    """The files of a local input source, sorted; a missing directory or file is an error."""
    out: set[str] = set()
    base = source.get("baseDir")
    if base:
        base = os.path.abspath(os.path.expanduser(base))
        if not os.path.isdir(base):
            raise ValidationError(f"local input: baseDir '{base}' does not exist or is not a directory")
        pattern = source.get("filter") or "*"
        for root, _dirs, names in os.walk(base):
            for name in names:
                if fnmatch.fnmatchcase(name, pattern) and not name.startswith("."):
                    out.add(os.path.join(root, name))
        if not out and not source.get("files"):
            raise ValidationError(f"local input: no file in baseDir '{base}' matches filter '{pattern}'")
    for f in source.get("files") or []:
        path = os.path.abspath(os.path.expanduser(f))
        if not os.path.isfile(path):
            raise ValidationError(f"local input: file '{f}' does not exist or is not a regular file")
        out.add(path)
    return sorted(out)


def _auth_header(source: dict) -> str | None:
    user = source.get("httpAuthenticationUsername")
    if user is None:
        return None
    pw = source.get("httpAuthenticationPassword") or {}
    if pw.get("type") == "environment":
        var = pw.get("variable", "")
        if var not in os.environ:
            raise ValidationError(f"http input: environment variable '{var}' (the password) is not set")
        password = os.environ[var]
    else:
        password = pw.get("password", "")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def download(uri: str, target: str, *, timeout_s: float, max_bytes: int, auth: str | None = None) -> int:
    """Fetch ``uri`` into ``target`` within ``timeout_s`` overall; refuse bodies over ``max_bytes``."""
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(uri, headers={"User-Agent": "strata-ingestion"})
    if auth:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            length = resp.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise ValidationError(f"http input '{uri}' is {int(length)} bytes, over the limit of {max_bytes}; "
                                      "raise httpInputMaxBytes in the query context")
            written = 0
            with open(target, "wb") as out:
                while True:
                    if time.monotonic() > deadline:
                        raise ValidationError(f"http input '{uri}': download did not finish within {timeout_s:g}s; "
                                              "raise httpInputTimeoutSeconds in the query context")
                    chunk = resp.read(_CHUNK)
                    if not chunk:
                        break
                    written += len(chunk)
                    if written > max_bytes:
                        raise ValidationError(f"http input '{uri}' is over the limit of {max_bytes} bytes; raise "
                                              "httpInputMaxBytes in the query context")
                    out.write(chunk)
            return written
    except urllib.error.HTTPError as exc:
        raise ValidationError(f"http input '{uri}': the server answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ValidationError(f"http input '{uri}': cannot download it: {reason}") from None


def list_input(source: ExternalSource, work_dir: str, context: dict | None = None) -> list[InputFile]:
    """The input files of ``source``; HTTP inputs are downloaded into ``work_dir`` first."""
    context = context or {}
    src = source.input_source
    if src["type"] == "inline":
        return [InputFile("inline data", data=src["data"])]
    if src["type"] == "local":
        return [InputFile(p, path=p) for p in local_files(src)]
    timeout_s = float(context.get("httpInputTimeoutSeconds", DEFAULT_HTTP_TIMEOUT_S))
    max_bytes = int(context.get("httpInputMaxBytes", DEFAULT_HTTP_MAX_BYTES))
    auth = _auth_header(src)
    os.makedirs(work_dir, exist_ok=True)
    out = []
    for i, uri in enumerate(src["uris"]):
        base = os.path.basename(urllib.parse.urlparse(uri).path) or "download"
        target = os.path.join(work_dir, f"{i:05d}-{re.sub(r'[^A-Za-z0-9._-]', '_', base)}")
        download(uri, target, timeout_s=timeout_s, max_bytes=max_bytes, auth=auth)
        out.append(InputFile(uri, path=target))
    return out


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
