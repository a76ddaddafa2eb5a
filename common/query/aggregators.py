"""Aggregators with a mergeable intermediate form: accumulate -> combine -> finalize.

``accumulate(columns, gid, G)`` reduces the selected rows of one segment into one intermediate
value per group (``gid`` numbers each row's group densely in [0, G)). ``combine`` reduces
intermediates the same way, which is how the broker merges historicals' partials and how
projections will re-aggregate. ``finalize`` turns an intermediate into the user-facing value.

Grouped reductions use numpy's unbuffered ``ufunc.at`` (exact int64 sums, no per-row Python).
SQL null semantics: COUNT is never null; SUM/MIN/MAX/ANY of a group with no non-null input is null.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.query.filters import Filter, filter_from_json, filter_to_json
from common.types.column_type import DOUBLE, FLOAT, LONG, STRING, STRING_ARRAY, ColumnType
from common.types.number_parsing import strings_to_double


def _input(cols, field_name: str | None, expression: str | None) -> pa.Array:
    if expression is not None:
        from common.expr import evaluate_column, parse

        return evaluate_column(parse(expression), cols, cols.num_rows, cols.types())
    return cols[field_name]


def _input_type(types, field_name: str | None, expression: str | None) -> ColumnType:
    if expression is not None:
        from common.expr import infer_type, parse

        return infer_type(parse(expression), types)
    if field_name not in types:
        from common.errors import unknown_name_message

        raise ValidationError(unknown_name_message("column", field_name, types))
    return types[field_name]


def _numpy_values(arr: pa.Array, dtype) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, valid mask or None when nothing is null); null slots hold zeros."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if pa.types.is_timestamp(arr.type):
        arr = arr.cast(pa.int64())
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = strings_to_double(arr)  # text that is not a number counts as null
        if dtype == np.int64:
            arr = arr.cast(pa.int64(), safe=False)
    if arr.null_count == 0:
        return arr.to_numpy(zero_copy_only=False).astype(dtype, copy=False), None
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    values = arr.fill_null(0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return values, valid


def _grouped(ufunc, values: np.ndarray, valid: np.ndarray | None, gid: np.ndarray, groups: int, init,
             dtype) -> tuple[np.ndarray, np.ndarray]:
    """Per-group reduction with ``ufunc`` and whether each group saw a non-null value."""
    if valid is not None:
        values, gid = values[valid], gid[valid]
    out = np.full(groups, init, dtype=dtype)
    with np.errstate(invalid="ignore"):  # NaN inputs give NaN (max) or are skipped (fmin): no warning
        return _reduce_groups(ufunc, values, gid, groups, out)


def _reduce_groups(ufunc, values: np.ndarray, gid: np.ndarray, groups: int, out: np.ndarray):
    if len(gid) and _is_sorted_runs(gid):
        # Rows sorted by group (time buckets of a time-sorted segment): one pass, no scatter.
        starts = np.flatnonzero(np.concatenate(([True], gid[1:] != gid[:-1])))
        out[gid[starts]] = ufunc.reduceat(values, starts)
        has = np.zeros(groups, dtype=bool)
        has[gid[starts]] = True
        return out, has
    ufunc.at(out, gid, values)
    return out, np.bincount(gid, minlength=groups) > 0


def _run_sums(values: pa.Array, groups, dtype) -> np.ndarray | None:
    """Per-group sums of ``values`` when the rows are sorted by group (``groups.run_starts``) and
    none is null: what ``_grouped(np.add, ...)`` gives for them (it reduces sorted runs the same
    way); None otherwise."""
    starts = groups.run_starts
    if starts is None or not len(starts) or values.null_count:
        return None
    v, valid = _numpy_values(values, dtype)
    return np.add.reduceat(v, starts) if valid is None else None  # text that is not a number is null


def _is_sorted_runs(gid: np.ndarray) -> bool:
    return bool(gid[0] <= gid[-1]) and bool(np.all(gid[1:] >= gid[:-1]))


@dataclass(frozen=True)
class Aggregator:
    name: str

    # Whether ``combine`` over the concatenated intermediates of several segments' projection rows
    # is as good as combining each segment's and then their partials (see
    # grouped_engine.run_together). Sketches say no: they decode each stored column once and keep
    # the decoding with the segment's file (``combine_parts``' ``keeps``), which a concatenation
    # of several segments' columns would defeat; they combine each source's rows instead.
    combines_concatenated = True

    def columns(self) -> frozenset[str]:
        return frozenset()

    def result_type(self, types) -> ColumnType:
        raise NotImplementedError

    def accumulate(self, cols, gid: np.ndarray, groups: int) -> pa.Array:
        raise NotImplementedError

    def combine(self, values: pa.Array, gid: np.ndarray, groups: int) -> pa.Array:
        raise NotImplementedError

    def combine_groups(self, values: pa.Array, groups) -> pa.Array:
        """``combine`` over the rows of ``groups`` (a ``grouping.Groups``). When the rows come
        sorted by group (its ``run_starts``: time buckets of projection rows), the simple
        aggregators reduce each run with one call instead of first checking the group ids for it."""
        return self.combine(values, groups.gid, groups.count)

    def combine_parts(self, parts: list[pa.Array], gids: list[np.ndarray], groups: int, keeps=None) -> pa.Array:
        """``combine`` over several sources' intermediates (``parts``, their rows' group ids in
        ``gids``), for aggregators that do not combine concatenated. ``keeps``: per part, None or
        its source's ``RowSource.derived`` for the stored column the part is all of, to keep what
        is computed from it with the segment's file (see ``HllSketch``)."""
        values = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        return self.combine(values, np.concatenate(gids) if len(gids) > 1 else gids[0], groups)

    def finalize(self, values: pa.Array) -> pa.Array:
        return values

    def accumulate_empty(self, types, groups: int) -> pa.Array:
        """Intermediates of groups that saw no rows (zero-filled time buckets)."""
        return pa.nulls(groups, self.result_type(types).to_arrow())

    def to_json(self) -> dict:
        raise NotImplementedError


@dataclass(frozen=True)
class Count(Aggregator):
    def result_type(self, types) -> ColumnType:
        return LONG

    def accumulate(self, cols, gid, groups):
        return pa.array(np.bincount(gid, minlength=groups).astype(np.int64))

    def combine(self, values, gid, groups):
        v, _ = _numpy_values(values, np.int64)
        return pa.array(_grouped(np.add, v, None, gid, groups, 0, np.int64)[0])

    def combine_groups(self, values, groups):
        runs = _run_sums(values, groups, np.int64)
        return pa.array(runs) if runs is not None else self.combine(values, groups.gid, groups.count)

    def accumulate_empty(self, types, groups):
        return pa.array(np.zeros(groups, dtype=np.int64))

    def to_json(self):
        return {"type": "count", "name": self.name}


_KIND_TYPES = {"long": LONG, "double": DOUBLE, "float": FLOAT}


@dataclass(frozen=True)
class _FieldAggregator(Aggregator):
    field_name: str | None = None
    expression: str | None = None
    kind: str = "double"  # long | double | float

    def columns(self) -> frozenset[str]:
        if self.expression is not None:
            from common.expr import parse

            return frozenset(parse(self.expression).columns())
        return frozenset([self.field_name])

    def result_type(self, types) -> ColumnType:
        return _KIND_TYPES[self.kind]

    def _dtype(self):
        return np.int64 if self.kind == "long" else np.float64

    def _json_base(self, druid_op: str) -> dict:
        out = {"type": f"{self.kind}{druid_op}", "name": self.name}
        if self.expression is not None:
            out["expression"] = self.expression
        else:
            out["fieldName"] = self.field_name
        return out

    def _arrow(self, values: np.ndarray, has: np.ndarray) -> pa.Array:
        target = _KIND_TYPES[self.kind].to_arrow()
        arr = pa.array(values, mask=~has)
        return arr.cast(target) if arr.type != target else arr

    def _check_input(self, cols) -> None:
        ctype = _input_type(cols.types(), self.field_name, self.expression)
        if not (ctype.is_numeric or ctype.is_string):
            what = self.expression or self.field_name
            raise ValidationError(f"aggregator '{self.name}' needs a number, but '{what}' is {ctype.sql_name}")


@dataclass(frozen=True)
class Sum(_FieldAggregator):
    def accumulate(self, cols, gid, groups):
        self._check_input(cols)
        return self._reduce(_input(cols, self.field_name, self.expression), gid, groups)

    def _reduce(self, arr, gid, groups):
        v, valid = _numpy_values(arr, self._dtype())
        return self._arrow(*_grouped(np.add, v, valid, gid, groups, 0, self._dtype()))

    combine = _reduce

    def combine_groups(self, values, groups):
        runs = _run_sums(values, groups, self._dtype())
        if runs is None:
            return self._reduce(values, groups.gid, groups.count)
        arr = pa.array(runs)
        target = _KIND_TYPES[self.kind].to_arrow()
        return arr.cast(target) if arr.type != target else arr

    def to_json(self):
        return self._json_base("Sum")


@dataclass(frozen=True)
class Min(_FieldAggregator):
    def _reduce(self, arr, gid, groups):
        v, valid = _numpy_values(arr, self._dtype())
        init = np.iinfo(np.int64).max if self.kind == "long" else np.inf
        if self.kind == "long":
            return self._arrow(*_grouped(np.minimum, v, valid, gid, groups, init, self._dtype()))
        # NaN orders above every number (as in DuckDB and Java's Double.compare), so the minimum
        # skips NaN unless a group holds nothing else.
        out, has = _grouped(np.fmin, v, valid, gid, groups, init, self._dtype())
        nan = np.isnan(v) if valid is None else np.isnan(v) & valid
        if nan.any():
            counted = gid if valid is None else gid[valid]
            numbers = np.bincount(counted[~np.isnan(v if valid is None else v[valid])], minlength=groups)
            out = np.where(has & (numbers == 0), np.nan, out)
        return self._arrow(out, has)

    def accumulate(self, cols, gid, groups):
        self._check_input(cols)
        return self._reduce(_input(cols, self.field_name, self.expression), gid, groups)

    combine = _reduce

    def to_json(self):
        return self._json_base("Min")


@dataclass(frozen=True)
class Max(_FieldAggregator):
    def _reduce(self, arr, gid, groups):
        v, valid = _numpy_values(arr, self._dtype())
        init = np.iinfo(np.int64).min if self.kind == "long" else -np.inf
        return self._arrow(*_grouped(np.maximum, v, valid, gid, groups, init, self._dtype()))

    def accumulate(self, cols, gid, groups):
        self._check_input(cols)
        return self._reduce(_input(cols, self.field_name, self.expression), gid, groups)

    combine = _reduce

    def to_json(self):
        return self._json_base("Max")


def _first_index(gid: np.ndarray, valid: np.ndarray, groups: int, order_key: np.ndarray | None = None,
                 earliest: bool = True) -> np.ndarray:
    """Per group, the row index chosen (-1 if none): first valid row, or the valid row with the
    smallest (``earliest``) / largest order key, ties going to the earliest row."""
    n = len(gid)
    idx = np.arange(n, dtype=np.int64)
    g, i = gid[valid], idx[valid]
    if order_key is not None:
        k = order_key[valid]
        best = np.full(groups, np.iinfo(np.int64).max if earliest else np.iinfo(np.int64).min, dtype=np.int64)
        (np.minimum if earliest else np.maximum).at(best, g, k)
        keep = k == best[g]
        g, i = g[keep], i[keep]
    first = np.full(groups, n, dtype=np.int64)
    np.minimum.at(first, g, i)
    first[first == n] = -1
    return first


def _as_arrow_type(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type == target:
        return arr
    if pa.types.is_string(arr.type) and not pa.types.is_string(target):
        return strings_to_double(arr).cast(target, safe=False)
    return arr.cast(target, safe=False)


def _take_or_null(arr: pa.Array, picks: np.ndarray) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    return arr.take(pa.array(picks, pa.int64(), mask=picks < 0))


@dataclass(frozen=True)
class AnyValue(Aggregator):
    field_name: str = ""
    kind: str = "string"  # string | long | double | float | array

    def columns(self):
        return frozenset([self.field_name])

    def result_type(self, types):
        if self.kind == "array":  # the input's own array type
            t = types.get(self.field_name) if hasattr(types, "get") else None
            return t if t is not None and t.is_array else STRING_ARRAY
        return STRING if self.kind == "string" else _KIND_TYPES[self.kind]

    def _reduce(self, arr, gid, groups):
        if pa.types.is_dictionary(arr.type):
            arr = arr.cast(arr.type.value_type)
        if self.kind != "array":
            arr = _as_arrow_type(arr, self.result_type({}).to_arrow())
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        return _take_or_null(arr, _first_index(gid, valid, groups))

    def accumulate(self, cols, gid, groups):
        return self._reduce(cols[self.field_name], gid, groups)

    combine = _reduce

    def to_json(self):
        return {"type": f"{self.kind}Any", "name": self.name, "fieldName": self.field_name}


@dataclass(frozen=True)
class StringMinMax(Aggregator):
    """MIN/MAX of text (Druid's ``stringMin``/``stringMax``): the smallest or largest value in
    code point order (UTF-8 byte order, as DuckDB and Arrow sort); NULLs are skipped. The
    intermediate is the chosen text itself, so combining is the same reduction again."""

    field_name: str = ""
    largest: bool = False

    def columns(self):
        return frozenset([self.field_name])

    def result_type(self, types):
        return STRING

    def _reduce(self, arr, gid, groups):
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_dictionary(arr.type):
            # Rank the (small) dictionary once and look the rows' ranks up through their indices.
            values = _as_arrow_type(arr.dictionary, pa.string())
            dict_rank = pc.rank(values, sort_keys="ascending", tiebreaker="dense").to_numpy(zero_copy_only=False)
            indices = arr.indices.fill_null(0).to_numpy(zero_copy_only=False)
            rank = dict_rank.astype(np.int64)[indices] if len(dict_rank) else np.zeros(len(arr), dtype=np.int64)
            valid = arr.is_valid().to_numpy(zero_copy_only=False) & values.is_valid().to_numpy(
                zero_copy_only=False)[indices] if len(dict_rank) else np.zeros(len(arr), dtype=bool)
            arr = arr.cast(arr.type.value_type)
        else:
            arr = _as_arrow_type(arr, pa.string())
            rank = pc.rank(arr, sort_keys="ascending", tiebreaker="dense").to_numpy(zero_copy_only=False)
            rank = rank.astype(np.int64)
            valid = arr.is_valid().to_numpy(zero_copy_only=False)
        arr = _as_arrow_type(arr, pa.string())
        return _take_or_null(arr, _first_index(gid, valid, groups, rank, earliest=not self.largest))

    def accumulate(self, cols, gid, groups):
        return self._reduce(cols[self.field_name], gid, groups)

    combine = _reduce

    def to_json(self):
        return {"type": "stringMax" if self.largest else "stringMin", "name": self.name,
                "fieldName": self.field_name}


@dataclass(frozen=True)
class EarliestLatest(Aggregator):
    """Value at the smallest (earliest) or largest (latest) ``__time``; intermediate keeps the time."""

    field_name: str = ""
    kind: str = "string"
    latest: bool = False
    time_column: str = "__time"

    def columns(self):
        return frozenset([self.field_name])

    def result_type(self, types):
        if self.kind == "array":  # the input's own array type
            t = types.get(self.field_name) if hasattr(types, "get") else None
            return t if t is not None and t.is_array else STRING_ARRAY
        return STRING if self.kind == "string" else _KIND_TYPES[self.kind]

    def _pick(self, values: pa.Array, times: np.ndarray, gid, groups) -> pa.Array:
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        if self.kind != "array":
            values = _as_arrow_type(values, self.result_type({}).to_arrow())
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        picks = _first_index(gid, valid, groups, times, earliest=not self.latest)
        t = pa.array(times, pa.int64()).take(pa.array(picks, pa.int64(), mask=picks < 0))
        return pa.StructArray.from_arrays([t, _take_or_null(values, picks)], names=["t", "v"])

    def accumulate(self, cols, gid, groups):
        values = cols[self.field_name]
        if self.time_column == "__time":
            times = cols.time()
        else:
            times, has_time = _numpy_values(cols[self.time_column], np.int64)
            if has_time is not None:  # a row without a time is never the earliest or latest
                if isinstance(values, pa.ChunkedArray):
                    values = values.combine_chunks()
                if pa.types.is_dictionary(values.type):
                    values = values.cast(values.type.value_type)
                values = pc.if_else(pa.array(has_time), values, pa.nulls(len(values), values.type))
        return self._pick(values, times, gid, groups)

    def combine(self, values, gid, groups):
        t = values.field("t")
        tv = t.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return self._pick(values.field("v"), tv, gid, groups)

    def finalize(self, values):
        return values.field("v")

    def accumulate_empty(self, types, groups):
        return pa.StructArray.from_arrays([pa.nulls(groups, pa.int64()), pa.nulls(groups, self.result_type(types).to_arrow())],
                                          names=["t", "v"])

    def to_json(self):
        op = "Last" if self.latest else "First"
        out = {"type": f"{self.kind}{op}", "name": self.name, "fieldName": self.field_name}
        if self.time_column != "__time":
            out["timeColumn"] = self.time_column
        return out


@dataclass(frozen=True)
class Filtered(Aggregator):
    filter: Filter = None
    aggregator: Aggregator = None

    def columns(self):
        return self.aggregator.columns() | self.filter.columns()

    def result_type(self, types):
        return self.aggregator.result_type(types)

    def accumulate(self, cols, gid, groups):
        from common.query.selection import evaluate_values

        mask = evaluate_values(self.filter, cols)
        return self.aggregator.accumulate(cols.subset(mask), gid[mask], groups)

    def combine(self, values, gid, groups):
        return self.aggregator.combine(values, gid, groups)

    def combine_groups(self, values, groups):
        return self.aggregator.combine_groups(values, groups)

    @property
    def combines_concatenated(self) -> bool:
        return self.aggregator.combines_concatenated

    def combine_parts(self, parts, gids, groups, keeps=None):
        return self.aggregator.combine_parts(parts, gids, groups, keeps)

    def finalize(self, values):
        return self.aggregator.finalize(values)

    def accumulate_empty(self, types, groups):
        return self.aggregator.accumulate_empty(types, groups)

    def to_json(self):
        return {"type": "filtered", "name": self.name, "filter": filter_to_json(self.filter),
                "aggregator": self.aggregator.to_json()}


def _lists_by_group(table: pa.Table, groups: int, has: np.ndarray, list_type: pa.DataType) -> pa.Array:
    """One list per group of ``table``'s ``v`` values (``table`` sorted by group id ``g``), null
    for a group where ``has`` is False, as ``list_type``."""
    counts = np.bincount(table.column("g").to_numpy(), minlength=groups) if table.num_rows else \
        np.zeros(groups, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    out = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), table.column("v").combine_chunks(),
                                   mask=pa.array(~has))
    return out.cast(list_type) if out.type != list_type else out


@dataclass(frozen=True)
class ArrayConcat(Aggregator):
    """ARRAY_CONCAT_AGG: the arrays of a group concatenated in row order; with ``distinct``, the
    set of their elements, sorted with null first (as Druid's ARRAY_CONCAT_AGG(DISTINCT ..) builds
    it). A group with no non-null array is null."""

    field_name: str = ""
    distinct: bool = False

    def columns(self):
        return frozenset([self.field_name])

    def result_type(self, types):
        t = types.get(self.field_name) if hasattr(types, "get") else None
        if t is None or not t.is_array:
            from common.types.column_type import STRING_ARRAY

            return STRING_ARRAY if t is None or t.is_string else ColumnType.parse(f"ARRAY<{t.native_name}>")
        return t

    def accumulate(self, cols, gid, groups):
        values = cols[self.field_name]
        if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
            raise ValidationError(f"aggregator '{self.name}' (ARRAY_CONCAT_AGG) needs an array, but "
                                  f"'{self.field_name}' is {values.type}")
        return self._reduce(values, gid, groups)

    def combine(self, values, gid, groups):
        return self._reduce(values, gid, groups)

    def _reduce(self, values: pa.Array, gid: np.ndarray, groups: int) -> pa.Array:
        import pyarrow.compute as pc

        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        has = np.zeros(groups, dtype=bool)
        present = values.is_valid().to_numpy(zero_copy_only=False)
        has[gid[present]] = True
        parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
        elements = pc.list_flatten(values)
        table = pa.table({"g": pa.array(gid[parents] if len(parents) else np.zeros(0, np.int64), pa.int64()),
                          "i": pa.array(np.arange(len(parents), dtype=np.int64)), "v": elements})
        if self.distinct:
            table = table.group_by(["g", "v"], use_threads=False).aggregate([])
            table = table.sort_by([("g", "ascending"), ("v", "ascending", "at_start")])  # null first, as Druid
        else:
            table = table.sort_by([("g", "ascending"), ("i", "ascending")])
        return _lists_by_group(table, groups, has, values.type)

    def to_json(self):
        return {"type": "arrayConcat", "name": self.name, "fieldName": self.field_name, "distinct": self.distinct}


@dataclass(frozen=True)
class ArrayAgg(ArrayConcat):
    """ARRAY_AGG: the values of a group (nulls included) as one array, in row order; with
    ``distinct``, each value once, sorted with null first. A group that saw no rows is null. The
    intermediate is that array, so merging partials is ARRAY_CONCAT_AGG's reduction."""

    def result_type(self, types):
        t = types.get(self.field_name) if hasattr(types, "get") else None
        if t is None or t.is_string:
            return STRING_ARRAY
        element = "LONG" if t.kind.value in ("TIMESTAMP", "LONG") else "DOUBLE"
        return ColumnType.parse(f"ARRAY<{element}>")

    def accumulate(self, cols, gid, groups):
        values = cols[self.field_name]
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
            raise ValidationError(f"aggregator '{self.name}' (ARRAY_AGG) needs single values, but "
                                  f"'{self.field_name}' is an array; use arrayConcat")
        if pa.types.is_timestamp(values.type) or pa.types.is_boolean(values.type):
            values = values.cast(pa.int64())
        target = self.result_type(cols.types() if hasattr(cols, "types") else {}).element.to_arrow()
        values = _as_arrow_type(values, target)
        offsets = pa.array(np.arange(len(values) + 1, dtype=np.int32))
        return self._reduce(pa.ListArray.from_arrays(offsets, values), gid, groups)

    def _reduce(self, values, gid, groups):
        if not self.distinct:
            return super()._reduce(values, gid, groups)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        has = np.zeros(groups, dtype=bool)
        has[gid[values.is_valid().to_numpy(zero_copy_only=False)]] = True
        parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
        g = gid[parents] if len(parents) else np.zeros(0, np.int64)
        table = pa.table({"g": pa.array(g, pa.int64()), "v": pc.list_flatten(values)})
        table = table.group_by(["g", "v"], use_threads=False).aggregate([])
        table = table.sort_by([("g", "ascending"), ("v", "ascending", "at_start")])
        return _lists_by_group(table, groups, has, values.type)

    def to_json(self):
        return {"type": "arrayAgg", "name": self.name, "fieldName": self.field_name, "distinct": self.distinct}


_SIMPLE = {"Sum": Sum, "Min": Min, "Max": Max}


def aggregator_from_json(obj: dict) -> Aggregator:
    from common.query.sketch_aggregators import HllSketch

    if not isinstance(obj, dict) or "type" not in obj:
        raise ValidationError(f"each of 'aggregations' must be an aggregator object with a 'type', got {obj!r:.200}")
    kind = obj["type"]
    name = obj.get("name")
    for key in ("name", "fieldName", "expression", "timeColumn"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise ValidationError(f"aggregator '{key}' must be a string, got {obj[key]!r:.200}")
    if kind == "filtered":
        inner = aggregator_from_json(obj["aggregator"])
        return Filtered(name or inner.name, filter_from_json(obj["filter"]), inner)
    if not name:
        raise ValidationError(f"aggregator of type '{kind}' needs a 'name'")
    if kind == "count":
        return Count(name)
    if kind in ("stringMin", "stringMax"):
        if not obj.get("fieldName"):
            raise ValidationError(f"aggregator '{name}' ({kind}) needs 'fieldName'")
        return StringMinMax(name, obj["fieldName"], kind == "stringMax")
    if kind == "arrayAgg":
        return ArrayAgg(name, obj.get("fieldName") or "", bool(obj.get("distinct", False)))
    if kind == "arrayConcat":
        return ArrayConcat(name, obj.get("fieldName") or "", bool(obj.get("distinct", False)))
    if kind in ("HLLSketchBuild", "HLLSketch", "approxCountDistinct"):
        return HllSketch(name, obj.get("fieldName"), obj.get("expression"), int(obj.get("lgK", 12)),
                         bool(obj.get("round", False)))
    for prefix in ("long", "double", "float"):
        for op, cls in _SIMPLE.items():
            if kind == f"{prefix}{op}":
                if obj.get("fieldName") is None and obj.get("expression") is None:
                    raise ValidationError(f"aggregator '{name}' ({kind}) needs 'fieldName' or 'expression'")
                return cls(name, obj.get("fieldName"), obj.get("expression"), prefix)
    for prefix in ("string", "long", "double", "float", "array"):
        if kind == f"{prefix}Any":
            return AnyValue(name, obj["fieldName"], prefix)
        if kind in (f"{prefix}First", f"{prefix}Last"):
            return EarliestLatest(name, obj["fieldName"], prefix, kind.endswith("Last"), obj.get("timeColumn", "__time"))
    valid = ["count", "longSum", "doubleSum", "floatSum", "longMin", "longMax", "doubleMin", "doubleMax", "floatMin",
             "floatMax", "stringAny", "longAny", "doubleAny", "arrayAny", "stringFirst", "stringLast", "longFirst",
             "longLast", "doubleFirst", "doubleLast", "arrayFirst", "arrayLast", "filtered", "HLLSketchBuild",
             "arrayConcat", "arrayAgg", "stringMin", "stringMax"]
    raise ValidationError(f"unknown aggregator type '{kind}'; valid types: {', '.join(valid)}")


__all__ = ["Aggregator", "AnyValue", "ArrayAgg", "ArrayConcat", "Count", "EarliestLatest", "Filtered", "Max", "Min",
           "StringMinMax", "Sum", "aggregator_from_json"]
