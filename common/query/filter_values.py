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


def any_value(values: pa.Array, predicate) -> pa.Array:
    """A multi-value column's rows through ``predicate`` (a filter's per-value test), as Druid
    filters them: true when any value passes, else unknown when a value is unknown, else false.
    A row without values is tested as one null value (Druid's empty row is null)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    lengths = pc.list_value_length(values).fill_null(0).to_numpy(zero_copy_only=False)
    if (lengths == 0).any():
        values = pc.if_else(pa.array(lengths > 0), values, pa.scalar([None], values.type))
    flat = pc.list_flatten(values)
    parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
    hit = predicate(flat)
    if isinstance(hit, pa.ChunkedArray):
        hit = hit.combine_chunks()
    true = hit.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    unknown = hit.is_null().to_numpy(zero_copy_only=False)
    row_true = np.bincount(parents[true], minlength=n) > 0
    row_unknown = (np.bincount(parents[unknown], minlength=n) > 0) & ~row_true
    return pa.array(row_true, mask=row_unknown)


def range_mask(values: pa.Array, f, coerce) -> pa.Array:
    floating = pa.types.is_floating(values.type)
    integral = pa.types.is_integer(values.type)
    nan = pc.is_nan(values) if floating else None
    out = None
    if f.lower is not None:
        lo, strict = coerce(f.lower), f.lower_open
        if integral and isinstance(lo, float):
            lo, strict = _integer_bound(lo, strict, above=True)
        if isinstance(lo, bool):
            out = _constant(values, lo)
        else:
            out = pc.greater(values, lo) if strict else pc.greater_equal(values, lo)
        if floating:
            out = _nan_above(out, nan, lo, above=True, strict=strict)
    if f.upper is not None:
        hi, strict = coerce(f.upper), f.upper_open
        if integral and isinstance(hi, float):
            hi, strict = _integer_bound(hi, strict, above=False)
        if isinstance(hi, bool):
            up = _constant(values, hi)
        else:
            up = pc.less(values, hi) if strict else pc.less_equal(values, hi)
        if floating:
            up = _nan_above(up, nan, hi, above=False, strict=strict)
        out = up if out is None else pc.and_kleene(out, up)
    if out is None:
        out = pc.invert(values.is_null())
        out = pc.if_else(out, True, pa.scalar(None, pa.bool_()))
    return out


def _constant(values: pa.Array, value: bool) -> pa.Array:
    return pc.if_else(values.is_null(), pa.scalar(None, pa.bool_()), value)


def _integer_bound(bound: float, strict: bool, above: bool):
    """A float bound on an integer column as an exact int64 bound (never through a double, which
    would lose integers beyond 2**53), or True/False when every or no number is inside it.
    ``above`` says the bound is a lower one (x > bound or x >= bound)."""
    if math.isnan(bound):  # NaN orders above every number
        return (False, strict) if above else (True, strict)
    if math.isinf(bound):
        return ((bound < 0) if above else (bound > 0)), strict
    if bound.is_integer():
        edge = int(bound)
    else:
        # x > 2.5 is x >= 3; x < 2.5 is x <= 2.
        edge, strict = (math.ceil(bound), False) if above else (math.floor(bound), False)
    if edge > INT64_MAX:
        return (False if above else True), strict
    if edge < INT64_MIN:
        return (True if above else False), strict
    return edge, strict


def _nan_above(mask: pa.Array, nan: pa.Array, bound, above: bool, strict: bool) -> pa.Array:
    """Fix a float comparison for NaN, which orders above every number and equals itself (as in
    DuckDB and Java's Double.compare); Arrow's comparisons say false for any NaN."""
    if isinstance(bound, float) and math.isnan(bound):
        # x >= NaN only for NaN; x > NaN never; x <= NaN always; x < NaN unless x is NaN.
        if above:
            return pc.and_kleene(mask, False) if strict else pc.or_kleene(pc.and_kleene(mask, False), nan)
        return pc.invert(nan) if strict else pc.or_kleene(pc.invert(nan), nan)
    return pc.or_kleene(mask, nan) if above else mask


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
        values = values.cast(pa.float64())
    if pa.types.is_floating(values.type):
        # -0.0 + 0.0 is 0.0: as in SQL, -0.0 and 0.0 are one value, also for hash lookups (IN).
        return pc.add(values, 0.0)
    if ctype.is_array:
        raise ValidationError("filters on ARRAY columns need an expression filter (e.g. array_contains)")
    return values


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def exact_integer(value) -> int | None:
    """A number as the int64 it equals exactly, or None when no int64 equals it (2.5, NaN, 1e30):
    such a value can never match a row of an integer column, so it must not be truncated."""
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    return value if INT64_MIN <= value <= INT64_MAX else None


def in_value_set(values, ctype: ColumnType, column: str) -> pa.Array:
    """The non-null values of an IN list as an Arrow set comparable with ``comparable(column)``:
    values of an integer column keep only those an int64 equals exactly, floats fold -0.0 into
    0.0."""
    targets = [coerce(v, ctype, column) for v in values if v is not None]
    arrow_type = comparable_type(ctype)
    if pa.types.is_integer(arrow_type):
        exact = (exact_integer(t) for t in targets)
        return pa.array([t for t in exact if t is not None], arrow_type)
    if pa.types.is_floating(arrow_type):
        return pa.array([float(t) + 0.0 for t in targets], arrow_type)
    return pa.array(targets, arrow_type)


def equal_mask(values: pa.Array, target) -> pa.Array:
    """``values == target`` with SQL's numeric rules as DuckDB applies them: an integer column
    equals only exact integers, NaN equals NaN, -0.0 equals 0.0."""
    if pa.types.is_integer(values.type) and isinstance(target, (int, float)) and not isinstance(target, bool):
        exact = exact_integer(target)
        if exact is None:
            return pc.if_else(values.is_null(), pa.scalar(None, pa.bool_()), False)
        return pc.equal(values, pa.scalar(exact, values.type))
    if pa.types.is_floating(values.type) and isinstance(target, float) and math.isnan(target):
        return pc.is_nan(values)
    return pc.equal(values, target)


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
        if isinstance(value, float) and not value.is_integer():
            return value  # no instant equals 2.5 ms: never truncated into one that does
        return int(value)
    if ctype.is_numeric:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, (int, float)):
            return value if ctype.kind is TypeKind.LONG and isinstance(value, int) else float(value)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            # Druid casts 'true'/'false' to 1/0 for a numeric column (booleans are stored as LONG 0/1)
            flag = int(value.lower() == "true")
            return flag if ctype.kind is TypeKind.LONG else float(flag)
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


