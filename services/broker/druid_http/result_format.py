"""ResultFormat: a SQL result written as Druid's HTTP API writes it (``resultFormat`` object, array,
objectLines, arrayLines or csv), a record batch at a time so a large result is never held whole.

What the bytes look like follows Druid's SQL API reference: the header rows (column names, then
the Druid runtime types, then the SQL types, as asked); TIMESTAMP values as ISO-8601 text with
milliseconds in the statement's ``sqlTimeZone`` (``Z`` for a zero offset); BOOLEAN as JSON
true/false; NaN and infinities as the strings Jackson writes for them; COMPLEX<json> as the JSON
value itself. Every complete response ends with a newline (the line formats and csv with a blank
line), so a client can tell a body an error cut short from a complete one.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.sql import sql_types
from common.sql.sql_plan import JSON_FIELD_METADATA

FORMATS = ("object", "array", "objectLines", "arrayLines", "csv")
CONTENT_TYPES = {"object": "application/json", "array": "application/json", "objectLines": "text/plain",
                 "arrayLines": "text/plain", "csv": "text/csv"}


def check_format(name) -> str:
    if name is None:
        return "object"
    if name not in FORMATS:
        raise ValidationError(f"resultFormat {name!r} is not one of {', '.join(FORMATS)}")
    return name


def column_types(field: pa.Field) -> tuple[str, str]:
    """(Druid runtime type, SQL type) of a result column, as the type headers spell them."""
    dtype = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    if _is_json(field):
        return "COMPLEX<json>", "OTHER"
    if _is_json_list(field):
        return "ARRAY<COMPLEX<json>>", "ARRAY"
    sql = sql_types.from_arrow(dtype)
    if sql.name == "TIMESTAMP" or sql.name == "BOOLEAN":
        return "LONG", sql.name
    if sql.name.startswith("ARRAY"):
        return sql.native.native_name, "ARRAY"
    if sql.name.startswith("COMPLEX"):
        return sql.native.native_name, "OTHER"
    return sql.native.native_name, sql.name


def _is_json(field: pa.Field) -> bool:
    return field.metadata == JSON_FIELD_METADATA


def _is_json_list(field: pa.Field) -> bool:
    """ARRAY<COMPLEX<json>> (JSON_QUERY_ARRAY): a list whose elements are marked as JSON text."""
    return pa.types.is_list(field.type) and _is_json(field.type.value_field)


def _zone_format(tz: str) -> str:
    return "%Y-%m-%dT%H:%M:%SZ" if tz in ("UTC", "Z", "Etc/UTC") else "%Y-%m-%dT%H:%M:%S%z"


def _iso_array(column: pa.Array, tz: str) -> pa.Array:
    """Timestamps as Druid prints them, 2015-09-12T00:47:53.259Z (or -07:00 in another zone), as
    an Arrow string array (nulls kept): no Python object per value."""
    column = column.cast(pa.timestamp("ms", tz="UTC"))
    if tz in ("UTC", "Z", "Etc/UTC"):
        # A large result's main cost, so no per-value formatting at all: the date of each distinct
        # day (few in a batch) by numpy, the time of day and the millis looked up in tables.
        millis = pc.fill_null(column.cast(pa.int64()), 0).to_numpy()
        days, in_day = np.divmod(millis, _DAY_MS)
        encoded = pa.array(days).dictionary_encode()
        dates = np.datetime_as_string(encoded.dictionary.to_numpy().astype("datetime64[D]"), unit="D")
        clock, fraction = _clock_tables()
        text = pc.binary_join_element_wise(pa.array(dates, pa.string()).take(encoded.indices), "T",
                                           clock.take(pa.array(in_day // 1000)), ".",
                                           fraction.take(pa.array(in_day % 1000)), "Z", "")
        if column.null_count:
            text = pc.if_else(column.is_valid(), text, pa.scalar(None, pa.string()))
        return text
    text = pc.strftime(column.cast(pa.timestamp("ms", tz=tz)), format=_zone_format(tz))
    text = pc.replace_substring_regex(text, pattern=r"\+0000$", replacement="Z")
    return pc.replace_substring_regex(text, pattern=r"([+-]\d\d)(\d\d)$", replacement=r"\1:\2")


_DAY_MS = 86_400_000


@functools.cache
def _clock_tables() -> tuple[pa.Array, pa.Array]:
    """"HH:MM:SS" of every second of a day, and "000" to "999"."""
    seconds = np.arange(86_400)
    clock = [f"{h:02d}:{m:02d}:{x:02d}" for h, m, x in zip(seconds // 3600, seconds // 60 % 60, seconds % 60)]
    return pa.array(clock, pa.string()), pa.array([f"{i:03d}" for i in range(1000)], pa.string())


def _iso(column: pa.Array, tz: str) -> list:
    return _iso_array(column, tz).to_pylist()


def _non_finite(value: float):
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _floats(column: pa.Array) -> list:
    if pa.types.is_float32(column.type):
        # Float32 values as their shortest text (0.1, not 0.10000000149011612), as Java prints a float.
        values = [None if v is None else float(v) for v in pc.cast(column, pa.string()).to_pylist()]
    else:
        values = column.to_pylist()
    if pc.all(pc.is_finite(column)).as_py() is False:
        values = [v if v is None or math.isfinite(v) else _non_finite(v) for v in values]
    return values


def json_values(column: pa.Array, field: pa.Field, tz: str, raw_json: bool = False) -> list:
    """A column's values as what the JSON formats write for them (``raw_json``: COMPLEX<json>
    values as their text, for csv)."""
    column = _plain(column)
    dtype = column.type
    if pa.types.is_timestamp(dtype):
        return _iso(column, tz)
    if pa.types.is_floating(dtype):
        return _floats(column)
    if _is_json(field) and not raw_json:
        return [None if v is None else orjson.Fragment(v) for v in column.to_pylist()]
    if _is_json_list(field):
        # The documents as JSON inside the array, not as strings holding their text.
        return [None if row is None else [None if v is None else orjson.Fragment(v) for v in row]
                for row in column.to_pylist()]
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        import base64

        return [None if v is None else base64.b64encode(v).decode() for v in column.to_pylist()]
    return column.to_pylist()


def _csv_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return orjson.dumps(value).decode()
    return str(value)


def _plain(column) -> pa.Array:
    """One contiguous array of the values themselves (chunks combined, a dictionary decoded)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column


def _csv_column(column: pa.Array, field: pa.Field, tz: str) -> pa.Array:
    """A column as the text of its CSV fields: numbers and booleans as Arrow prints them (true/false),
    floats, times, JSON and arrays as Druid's CSV has them, nulls empty; a field holding a comma,
    quote or line break quoted, its quotes doubled."""
    column = _plain(column)
    dtype = column.type
    if pa.types.is_integer(dtype) or pa.types.is_boolean(dtype):
        return pc.cast(column, pa.string())
    if pa.types.is_timestamp(dtype):
        return _iso_array(column, tz)  # digits, dashes, colons, a dot: never quoted
    if not (pa.types.is_string(dtype) or pa.types.is_large_string(dtype)):
        column = pa.array([_csv_text(v) for v in json_values(column, field, tz, raw_json=True)], pa.string())
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(column, '"', '""'), '"', "")
    return pc.if_else(pc.match_substring_regex(column, '[",\r\n]'), quoted, column)


def _joined(rows: pa.Array) -> bytes:
    """The rows (a string array without nulls, each ending in its terminator) as one byte string:
    Arrow's value buffer already holds them back to back."""
    if len(rows) == 0:
        return b""
    _, offsets, data = rows.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32)
    start, end = int(bounds[rows.offset]), int(bounds[rows.offset + len(rows)])
    return data.slice(start, end - start).to_pybytes()


def _interleaved(opening: str, tokens: list[pa.Array], separators: list[str], closing: str, **options) -> pa.Array:
    """Each row's ``opening, tokens[0], separators[0], tokens[1], ..., closing`` in one Arrow pass
    (no intermediate array per step): the text of a whole row at once."""
    parts: list = [opening]
    for i, token in enumerate(tokens):
        parts.append(token)
        parts.append(separators[i] if i < len(separators) else closing)
    return pc.binary_join_element_wise(*parts, "", **options)


def _csv_lines(columns: list[pa.Array]) -> bytes:
    """The rows as CSV lines, each ending in a newline."""
    return _joined(_interleaved("", columns, [","] * (len(columns) - 1), "\n", null_handling="replace",
                                null_replacement=""))


_CONTROL = r"[\x00-\x1f]"
_ESCAPED = r'[\x00-\x1f"\\]'


def _json_strings(column: pa.Array) -> pa.Array:
    """Strings as JSON string literals, escaped in Arrow (as orjson would: backslash and quote; a
    column holding control characters goes through orjson value by value)."""
    if pc.any(pc.match_substring_regex(column, _ESCAPED)).as_py():  # most columns need no escaping
        if pc.any(pc.match_substring_regex(column, _CONTROL)).as_py():
            return pa.array([None if v is None else orjson.dumps(v).decode() for v in column.to_pylist()],
                            pa.string())
        column = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
    return pc.binary_join_element_wise('"', column, '"', "")


def _json_tokens(column: pa.Array, field: pa.Field, tz: str) -> pa.Array:
    """Each value of a column as its JSON text (``null`` for nulls), the same text ``json_values``
    and orjson give, made mostly in Arrow: the per-value Python work of a large result."""
    column = _plain(column)
    dtype = column.type
    if pa.types.is_integer(dtype) or pa.types.is_boolean(dtype):
        tokens = pc.cast(column, pa.string())
    elif pa.types.is_timestamp(dtype):
        tokens = pc.binary_join_element_wise('"', _iso_array(column, tz), '"', "")
    elif (pa.types.is_string(dtype) or pa.types.is_large_string(dtype)) and _is_json(field):
        tokens = column  # already JSON text
    elif pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        tokens = _json_strings(column)
    elif pa.types.is_floating(dtype):
        # numbers and "NaN"-like strings hold no commas: one dumps, split at them
        text = orjson.dumps(_floats(column))[1:-1].decode()
        tokens = pa.array(text.split(",") if text else [], pa.string())
    else:
        tokens = pa.array([orjson.dumps(v).decode() for v in json_values(column, field, tz)], pa.string())
    return pc.fill_null(tokens, "null")


class ResultWriter:
    """Writes one response: ``start()``, then ``rows(batch)`` per batch, then ``end()``; each
    returns the bytes to send."""

    def __init__(self, fmt: str, schema: pa.Schema, header: bool = False, types_header: bool = False,
                 sql_types_header: bool = False, time_zone: str = "UTC") -> None:
        self.format = check_format(fmt)
        self.schema = schema
        self.names = list(schema.names)
        self.header = bool(header)
        self.types_header = bool(types_header) and self.header
        self.sql_types_header = bool(sql_types_header) and self.header
        self.time_zone = time_zone or "UTC"
        self._first = True  # no row written yet (object/array: no comma before the next)

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.format]

    def _header_rows(self) -> list[list]:
        """The header as rows: names, then Druid types, then SQL types (array/csv formats)."""
        types = [column_types(f) for f in self.schema]
        rows = [list(self.names)]
        if self.types_header:
            rows.append([t[0] for t in types])
        if self.sql_types_header:
            rows.append([t[1] for t in types])
        return rows

    def _header_object(self) -> dict:
        out = {}
        for field in self.schema:
            druid, sql = column_types(field)
            entry = {}
            if self.types_header:
                entry["type"] = druid
            if self.sql_types_header:
                entry["sqlType"] = sql
            out[field.name] = entry or None
        return out

    def start(self) -> bytes:
        fmt = self.format
        if fmt in ("object", "array"):
            out = b"["
            if self.header:
                items = [self._header_object()] if fmt == "object" else self._header_rows()
                out += b",".join(orjson.dumps(item) for item in items)
                self._first = False
            return out
        if not self.header:
            return b""
        if fmt == "objectLines":
            return orjson.dumps(self._header_object()) + b"\n"
        if fmt == "arrayLines":
            return b"".join(orjson.dumps(row) + b"\n" for row in self._header_rows())
        return self._csv(self._header_rows())

    def rows(self, batch: pa.RecordBatch | pa.Table) -> bytes:
        if batch.num_rows == 0:
            return b""
        fmt = self.format
        if fmt == "csv":
            return _csv_lines([_csv_column(batch.column(i), field, self.time_zone)
                               for i, field in enumerate(self.schema)])
        tokens = [_json_tokens(batch.column(i), field, self.time_zone) for i, field in enumerate(self.schema)]
        end = "\n" if fmt in ("objectLines", "arrayLines") else ","  # object/array: commas between rows
        if fmt in ("object", "objectLines"):
            keys = [orjson.dumps(name).decode() + ":" for name in self.names]
            rows = _interleaved("{" + keys[0], tokens, ["," + k for k in keys[1:]], "}" + end)
        else:
            rows = _interleaved("[", tokens, [","] * (len(tokens) - 1), "]" + end)
        if end == "\n":
            return _joined(rows)
        body = _joined(rows)[:-1]  # the rows with commas between them
        if self._first:
            self._first = False
            return body
        return b"," + body

    def end(self) -> bytes:
        if self.format in ("object", "array"):
            return b"]\n"
        return b"\n"  # the line formats and csv end with a blank line

    @staticmethod
    def _csv(rows: list[list]) -> bytes:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        return buffer.getvalue().encode()

    def write_all(self, batches) -> Iterator[bytes]:
        yield self.start()
        for batch in batches:
            piece = self.rows(batch)
            if piece:
                yield piece
        yield self.end()


__all__ = ["CONTENT_TYPES", "FORMATS", "ResultWriter", "check_format", "column_types", "json_values"]
