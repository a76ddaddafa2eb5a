"""Ordering of result tables with per-key direction and null placement (SQL: NULLS FIRST for
ascending, NULLS LAST for descending, unless a key says otherwise)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.types.number_parsing import strings_to_double


@dataclass(frozen=True)
class SortKey:
    column: str
    descending: bool = False
    nulls_first: bool | None = None  # None: first when ascending, last when descending
    numeric: bool | None = None  # force numeric (True) or lexicographic (False) comparison


def _plain(t: pa.DataType, key: SortKey) -> bool:
    """Whether Arrow sorts values of type ``t`` under ``key`` as strata orders them, as they are."""
    if pa.types.is_dictionary(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_floating(t):
        return False
    if key.numeric is True:
        return _is_numeric(t)
    if key.numeric is False:
        return not _is_numeric(t)
    return True


def sort_indices(table: pa.Table, keys: list[SortKey]) -> pa.Array:
    # Keys whose columns Arrow sorts as they are (integers, strings, timestamps: no dictionary,
    # list, NaN or numeric/text conversion) go to Arrow directly, without a copy of the columns.
    schema = table.schema
    direct = []
    for k in keys:
        if schema.get_all_field_indices(k.column) != [schema.get_field_index(k.column)] or \
                not _plain(schema.field(k.column).type, k):
            direct = None
            break
        nulls_first = (not k.descending) if k.nulls_first is None else k.nulls_first
        direct.append((k.column, "descending" if k.descending else "ascending", "at_start" if nulls_first else "at_end"))
    if direct:
        return pc.sort_indices(table, sort_keys=direct)
    cols, sort_keys = {}, []
    for i, k in enumerate(keys):
        values = table.column(k.column)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
            values = _array_ranks(values)
        if k.numeric is True and not _is_numeric(values.type):
            values = strings_to_double(values)
        elif k.numeric is False and _is_numeric(values.type):
            values = values.cast(pa.string())
        nulls_first = (not k.descending) if k.nulls_first is None else k.nulls_first
        order, placement = "descending" if k.descending else "ascending", "at_start" if nulls_first else "at_end"
        if pa.types.is_floating(values.type):
            # NaN orders above every number (DuckDB, Java's Double.compare); Arrow would put it
            # next to the nulls, so it gets a key of its own first.
            cols[f"n{i}"] = pc.is_nan(values)
            sort_keys.append((f"n{i}", order, placement))
        cols[f"v{i}"] = values
        sort_keys.append((f"v{i}", order, placement))
    if not sort_keys:
        return pa.array(range(table.num_rows), pa.int64())
    return pc.sort_indices(pa.table(cols), sort_keys=sort_keys)


def _array_ranks(values: pa.Array) -> pa.Array:
    """Arrays order element by element (a prefix first; a null element before any value), as
    Druid orders ARRAY values; Arrow cannot sort lists, so each row gets its array's rank."""
    from common.query.grouping import codes_from_lists

    keys = codes_from_lists(values)
    distinct = keys.values.to_pylist()  # one per distinct array: few, since these are grouped results

    def order(i: int):
        v = distinct[i]
        return (0,) if v is None else (1, tuple((0, 0) if e is None else (1, e) for e in v))

    rank = np.empty(len(distinct), dtype=np.int64)
    rank[sorted(range(len(distinct)), key=order)] = np.arange(len(distinct))
    return pa.array(rank[keys.codes], pa.int64(), mask=(keys.codes == 0))


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)


def sort_table(table: pa.Table, keys: list[SortKey]) -> pa.Table:
    if not keys or table.num_rows <= 1:
        return table
    return table.take(sort_indices(table, keys))
