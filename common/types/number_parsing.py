"""Lenient number parsing: text that is a number becomes one, anything else becomes null.

Used wherever strings meet numbers (numeric filters or sorts on string columns, sums over text,
declared numeric types over string data), so "abc" is a null there, never an error mid-query.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

# Java's spellings of the special values (Druid parses with Double.parseDouble) are numbers too.
_NUMBER = r"^\s*([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|NaN|[-+]?Infinity)\s*$"


def strings_to_double(values: pa.Array) -> pa.Array:
    """float64 of each value that reads as a number; null otherwise (non-strings are cast)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return values.cast(pa.float64(), safe=False)
    numeric = pc.match_substring_regex(values, _NUMBER)
    kept = pc.if_else(numeric, pc.utf8_trim_whitespace(values), pa.scalar(None, values.type))
    return kept.cast(pa.float64())


# ---- to BIGINT: the one rule of CAST(x AS BIGINT), JSON_VALUE .. RETURNING BIGINT and nested fields --

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_LONG_TEXT = r"^\s*[+-]?\d{1,18}\s*$"            # always fits in 64 bits: read exactly
_LONG_TEXT_19 = r"^\s*[+-]?\d{19}\s*$"           # may fit: read exactly when it does
_DOUBLE_TEXT = r"^\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|NaN|Infinity)\s*$"


def text_to_double(values: pa.Array) -> pa.Array:
    """float64 of number texts as Java's Double.parseDouble reads them (NaN, Infinity too); null else."""
    ok = pc.match_substring_regex(values, _DOUBLE_TEXT)
    return pc.if_else(ok, pc.utf8_trim_whitespace(values), pa.scalar(None, pa.string())).cast(pa.float64())


def boolean_text_as_number(values: pa.Array) -> pa.Array:
    """'true' and 'false' (any case, nothing around them) as the texts '1' and '0', other texts as
    they are: Druid's CAST of text to a number (ExprEval.computeNumber) reads them as 1 and 0, so
    CAST('true' AS BIGINT) is 1, as a discovered boolean column holds it."""
    low = pc.utf8_lower(values)
    return pc.if_else(pc.equal(low, "true"), pa.scalar("1", values.type),
                      pc.if_else(pc.equal(low, "false"), pa.scalar("0", values.type), values))


def double_to_long(x):
    """Java's (long) cast of a double, as Druid casts: truncate toward zero, NaN is 0, and values
    beyond 64 bits (infinities too) saturate to the largest or smallest BIGINT."""
    x = pc.trunc(x)
    x = pc.if_else(pc.is_nan(x), 0.0, x)
    high, low = pc.greater_equal(x, 2.0**63), pc.less(x, -(2.0**63))
    inside = pc.if_else(pc.or_(high, low), 0.0, x).cast(pa.int64())
    return pc.if_else(high, _INT64_MAX, pc.if_else(low, _INT64_MIN, inside))


def text_to_long(values: pa.Array) -> pa.Array:
    """BIGINT of texts as Druid casts them: an integer text exactly (when it fits in 64 bits), else
    a number text as a double through double_to_long (so '1e20' and '9223372036854775808'
    saturate and '1.7' is 1); null for what is no number."""
    short = pc.match_substring_regex(values, _LONG_TEXT)
    digits = pc.replace_substring_regex(pc.utf8_trim_whitespace(values), r"^\+", "")
    exact = pc.if_else(short, digits, pa.scalar(None, pa.string())).cast(pa.int64())
    nineteen = pc.match_substring_regex(values, _LONG_TEXT_19).fill_null(False)
    if pc.any(nineteen).as_py():  # rare: Python reads those that fit
        picked = digits.filter(nineteen).to_pylist()
        fits = [int(t) if _INT64_MIN <= int(t) <= _INT64_MAX else None for t in picked]
        exact = pc.replace_with_mask(exact, nineteen, pa.array(fits, pa.int64()))
        short = pc.or_(short, pc.and_(nineteen, pc.is_valid(exact)))
    return pc.if_else(short, exact, double_to_long(text_to_double(values)))


def to_long_values(values: pa.Array) -> pa.Array:
    """int64 of an array (or scalar) of integers, booleans, doubles or texts by the rule above (CAST's)."""
    if isinstance(values, pa.Scalar):
        return to_long_values(pa.array([values.as_py()], values.type))[0]
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    t = values.type
    if pa.types.is_int64(t):
        return values
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_null(t):
        return values.cast(pa.int64())
    if pa.types.is_floating(t):
        return double_to_long(values.cast(pa.float64()))
    if pa.types.is_large_string(t):
        values = values.cast(pa.string())
    return text_to_long(values)
