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
