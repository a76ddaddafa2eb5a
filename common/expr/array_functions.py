"""The array functions of the expression language (Druid's ``array``, ``array_length``,
``array_contains``, ...) over Arrow list arrays.

Semantics follow Druid's SQL-compatible null handling: a null array gives null (except where a
function is defined on nulls), offsets out of range give null, ``array_offset_of`` of a missing
element is null. Element equality compares the elements after both sides are brought to the array's
element type, so ``array_contains(longs, 2.0)`` matches 2 as Druid's does.

Lengths, offsets and casts run as Arrow kernels over the flattened values; the set-like functions
(contains, overlap, offset_of, to_string) walk rows in Python, which is fine for the row counts one
expression batch holds and keeps their null rules readable.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.expr.evaluator import Type, cast_value, const, is_scalar, plain, register, to_string, unify
from common.types.column_type import LONG, STRING, ColumnType, TypeKind


def _array_type(element: Type) -> ColumnType:
    if element is None:
        element = STRING
    if element.kind is TypeKind.TIMESTAMP:
        element = LONG
    if element.kind is TypeKind.FLOAT:
        element = ColumnType.parse("DOUBLE")
    if element.kind is TypeKind.ARRAY:
        element = element.element
    return ColumnType(TypeKind.ARRAY, element)


def _element(t: Type) -> Type:
    return t.element if t is not None and t.kind is TypeKind.ARRAY else t


def _check_array(call, types, positions) -> None:
    for i in positions:
        t = types[i]
        if t is not None and t.kind is not TypeKind.ARRAY:
            raise ValidationError(f"{call.name}() needs an array for argument {i + 1}, but "
                                  f"'{call.args[i].to_string()}' is {t.sql_name} in '{call.to_string()}'")


def _rows(v, n: int) -> list:
    """Python values of ``v`` (array or scalar), one per row."""
    if is_scalar(v):
        return [v.as_py()] * n
    return plain(v).to_pylist()


def _list_rows(v, element: ColumnType, n: int) -> list:
    """Rows of ``v`` as Python lists of ``element`` (None for a null array); scalars repeat."""
    if is_scalar(v):
        if not v.is_valid:
            return [None] * n
        v = pa.repeat(v, n)
    return to_list_array(v, element).to_pylist()


def _length(args) -> int:
    return max((len(a) for a in args if not is_scalar(a)), default=1)


def to_list_array(v, element: ColumnType) -> pa.Array:
    """``v`` (a list array, or scalars read as one-element arrays) as a list of ``element``."""
    v = plain(v)
    target = pa.list_(element.to_arrow())
    if is_scalar(v):
        v = pa.repeat(v, 1)
    if not (pa.types.is_list(v.type) or pa.types.is_large_list(v.type)):
        # A single value becomes a one-element array (null stays a null array), as Druid casts.
        # A null row spans no values, so flattening and parent indices agree.
        valid = v.is_valid().to_numpy(zero_copy_only=False)
        values = cast_value(v.filter(pa.array(valid)), element)
        offsets = pa.array(np.concatenate(([0], np.cumsum(valid))).astype(np.int32))
        return pa.ListArray.from_arrays(offsets, values, mask=pa.array(~valid)).cast(target)
    if v.type == target:
        return v
    if v.offset or pa.types.is_large_list(v.type):
        v = v.cast(pa.list_(v.type.value_type))
        v = pa.concat_arrays([v])  # rebase offsets so flatten() and offsets agree
    values = cast_value(v.values, element) if len(v.values) else pa.array([], element.to_arrow())
    values = values.cast(element.to_arrow())
    return pa.ListArray.from_arrays(v.offsets, values, mask=v.is_null()).cast(target)


def _from_rows(rows: list, out: ColumnType) -> pa.Array:
    return pa.array(rows, out.to_arrow())


# ---- construction and casts ----------------------------------------------------------------------
def _array_infer(call, types):
    return _array_type(unify([_element(t) for t in types]))


@register("array", args=(0, None), kinds="a", out=_array_infer, strict=False,
          doc="array(expr, ...): an array of the arguments, of their common element type")
def _array(args, types, out, call):
    n = _length(args)
    element = out.element
    if not args:
        return pa.array([[]] * n, out.to_arrow())
    columns = [cast_value(pa.repeat(a, n) if is_scalar(a) else plain(a), element).cast(element.to_arrow())
               for a in args]
    # Interleave the columns row by row: row r is [c0[r], c1[r], ...].
    values = pa.concat_arrays(columns).take(
        pa.array((np.arange(len(columns))[None, :] * n + np.arange(n)[:, None]).reshape(-1)))
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * len(columns))
    return pa.ListArray.from_arrays(offsets, values)


def cast_array(v, target: ColumnType) -> pa.Array:
    """cast(x, 'ARRAY<...>'): elements converted as single values are (text that is not a number
    becomes null)."""
    out = to_list_array(v, target.element)
    return out[0] if is_scalar(v) else out  # a constant stays a scalar, as the evaluator keeps constants


# ---- element access --------------------------------------------------------------------------
@register("array_length", args=(1, 1), kinds="x", out=LONG, doc="array_length(arr)")
def _array_length(args, types, out, call):
    _check_array(call, types, [0])
    return pc.list_value_length(plain(args[0])).cast(pa.int64())


def _element_infer(call, types):
    _check_array(call, types, [0])
    return _element(types[0]) or STRING


def _element_at(args, out, base: int):
    arrays, index = plain(args[0]), args[1]
    n = len(arrays)
    if is_scalar(index) and index.is_valid:
        # One position for every row: gather it from the flat values through the offsets.
        arrays = to_list_array(arrays, out)
        k = int(index.as_py()) - base
        offsets = arrays.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        lengths = offsets[1:] - offsets[:-1]
        ok = (k >= 0) & (k < lengths) & arrays.is_valid().to_numpy(zero_copy_only=False)
        at = np.where(ok, offsets[:-1] + k, 0)
        return arrays.values.take(pa.array(at, mask=~ok)).cast(out.to_arrow())
    lists = arrays.to_pylist()
    idx = _rows(index, n)
    result = []
    for values, i in zip(lists, idx):
        if values is None or i is None:
            result.append(None)
            continue
        k = int(i) - base
        result.append(values[k] if 0 <= k < len(values) else None)
    return pa.array(result, out.to_arrow())


@register("array_offset", args=(2, 2), kinds="xn", out=_element_infer, doc="array_offset(arr, index): 0-based")
def _array_offset(args, types, out, call):
    return _element_at(args, out, 0)


@register("array_ordinal", args=(2, 2), kinds="xn", out=_element_infer, doc="array_ordinal(arr, index): 1-based")
def _array_ordinal(args, types, out, call):
    return _element_at(args, out, 1)


def _needles(v, t: Type, element: ColumnType, n: int) -> list:
    """The element(s) to look for, per row, converted to the array's element type."""
    if t is not None and t.kind is TypeKind.ARRAY:
        return _list_rows(v, element, n)
    converted = cast_value(pa.repeat(v, n) if is_scalar(v) else plain(v), element)
    return converted.to_pylist()


def _element_type(types) -> ColumnType:
    for t in types:
        if t is not None and t.kind is TypeKind.ARRAY:
            return t.element
    return STRING


@register("array_contains", args=(2, 2), kinds="x", out=LONG, boolean=True,
          doc="array_contains(arr, expr): whether arr holds expr (every element of expr, if an array)")
def _array_contains(args, types, out, call):
    _check_array(call, types, [0])
    n = _length(args)
    element = _element_type(types[:1])
    as_array = types[1] is not None and types[1].kind is TypeKind.ARRAY
    if not as_array and is_scalar(args[1]) and not is_scalar(args[0]):
        return _contains_constant(plain(args[0]), args[1], element)
    hay = _list_rows(args[0], element, n)
    needles = _needles(args[1], types[1], element, n)
    result = []
    for values, needle in zip(hay, needles):
        if values is None:
            result.append(None)
        elif needle is None:
            result.append(None)  # an unknown element may or may not be there, as SQL reads NULL
        elif as_array:
            result.append(all(x in values for x in needle))
        else:
            result.append(needle in values)
    return pa.array(result, pa.bool_())


def _contains_constant(arrays: pa.Array, needle: pa.Scalar, element: ColumnType) -> pa.Array:
    """array_contains(column, constant) without a Python loop: compare the flattened elements once."""
    target = cast_value(pa.repeat(needle, 1), element).cast(element.to_arrow())[0]
    if not target.is_valid:
        return pa.nulls(len(arrays), pa.bool_())
    arrays = to_list_array(arrays, element)
    hit = pc.equal(pc.list_flatten(arrays), target).fill_null(False).to_numpy(zero_copy_only=False)
    found = np.zeros(len(arrays), dtype=bool)
    found[pc.list_parent_indices(arrays).to_numpy(zero_copy_only=False)[hit]] = True
    return pa.array(found, mask=arrays.is_null().to_numpy(zero_copy_only=False))


@register("array_overlap", args=(2, 2), kinds="x", out=LONG, boolean=True,
          doc="array_overlap(arr1, arr2): whether the arrays share an element")
def _array_overlap(args, types, out, call):
    _check_array(call, types, [0, 1])
    n = _length(args)
    element = _element_type(types)
    left, right = _list_rows(args[0], element, n), _list_rows(args[1], element, n)
    result = []
    for a, b in zip(left, right):
        result.append(None if a is None or b is None else bool(set(a) & set(b)))
    return pa.array(result, pa.bool_())


def _position(args, types, base: int):
    n = _length(args)
    element = _element_type(types[:1])
    hay = _list_rows(args[0], element, n)
    needles = _needles(args[1], types[1], element, n)
    result = []
    for values, needle in zip(hay, needles):
        if values is None or needle is None or needle not in values:
            result.append(None)
        else:
            result.append(values.index(needle) + base)
    return pa.array(result, pa.int64())


@register("array_offset_of", args=(2, 2), kinds="xa", out=LONG, strict=False,
          doc="array_offset_of(arr, expr): 0-based index of the first expr, or null")
def _array_offset_of(args, types, out, call):
    _check_array(call, types, [0])
    return _position(args, types, 0)


@register("array_ordinal_of", args=(2, 2), kinds="xa", out=LONG, strict=False,
          doc="array_ordinal_of(arr, expr): 1-based index of the first expr, or null")
def _array_ordinal_of(args, types, out, call):
    _check_array(call, types, [0])
    return _position(args, types, 1)


# ---- building new arrays -------------------------------------------------------------------------
def _first_array_infer(call, types):
    for t in types:
        if t is not None and t.kind is TypeKind.ARRAY:
            return t
    return _array_type(unify(types))


@register("array_append", args=(2, 2), kinds="xa", out=_first_array_infer, strict=False,
          doc="array_append(arr, expr)")
def _array_append(args, types, out, call):
    _check_array(call, types, [0])
    n = _length(args)
    arrays = _list_rows(args[0], out.element, n)
    extra = _needles(args[1], types[1], out.element, n)
    return _from_rows([None if a is None else a + [x] for a, x in zip(arrays, extra)], out)


@register("array_prepend", args=(2, 2), kinds="ax", out=_first_array_infer, strict=False,
          doc="array_prepend(expr, arr)")
def _array_prepend(args, types, out, call):
    _check_array(call, types, [1])
    n = _length(args)
    arrays = _list_rows(args[1], out.element, n)
    extra = _needles(args[0], types[0], out.element, n)
    return _from_rows([None if a is None else [x] + a for a, x in zip(arrays, extra)], out)


@register("array_concat", args=(2, 2), kinds="x", out=_first_array_infer, strict=False,
          doc="array_concat(arr1, arr2): null if either is null")
def _array_concat(args, types, out, call):
    n = _length(args)
    parts = [_list_rows(a, out.element, n) for a in args]
    return _from_rows([None if a is None or b is None else a + b for a, b in zip(*parts)], out)


@register("array_slice", args=(2, 3), kinds="xn", out=_first_array_infer,
          doc="array_slice(arr, start, end): elements from start (0-based, included) to end (excluded)")
def _array_slice(args, types, out, call):
    _check_array(call, types, [0])
    n = _length(args)
    arrays = _rows(args[0], n)
    starts = _rows(args[1], n)
    ends = _rows(args[2], n) if len(args) > 2 else [None] * n
    result = []
    for a, s, e in zip(arrays, starts, ends):
        if a is None or s is None or s < 0 or s > len(a):
            result.append(None)
            continue
        e = len(a) if e is None else e
        result.append(a[int(s):int(e)] if e >= s else None)
    return _from_rows(result, out)


@register("array_to_string", args=(2, 2), kinds="xs", out=STRING,
          doc="array_to_string(arr, separator): elements as text, null elements as 'null'")
def _array_to_string(args, types, out, call):
    _check_array(call, types, [0])
    n = _length(args)
    arrays = to_list_array(args[0], _element_type(types[:1])) if not is_scalar(args[0]) else \
        to_list_array(pa.repeat(args[0], n), _element_type(types[:1]))
    texts = to_string(arrays.flatten()).to_pylist()
    offsets = arrays.offsets.to_pylist()
    valid = arrays.is_valid().to_pylist()
    seps = _rows(args[1], n)
    result = []
    for r in range(len(arrays)):
        if not valid[r] or seps[r] is None:
            result.append(None)
            continue
        part = texts[offsets[r]:offsets[r + 1]]
        result.append(seps[r].join("null" if x is None else x for x in part))
    return pa.array(result, pa.string())


@register("string_to_array", args=(2, 2), kinds="sk", out=ColumnType(TypeKind.ARRAY, STRING),
          doc="string_to_array(text, regex): text split at each match of regex")
def _string_to_array(args, types, out, call):
    pattern = const(args[1], "the delimiter")
    try:
        regex = re.compile(str(pattern))
    except re.error as e:
        raise ValidationError(f"string_to_array: bad delimiter pattern '{pattern}': {e}") from None
    result = []
    for s in to_string(args[0]).to_pylist():
        if s is None:
            result.append(None)
            continue
        parts = regex.split(s) if s else [s]
        if len(parts) > 1:  # as Java's String.split: a split text loses its trailing empty strings
            while parts and parts[-1] == "":
                parts.pop()
        result.append(parts)
    return pa.array(result, out.to_arrow())


# ---- comparison ------------------------------------------------------------------------------------
def _sort_key(values: list) -> tuple:
    # Element by element, a null element before any value (Druid's array comparator), a shorter
    # array before a longer one it starts.
    return tuple((0, 0) if x is None else (1, x) for x in values)


_OPS = {"==": lambda x, y: x == y, "!=": lambda x, y: x != y, "<": lambda x, y: x < y,
        "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}


def compare_arrays(op: str, a, b, ta: Type, tb: Type):
    """Whole-array comparison after both sides take their common element type; null if either is."""
    elements = [t.element if t.kind is TypeKind.ARRAY else t for t in (ta, tb) if t is not None]
    element = _element(_array_type(unify(elements)))
    n = _length([a, b])
    left, right = _list_rows(a, element, n), _list_rows(b, element, n)
    fn = _OPS[op]
    out = [None if x is None or y is None else fn(_sort_key(x), _sort_key(y)) for x, y in zip(left, right)]
    result = pa.array(out, pa.bool_())
    return result[0] if is_scalar(a) and is_scalar(b) else result


@register("mv_filter_only", "mv_filter_none", args=(2, 2), kinds="xk", out=_first_array_infer,
          doc="mv_filter_only(arr, values): the elements of arr in values (mv_filter_none: not in values)")
def _mv_filter(args, types, out, call):
    _check_array(call, types, [0, 1])
    n = _length(args)
    keep_listed = call.name.lower() == "mv_filter_only"
    listed = set(_list_rows(args[1], out.element, 1)[0] or [])
    arrays = _list_rows(args[0], out.element, n)
    return _from_rows([None if a is None else [x for x in a if (x in listed) == keep_listed] for a in arrays], out)
