"""The array functions of the expression language (Druid's ``array``, ``array_length``,
``array_contains``, ...) over Arrow list arrays.

Semantics follow Druid's SQL-compatible null handling: a null array gives null (except where a
function is defined on nulls), offsets out of range give null, ``array_offset_of`` of a missing
element is null. Element equality compares the elements after both sides are brought to the array's
element type, so ``array_contains(longs, 2.0)`` matches 2 as Druid's does.

Every function runs over the flattened values with Arrow kernels and numpy (``list_rows``): no
Python loop per row, so a million-row batch costs a few passes over its elements. Whole-array
comparison and ``string_to_array`` (a regex split with Java's rules) still walk rows.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.expr.evaluator import Type, cast_value, const, is_scalar, plain, register, to_string, unify
from common.expr.list_rows import ListRows, gather, in_constant_set, member_rows, rows_with
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


def _list_rows(v, element: ColumnType, n: int) -> list:
    """Rows of ``v`` as Python lists of ``element`` (None for a null array); scalars repeat."""
    if is_scalar(v):
        if not v.is_valid:
            return [None] * n
        v = pa.repeat(v, n)
    return to_list_array(v, element).to_pylist()


def _lists(v, element: ColumnType, n: int) -> ListRows:
    """``v`` (a list array, a scalar repeated n times, or single values read as one-element arrays)
    as ListRows of ``element``."""
    if is_scalar(v):
        if not v.is_valid:
            return ListRows.of(pa.nulls(n, pa.list_(element.to_arrow())))
        v = pa.repeat(v, n)
    return ListRows.of(to_list_array(v, element))


def _per_row(v, element: ColumnType, n: int) -> pa.Array:
    """A single value per row (scalars repeated) converted to ``element``."""
    v = pa.repeat(v, n) if is_scalar(v) else plain(v)
    return cast_value(v, element).cast(element.to_arrow())


def _numbers(v, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, validity) per row of a numeric argument (scalars repeated)."""
    v = pa.repeat(v, n) if is_scalar(v) else plain(v)
    valid = v.is_valid().to_numpy(zero_copy_only=False)
    return pc.cast(v, pa.float64()).fill_null(0).to_numpy(zero_copy_only=False), valid


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
    rows = _lists(arrays, out, n)
    at, has = _numbers(index, n)
    k = np.trunc(at) - base
    ok = has & rows.valid & (k >= 0) & (k < rows.lengths)
    pick = np.where(ok, rows.starts + np.where(ok, k, 0).astype(np.int64), 0)
    return rows.values.take(pa.array(pick, mask=~ok)).cast(out.to_arrow())


@register("array_offset", args=(2, 2), kinds="xn", out=_element_infer, doc="array_offset(arr, index): 0-based")
def _array_offset(args, types, out, call):
    return _element_at(args, out, 0)


@register("array_ordinal", args=(2, 2), kinds="xn", out=_element_infer, doc="array_ordinal(arr, index): 1-based")
def _array_ordinal(args, types, out, call):
    return _element_at(args, out, 1)


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
    hay = _lists(args[0], element, n)
    if as_array:
        if is_scalar(args[1]) and args[1].is_valid and len(args[1]) <= 8:
            # A short constant list: one pass over the values per wanted element.
            found = np.ones(n, dtype=bool)
            for wanted in to_list_array(pa.repeat(args[1], 1), element).values:
                found &= _rows_holding(hay, pa.array([wanted.as_py()], element.to_arrow()))
            needles_valid = np.ones(n, dtype=bool)
        else:
            needles = _lists(args[1], element, n)
            hit, rows = member_rows(hay, needles)
            found = np.bincount(rows[~hit], minlength=n)[:n] == 0  # no wanted element missing
            needles_valid = needles.valid
        return pa.array(found, mask=~(hay.valid & needles_valid))
    needle = _per_row(args[1], element, n)
    parents = hay.parents
    hit = pc.equal(hay.values, needle.take(pa.array(parents))).fill_null(False).to_numpy(zero_copy_only=False)
    # an unknown element may or may not be there, as SQL reads NULL
    return pa.array(rows_with(hit, parents, n), mask=~(hay.valid & needle.is_valid().to_numpy(zero_copy_only=False)))


def _rows_holding(hay: ListRows, constants: pa.Array) -> np.ndarray:
    """Whether each row of ``hay`` holds one of ``constants``."""
    return rows_with(in_constant_set(hay.values, constants), hay.parents, hay.n)


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
    left, right = args
    if is_scalar(left) and not is_scalar(right):
        left, right = right, left  # overlap is symmetric: keep the constant on the right
    hay = _lists(left, element, n)
    if is_scalar(right):
        if not right.is_valid:
            return pa.nulls(n, pa.bool_())
        constants = to_list_array(pa.repeat(right, 1), element).values
        return pa.array(_rows_holding(hay, constants), mask=~hay.valid)
    other = _lists(right, element, n)
    hit, rows = member_rows(hay, other)
    return pa.array(rows_with(hit, rows, n), mask=~(hay.valid & other.valid))


def _position(args, types, base: int):
    n = _length(args)
    element = _element_type(types[:1])
    if types[1] is not None and types[1].kind is TypeKind.ARRAY:
        return pa.nulls(n, pa.int64())  # an array is never an element of a flat array
    hay = _lists(args[0], element, n)
    parents = hay.parents
    if is_scalar(args[1]):
        needle = _per_row(args[1], element, 1)[0]
        hit = pc.equal(hay.values, needle) if needle.is_valid else pa.nulls(len(hay.values), pa.bool_())
    else:
        hit = pc.equal(hay.values, _per_row(args[1], element, n).take(pa.array(parents)))
    at = np.flatnonzero(hit.fill_null(False).to_numpy(zero_copy_only=False))
    rows, first = np.unique(parents[at], return_index=True)  # the first hit of each row
    position = np.zeros(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    position[rows] = at[first] - hay.starts[rows] + base
    found[rows] = True
    return pa.array(position, mask=~(found & hay.valid))


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
    return _join_rows(_lists(args[0], out.element, n), _single(args[1], types[1], out.element, n), out)


@register("array_prepend", args=(2, 2), kinds="ax", out=_first_array_infer, strict=False,
          doc="array_prepend(expr, arr)")
def _array_prepend(args, types, out, call):
    _check_array(call, types, [1])
    n = _length(args)
    arrays = _lists(args[1], out.element, n)
    return _join_rows(_single(args[0], types[0], out.element, n), arrays, out, valid=arrays.valid)


@register("array_concat", args=(2, 2), kinds="x", out=_first_array_infer, strict=False,
          doc="array_concat(arr1, arr2): null if either is null")
def _array_concat(args, types, out, call):
    n = _length(args)
    left, right = (_lists(a, out.element, n) for a in args)
    return _join_rows(left, right, out)


def _single(v, t: Type, element: ColumnType, n: int) -> ListRows:
    """The element to add, per row, as one-element lists (a null element stays, as Druid appends it)."""
    if t is not None and t.kind is TypeKind.ARRAY:
        raise ValidationError("array_append/array_prepend add one element; use array_concat to join two arrays")
    values = _per_row(v, element, n)
    return ListRows(values, np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.ones(n, dtype=bool))


def _join_rows(left: ListRows, right: ListRows, out: ColumnType, valid: np.ndarray | None = None) -> pa.Array:
    """Row r of left followed by row r of right; null where either is a null array (or not ``valid``)."""
    values = pa.concat_arrays([left.values.cast(out.element.to_arrow()), right.values.cast(out.element.to_arrow())])
    valid = left.valid & right.valid if valid is None else valid
    pieces = [(left.starts, left.lengths), (right.starts + len(left.values), right.lengths)]
    return gather(left, pieces, valid, values)


_MAX_SLICE_PADDING = 1 << 20


@register("array_slice", args=(2, 3), kinds="xn", out=_first_array_infer,
          doc="array_slice(arr, start, end): elements from start (0-based, included) to end (excluded)")
def _array_slice(args, types, out, call):
    _check_array(call, types, [0])
    n = _length(args)
    rows = _lists(args[0], out.element, n)
    start, has_start = _numbers(args[1], n)
    if len(args) > 2:
        end, has_end = _numbers(args[2], n)
    else:
        end, has_end = np.zeros(n), np.zeros(n, dtype=bool)
    end = np.where(has_end, end, rows.lengths)  # no end (or a null one): to the last element
    ok = rows.valid & has_start & (start >= 0) & (start <= rows.lengths) & (end >= start)
    first = np.where(ok, np.trunc(start), 0).astype(np.int64)
    wanted = np.where(ok, np.trunc(end), 0).astype(np.int64)
    last = np.minimum(wanted, rows.lengths)
    # An end past the last element pads the slice with nulls, as Druid's slice does (copyOfRange)
    pad = np.where(ok, wanted - np.maximum(last, first), 0)
    most = int(pad.max()) if len(pad) else 0
    if most > _MAX_SLICE_PADDING:
        raise ValidationError(f"{call}: end reaches {most} elements past the end of an array; "
                              f"at most {_MAX_SLICE_PADDING} are padded with nulls, so give a smaller end")
    values = pa.concat_arrays([rows.values, pa.nulls(most, rows.values.type)])
    pieces = [(rows.starts + first, np.maximum(last - first, 0)), (np.full(n, len(rows.values)), pad)]
    return gather(rows, pieces, ok, values)


@register("array_to_string", args=(2, 2), kinds="xs", out=STRING,
          doc="array_to_string(arr, separator): elements as text, null elements as 'null'")
def _array_to_string(args, types, out, call):
    _check_array(call, types, [0])
    n = _length(args)
    rows = _lists(args[0], _element_type(types[:1]), n)
    texts = to_string(rows.values).fill_null("null")
    lists = pa.ListArray.from_arrays(pa.array(np.concatenate(([0], np.cumsum(rows.lengths))).astype(np.int32)),
                                     texts, mask=pa.array(~rows.valid))
    separator = args[1] if is_scalar(args[1]) else plain(args[1])
    return pc.binary_join(lists, separator.cast(pa.string()))


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
    listed = _lists(args[1] if is_scalar(args[1]) else plain(args[1])[0], out.element, 1)
    rows = _lists(args[0], out.element, n)
    keep = in_constant_set(rows.values, listed.values.slice(0, int(listed.lengths.sum()))) == keep_listed
    kept = np.flatnonzero(keep)
    counts = np.bincount(rows.parents[kept], minlength=n)[:n]
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), rows.values.take(pa.array(kept)).cast(out.element.to_arrow()),
                                    mask=pa.array(~rows.valid))
