"""RowParser: one input file (CSV, TSV, newline-delimited JSON or Parquet) into typed Arrow batches.

This is what Spark executors run for each input file; it is pure (file objects in, Arrow out) so
it is tested without Spark. Every row keeps where it came from: the file and its real 1-based line
number (a Parquet row's position in its file), and a row that cannot be read or whose value does
not fit its declared type becomes a *parse exception* row carrying the reason and the raw text,
never a silent null. Values are converted as Druid converts them: empty CSV fields are null,
JSON booleans are 1/0 in numeric columns and "true"/"false" in string ones, a scalar in an array
column is a one-element array, and list delimiters split text into ARRAY values. A value no
column can hold is a parse exception too: a lone surrogate escape (no UTF-8 text holds it), a
document nested deeper than documents may nest; NaN and numbers beyond a double in a document are
kept as Jackson prints them (common/json/document_text.py).
"""

from __future__ import annotations

import bz2
import csv
import datetime
import decimal
import gzip
import io
import json
import lzma
import math
import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson
import pyarrow as pa

from common.errors import ValidationError
from common.json.document_text import (MAX_DOCUMENT_DEPTH, depth_over, dumps_document, jackson_value,
                                       loads_document, lone_surrogate, surrogate_escape)
from common.types.column_type import ColumnType, TypeKind
from common.types.interval import parse_instant

META_FILE = "__strata_file"
META_LINE = "__strata_line"
META_ERROR = "__strata_error"
META_RAW = "__strata_raw"
META_COLUMNS = (META_FILE, META_LINE, META_ERROR, META_RAW)
BATCH_ROWS = 8192
MAX_RAW_CHARS = 2000
_BAD_UTF8 = re.compile("[\udc80-\udcff]")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class BadValue(Exception):
    """A value that does not fit its column; the message is the parse exception's reason."""


def arrow_type(ctype: ColumnType) -> pa.DataType:
    """The Arrow type a signature column travels as (Spark's timestamps are microseconds)."""
    if ctype.kind is TypeKind.TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if ctype.kind is TypeKind.ARRAY:
        return pa.list_(pa.field("element", arrow_type(ctype.element)))
    return ctype.to_arrow()


def output_schema(signature) -> pa.Schema:
    fields = [pa.field(name, arrow_type(ctype)) for name, ctype in signature]
    fields += [pa.field(META_FILE, pa.string()), pa.field(META_LINE, pa.int64()),
               pa.field(META_ERROR, pa.string()), pa.field(META_RAW, pa.string())]
    return pa.schema(fields)


# ---- value conversion -------------------------------------------------------------------------------------


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _long_in_range(value: int, v, column: str) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise BadValue(f"column '{column}': {v!r} is out of range for BIGINT ({_INT64_MIN} to {_INT64_MAX}); "
                       "declare the column DOUBLE or VARCHAR to keep such values")
    return value


def _to_long(v, column: str):
    if v is None:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return _long_in_range(v, v, column)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise BadValue(f"column '{column}': {v} is not a whole number")
        return _long_in_range(int(v), v, column)  # Druid truncates fractional input for LONG columns
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return None
        try:
            return _long_in_range(int(s), v, column)
        except ValueError:
            pass
        try:
            f = float(s)
        except ValueError:
            raise BadValue(f"column '{column}': cannot parse '{v}' as a LONG") from None
        if not math.isfinite(f):
            raise BadValue(f"column '{column}': cannot parse '{v}' as a LONG")
        return _long_in_range(int(f), v, column)
    raise BadValue(f"column '{column}': a {type(v).__name__} value cannot be a LONG")


def _to_double(v, column: str):
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:  # an integer beyond every double
            raise BadValue(f"column '{column}': {v} is out of range for DOUBLE") from None
    if isinstance(v, decimal.Decimal):  # a Parquet DECIMAL: the correctly rounded double, as Arrow's cast
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return None
        try:
            return float(s)
        except ValueError:
            raise BadValue(f"column '{column}': cannot parse '{v}' as a number") from None
    raise BadValue(f"column '{column}': a {type(v).__name__} value cannot be a number")


def _no_surrogate(text: str, column: str) -> str:
    """``text`` unless a ``\\udXXX`` escape left a lone surrogate in it: Arrow text is UTF-8, which
    has no such character (Druid's writer would silently make it '?'), so the row is a parse
    exception instead of failing the whole batch."""
    char = lone_surrogate(text)
    if char is not None:
        raise BadValue(f"column '{column}': the value holds a lone UTF-16 surrogate escape ({surrogate_escape(char)}), "
                       "which is no character and cannot be stored as text; remove it or pair it with its "
                       "other half")
    return text


def _to_string(v, column: str):
    if v is None:
        return v
    if isinstance(v, str):
        return _no_surrogate(v, column)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(jackson_value(v))
    if type(v) is datetime.date:  # a Parquet DATE, printed as Arrow's and Spark's casts print it
        return v.isoformat()
    kind = "a list" if isinstance(v, list) else "an object"
    hint = "declare it ARRAY<VARCHAR>" if isinstance(v, list) else "declare it COMPLEX<json>"
    raise BadValue(f"column '{column}': {kind} cannot be a VARCHAR; {hint}")


def _to_timestamp(v, column: str):
    if v is None:
        return None
    # Parquet times reach here as datetimes when another column of their batch needs the
    # row-by-row path; naive ones are UTC, as the vectorized cast takes them.
    if isinstance(v, datetime.datetime):
        aware = v if v.tzinfo is not None else v.replace(tzinfo=datetime.timezone.utc)
        return (aware - _EPOCH) // datetime.timedelta(microseconds=1)
    if isinstance(v, datetime.date):
        return (datetime.datetime.combine(v, datetime.time(), datetime.timezone.utc) - _EPOCH) // datetime.timedelta(
            microseconds=1)
    if isinstance(v, bool):
        raise BadValue(f"column '{column}': a boolean cannot be a TIMESTAMP")
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise BadValue(f"column '{column}': {v} is not a time; use ISO-8601 or epoch milliseconds")
        return _time_in_range(int(v), v, column)
    if isinstance(v, str):
        if not v.strip():
            return None
        try:
            return _time_in_range(parse_instant(v), v, column)
        except ValidationError:
            raise BadValue(f"column '{column}': cannot parse '{v}' as a time; use ISO-8601 or epoch "
                              "milliseconds") from None
    raise BadValue(f"column '{column}': a {type(v).__name__} value cannot be a TIMESTAMP")


def _plain_json(v):
    """Parquet values as JSON values: structs are objects, and so are maps, which arrive as
    (key, value) pairs; lists stay lists, at any depth."""
    if isinstance(v, dict):
        return {str(k): _plain_json(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and all(isinstance(e, tuple) and len(e) == 2 for e in v):
            return {str(k): _plain_json(x) for k, x in v}
        return [_plain_json(x) for x in v]
    return v


# Times travel as int64 microseconds (Arrow's timestamp[us]); Druid's instants are years 1 to 9999
# at most, well inside that.
_MIN_MILLIS, _MAX_MILLIS = -62135596800000, 253402300799999


def _time_in_range(millis: int, v, column: str) -> int:
    if not _MIN_MILLIS <= millis <= _MAX_MILLIS:
        raise BadValue(f"column '{column}': {v!r} is out of range for a time (years 1 to 9999, epoch milliseconds "
                       f"{_MIN_MILLIS} to {_MAX_MILLIS})")
    return millis * 1000


def _to_json(v, column: str):
    if v is None:
        return None
    return _json_text(_plain_json(v), column, default=str)


def _json_text(v, column: str, default=None) -> str:
    """A parsed document's compact text (dumps_document: non-finite numbers as Jackson prints them);
    a lone surrogate in it makes the row a parse exception (see _no_surrogate)."""
    return _no_surrogate(dumps_document(v, default), column)


def _text_to_json(v, column: str):
    """A COMPLEX<json> column of a text format (CSV, TSV) holds JSON text: parse it, so malformed
    text is this row's parse exception, with the reason and where in the value it went wrong."""
    if not isinstance(v, str):
        return _to_json(v, column)
    try:
        if depth_over(v):
            raise RecursionError
        doc = loads_document(v)
    except json.JSONDecodeError as exc:
        raise BadValue(f"column '{column}' is COMPLEX<json> but holds invalid JSON ({exc.msg} at character "
                       f"{exc.pos + 1}: {v[:60]!r}); fix the text, or declare the column VARCHAR and use "
                       "TRY_PARSE_JSON") from None
    except RecursionError:
        raise BadValue(_too_deep(f"column '{column}' holds JSON that")) from None
    return _json_text(doc, column)


def _too_deep(what: str, inside: str = "") -> str:
    return (f"{what} nests arrays/objects deeper than {MAX_DOCUMENT_DEPTH} levels{inside}; flatten it (documents "
            f"may nest {MAX_DOCUMENT_DEPTH} levels at most)")


def _scalar_converter(ctype: ColumnType) -> Callable:
    kind = ctype.kind
    if kind is TypeKind.LONG:
        return _to_long
    if kind in (TypeKind.DOUBLE, TypeKind.FLOAT):
        return _to_double
    if kind is TypeKind.TIMESTAMP:
        return _to_timestamp
    if kind is TypeKind.COMPLEX:
        return _to_json
    return _to_string


def converter(ctype: ColumnType, list_delimiter: str | None = None, json_text: bool = False) -> Callable:
    """value -> Python value of the column's Arrow type; raises BadValue with the reason.
    ``json_text``: the input is a text format, whose COMPLEX<json> values are JSON text to parse."""
    if json_text and ctype.kind is TypeKind.COMPLEX:
        return _text_to_json
    if ctype.kind is not TypeKind.ARRAY:
        return _scalar_converter(ctype)
    element = _scalar_converter(ctype.element)

    def to_array(v, column: str):
        if v is None:
            return None
        if isinstance(v, str) and list_delimiter is not None:
            if v == "":
                return None
            v = v.split(list_delimiter)
        if not isinstance(v, list):
            v = [v]
        return [element(x, column) for x in v]

    return to_array


# ---- files ---------------------------------------------------------------------------------------------


def decompressed(name: str, raw: BinaryIO) -> BinaryIO:
    """Undo the compression that the file name's extension announces."""
    low = name.lower().split("?")[0]
    if low.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)
    if low.endswith(".bz2"):
        return bz2.BZ2File(raw)
    if low.endswith(".xz"):
        return lzma.LZMAFile(raw)
    if low.endswith((".zst", ".zstd", ".snappy", ".zip")):
        raise ValidationError(f"input '{name}': this compression is not supported; use .gz, .bz2 or .xz")
    return raw


class _Batcher:
    """Accumulates rows column by column and cuts Arrow batches."""

    def __init__(self, name: str, signature, list_delimiter: str | None = None, json_text: bool = False,
                 json_input: bool = False) -> None:
        self.name = name
        self.names = [n for n, _ in signature]
        self.schema = output_schema(signature)
        self.convert = [converter(t, list_delimiter, json_text) for _, t in signature]
        # Newline-delimited JSON: _orjson_values prints a COMPLEX<json> value of a line orjson
        # parsed; a line json parsed (NaN, huge integers) keeps json's printing.
        self.orjson_line = False
        self.complex = frozenset(i for i, (_, t) in enumerate(signature) if t.kind is TypeKind.COMPLEX)
        if json_input:
            self.convert = [self._json_value if i in self.complex else c for i, c in enumerate(self.convert)]
        self._reset()

    def _json_value(self, v, column: str):
        # A line json parsed holds only dicts, lists and JSON scalars: no Parquet maps to turn into objects.
        return v if self.orjson_line else (None if v is None else _json_text(v, column))

    def _reset(self) -> None:
        self.cols: list[list] = [[] for _ in self.names]
        self.lines: list[int] = []
        self.errors: list[str | None] = []
        self.raws: list[str | None] = []

    def add(self, values: list, line: int, raw: str) -> None:
        """``values`` in signature order (unconverted); a conversion failure makes an error row."""
        try:
            out = [conv(v, name) for conv, v, name in zip(self.convert, values, self.names)]
        except BadValue as exc:
            self.error(line, raw, str(exc))
            return
        for col, v in zip(self.cols, out):
            col.append(v)
        self.lines.append(line)
        self.errors.append(None)
        self.raws.append(None)

    def error(self, line: int, raw: str, reason: str) -> None:
        for col in self.cols:
            col.append(None)
        self.lines.append(line)
        self.errors.append(reason)
        if raw is not None:
            raw = raw[:MAX_RAW_CHARS].encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        self.raws.append(raw)

    def __len__(self) -> int:
        return len(self.lines)

    def flush(self) -> pa.RecordBatch:
        n = len(self.lines)
        arrays = [pa.array(col, type=f.type) for col, f in zip(self.cols, self.schema)]
        arrays += [pa.array([self.name] * n, pa.string()), pa.array(self.lines, pa.int64()),
                   pa.array(self.errors, pa.string()), pa.array(self.raws, pa.string())]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _text_lines(stream: BinaryIO) -> Iterator[str]:
    # surrogateescape keeps undecodable bytes visible, so a line with bad UTF-8 is one parse
    # exception instead of an exception that ends the whole file.
    # A byte order mark opening the file (Excel and Windows tools write one) is not part of the
    # first line, so it does not end up in the first column name or value. It is dropped here, not
    # by the utf-8-sig codec: that codec silently drops a file that is only the start of a mark
    # (EF BB), which the compiled reader (json_lines_reader) reports as a line that is not UTF-8.
    lines = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape", newline="")
    first = next(lines, None)
    if first is None:
        return
    yield first[1:] if first.startswith("\ufeff") else first
    yield from lines


def parse_file(name: str, stream: BinaryIO, input_format: dict, signature,
               batch_rows: int = BATCH_ROWS, first_line: int = 1) -> Iterator[pa.RecordBatch]:
    """Typed batches (signature columns, then META_COLUMNS) of one input file, or of the part of a
    JSON or TSV file that starts at line ``first_line`` (text_splits.py cuts them on line ends)."""
    kind = input_format["type"]
    if kind == "parquet":
        yield from _parse_parquet(name, stream, signature, batch_rows)
        return
    delimiter = input_format.get("listDelimiter") if kind in ("csv", "tsv") else None
    batcher = _Batcher(name, signature, delimiter, json_text=kind in ("csv", "tsv"), json_input=kind == "json")
    last_line = first_line - 1
    try:
        rows = _json_rows if kind == "json" else _delimited_rows
        for item in rows(name, _text_lines(decompressed(name, stream)), input_format, signature, batcher, first_line):
            last_line = item
            if len(batcher) >= batch_rows:
                yield batcher.flush()
    except (OSError, EOFError, lzma.LZMAError, gzip.BadGzipFile) as exc:
        batcher.error(last_line + 1, "", _unreadable(last_line, exc))
    if len(batcher):
        yield batcher.flush()


def _unreadable(last_line: int, exc: Exception) -> str:
    return f"cannot read the file past line {last_line}: {exc}"


def read_error_batch(name: str, signature, last_line: int, exc: Exception) -> pa.RecordBatch:
    """The parse exception row parse_file adds when the input cannot be read past ``last_line``."""
    batcher = _Batcher(name, signature, json_input=True)
    batcher.error(last_line + 1, "", _unreadable(last_line, exc))
    return batcher.flush()


def _orjson_number_text(printed: bytes) -> bool:
    """Whether orjson's text may hold a number json.dumps prints differently (orjson: 0.00001 and
    1e-7 for json's 1e-05 and 1e-07) or a huge integer orjson read as a double (json.dumps: 1e+19
    form). A string holding such text only costs the slower exact path."""
    if b"0.0000" in printed:
        return True
    for mark in (b"e-", b"e+"):
        i = printed.find(mark)
        while i >= 0:
            if printed[i + 2:i + 3].isdigit():
                return True
            i = printed.find(mark, i + 2)
    return False


def _orjson_values(obj, names: list[str], complex_columns: frozenset) -> list[list] | None:
    """The column values of each row of a line orjson parsed (an object, or an array of objects;
    an empty list for anything else, which the caller reports), COMPLEX<json> ones printed by
    orjson; None when json must read the line instead: orjson reads integers beyond 64 bits as
    doubles (so a double of 9e18 or more is checked), and prints doubles below 1e-4 otherwise."""
    if isinstance(obj, dict):
        objs = [obj]
    elif isinstance(obj, list) and obj and all(isinstance(o, dict) for o in obj):
        objs = obj
    else:
        return None
    out = []
    for o in objs:
        values = [o.get(n) for n in names]
        for i, v in enumerate(values):
            if v is None:
                continue
            if i in complex_columns:
                try:
                    printed = orjson.dumps(v)
                except (TypeError, orjson.JSONEncodeError):  # nested deeper than orjson prints
                    return None
                if _orjson_number_text(printed):
                    return None
                values[i] = printed.decode()
            elif type(v) is float and abs(v) >= 9e18 or type(v) is list and any(
                    type(e) is float and abs(e) >= 9e18 for e in v):
                return None
        out.append(values)
    return out


# A line is a row's object around its documents, which may nest MAX_DOCUMENT_DEPTH levels each (so
# the segment build parses every document it gets); a deeper line is a parse exception.
MAX_LINE_DEPTH = MAX_DOCUMENT_DEPTH + 1


def _json_rows(name, lines, fmt, signature, batcher: _Batcher, first_line: int = 1) -> Iterator[int]:
    names = [n for n, _ in signature]
    for line_no, line in enumerate(lines, first_line):
        text = line.strip()
        if not text:
            yield line_no
            continue
        if not text.isascii() and _BAD_UTF8.search(text):
            batcher.error(line_no, text, "the line is not valid UTF-8")
        elif depth_over(text, MAX_LINE_DEPTH):
            batcher.error(line_no, text, _too_deep("the line", " inside its row's object"))
        else:
            try:
                # One parse per line: orjson, or json where orjson reads differently (NaN, numbers
                # beyond a double, huge integers, lone surrogates) and to word a malformed line's
                # error as before; loads_document reads what JSON cannot print as Jackson prints it.
                rows = None
                try:
                    obj = orjson.loads(text)
                except orjson.JSONDecodeError:
                    pass
                else:
                    rows = _orjson_values(obj, names, batcher.complex)
                batcher.orjson_line = rows is not None
                if rows is None:
                    obj = loads_document(text)
            except json.JSONDecodeError as exc:
                batcher.error(line_no, text, f"invalid JSON: {exc.msg} at column {exc.colno}")
            except RecursionError:  # within MAX_LINE_DEPTH, yet deeper than the stack left allows
                batcher.error(line_no, text, _too_deep("the line", " inside its row's object"))
            except ValueError as exc:  # an integer literal longer than Python converts
                batcher.error(line_no, text, f"invalid JSON: {str(exc).split(';')[0]}")
            else:
                if rows is not None and rows:
                    for values in rows:
                        batcher.add(values, line_no, text)
                elif isinstance(obj, dict):
                    batcher.add([obj.get(n) for n in names], line_no, text)
                elif isinstance(obj, list) and obj and all(isinstance(o, dict) for o in obj):
                    for o in obj:  # a JSON array of objects on one line: each object is a row, as in Druid
                        batcher.add([o.get(n) for n in names], line_no, text)
                else:
                    batcher.error(line_no, text, f"expected a JSON object, got a {type(obj).__name__}")
        yield line_no


def json_line_rows(name: str, signature, lines: list[tuple[int, str]]) -> tuple[pa.RecordBatch, list[int]]:
    """The rows of some lines of a newline-delimited JSON file (line number, text without its line
    end), each read exactly as parse_file reads it: one batch, and how many rows each line gave
    (0 for a blank line, several for an array of objects). The compiled reader hands over the lines
    it cannot read the same way."""
    batcher = _Batcher(name, signature, json_input=True)
    counts = []
    for line_no, text in lines:
        before = len(batcher)
        for _ in _json_rows(name, [text], None, signature, batcher, line_no):
            pass
        counts.append(len(batcher) - before)
    return batcher.flush(), counts


class _LineCounter:
    """Feeds lines to csv.reader while remembering the lines of the current record."""

    def __init__(self, lines) -> None:
        self._lines = iter(lines)
        self.count = 0
        self.pending: list[str] = []

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.count += 1
        self.pending.append(line)
        return line

    def take(self) -> str:
        raw = "".join(self.pending).rstrip("\r\n")
        self.pending = []
        return raw


def _delimited_records(lines, fmt, first_line: int = 1) -> Iterator[tuple[int, str, list[str] | None, str | None]]:
    """(first line number, raw text, fields or None, error) per record."""
    if fmt["type"] == "tsv":
        delimiter = fmt["delimiter"]
        for line_no, line in enumerate(lines, first_line):
            raw = line.rstrip("\r\n")
            yield line_no, raw, raw.split(delimiter), None
        return
    counter = _LineCounter(lines)
    counter.count = first_line - 1
    reader = csv.reader(counter, strict=True)
    while True:
        start = counter.count + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, counter.take(), None, f"malformed CSV: {exc}"
            continue
        yield start, counter.take(), fields, None


def _delimited_rows(name, lines, fmt, signature, batcher: _Batcher, first_line: int = 1) -> Iterator[int]:
    skip = fmt.get("skipHeaderRows", 0) if first_line == 1 else 0
    columns = fmt.get("columns")
    positions = None
    if fmt.get("columnsArray"):  # no header, no declared columns: one ARRAY<VARCHAR> of every field
        columns, positions = None, []
    elif columns:
        positions = [columns.index(n) for n, _ in signature]
    for line_no, raw, fields, error in _delimited_records(lines, fmt, first_line):
        if skip > 0:
            skip -= 1
            yield line_no
            continue
        if error is None and _BAD_UTF8.search(raw):
            error = "the line is not valid UTF-8"
        if positions is None:  # findColumnsFromHeader: this record is the header
            if error is not None:
                batcher.error(line_no, raw, f"cannot read the header: {error}")
                return
            header = [f.strip() for f in fields]
            missing = [n for n, _ in signature if n not in header]
            if missing and fmt.get("missingColumnsNull"):
                # A discovered schema is the union of the files' headers: what this one lacks is null.
                missing = []
            if missing:
                batcher.error(line_no, raw, f"the header has no column(s) {', '.join(missing)} (it has "
                              f"{', '.join(header)}); the file's rows were skipped")
                return
            columns = header
            positions = [header.index(n) if n in header else None for n, _ in signature]
            yield line_no
            continue
        if error is not None:
            batcher.error(line_no, raw, error)
        elif fields == [] or (len(fields) == 1 and fields[0].strip() == ""):
            pass  # blank line
        elif columns is None:
            batcher.add([[f if f != "" else None for f in fields]], line_no, raw)
        elif len(fields) > len(columns):
            batcher.error(line_no, raw, f"the row has {len(fields)} values but there are {len(columns)} columns "
                          f"({', '.join(columns)})")
        else:
            # A row may stop early (no trailing delimiters, as Druid's TSV test files do): the rest is null.
            batcher.add([None if p is None or p >= len(fields) or fields[p] == "" else fields[p] for p in positions],
                        line_no, raw)
        yield line_no


def cast_column(values: pa.Array, target: pa.DataType) -> pa.Array:
    """A Parquet column as ``target``, value for value what the row-by-row converters give.

    Arrow's own decimal-to-double cast scales by a power of ten in floating point and can miss
    the nearest double (-8.979 became -8.979000000000001), so decimals go through their exact
    text, which Arrow parses correctly rounded, as float(Decimal) does."""
    if values.type == target:
        return values
    if pa.types.is_decimal(values.type) and pa.types.is_floating(target):
        return values.cast(pa.string()).cast(target)
    # Finer-than-microsecond times truncate, as everywhere else in strata.
    lossy = pa.types.is_timestamp(values.type) and pa.types.is_timestamp(target)
    return values.cast(target, safe=not lossy)


def _parse_parquet(name: str, stream: BinaryIO, signature, batch_rows: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    batcher = _Batcher(name, signature)
    schema = batcher.schema
    try:
        pf = pq.ParquetFile(stream)
    except (pa.ArrowInvalid, OSError) as exc:
        batcher.error(0, "", f"not a readable Parquet file: {exc}")
        yield batcher.flush()
        return
    present = [n for n, _ in signature if n in pf.schema_arrow.names]
    row = 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=present or None):
        n = batch.num_rows
        arrays, ok = [], True
        for (col, ctype), field in zip(signature, schema):
            if col not in present:
                arrays.append(pa.nulls(n, field.type))
                continue
            values = batch.column(col)
            try:
                if ctype.kind is TypeKind.COMPLEX:
                    raise pa.ArrowInvalid("encode as JSON")
                arrays.append(cast_column(values, field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                ok = False
                break
        if ok:
            meta = [pa.array([name] * n, pa.string()), pa.array(range(row + 1, row + n + 1), pa.int64()),
                    pa.nulls(n, pa.string()), pa.nulls(n, pa.string())]
            yield pa.RecordBatch.from_arrays(arrays + meta, schema=schema)
        else:
            # Some value does not fit: go row by row so only the bad rows become parse exceptions.
            records = batch.to_pylist()
            for i, rec in enumerate(records):
                raw = json.dumps(rec, default=str, ensure_ascii=False)
                batcher.add([rec.get(c) for c, _ in signature], row + i + 1, raw)
            yield batcher.flush()
        row += n


__all__ = ["BATCH_ROWS", "META_COLUMNS", "META_ERROR", "META_FILE", "META_LINE", "META_RAW", "arrow_type",
           "cast_column", "converter", "decompressed", "json_line_rows", "output_schema", "parse_file",
           "read_error_batch"]
