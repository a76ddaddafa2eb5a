"""StreamRowRules: what a Kafka supervisor's task does with each message before it is indexed (pure).

For one micro-batch of messages, in Druid's order:

    parse        the message's value by ``ioConfig.inputFormat``: a JSON object, or csv/tsv lines
                 (each line a row; a bad line is a parse exception naming its line)
    timestamp    ``timestampSpec`` (auto, iso, millis, posix) -> ``__time`` in epoch millis
    transforms   ``transformSpec.transforms``: Druid expressions over the parsed row (each sees the
                 row as parsed, not the other transforms' outputs); a transform named like a field
                 shadows it, one named ``__time`` sets the time
    filter       ``transformSpec.filter`` (Druid's filter JSON) over the transformed row
    rejection    late and early messages by their (transformed) time, as Druid bounds a task:
                 earlier than ``lateMessageRejectionStartDateTime`` or than the task's start minus
                 ``lateMessageRejectionPeriod``; later than the task's start plus ``taskDuration``
                 plus ``earlyMessageRejectionPeriod``
    granularity  ``__time`` truncated to ``queryGranularity``

A message or line that cannot be parsed, has no usable timestamp, or whose transform fails is a
*parse exception* (partition, offset, reason); a row the filter drops or a late/early one is
*thrown away* (Druid's ``thrownAway``). Everything else is a row for the micro-batch's INSERT.

Transforms and filters are the query engine's (``common/expr``, ``common/query/filters``), run
vectorized over the rows whose referenced fields have the same types, so a field that is a
number in one message and a string in the next is read as each message wrote it.
"""

from __future__ import annotations

import csv
import datetime
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import orjson
import pyarrow as pa

from common.errors import ValidationError
from common.expr import evaluate_column, parse
from common.ingest.supervisor_spec import SupervisorSpec
from common.query.filters import And, ColumnFilter, Not, NullFilter, Or, filter_from_json
from common.query.row_source import ColumnSource, TableRowSource
from common.types.column_type import ColumnType
from common.types.granularity import Granularity
from common.types.interval import parse_instant

TIME = "__time"
# Druid's instants: years 1 to 9999.
MIN_MILLIS, MAX_MILLIS = -62135596800000, 253402300799999
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Message(Protocol):
    partition: int
    offset: int
    value: bytes | None


@dataclass(frozen=True)
class RowException:
    partition: int
    offset: int
    reason: str


@dataclass
class StreamRows:
    """The outcome of one micro-batch's messages."""

    rows: list[dict] = field(default_factory=list)  # each with __time (epoch millis, truncated)
    origins: list[int] = field(default_factory=list)  # per row, the position of its message in the batch
    parse_exceptions: list[RowException] = field(default_factory=list)
    thrown_away: int = 0  # filtered out, or rejected as late or early


class _Bad(Exception):
    """A value that makes its row a parse exception; the message is the reason."""


def _time_ms(value, fmt: str, column: str) -> int:
    # The usual case first, without the checks below: ISO text such as 2024-05-01T10:00:00.123Z.
    if type(value) is str and fmt in ("iso", "auto") and len(value) >= 20 and value[-1] == "Z" \
            and value[10] == "T" and value[4] == "-":
        try:
            ms = (datetime.datetime.fromisoformat(value) - _EPOCH) // _MS
        except ValueError:
            pass
        else:
            if MIN_MILLIS <= ms <= MAX_MILLIS:
                return ms
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _Bad(f"no timestamp: field '{column}' is missing or null")
    if isinstance(value, bool) or isinstance(value, (dict, list)):
        raise _Bad(f"timestamp field '{column}' holds {orjson.dumps(value).decode()[:100]}, not a time")
    if isinstance(value, float) and not math.isfinite(value):
        raise _Bad(f"timestamp field '{column}' is {value}, not a time")
    numeric = isinstance(value, (int, float))
    if fmt in ("millis", "posix") or (fmt == "auto" and (numeric or _is_integer_text(value))):
        try:
            number = value if numeric else (int(value.strip()) if _is_integer_text(value) else float(value))
        except ValueError:
            raise _Bad(f"timestamp field '{column}': '{value}' is not a number ({fmt} format)") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise _Bad(f"timestamp field '{column}' is {value}, not a time")
        ms = int(number * 1000) if fmt == "posix" else int(number)
    else:
        if numeric:
            raise _Bad(f"timestamp field '{column}' is the number {value}, not an ISO-8601 time (format {fmt}); "
                       "use format millis or auto for epoch milliseconds")
        try:
            ms = _iso_ms(value)
        except ValidationError:
            raise _Bad(f"timestamp field '{column}': cannot parse '{value[:100]}' as an ISO-8601 time") from None
    if not MIN_MILLIS <= ms <= MAX_MILLIS:
        raise _Bad(f"timestamp field '{column}': {value!r} is out of range for a time (years 1 to 9999)")
    return ms


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)


def _iso_ms(text: str) -> int:
    """``parse_instant`` with a fast path for the usual shape of event times
    (``2024-05-01T10:00:00[.fff]Z``), which was most of the time of a micro-batch's rules."""
    if len(text) >= 20 and text[-1] == "Z" and text[10] == "T" and text[4] == "-":
        try:
            return (datetime.datetime.fromisoformat(text) - _EPOCH) // _MS
        except ValueError:
            pass
    return parse_instant(text)


def _is_integer_text(value) -> bool:
    if not isinstance(value, str):
        return False
    s = value.strip()
    return s.lstrip("-").isdigit()


# ---- typed columns for the expression engine ---------------------------------------------------------------

_ARROW = {"long": pa.int64(), "double": pa.float64(), "string": pa.string(), "strings": pa.list_(pa.string())}


def _kind(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "long"
    if isinstance(value, int):
        return "long" if _INT64_MIN <= value <= _INT64_MAX else "double"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list) and all(v is None or isinstance(v, str) for v in value):
        return "strings"
    raise _Bad(f"holds {orjson.dumps(value, default=str).decode()[:100]}; transforms and filters read numbers, "
               "strings and lists of strings")


def _plain(value, kind: str | None):
    if kind == "long" and isinstance(value, bool):
        return int(value)
    if kind == "double" and isinstance(value, int):
        return float(value)
    return value


def _groups(rows: list[dict], columns: list[str], failed: dict[int, str], alive: Iterable[int]):
    """Row indexes grouped by the kinds of ``columns`` (rows whose values have no usable kind
    fail with a reason in ``failed``), with each group's typed arrays."""
    groups: dict[tuple, list[int]] = {}
    for i in alive:
        try:
            key = []
            for c in columns:
                try:
                    key.append(_kind(rows[i].get(c)))
                except _Bad as e:
                    raise _Bad(f"field '{c}' {e}") from None
        except _Bad as e:
            failed[i] = str(e)
            continue
        groups.setdefault(tuple(key), []).append(i)
    for key, idx in groups.items():
        # A field that is null in every row of the group has no type: a bare null, which fits
        # anywhere (null * 2 is null, nvl(x, 0) is 0), as a missing field is in Druid.
        arrays = {c: (pa.array([_plain(rows[i].get(c), k) for i in idx], _ARROW[k]) if k is not None
                      else pa.nulls(len(idx))) for c, k in zip(columns, key)}
        types = {c: (ColumnType.from_arrow(_ARROW[k], c) if k is not None else None) for c, k in zip(columns, key)}
        yield idx, arrays, types


def _from_arrow(value):
    if isinstance(value, float) and math.isnan(value):
        return None  # JSON has no NaN; a NaN result is stored as null
    return value


class StreamRowRules:
    """The per-message rules of one supervisor spec, for a task that started at ``task_start_ms``."""

    def __init__(self, spec: SupervisorSpec, task_start_ms: int) -> None:

        self.spec = spec
        self.fmt = spec.input_format
        self.transforms = [(t.name, parse(t.expression)) for t in spec.transforms]
        self.filter = filter_from_json(dict(spec.filter)) if spec.filter is not None else None
        self.granularity = Granularity.parse(spec.query_granularity)
        self.min_ms: int | None = None
        if spec.late_rejection_start_ms is not None:
            self.min_ms = spec.late_rejection_start_ms
        elif spec.late_rejection_period_ms is not None:
            self.min_ms = task_start_ms - spec.late_rejection_period_ms
        self.max_ms: int | None = None
        if spec.early_rejection_period_ms is not None:
            self.max_ms = task_start_ms + spec.task_duration_ms + spec.early_rejection_period_ms

    # ---- parsing --------------------------------------------------------------------------------------------

    def _records(self, m: Message) -> list[tuple[dict | None, str | None]]:
        """(row, None) or (None, reason) per row the message holds."""
        if not m.value:
            return [(None, "empty message (no value)")]
        if self.fmt.type == "json":
            try:
                row = orjson.loads(m.value)
            except orjson.JSONDecodeError as e:
                return [(None, f"not JSON: {e}")]
            if not isinstance(row, dict):
                return [(None, f"a JSON {type(row).__name__}, not an object")]
            return [(row, None)]
        try:
            text = m.value.decode("utf-8")
        except UnicodeDecodeError as e:
            return [(None, f"not UTF-8 text: {e}")]
        return list(self._delimited(text))

    def _delimited(self, text: str):
        fmt = self.fmt
        columns = fmt.columns
        if fmt.type == "tsv":
            records = ((n, line, line.split(fmt.delimiter), None) for n, line in enumerate(text.splitlines(), 1))
        else:
            records = _csv_records(text)
        skip = fmt.skip_header_rows
        for line_no, raw, fields, error in records:
            if skip > 0:
                skip -= 1
                continue
            if error is not None:
                yield None, f"line {line_no}: {error}"
                continue
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # a blank line
            if len(fields) > len(columns):
                yield None, (f"line {line_no}: {len(fields)} values but {len(columns)} columns "
                             f"({', '.join(columns)}): {raw[:200]!r}")
                continue
            row = {}
            for name, value in zip(columns, fields):
                if value == "":
                    continue  # an empty field is null
                row[name] = value.split(fmt.list_delimiter) if fmt.list_delimiter in value else value
            yield row, None

    # ---- the micro-batch ------------------------------------------------------------------------------------

    def decide(self, messages: Iterable[Message]) -> StreamRows:
        out = StreamRows()
        rows: list[dict] = []
        origin: list[tuple[int, Message]] = []
        errors: list[tuple[int, RowException]] = []  # with the message's position: reported in read order
        spec = self.spec
        # JSON objects whose timestamp is epoch millis take a short path (most messages of most
        # topics); any other message takes the general one, which words its parse exception.
        short = self.fmt.type == "json" and spec.timestamp_format in ("millis", "auto")
        loads, column, decode_error = orjson.loads, spec.timestamp_column, orjson.JSONDecodeError
        for pos, m in enumerate(messages):
            if short and m.value:
                try:
                    row = loads(m.value)
                except decode_error:
                    row = None
                if type(row) is dict:
                    t = row.get(column)
                    if type(t) is int and MIN_MILLIS <= t <= MAX_MILLIS:
                        row[TIME] = t
                        rows.append(row)
                        origin.append((pos, m))
                        continue
            for row, reason in self._records(m):
                if reason is None:
                    try:
                        row[TIME] = _time_ms(row.get(spec.timestamp_column), spec.timestamp_format,
                                             spec.timestamp_column)
                    except _Bad as e:
                        reason = str(e)
                if reason is not None:
                    errors.append((pos, RowException(m.partition, m.offset, reason)))
                    continue
                rows.append(row)
                origin.append((pos, m))
        failed: dict[int, str] = {}
        if self.transforms:
            rows = self._transform(rows, failed)
        keep = np.ones(len(rows), dtype=bool)
        if self.filter is not None:
            keep = self._filter(rows, failed)
        times = np.array([r[TIME] for r in rows], dtype=np.int64) if rows else np.zeros(0, np.int64)
        in_bounds = np.ones(len(rows), dtype=bool)
        if self.min_ms is not None:
            in_bounds &= times >= self.min_ms
        if self.max_ms is not None:
            in_bounds &= times <= self.max_ms
        floored = self.granularity.bucket_start(times) if len(times) else times
        if not failed:  # no transform failed: the kept rows by mask
            kept = keep & in_bounds
            out.thrown_away = int(len(rows) - kept.sum())
            starts = floored.tolist()
            for i in np.flatnonzero(kept).tolist():
                row = rows[i]
                row[TIME] = starts[i]
                out.rows.append(row)
                out.origins.append(origin[i][0])
            rows = []
        for i, row in enumerate(rows):
            if i in failed:
                pos, m = origin[i]
                errors.append((pos, RowException(m.partition, m.offset, failed[i])))
            elif not keep[i] or not in_bounds[i]:
                out.thrown_away += 1
            else:
                row[TIME] = int(floored[i])
                out.rows.append(row)
                out.origins.append(origin[i][0])
        errors.sort(key=lambda e: e[0])
        out.parse_exceptions = [e for _, e in errors]
        return out

    def _transform(self, rows: list[dict], failed: dict[int, str]) -> list[dict]:

        results: list[dict] = [{} for _ in rows]
        for name, expr in self.transforms:
            columns = sorted(expr.columns())
            alive = (i for i in range(len(rows)) if i not in failed)
            for idx, arrays, types in _groups(rows, columns, failed, alive):
                try:
                    values = evaluate_column(expr, arrays, len(idx), types).to_pylist()
                except (ValidationError, pa.ArrowException, ValueError, TypeError, OverflowError) as e:
                    for i in idx:
                        failed[i] = f"transform '{name}' failed: {e}"
                    continue
                for i, v in zip(idx, values):
                    results[i][name] = _from_arrow(v)
        out = []
        for i, row in enumerate(rows):
            if i in failed:
                out.append(row)
                continue
            changed = {**row, **results[i]}
            if TIME in results[i]:
                try:
                    changed[TIME] = _transformed_time(results[i][TIME])
                except _Bad as e:
                    failed[i] = str(e)
                    changed = row
            out.append(changed)
        return out

    def _filter(self, rows: list[dict], failed: dict[int, str]) -> np.ndarray:
        keep = np.zeros(len(rows), dtype=bool)
        columns = sorted(self.filter.columns())
        alive = (i for i in range(len(rows)) if i not in failed)
        for idx, arrays, _ in _groups(rows, columns, failed, alive):
            # Typed nulls: a null-typed column has no values an IN set can be compared with.
            arrays = {c: (a.cast(pa.string()) if pa.types.is_null(a.type) else a) for c, a in arrays.items()}
            try:
                mask = _matches(self.filter, arrays, len(idx))
            except (ValidationError, pa.ArrowException, ValueError, TypeError) as e:
                for i in idx:
                    failed[i] = f"transformSpec.filter failed: {e}"
                continue
            keep[np.array(idx, dtype=np.int64)] = mask
        return keep


def _matches(flt, arrays: dict[str, pa.Array], n: int) -> np.ndarray:
    """The filter's row mask. A leaf over a multi-value (list) field matches a row when it matches
    any of the row's values, and and/or/not combine those row matches: Druid's multi-value
    dimension semantics (``not(selector a)`` drops a row holding ["a", "e"])."""

    lists = [c for c in flt.columns() if c in arrays and pa.types.is_list(arrays[c].type)]
    if not lists:  # the engine's own filter, with its three-valued logic
        table = pa.table({c: arrays[c] for c in flt.columns() if c in arrays} or {"__none": pa.nulls(n)})
        return np.asarray(flt.matches(ColumnSource(TableRowSource(table, "the transformSpec filter"), None), False),
                          dtype=bool)
    if isinstance(flt, And):
        out = np.ones(n, dtype=bool)
        for f in flt.fields:
            out &= _matches(f, arrays, n)
        return out
    if isinstance(flt, Or):
        out = np.zeros(n, dtype=bool)
        for f in flt.fields:
            out |= _matches(f, arrays, n)
        return out
    if isinstance(flt, Not):
        # SQL-compatible: NOT of an unknown (null) comparison is not a match either.
        return ~_matches(flt.field, arrays, n) & ~_unknown(flt.field, arrays, n)
    if len(lists) > 1:
        raise ValidationError(f"a filter over two multi-value fields ({', '.join(sorted(lists))}) is not supported")
    column = lists[0]
    values = arrays[column].to_pylist()
    owner = [i for i, v in enumerate(values) for _ in (v or [None])]
    flat = pa.array([e for v in values for e in (v or [None])], pa.string())
    exploded = {c: (flat if c == column else arrays[c].take(pa.array(owner, pa.int64()))) for c in arrays}
    hits = _matches(flt, exploded, len(owner))
    out = np.zeros(n, dtype=bool)
    np.logical_or.at(out, np.array(owner, dtype=np.int64), hits)
    return out


def _unknown(flt, arrays: dict[str, pa.Array], n: int) -> np.ndarray:
    """Rows where a leaf filter's column is null (its comparison is unknown, not false)."""

    if isinstance(flt, NullFilter) or not isinstance(flt, (ColumnFilter, And, Or, Not)):
        return np.zeros(n, dtype=bool)
    if isinstance(flt, Not):
        return _unknown(flt.field, arrays, n)
    if isinstance(flt, (And, Or)):
        out = np.zeros(n, dtype=bool)
        for f in flt.fields:
            out |= _unknown(f, arrays, n)
        return out
    arr = arrays.get(flt.column)
    if arr is None:
        return np.ones(n, dtype=bool)
    if pa.types.is_list(arr.type):  # an empty multi-value row is null, as in Druid
        return np.array([not v for v in arr.to_pylist()], dtype=bool)
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _transformed_time(value) -> int:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise _Bad(f"transform '__time' gave {value!r}; it must give epoch milliseconds")
    ms = int(value)
    if not MIN_MILLIS <= ms <= MAX_MILLIS:
        raise _Bad(f"transform '__time' gave {ms}, out of range for a time (years 1 to 9999)")
    return ms


def _csv_records(text: str):
    """(first line number, raw text, fields or None, error) per CSV record; quoted fields may
    span lines."""
    reader = csv.reader(io.StringIO(text), strict=True)
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield start, "", None, f"malformed CSV: {e}"
            continue
        yield start, ",".join(fields), fields, None


__all__ = ["RowException", "StreamRowRules", "StreamRows", "TIME"]
