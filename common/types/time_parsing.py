"""Vectorized parsing of time strings the way Druid's ``auto`` timestamp format reads them.

ISO-8601 dates and date-times, with or without a zone (no zone means UTC), fractional seconds,
a space instead of ``T``, non-zero-padded months and days (``2022-6-14T10:32:08Z``), and
epoch milliseconds given as digits. Unparseable values become null; callers decide whether
that is an error (ingestion counts parse exceptions) or a null (TIME_PARSE in SQL).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_ZONED = r"(Z|z|[+-]\d{2}:?\d{2})$"


def _normalize(s: pa.Array) -> pa.Array:
    s = pc.utf8_trim_whitespace(s)
    s = pc.replace_substring_regex(s, r"^(\d{4})-(\d)(-|$)", r"\1-0\2\3")
    s = pc.replace_substring_regex(s, r"^(\d{4}-\d{2})-(\d)(T| |$)", r"\1-0\2\3")
    s = pc.replace_substring_regex(s, r"^(\d{4}-\d{2}-\d{2}) ", r"\1T")
    s = pc.replace_substring_regex(s, r"[zZ]$", "+00:00")
    # Milliseconds are strata's resolution: truncate finer fractions instead of failing the cast.
    s = pc.replace_substring_regex(s, r"(\.\d{3})\d+", r"\1")
    return s


def _cast_each_subset(s: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast what parses; anything that does not becomes null (bisecting only on failure)."""
    try:
        return s.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if len(s) == 1:
            return pa.nulls(1, target)
        mid = len(s) // 2
        return pa.concat_arrays([_cast_each_subset(s.slice(0, mid), target),
                                 _cast_each_subset(s.slice(mid), target)])


def parse_timestamps(values: pa.Array) -> pa.Array:
    """Strings (or integers as epoch millis) -> int64 epoch milliseconds, null where unparseable."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if pa.types.is_integer(values.type):
        return values.cast(pa.int64())
    if pa.types.is_timestamp(values.type) or pa.types.is_date(values.type):
        return values.cast(pa.timestamp("ms", tz="UTC") if pa.types.is_date(values.type) else values.type).cast(
            pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    if pa.types.is_floating(values.type):
        return values.cast(pa.int64(), safe=False)
    s = _normalize(values.cast(pa.string()))
    out_type = pa.int64()
    digits = pc.match_substring_regex(s, r"^-?\d{9,}$")
    zoned = pc.match_substring_regex(s, _ZONED)
    result = pa.nulls(len(s), out_type)
    idx_all = pa.array(range(len(s)), pa.int64())
    pieces = []
    for mask, kind in ((digits, "millis"), (pc.and_(zoned, pc.invert(digits)), "zoned"),
                       (pc.and_(pc.invert(zoned), pc.invert(digits)), "naive")):
        mask = mask.fill_null(False)
        sub = s.filter(mask)
        if len(sub) == 0:
            continue
        if kind == "millis":
            parsed = sub.cast(pa.int64())
        elif kind == "zoned":
            parsed = _cast_each_subset(sub, pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        else:
            parsed = _cast_each_subset(sub, pa.timestamp("ms")).cast(pa.int64())
        pieces.append((idx_all.filter(mask), parsed))
    if not pieces:
        return result
    order = pa.concat_arrays([p[0] for p in pieces])
    data = pa.concat_arrays([p[1] for p in pieces])
    # Scatter back to input order: sorting the gathered positions restores it.
    perm = pc.sort_indices(order)
    return data.take(perm) if len(order) == len(s) else _scatter(len(s), order, data)


def _scatter(n: int, positions: pa.Array, data: pa.Array) -> pa.Array:
    import numpy as np

    out = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=bool)
    pos = positions.to_numpy()
    out[pos] = data.fill_null(0).to_numpy(zero_copy_only=False)
    valid[pos] = data.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(out, pa.int64(), mask=~valid)
