"""How filter values meet column values: coercion to the column's type, string forms of
numbers, numeric matches against string dictionaries, range and LIKE translation to Arrow, and
the three-valued masks filters produce. Shared by every filter's index and value paths.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.types.column_type import ColumnType, TypeKind
from common.types.interval import parse_instant
from common.types.number_parsing import strings_to_double


def to_mask(arr: pa.Array, include_unknown: bool) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.fill_null(include_unknown).to_numpy(zero_copy_only=False).astype(bool, copy=False)


def per_value(values: pa.Array, predicate) -> pa.Array:
    """Run ``predicate`` once per distinct value for dictionary arrays, else per row."""
    if pa.types.is_dictionary(values.type):
        per_value = predicate(values.dictionary)
        return per_value.take(values.indices)
    return predicate(values)


def range_mask(values: pa.Array, f, coerce) -> pa.Array:
    out = None
    if f.lower is not None:
        lo = coerce(f.lower)
        out = pc.greater(values, lo) if f.lower_open else pc.greater_equal(values, lo)
    if f.upper is not None:
        hi = coerce(f.upper)
        up = pc.less(values, hi) if f.upper_open else pc.less_equal(values, hi)
        out = up if out is None else pc.and_kleene(out, up)
    if out is None:
        out = pc.invert(values.is_null())
        out = pc.if_else(out, True, pa.scalar(None, pa.bool_()))
    return out


def is_numeric_match(value, value_type) -> bool:
    if value_type:
        return value_type.upper() in ("LONG", "DOUBLE", "FLOAT")
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_string(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 2**53 else repr(value)
    return str(value)


def as_strings(values: pa.Array) -> pa.Array:
    return values if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) else values.cast(pa.string())


def to_double(values: pa.Array) -> pa.Array:
    return strings_to_double(values)


def numeric_dictionary_ids(dictionary: pa.Array, predicate) -> np.ndarray:
    hits = predicate(to_double(dictionary))
    return np.flatnonzero(hits.fill_null(False).to_numpy(zero_copy_only=False))


def comparable_type(ctype: ColumnType) -> pa.DataType:
    if ctype.kind is TypeKind.TIMESTAMP:
        return pa.int64()
    if ctype.kind is TypeKind.FLOAT:
        return pa.float64()
    if ctype.is_array or ctype.kind is TypeKind.COMPLEX:
        return pa.string()
    return ctype.to_arrow()


def comparable(values: pa.Array, ctype: ColumnType) -> pa.Array:
    if pa.types.is_timestamp(values.type):
        return values.cast(pa.int64())
    if pa.types.is_float32(values.type):
        return values.cast(pa.float64())
    if ctype.is_array:
        raise ValidationError("filters on ARRAY columns need an expression filter (e.g. array_contains)")
    return values


def coerce(value, ctype: ColumnType, column: str):
    """The filter value as the column's type, or a clear error naming both."""
    if ctype.is_string:
        return as_string(value)
    if ctype.kind is TypeKind.TIMESTAMP:
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return parse_instant(value)
        return int(value)
    if ctype.is_numeric:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, (int, float)):
            return value if ctype.kind is TypeKind.LONG and isinstance(value, int) else float(value)
        try:
            num = float(value)
        except (TypeError, ValueError):
            raise ValidationError(
                f"wrong type in a filter: column '{column}' is {ctype.sql_name} but the filter compares it "
                f"with '{value}'; use a number"
            ) from None
        if ctype.kind is TypeKind.LONG and math.isfinite(num) and num.is_integer():
            return int(num)
        return num
    raise ValidationError(f"column '{column}' of type {ctype.sql_name} cannot be filtered this way")


def check_like(pattern: str, escape: str | None, strict: bool = False) -> None:
    """Refuse a LIKE the matcher would misread: an escape that is not one character, a pattern
    ending in its escape character, and (``strict``, SQL's rule) an escape before anything but
    '%', '_' or the escape itself."""
    if escape is None:
        return
    if not isinstance(escape, str) or len(escape) != 1:
        raise ValidationError(f"LIKE ESCAPE must be a single character, got {escape!r}")
    i = 0
    while i < len(pattern):
        if pattern[i] == escape:
            if i + 1 == len(pattern):
                raise ValidationError(f"LIKE pattern '{pattern}' ends with its escape character '{escape}'; "
                                      f"write '{escape}{escape}' to match a literal '{escape}'")
            if strict and pattern[i + 1] not in ("%", "_", escape):
                raise ValidationError(f"invalid escape sequence '{escape}{pattern[i + 1]}' at position {i + 1} of "
                                      f"LIKE pattern '{pattern}': the escape character '{escape}' may only precede "
                                      f"'%', '_' or itself")
            i += 2
            continue
        i += 1


def check_regex(pattern: str, where: str) -> None:
    """Refuse a regular expression Arrow's engine (RE2) cannot compile, before any data is read."""
    try:
        pc.match_substring_regex(pa.array([""], pa.string()), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValidationError(f"invalid regular expression '{pattern}' in {where}: {exc}") from None


def like_to_arrow(pattern: str, escape: str | None) -> str:
    """SQL LIKE with a custom escape -> Arrow's match_like, whose escape is the backslash."""
    if not escape or escape == "\\":
        return pattern
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append("\\" + nxt)
            i += 2
            continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


