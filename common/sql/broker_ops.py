"""Broker-side operations over Arrow tables: the parts of a SQL plan that run after native
queries return (typing results, sorting, hash joins, unions, constant rows).

Everything here is vectorized pyarrow; nothing loops over rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import UnsupportedError
from common.query.ordering import SortKey, sort_table
from common.sql.logical_plan import Field
from common.sql.sql_types import SqlType
from common.query.partial import decode_dictionaries


def unique_names(names: Sequence[str]) -> tuple[str, ...]:
    """Column names for an intermediate table: the field names, made distinct with a suffix."""
    out: list[str] = []
    taken = set()
    for name in names:
        candidate, i = name, 0
        while candidate in taken:
            candidate = f"{name}{i}"
            i += 1
        taken.add(candidate)
        out.append(candidate)
    return tuple(out)


def cast_column(arr: pa.Array | pa.ChunkedArray, t: SqlType) -> pa.Array:
    """Values in the Arrow type of SQL type ``t`` (native queries return LONG for TIMESTAMP and
    BOOLEAN, dictionaries for strings, float64 where FLOAT was asked for...)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    target = t.to_arrow()
    if arr.type == target:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target)
    if pa.types.is_boolean(target):
        if pa.types.is_string(arr.type):
            return pc.equal(pc.utf8_lower(arr), "true")
        return pc.not_equal(arr.cast(pa.float64(), safe=False), 0.0)
    if pa.types.is_timestamp(target):
        if pa.types.is_timestamp(arr.type):
            if arr.type.tz is None:
                arr = arr.cast(pa.timestamp(arr.type.unit, tz="UTC"))
            return arr.cast(target, safe=False)
        if pa.types.is_floating(arr.type):
            arr = arr.cast(pa.int64(), safe=False)
        return arr.cast(pa.int64()).cast(target)
    if pa.types.is_string(target) and pa.types.is_boolean(arr.type):
        return pc.if_else(arr, "true", "false")
    if pa.types.is_integer(target) and pa.types.is_timestamp(arr.type):
        return arr.cast(pa.int64())
    return arr.cast(target, safe=False)


def shape(table: pa.Table, sources: Sequence[str], fields: Sequence[Field], names: Sequence[str]) -> pa.Table:
    """Columns ``sources`` of ``table`` (missing ones read as NULL), cast to ``fields``' types and
    named ``names``."""
    arrays = []
    n = table.num_rows
    present = set(table.column_names)
    for src, f in zip(sources, fields):
        if src in present:
            column = table.column(src)
            # Already one array of the right type (a native result usually is): as it is.
            if column.num_chunks == 1 and column.type == f.type.to_arrow():
                arrays.append(column.chunk(0))
            else:
                arrays.append(cast_column(column, f.type))
        else:
            arrays.append(pa.nulls(n, f.type.to_arrow()))
    return pa.Table.from_arrays(arrays, names=list(names))


def sort(table: pa.Table, keys: Sequence[tuple[str, bool, bool | None]], limit: int | None, offset: int) -> pa.Table:
    """Order by (column, descending, nulls_first) keys, then apply OFFSET and LIMIT."""
    if keys:
        table = sort_table(table, [SortKey(c, d, nf) for c, d, nf in keys])
    if offset or limit is not None:
        table = table.slice(offset, limit if limit is not None else None)
    return table


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _array_keys(a: pa.Array, b: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Whole arrays as join keys (Arrow cannot join on lists): each array's JSON text, after
    widening both sides to one element type (numbers to DOUBLE, else text), so equal arrays match
    (nulls inside alike, -0.0 as 0.0); a null array never matches."""
    def element(t: pa.DataType) -> pa.DataType:
        return t.value_type if _is_list(t) else t

    ea, eb = element(a.type), element(b.type)
    numeric = all(pa.types.is_integer(e) or pa.types.is_floating(e) or pa.types.is_null(e) for e in (ea, eb))
    if ea != eb or not (_is_list(a.type) and _is_list(b.type)):
        target = pa.list_(pa.float64() if numeric else pa.string())
        a, b = (v.cast(target) if _is_list(v.type) else pa.nulls(len(v), target) for v in (a, b))
    def text(v):  # (-0.0 + 0.0 is 0.0: the two are equal, so they match)
        return None if v is None else json.dumps([e + 0.0 if isinstance(e, float) else e for e in v])

    return tuple(pa.array([text(v) for v in x.to_pylist()], pa.string()) for x in (a, b))


def _join_key(arr: pa.ChunkedArray, other: pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    b = other.combine_chunks() if isinstance(other, pa.ChunkedArray) else other
    for side in ("a", "b"):
        v = a if side == "a" else b
        if pa.types.is_dictionary(v.type):
            v = v.dictionary_decode()
        if pa.types.is_timestamp(v.type):
            v = v.cast(pa.int64())
        if pa.types.is_boolean(v.type):
            v = v.cast(pa.int64())
        if side == "a":
            a = v
        else:
            b = v
    if _is_list(a.type) or _is_list(b.type):
        return _array_keys(a, b)
    if a.type != b.type:
        if (pa.types.is_integer(a.type) or pa.types.is_floating(a.type)) and \
                (pa.types.is_integer(b.type) or pa.types.is_floating(b.type)):
            a, b = a.cast(pa.float64(), safe=False), b.cast(pa.float64(), safe=False)
        elif pa.types.is_null(a.type):
            a = a.cast(b.type)
        elif pa.types.is_null(b.type):
            b = b.cast(a.type)
        else:
            a, b = a.cast(pa.string()), b.cast(pa.string())
    return a, b


def hash_join(left: pa.Table, right: pa.Table, kind: str, left_keys: Sequence[int], right_keys: Sequence[int],
              names: Sequence[str]) -> pa.Table:
    """Equi-join on key column positions; output is the left columns then the right columns,
    named ``names``. NULL keys never match, as in SQL."""
    if kind not in ("INNER", "LEFT"):
        raise UnsupportedError(f"{kind} JOIN is not supported")
    # Only the keys and each side's row numbers go through Arrow's join (it cannot carry list or
    # struct columns, such as arrays); the columns are then taken by row number.
    lcols = {"$l": pa.array(np.arange(left.num_rows, dtype=np.int64))}
    rcols = {"$r": pa.array(np.arange(right.num_rows, dtype=np.int64))}
    lkeys, rkeys = [], []
    for n, (i, j) in enumerate(zip(left_keys, right_keys)):
        a, b = _join_key(left.column(i), right.column(j))
        lcols[f"lk{n}"] = a
        rcols[f"rk{n}"] = b
        lkeys.append(f"lk{n}")
        rkeys.append(f"rk{n}")
    lt = decode_dictionaries(pa.table(lcols))
    rt = decode_dictionaries(pa.table(rcols))
    joined = lt.join(rt, keys=lkeys, right_keys=rkeys, join_type="inner" if kind == "INNER" else "left outer",
                     coalesce_keys=False, use_threads=True)
    lrows, rrows = joined.column("$l"), joined.column("$r")  # (a left row without a match: a null right row)
    left, right = decode_dictionaries(left), decode_dictionaries(right)
    columns = [left.column(i).take(lrows) for i in range(left.num_columns)] + \
        [right.column(j).take(rrows) for j in range(right.num_columns)]
    return pa.Table.from_arrays(columns, names=list(names))




def concat(tables: Sequence[pa.Table], fields: Sequence[Field], names: Sequence[str]) -> pa.Table:
    """UNION ALL: inputs' columns by position, cast to the union's types."""
    shaped = [shape(t, t.column_names, fields, names) for t in tables]
    if not shaped:
        return pa.Table.from_arrays([pa.array([], f.type.to_arrow()) for f in fields], names=list(names))
    return pa.concat_tables(shaped)


def constant_rows(rows: Sequence[Sequence], fields: Sequence[Field], names: Sequence[str]) -> pa.Table:
    """A table of literal rows. Zero columns still need a row count, so one hidden column is kept."""
    if not fields:
        return pa.table({"$row": pa.array([0] * len(rows), pa.int64())})
    columns = list(zip(*rows)) if rows else [[] for _ in fields]
    arrays = [pa.array(list(c), f.type.to_arrow()) for c, f in zip(columns, fields)]
    return pa.Table.from_arrays(arrays, names=list(names))
