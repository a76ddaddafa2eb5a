"""LocalInput: read parquet, newline-delimited JSON (optionally gzipped) or CSV/TSV files into one
Arrow table with a parsed ``__time`` column."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from common.errors import ValidationError
from common.types.column_type import TIME_COLUMN
from common.types.time_parsing import parse_timestamps

FORMATS = ("parquet", "json", "csv", "tsv")


def detect_format(path: str) -> str:
    name = path.lower().removesuffix(".gz")
    for fmt, suffixes in (("parquet", (".parquet", ".pq")), ("json", (".json", ".jsonl", ".ndjson")),
                          ("csv", (".csv",)), ("tsv", (".tsv",))):
        if name.endswith(suffixes):
            return fmt
    raise ValidationError(f"cannot tell the format of '{path}' from its name; pass --format ({', '.join(FORMATS)})")


def read_file(path: str, fmt: str | None = None) -> pa.Table:
    if not os.path.exists(path):
        raise ValidationError(f"input file '{path}' does not exist")
    fmt = fmt or detect_format(path)
    try:
        if fmt == "parquet":
            return pq.read_table(path)
        if fmt == "json":
            return pajson.read_json(path)
        if fmt in ("csv", "tsv"):
            parse = pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",")
            return pacsv.read_csv(path, parse_options=parse)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValidationError(f"cannot read '{path}' as {fmt}: {exc}") from None
    raise ValidationError(f"unknown input format '{fmt}'; valid: {', '.join(FORMATS)}")


TIME_CANDIDATES = ("__time", "time", "timestamp")


def with_time(table: pa.Table, time_column: str | None, source: str) -> pa.Table:
    """Replace ``time_column`` with a parsed ``__time``; a row whose time cannot be read is an error.

    Without a ``time_column`` the first of __time, time, timestamp present is used.
    """
    if time_column is None:
        time_column = next((c for c in TIME_CANDIDATES if c in table.column_names), TIME_CANDIDATES[0])
    if time_column not in table.column_names:
        raise ValidationError(
            f"{source}: no time column '{time_column}' (columns: {', '.join(table.column_names)}); pass --time-column"
        )
    raw = table.column(time_column).combine_chunks()
    parsed = parse_timestamps(raw)
    bad = parsed.is_null()  # null input or unparseable text
    if parsed.null_count:
        row = int(pc.index(bad, True).as_py())
        raise ValidationError(
            f"{source}: row {row + 1}: cannot parse time column '{time_column}' value {raw[row].as_py()!r}; "
            "use ISO-8601 (2015-09-12T00:46:58Z) or epoch milliseconds"
        )
    idx = table.column_names.index(time_column)
    table = table.remove_column(idx)
    if TIME_COLUMN in table.column_names:
        table = table.remove_column(table.column_names.index(TIME_COLUMN))
    return table.add_column(0, TIME_COLUMN, parsed.cast(pa.timestamp("ms", tz="UTC")))


def read_inputs(paths: list[str], fmt: str | None = None, time_column: str | None = None) -> pa.Table:
    tables = [with_time(read_file(p, fmt), time_column, p) for p in paths]
    if not tables:
        raise ValidationError("no input files given")
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
