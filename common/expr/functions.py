"""The built-in function library: Druid's native expression functions, each registered with its
argument kinds, output-type inference and a vectorized implementation over Arrow arrays.

Implementations receive values with at least one array (the evaluator folds all-constant calls
onto one-row arrays) and, for a lone dictionary-encoded argument, only its distinct values. Time
functions lean on ``common.types.granularity`` for calendar math and on Arrow's temporal kernels
for zones; Joda-Time patterns are translated to strftime fragments (formatting) or to a regex of
named fields (parsing).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import UnsupportedError, ValidationError
from common.expr.evaluator import (
    ISO_INSTANT,
    TS,
    Infer,
    Type,
    Value,
    arithmetic,
    cast_value,
    compare,
    const,
    const_int,
    const_str,
    double_to_long,
    null_of,
    numeric_infer,
    on_numpy,
    parse_instants,
    plain,
    register,
    to_double,
    to_long,
    to_string,
    truthy,
    unify,
)
from common.expr.node import Call
from common.types.column_type import DOUBLE, LONG, STRING, TIMESTAMP, ColumnType, TypeKind
from common.types.granularity import Granularity, Period, shift_millis
from common.types.interval import parse_instant
from common.types.time_zone import time_zone


# ---- strings ---------------------------------------------------------------------------------
@register("concat", args=(1, None), kinds="s", out=STRING, doc="concat(expr, expr...)")
def _concat(args, types, out, call):
    return pc.binary_join_element_wise(*(to_string(a) for a in args), "")


def _unary_string(name: str, kernel: Callable, out: ColumnType = STRING, *aliases: str):
    @register(name, *aliases, args=(1, 1), kinds="s", out=out, doc=f"{name}(expr)")
    def _apply(args, types, out_type, call):
        result = kernel(to_string(args[0]))
        return result.cast(pa.int64()) if out == LONG else result


_unary_string("lower", pc.utf8_lower)
_unary_string("upper", pc.utf8_upper)
_unary_string("reverse", pc.utf8_reverse)
_unary_string("strlen", pc.utf8_length, LONG, "length")


@register("trim", "ltrim", "rtrim", args=(1, 2), kinds="sk", out=STRING, doc="trim(expr[, chars])")
def _trim(args, types, out, call):
    chars = const_str(args[1], "the characters to trim") if len(args) > 1 else " "
    kernel = {"trim": pc.utf8_trim, "ltrim": pc.utf8_ltrim, "rtrim": pc.utf8_rtrim}[call.name.lower()]
    return kernel(to_string(args[0]), characters=chars)


@register("substring", args=(3, 3), kinds="skk", out=STRING, doc="substring(expr, index, length)")
def _substring(args, types, out, call):
    s = to_string(args[0])
    index = const_int(args[1], "substring index")
    length = const_int(args[2], "substring length")
    if index < 0:
        raise ValidationError(f"substring index must be 0 or more, got {index} in '{call.to_string()}'")
    sliced = pc.utf8_slice_codeunits(s, start=index, stop=index + length if length >= 0 else None)
    # Druid: an index past the end gives null, not ''.
    return pc.if_else(pc.less(index, pc.utf8_length(s)), sliced, pa.scalar(None, pa.string()))


@register("left", "right", args=(2, 2), kinds="sk", out=STRING, doc="left(expr, length)")
def _left_right(args, types, out, call):
    n = const_int(args[1], f"{call.name} length")
    if n < 0:
        raise ValidationError(f"{call.name}() needs a length of 0 or more, got {n} in '{call.to_string()}'")
    s = to_string(args[0])
    if call.name.lower() == "left":
        return pc.utf8_slice_codeunits(s, start=0, stop=n)
    return pc.utf8_slice_codeunits(s, start=-n) if n else pc.utf8_slice_codeunits(s, start=0, stop=0)


@register("replace", args=(3, 3), kinds="skk", out=STRING, doc="replace(expr, pattern, replacement)")
def _replace(args, types, out, call):
    pattern = const_str(args[1], "replace pattern")
    replacement = const_str(args[2], "replace replacement")
    s = to_string(args[0])
    if pattern == "":  # Arrow loops forever on an empty pattern; nothing to replace anyway
        return s
    return pc.replace_substring(s, pattern, replacement)


@register("repeat", args=(2, 2), kinds="sk", out=STRING, doc="repeat(expr, times)")
def _repeat(args, types, out, call):
    return pc.binary_repeat(to_string(args[0]), max(const_int(args[1], "repeat count"), 0))


@register("contains_string", "icontains_string", args=(2, 2), kinds="sk", out=LONG,
          boolean=True, doc="contains_string(expr, substring)")
def _contains(args, types, out, call):
    needle = const_str(args[1], "the substring")
    return pc.match_substring(to_string(args[0]), needle, ignore_case=call.name.lower().startswith("i"))


def _char_offsets(s: pa.Array, byte_pos: pa.Array) -> pa.Array:
    """Byte offsets within each string (-1 = absent) to character offsets. Arrow's find_substring
    reports bytes, which differ from characters only in non-ASCII text."""
    if pc.all(pc.string_is_ascii(s)).as_py() is not False:
        return byte_pos
    offsets = np.frombuffer(s.buffers()[1], dtype=np.int32)[s.offset: s.offset + len(s) + 1]
    data = np.frombuffer(s.buffers()[2], dtype=np.uint8)
    # chars before a match = its byte offset minus the UTF-8 continuation bytes (10xxxxxx) before it
    cont = np.concatenate([[0], np.cumsum((data & 0xC0) == 0x80)])
    pos = pc.fill_null(byte_pos, -1).to_numpy(zero_copy_only=False)
    start = offsets[:-1]
    end = start + np.maximum(pos, 0)
    chars = np.where(pos >= 0, pos - (cont[end] - cont[start]), -1)
    return pa.array(chars, pa.int64(), mask=byte_pos.is_null().to_numpy(zero_copy_only=False))


@register("strpos", args=(2, 3), kinds="skk", out=LONG, doc="strpos(haystack, needle[, fromIndex])")
def _strpos(args, types, out, call):
    s = to_string(args[0])
    needle = const_str(args[1], "strpos needle")
    start = const_int(args[2], "strpos start") if len(args) > 2 else 0
    start = max(start, 0)
    tail = pc.utf8_slice_codeunits(s, start=start) if start else s
    found = _char_offsets(tail, pc.find_substring(tail, needle).cast(pa.int64()))
    return pc.if_else(pc.equal(found, -1), -1, pc.add(found, start))


def _pad(args, call, left: bool):
    s = to_string(args[0])
    width = const_int(args[1], f"{call.name} length")
    chars = const_str(args[2], f"{call.name} padding")
    if width <= 0:
        return pc.if_else(pc.is_valid(s), "", pa.scalar(None, pa.string()))
    truncated = pc.utf8_slice_codeunits(s, start=0, stop=width)
    if not chars:
        return truncated
    # The pad for k missing characters is chars repeated k // m times plus its first k % m
    # characters; the remainders take at most m values, so they come from a small table.
    missing = pc.max_element_wise(pc.subtract(width, pc.utf8_length(truncated).cast(pa.int64())), 0, skip_nulls=False)
    m = len(chars)
    full = pc.binary_repeat(pa.scalar(chars), pc.divide(missing, m))
    rest = pa.array([chars[:k] for k in range(m)]).take(on_numpy(np.remainder, pa.int64(), missing, pa.scalar(m)))
    pad = pc.binary_join_element_wise(full, rest, "")
    return pc.binary_join_element_wise(pad, truncated, "") if left else pc.binary_join_element_wise(truncated, pad, "")


@register("lpad", "rpad", args=(3, 3), kinds="skk", out=STRING, doc="lpad(expr, length, chars)")
def _lpad(args, types, out, call):
    return _pad(args, call, call.name.lower() == "lpad")


def _like_to_arrow(pattern: str, escape: str | None) -> str:
    # Arrow's LIKE always treats backslash as the escape; SQL LIKE has no escape unless given.
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape and i + 1 == len(pattern):
            raise ValidationError(f"LIKE pattern '{pattern}' ends with its escape character '{escape}'; "
                                  f"write '{escape}{escape}' to match a literal '{escape}'")
        if escape is not None and ch == escape and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append("\\" + nxt if nxt in "%_\\" else nxt)
            i += 2
            continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


@register("like", args=(2, 3), kinds="skk", out=LONG, boolean=True, doc="like(expr, pattern[, escape])")
def _like(args, types, out, call):
    escape = const_str(args[2], "LIKE escape") if len(args) > 2 else None
    if escape is not None and len(escape) != 1:
        raise ValidationError(f"LIKE escape must be one character, got '{escape}' in '{call.to_string()}'")
    return pc.match_like(to_string(args[0]), _like_to_arrow(const_str(args[1], "LIKE pattern"), escape))


def _regex(pattern: str, call: Call) -> str:
    # Validate with Arrow's own engine (RE2), whose syntax differs from Python's re in places.
    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except pa.ArrowInvalid as e:
        raise ValidationError(f"invalid regular expression '{pattern}' in '{call.to_string()}': {e}") from None
    return pattern


@register("regexp_like", args=(2, 2), kinds="sk", out=LONG, boolean=True, doc="regexp_like(expr, pattern)")
def _regexp_like(args, types, out, call):
    return pc.match_substring_regex(to_string(args[0]), _regex(const_str(args[1], "pattern"), call))


def _name_group(pattern: str, group: int) -> tuple[str, int]:
    """Rewrite ``pattern`` so capturing group ``group`` is named '__g' and the other unnamed
    groups are non-capturing (Arrow's extract_regex wants named groups only)."""
    if group == 0:
        pattern = f"(?P<__g>{pattern})"
    out, i, n, count, in_class = [], 0, len(pattern), 0, False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(" and not pattern.startswith("(?", i):
            count += 1
            out.append("(?P<__g>" if count == group else "(?:")
            i += 1
            continue
        elif ch == "(" and pattern.startswith("(?P<", i) and not pattern.startswith("(?P<__g>", i):
            count += 1
            if count == group:
                out.append("(?P<__g>")
                i = pattern.index(">", i) + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out), count


@register("regexp_extract", args=(2, 3), kinds="skk", out=STRING, doc="regexp_extract(expr, pattern[, index])")
def _regexp_extract(args, types, out, call):
    pattern = _regex(const_str(args[1], "pattern"), call)
    group = const_int(args[2], "group index") if len(args) > 2 else 0
    rewritten, count = _name_group(pattern, group)
    if group < 0 or group > count:
        raise ValidationError(f"regexp_extract group {group} does not exist in '{pattern}' in '{call.to_string()}'")
    s = to_string(args[0])
    struct = pc.extract_regex(s, rewritten)
    return pc.if_else(pc.is_valid(struct), pc.struct_field(struct, "__g"), pa.scalar(None, pa.string()))


@register("regexp_replace", args=(3, 3), kinds="skk", out=STRING, doc="regexp_replace(expr, pattern, replacement)")
def _regexp_replace(args, types, out, call):
    pattern = _regex(const_str(args[1], "pattern"), call)
    # Java writes group references as $1; RE2 as \1.
    replacement = re.sub(r"\$(\d)", r"\\\1", const_str(args[2], "replacement"))
    return pc.replace_substring_regex(to_string(args[0]), pattern, replacement)


# ---- nulls and conditionals ----------------------------------------------------------------
def _unify_args(positions: Callable[[int], list[int]]) -> Infer:
    def infer(call: Call, types: list[Type]) -> Type:
        return unify([types[i] for i in positions(len(types))])
    return infer


def _choose(values: list[Value], out: Type, conditions: list[Value]) -> Value:
    """values[i] where conditions[i] is first true, else values[-1] (SQL CASE)."""
    result = cast_value(values[-1], out)
    for cond, value in zip(reversed(conditions), reversed(values[:-1])):
        result = pc.if_else(pc.fill_null(truthy(cond), False), cast_value(value, out), result)
    return result


def _coalesce(values: list[Value], out: Type) -> Value:
    if out is None:
        return values[0]
    return pc.coalesce(*(cast_value(plain(v), out) for v in values))


@register("nvl", args=(2, 2), kinds="x", out=_unify_args(lambda n: [0, 1]), strict=False, doc="nvl(expr, fallback)")
def _nvl(args, types, out, call):
    return _coalesce(args, out)


@register("coalesce", args=(1, None), kinds="x", out=_unify_args(lambda n: list(range(n))), strict=False,
          doc="coalesce(expr, expr...)")
def _coalesce_fn(args, types, out, call):
    return _coalesce(args, out)


@register("nullif", args=(2, 2), kinds="x", out=lambda call, types: types[0], strict=False, doc="nullif(expr, value)")
def _nullif(args, types, out, call):
    same = pc.fill_null(compare("==", args[0], args[1]), False)
    return pc.if_else(same, null_of(out), cast_value(plain(args[0]), out) if out else args[0])


@register("if", args=(3, 3), kinds="x", out=_unify_args(lambda n: [1, 2]), strict=False,
          doc="if(condition, then, else)")
def _if(args, types, out, call):
    return _choose([args[1], args[2]], out, [args[0]])


@register("case_searched", args=(2, None), kinds="x", strict=False,
          out=_unify_args(lambda n: list(range(1, n, 2)) + ([n - 1] if n % 2 else [])),
          doc="case_searched(cond1, value1, cond2, value2, ..., else)")
def _case_searched(args, types, out, call):
    conds, values = args[0:len(args) - len(args) % 2:2], args[1::2]
    fallback = args[-1] if len(args) % 2 else null_of(out)
    return _choose(list(values) + [fallback], out, list(conds))


@register("case_simple", args=(3, None), kinds="x", strict=False,
          out=_unify_args(lambda n: list(range(2, n, 2)) + ([n - 1] if n % 2 == 0 else [])),
          doc="case_simple(expr, key1, value1, key2, value2, ..., else)")
def _case_simple(args, types, out, call):
    subject, rest = args[0], args[1:]
    keys, values = rest[0:len(rest) - len(rest) % 2:2], rest[1::2]
    fallback = rest[-1] if len(rest) % 2 else null_of(out)
    conds = [compare("==", subject, k) for k in keys]
    return _choose(list(values) + [fallback], out, conds)


@register("isnull", "notnull", args=(1, 1), kinds="x", out=LONG, strict=False, doc="isnull(expr)")
def _isnull(args, types, out, call):
    nulls = pc.is_null(plain(args[0]))
    return nulls if call.name.lower() == "isnull" else pc.invert(nulls)


# ---- casts and math ----------------------------------------------------------------------------
def _cast_infer(call: Call, types: list[Type]) -> Type:
    target = ColumnType.parse(str(call.args[1].value))
    if target.kind is TypeKind.COMPLEX:
        raise UnsupportedError(f"cast to {target} is not supported in '{call.to_string()}'")
    if target.kind is not TypeKind.ARRAY and types and types[0] is not None and types[0].kind is TypeKind.ARRAY:
        raise ValidationError(f"cannot cast {types[0].sql_name} to {target.sql_name} in '{call.to_string()}'")
    return target


@register("cast", args=(2, 2), kinds="xl", out=_cast_infer,
          doc="cast(expr, 'LONG'|'DOUBLE'|'STRING'|'ARRAY<LONG>'|...)")
def _cast(args, types, out, call):
    if out.kind is TypeKind.ARRAY:
        from common.expr.array_functions import cast_array  # a cycle: both register through the evaluator

        return cast_array(args[0], out)
    return cast_value(args[0], out)


def _double_math(name: str, kernel: Callable, *aliases: str):
    @register(name, *aliases, args=(1, 1), kinds="n", out=DOUBLE, doc=f"{name}(x)")
    def _apply(args, types, out, call):
        return kernel(to_double(args[0]))


for _name, _kernel in {
    "sqrt": pc.sqrt, "exp": pc.exp, "log": pc.ln, "log10": pc.log10, "ceil": pc.ceil, "floor": pc.floor,
    "sin": pc.sin, "cos": pc.cos, "tan": pc.tan, "asin": pc.asin, "acos": pc.acos, "atan": pc.atan,
    "cbrt": lambda x: on_numpy(np.cbrt, pa.float64(), x), "signum": pc.sign,
}.items():
    _double_math(_name, _kernel)


@register("abs", args=(1, 1), kinds="n", out=numeric_infer, doc="abs(x)")
def _abs(args, types, out, call):
    return pc.abs(cast_value(args[0], out))


@register("round", args=(1, 2), kinds="nk", out=lambda call, types: numeric_infer(call, types[:1]),
          doc="round(x[, scale])")
def _round(args, types, out, call):
    scale = const_int(args[1], "round scale") if len(args) > 1 else 0
    x = cast_value(args[0], out)
    if out == DOUBLE:  # Druid rounds NaN to 0 and infinities to the largest finite doubles
        big = 1.7976931348623157e308
        x = pc.if_else(pc.is_nan(x), 0.0, pc.min_element_wise(pc.max_element_wise(x, -big, skip_nulls=False), big,
                                                               skip_nulls=False))
    elif scale >= 0:
        return x
    return pc.round(x, ndigits=scale, round_mode="half_towards_infinity")


@register("pow", "power", "atan2", args=(2, 2), kinds="n", out=DOUBLE, doc="pow(x, y)")
def _pow(args, types, out, call):
    a, b = to_double(args[0]), to_double(args[1])
    return pc.atan2(a, b) if call.name.lower() == "atan2" else pc.power(a, b)


@register("div", args=(2, 2), kinds="n", out=LONG, doc="div(x, y)")
def _div(args, types, out, call):
    if numeric_infer(call, types) == LONG:
        return arithmetic("/", args[0], args[1], LONG)
    return double_to_long(arithmetic("/", args[0], args[1], DOUBLE))


@register("mod", args=(2, 2), kinds="n", out=numeric_infer, doc="mod(x, y)")
def _mod(args, types, out, call):
    return arithmetic("%", args[0], args[1], out)


def _extremum_infer(call: Call, types: list[Type]) -> Type:
    if any(t is not None and t.is_string for t in types):
        return STRING
    return numeric_infer(call, types)


@register("greatest", "least", args=(1, None), kinds="a", out=_extremum_infer, strict=False,
          doc="greatest(expr, expr...)")
def _greatest(args, types, out, call):
    values = [cast_value(plain(a), out) if out else a for a in args]
    if out is None:
        return values[0]
    kernel = pc.max_element_wise if call.name.lower() == "greatest" else pc.min_element_wise
    return kernel(*values, skip_nulls=True)




# ---- time ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _zone_name(tz: str | None) -> str | None:
    return None if time_zone(tz) is None else tz  # an unknown name is a ValidationError naming it


def _zone(args: list[Value], i: int) -> str | None:
    return _zone_name(const(args[i], "time zone")) if len(args) > i else None


def _origin(value) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, str):
        return parse_instant(value)
    raise ValidationError(f"origin must be an ISO-8601 time or epoch milliseconds, got {value!r}")


@functools.lru_cache(maxsize=256)
def _granularity(period: str, origin: int | None, tz: str | None) -> Granularity:
    return Granularity.of_period(Period.parse(period), tz, origin)


@register("timestamp_floor", "timestamp_ceil", args=(2, 4), kinds="tkkk", out=TIMESTAMP, strict=False,
          doc="timestamp_floor(time, period[, origin[, timezone]])")
def _timestamp_floor(args, types, out, call):
    period = const(args[1], "period")
    if period is None:
        return null_of(TIMESTAMP)
    origin = _origin(const(args[2], "origin")) if len(args) > 2 else None
    gran = _granularity(str(period), origin, _zone(args, 3))
    ms = to_long(args[0])
    start = on_numpy(gran.bucket_start, pa.int64(), ms)
    if call.name.lower() == "timestamp_ceil":
        following = on_numpy(lambda x: shift_millis(x, gran.period, 1, gran.time_zone), pa.int64(), start)
        start = pc.if_else(pc.equal(start, ms), start, following)
    return start.cast(TS)


@register("timestamp_shift", args=(3, 4), kinds="tkkk", out=TIMESTAMP,
          doc="timestamp_shift(time, period, step[, timezone])")
def _timestamp_shift(args, types, out, call):
    period = Period.parse(const_str(args[1], "period"))
    step, tz = const_int(args[2], "step"), _zone(args, 3)
    return on_numpy(lambda x: shift_millis(x, period, step, tz), pa.int64(), to_long(args[0])).cast(TS)


@dataclass(frozen=True)
class _Zoned:
    """Instants read in a zone: ``local`` is the wall clock as a zone-less timestamp (Arrow's
    field kernels read it as is), ``offsets`` the UTC offset in millis (seconds kept: local mean
    time), ``utc`` the instants. Computed by ``common.types.time_zone``, not by Arrow's zone
    code, which ignores daylight saving from 2038 on and drops offset seconds when printing."""

    local: pa.Array
    offsets: pa.Array
    utc: pa.Array
    tz: str | None


def _zoned(v: Value, tz: str | None) -> _Zoned:
    utc = to_long(v)
    if isinstance(utc, pa.ChunkedArray):
        utc = utc.combine_chunks()
    zone = time_zone(tz)
    nulls = utc.is_null().to_numpy(zero_copy_only=False)
    if zone is None:
        offsets = pa.array(np.zeros(len(utc), np.int64), mask=nulls)
        return _Zoned(utc.cast(pa.timestamp("ms")), offsets, utc, None)
    ms = utc.fill_null(0).to_numpy(zero_copy_only=False)
    offs = zone.offsets(ms)
    local = pa.array(ms + offs, pa.int64(), mask=nulls)
    return _Zoned(local.cast(pa.timestamp("ms")), pa.array(offs, pa.int64(), mask=nulls), utc, tz)


def _local(v: Value, tz: str | None) -> Value:
    return _zoned(v, tz).local


_EXTRACT = {
    "EPOCH": lambda ts: pc.divide(ts.cast(pa.int64()), 1000),
    "MILLISECOND": pc.millisecond, "SECOND": pc.second, "MINUTE": pc.minute, "HOUR": pc.hour, "DAY": pc.day,
    "DOW": lambda ts: pc.day_of_week(ts, count_from_zero=False, week_start=1),
    "ISODOW": lambda ts: pc.day_of_week(ts, count_from_zero=False, week_start=1),
    "DOY": pc.day_of_year, "WEEK": pc.iso_week, "MONTH": pc.month, "QUARTER": pc.quarter, "YEAR": pc.year,
    "ISOYEAR": pc.iso_year, "DECADE": lambda ts: pc.divide(pc.year(ts), 10),
    "CENTURY": lambda ts: pc.ceil(pc.divide(pc.year(ts).cast(pa.float64()), 100.0)),
    "MILLENNIUM": lambda ts: pc.ceil(pc.divide(pc.year(ts).cast(pa.float64()), 1000.0)),
}


def _extract_unit(call: Call) -> str:
    unit = str(call.args[1].value).upper()
    if unit not in _EXTRACT:
        raise ValidationError(
            f"unknown timestamp_extract unit '{call.args[1].value}' in '{call.to_string()}'; "
            f"valid: {', '.join(_EXTRACT)}"
        )
    return unit


@register("timestamp_extract", args=(2, 3), kinds="tlk", strict=False,
          out=lambda call, types: DOUBLE if _extract_unit(call) in ("CENTURY", "MILLENNIUM") else LONG,
          doc="timestamp_extract(time, unit[, timezone])")
def _timestamp_extract(args, types, out, call):
    unit = _extract_unit(call)
    if unit == "EPOCH":  # seconds since the epoch are the same in every zone: read the instant
        return cast_value(_EXTRACT[unit](to_long(args[0]).cast(TS)), out)
    return cast_value(_EXTRACT[unit](_local(args[0], _zone(args, 2))), out)


def _joda_tokens(pattern: str) -> list[tuple[str, object]]:
    """('lit', text) or (letter, run length), following Joda's quoting ('' is a quote)."""
    out: list[tuple[str, object]] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "'":
            if pattern[i + 1:i + 2] == "'":  # '' outside quotes is a literal quote
                out.append(("lit", "'"))
                i += 2
                continue
            buf, j = [], i + 1
            while True:
                if j >= n:
                    raise ValidationError(f"unterminated quote in time pattern '{pattern}'")
                if pattern[j] == "'":
                    if pattern[j + 1:j + 2] != "'":
                        break
                    j += 1  # '' inside quotes is one quote
                buf.append(pattern[j])
                j += 1
            out.append(("lit", "".join(buf)))
            i = j + 1
        elif "a" <= ch.lower() <= "z":
            j = i
            while j < n and pattern[j] == ch:
                j += 1
            out.append((ch, j - i))
            i = j
        else:
            out.append(("lit", ch))
            i += 1
    return out


def _number(field: Callable, width: int) -> Callable:
    def piece(ts):
        text = field(ts).cast(pa.int64()).cast(pa.string())
        return pc.utf8_lpad(text, width=width, padding="0") if width > 1 else text
    return piece


def _names(field: Callable, names: list[str]) -> Callable:
    table = pa.array(names)
    return lambda ts: table.take(field(ts))


def _fraction(width: int) -> Callable:
    def piece(ts):
        ms = pc.utf8_lpad(pc.millisecond(ts).cast(pa.string()), width=3, padding="0")
        if width <= 3:
            return pc.utf8_slice_codeunits(ms, start=0, stop=width)
        return pc.utf8_rpad(ms, width=width, padding="0")
    return piece


def _offset(colon: bool, iso: bool = False) -> Callable:
    """The zone offset as Joda prints it: +HH:MM (or +HHMM), with :SS when it has seconds."""
    def piece(z: _Zoned):
        seconds = pc.divide(z.offsets, 1000)
        size = pc.abs(seconds)
        hours = pc.utf8_lpad(pc.divide(size, 3600).cast(pa.string()), width=2, padding="0")
        mins = pc.utf8_lpad(_remainder(pc.divide(size, 60), 60).cast(pa.string()), width=2, padding="0")
        secs = _remainder(size, 60)
        sec_text = pc.if_else(pc.equal(secs, 0), "",
                              pc.binary_join_element_wise(":" if colon else "",
                                                          pc.utf8_lpad(secs.cast(pa.string()), width=2, padding="0"),
                                                          ""))
        sign = pc.if_else(pc.less(seconds, 0), "-", "+")
        text = pc.binary_join_element_wise(sign, hours, *([":"] if colon else []), mins, sec_text, "")
        return pc.if_else(pc.equal(seconds, 0), "Z", text) if iso else text
    return piece


def _remainder(x: Value, n: int) -> Value:
    return pc.subtract(x, pc.multiply(pc.divide(x, n), n))  # x >= 0 here, so truncation is floor


def _hour12(ts):
    h = _remainder(pc.hour(ts).cast(pa.int64()), 12)
    return pc.if_else(pc.equal(h, 0), 12, h)


_MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December"]
_DAY_NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_FIELDS = {
    "y": pc.year, "Y": pc.year, "u": pc.year, "x": pc.iso_year, "M": pc.month, "d": pc.day, "D": pc.day_of_year,
    "H": pc.hour, "m": pc.minute, "s": pc.second, "w": pc.iso_week, "h": _hour12,
    "e": lambda ts: pc.day_of_week(ts, count_from_zero=False, week_start=1),
    "K": lambda ts: _remainder(pc.hour(ts).cast(pa.int64()), 12),
    "k": lambda ts: pc.if_else(pc.equal(pc.hour(ts), 0), 24, pc.hour(ts)),
    "C": lambda ts: pc.divide(pc.year(ts), 100),
}
_FORMAT_LETTERS = "".join(_FIELDS) + "SEaZzG"


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _zone_abbreviation(z: _Zoned) -> Value:
    if z.tz is None:
        return pc.if_else(pc.is_valid(z.utc), "UTC", pa.scalar(None, pa.string()))
    if time_zone(z.tz).fixed is not None:
        return pc.if_else(pc.is_valid(z.utc), z.tz, pa.scalar(None, pa.string()))
    info = zoneinfo.ZoneInfo(z.tz)
    # One name per distinct offset in the batch (within a zone an offset names its abbreviation).
    offsets = z.offsets.fill_null(0).to_numpy(zero_copy_only=False)
    utc = z.utc.fill_null(0).to_numpy(zero_copy_only=False)
    distinct, first, codes = np.unique(offsets, return_index=True, return_inverse=True)
    names = [(_EPOCH + dt.timedelta(milliseconds=int(utc[i]))).astimezone(info).tzname() for i in first]
    out = pa.array(names, pa.string()).take(pa.array(codes.reshape(-1)))
    return pc.if_else(pc.is_valid(z.utc), out, pa.scalar(None, pa.string()))


def _on_local(field: Callable) -> Callable:
    return lambda z: field(z.local)


def _format_piece(letter: str, n: int, tz: str | None, pattern: str):
    """Text for a literal, else a function of the ``_Zoned`` instants giving one string per row.
    Built from field kernels on the wall clock rather than strftime, which is several times slower."""
    if letter in "Zz":
        return _zone_piece(letter, n, tz)
    if letter == "G":
        return "AD"
    field = _local_piece(letter, n)
    if field is None:
        raise ValidationError(
            f"unsupported letter '{letter}' in time pattern '{pattern}'; supported Joda letters: {_FORMAT_LETTERS}"
        )
    return _on_local(field)


def _local_piece(letter: str, n: int) -> Callable | None:
    """A function of the wall-clock timestamp, for letters that read a field of it."""
    if letter in "yYux" and n == 2:  # two-digit (week) year
        return _number(lambda ts: _remainder(_FIELDS[letter](ts).cast(pa.int64()), 100), 2)
    if letter == "M" and n >= 3:
        return _names(lambda ts: pc.subtract(pc.month(ts), 1), [m[:3] if n == 3 else m for m in _MONTH_NAMES])
    if letter in _FIELDS:
        return _number(_FIELDS[letter], n)
    if letter == "S":
        return _fraction(n)
    if letter == "E":
        return _names(lambda ts: pc.day_of_week(ts, week_start=1), [d[:3] if n <= 3 else d for d in _DAY_NAMES])
    if letter == "a":
        return lambda ts: pc.if_else(pc.less(pc.hour(ts), 12), "AM", "PM")
    return None


def _zone_piece(letter: str, n: int, tz: str | None):
    if letter == "Z":
        return _offset(colon=n == 2) if n <= 2 else (tz or "UTC")
    return _zone_abbreviation


@functools.lru_cache(maxsize=256)
def _format_plan(pattern: str | None, tz: str | None) -> tuple:
    if pattern is None:  # Joda's ISO printer: 'Z' for UTC, else the offset with a colon
        return _format_plan("yyyy-MM-dd'T'HH:mm:ss.SSS", tz) + ("Z" if tz is None else _offset(True, iso=True),)
    plan: list = []
    for kind, value in _joda_tokens(pattern):
        piece = value if kind == "lit" else _format_piece(kind, value, tz, pattern)
        if isinstance(piece, str) and plan and isinstance(plan[-1], str):
            plan[-1] += piece  # adjacent literal text joins once
        else:
            plan.append(piece)
    return tuple(plan)


@register("timestamp_format", args=(1, 3), kinds="tkk", out=STRING, strict=False,
          doc="timestamp_format(time[, joda_pattern[, timezone]])")
def _timestamp_format(args, types, out, call):
    pattern = const(args[1], "pattern") if len(args) > 1 else None
    tz = _zone(args, 2)
    zoned = _zoned(args[0], tz)
    parts = [p(zoned) if callable(p) else pa.scalar(p) for p in _format_plan(pattern, tz)]
    if not any(isinstance(p, pa.Array) for p in parts):  # all literal text: still null for null times
        parts.insert(0, pc.if_else(pc.is_valid(zoned.utc), "", pa.scalar(None, pa.string())))
    return pc.binary_join_element_wise(*parts, "") if len(parts) > 1 else parts[0]


_PARSE_FIELDS = {
    "M": r"(?P<M>\d{1,2})", "d": r"(?P<D>\d{1,2})", "H": r"(?P<h>\d{1,2})", "k": r"(?P<h>\d{1,2})",
    "h": r"(?P<h12>\d{1,2})", "K": r"(?P<h12>\d{1,2})", "a": r"(?P<ap>[AaPp][Mm])", "m": r"(?P<m>\d{1,2})",
    "s": r"(?P<s>\d{1,2})", "S": r"(?P<f>\d{1,9})", "E": r"[A-Za-z]+", "Z": r"(?P<z>Z|[+-]\d{2}:?\d{2})",
}


@functools.lru_cache(maxsize=256)
def _parse_plan(pattern: str) -> tuple[str, bool]:
    """A Joda pattern as a regex of the named fields parse_instants reads, and whether the year
    has two digits."""
    parts, two_digit = ["^"], False
    for kind, value in _joda_tokens(pattern):
        if kind == "lit":
            parts.append(re.escape(value))
        elif kind in "yYu":
            two_digit = value == 2
            parts.append(r"(?P<Y>\d{2})" if two_digit else (r"(?P<Y>\d{4})" if value >= 3 else r"(?P<Y>\d{1,4})"))
        elif kind == "M" and value >= 3:
            parts.append(r"(?P<Mn>[A-Za-z]+)")
        elif kind in _PARSE_FIELDS:
            parts.append(_PARSE_FIELDS[kind])
        else:
            raise ValidationError(
                f"unsupported letter '{kind}' in time pattern '{pattern}' for parsing; "
                f"supported Joda letters: yMdHkhKamsSEZ"
            )
    regex = "".join(parts) + "$"
    try:
        re.compile(regex)
    except re.error:
        raise ValidationError(f"time pattern '{pattern}' names a field twice") from None
    if "(?P<h12>" in regex and "(?P<ap>" not in regex:
        regex = regex.replace("(?P<h12>", "(?P<h>")  # 'hh' without 'a' reads like 'HH', as in Joda
    return regex, two_digit


def _parse_text(args: list[Value]) -> Value:
    pattern = const(args[1], "pattern") if len(args) > 1 else None
    tz = _zone(args, 2)
    text = plain(to_string(args[0]))
    if pattern is None:
        return parse_instants(text, ISO_INSTANT, tz)
    regex, two_digit = _parse_plan(str(pattern))
    return parse_instants(text, regex, tz, two_digit)


@register("timestamp_parse", "timestamp", args=(1, 3), kinds="skk", out=TIMESTAMP, strict=False,
          doc="timestamp_parse(string[, joda_pattern[, timezone]])")
def _timestamp_parse(args, types, out, call):
    return _parse_text(args)


@register("unix_timestamp", args=(1, 3), kinds="skk", out=LONG, strict=False,
          doc="unix_timestamp(string[, joda_pattern[, timezone]])")
def _unix_timestamp(args, types, out, call):
    return pc.divide(_parse_text(args).cast(pa.int64()), 1000)


@register("millis_to_timestamp", args=(1, 1), kinds="n", out=TIMESTAMP, doc="millis_to_timestamp(millis)")
def _millis_to_timestamp(args, types, out, call):
    return to_long(args[0]).cast(TS)


@register("timestamp_to_millis", args=(1, 1), kinds="t", out=LONG, doc="timestamp_to_millis(time)")
def _timestamp_to_millis(args, types, out, call):
    return to_long(args[0])
