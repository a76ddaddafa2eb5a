"""Row selection: query intervals and filters turned into the rows a query reads.

Two tiers, as in Druid:
- the *pre-filter* is answered from indexes alone: time ranges of the time-sorted segment and,
  for string columns, the sorted dictionary plus per-value Roaring bitmaps (equality and IN are
  binary searches, ranges and LIKE prefixes are runs of ids, other LIKE/regex predicates run
  once per distinct value);
- the *post-filter* evaluates the remaining filters on values of just the pre-selected rows.

Null handling is SQL's three-valued logic. Every evaluator takes ``include_unknown``: whether
rows where the predicate is unknown (null inputs) count as matches. NOT flips it, so that
``NOT (x = 'a')`` excludes rows where x is null, as SQL requires.
"""

from __future__ import annotations

import array
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.errors import ValidationError
from common.query.filters import (
    And,
    Equals,
    ExpressionFilter,
    FalseFilter,
    Filter,
    In,
    Like,
    NullFilter,
    Not,
    Or,
    Range,
    Regex,
    TrueFilter,
)
from common.query.row_source import ColumnSource, RowSource, interval_rows
from common.types.column_type import ColumnType, TypeKind
from common.types.number_parsing import strings_to_double
from common.types.interval import Interval, parse_instant

# Above this many matching dictionary ids, reading codes beats unioning that many bitmaps.
MAX_BITMAPS_TO_UNION = 64


@dataclass
class Selection:
    columns: ColumnSource
    rows_after_prefilter: int


def _bitmap_of(ids: np.ndarray) -> BitMap:
    buf = array.array("I")
    buf.frombytes(np.ascontiguousarray(ids, dtype=np.uint32).tobytes())
    return BitMap(buf)


def _all_rows(n: int) -> BitMap:
    bm = BitMap()
    if n:
        bm.add_range(0, n)
    return bm


class _Selector:
    def __init__(self, source: RowSource, virtual_names: set[str], expected: dict[str, ColumnType]) -> None:
        self.source = source
        self.virtual_names = virtual_names
        self.expected = expected
        self.n = source.num_rows

    # ---- which filters the index can answer ----------------------------------------------------
    def _indexed(self, column: str) -> bool:
        if column in self.virtual_names:
            return False
        if column not in self.source.schema:
            return True  # a missing column is all nulls: trivially answerable
        if column in self.expected and self.expected[column] != self.source.schema[column]:
            return False  # declared type differs: compare converted values
        return self.source.string_index(column) is not None

    def can_index(self, f: Filter) -> bool:
        if isinstance(f, (TrueFilter, FalseFilter)):
            return True
        if isinstance(f, (And, Or)):
            return all(self.can_index(c) for c in f.fields)
        if isinstance(f, Not):
            return self.can_index(f.field)
        if isinstance(f, (Equals, In, Range, Like, Regex, NullFilter)):
            return self._indexed(f.column)
        return False

    # ---- index evaluation -> BitMap --------------------------------------------------------------
    def index(self, f: Filter, include_unknown: bool) -> BitMap:
        if isinstance(f, TrueFilter):
            return _all_rows(self.n)
        if isinstance(f, FalseFilter):
            return BitMap()
        if isinstance(f, And):
            out = None
            for child in f.fields:
                bm = self.index(child, include_unknown)
                out = bm if out is None else out & bm
                if not out:
                    break
            return out
        if isinstance(f, Or):
            return BitMap.union(*(self.index(c, include_unknown) for c in f.fields))
        if isinstance(f, Not):
            inner = self.index(f.field, not include_unknown)
            return _all_rows(self.n) - inner
        column = f.column
        # Druid's IN matches null rows when its list holds a null.
        matches_null = isinstance(f, NullFilter) or (isinstance(f, In) and any(v is None for v in f.values))
        if column not in self.source.schema:
            return _all_rows(self.n) if matches_null or include_unknown else BitMap()
        idx = self.source.string_index(column)
        if isinstance(f, NullFilter):
            return idx.null_bitmap()
        ids = self._matching_ids(f, idx)
        out = self._rows_for_ids(idx, ids)
        if include_unknown or matches_null:
            out |= idx.null_bitmap()
        return out

    def _matching_ids(self, f: Filter, idx) -> np.ndarray | tuple[int, int]:
        """Dictionary ids matching ``f``: an array of ids, or a contiguous (lo, hi) run."""
        if isinstance(f, Equals):
            if _is_numeric_match(f.value, f.value_type):
                return _numeric_dictionary_ids(idx.dictionary, lambda d: pc.equal(d, float(f.value)))
            code = idx.lookup(_as_string(f.value))
            return np.array([] if code is None else [code], dtype=np.int64)
        if isinstance(f, In):
            codes = {idx.lookup(_as_string(v)) for v in f.values if v is not None}
            codes.discard(None)
            return np.array(sorted(codes), dtype=np.int64)
        if isinstance(f, Range):
            if f.value_type and f.value_type.upper() in ("LONG", "DOUBLE", "FLOAT"):
                return _numeric_dictionary_ids(idx.dictionary, lambda d: _range_mask(d, f, float))
            lower = None if f.lower is None else _as_string(f.lower)
            upper = None if f.upper is None else _as_string(f.upper)
            return idx.code_range(lower, upper, f.lower_open, f.upper_open)
        if isinstance(f, Like):
            prefix, is_prefix_only = f.literal_prefix()
            if is_prefix_only:
                return idx.prefix_range(prefix)
            lo, hi = idx.prefix_range(prefix)
            candidates = idx.dictionary.slice(lo, hi - lo)
            hits = pc.match_like(candidates, _like_to_arrow(f.pattern, f.escape))
            return np.flatnonzero(hits.to_numpy(zero_copy_only=False)) + lo
        if isinstance(f, Regex):
            hits = pc.match_substring_regex(idx.dictionary, f.pattern)
            return np.flatnonzero(hits.to_numpy(zero_copy_only=False))
        raise ValidationError(f"filter {f!r} cannot use an index")

    def _rows_for_ids(self, idx, ids) -> BitMap:
        if isinstance(ids, tuple):
            lo, hi = ids
            if hi - lo <= MAX_BITMAPS_TO_UNION:
                return BitMap.union(*(idx.bitmap(c) for c in range(lo, hi))) if hi > lo else BitMap()
            codes = idx.codes()
            return _bitmap_of(np.flatnonzero((codes >= lo) & (codes < hi)))
        if len(ids) <= MAX_BITMAPS_TO_UNION:
            return BitMap.union(*(idx.bitmap(int(c)) for c in ids)) if len(ids) else BitMap()
        match = np.zeros(idx.cardinality + 1, dtype=bool)
        match[ids] = True
        codes = idx.codes()
        return _bitmap_of(np.flatnonzero(match[codes]))


# ---- value evaluation -> numpy bool mask over the ColumnSource's rows -----------------------------
def _mask(arr: pa.Array, include_unknown: bool) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.fill_null(include_unknown).to_numpy(zero_copy_only=False).astype(bool, copy=False)


def _apply(values: pa.Array, predicate) -> pa.Array:
    """Run ``predicate`` once per distinct value for dictionary arrays, else per row."""
    if pa.types.is_dictionary(values.type):
        per_value = predicate(values.dictionary)
        return per_value.take(values.indices)
    return predicate(values)


def evaluate_values(f: Filter, cols: ColumnSource, include_unknown: bool = False) -> np.ndarray:
    n = cols.num_rows
    if isinstance(f, TrueFilter):
        return np.ones(n, dtype=bool)
    if isinstance(f, FalseFilter):
        return np.zeros(n, dtype=bool)
    if isinstance(f, And):
        out = np.ones(n, dtype=bool)
        for child in f.fields:
            out &= evaluate_values(child, cols, include_unknown)
        return out
    if isinstance(f, Or):
        out = np.zeros(n, dtype=bool)
        for child in f.fields:
            out |= evaluate_values(child, cols, include_unknown)
        return out
    if isinstance(f, Not):
        return ~evaluate_values(f.field, cols, not include_unknown)
    if isinstance(f, ExpressionFilter):
        from common.expr import evaluate_predicate, parse

        return _mask(evaluate_predicate(parse(f.expression), cols, n), include_unknown)
    ctype = cols.type_of(f.column)
    values = cols[f.column]
    if isinstance(f, NullFilter):
        return values.is_null().to_numpy(zero_copy_only=False)
    return _mask(_apply(values, _value_predicate(f, ctype)), include_unknown)


def _value_predicate(f: Filter, ctype: ColumnType):
    column = f.column
    if isinstance(f, Equals):
        if ctype.is_string and _is_numeric_match(f.value, f.value_type):
            return lambda v: pc.equal(_to_double(v), float(f.value))
        target = _coerce(f.value, ctype, column)
        return lambda v: pc.equal(_comparable(v, ctype), target)
    if isinstance(f, In):
        targets = [_coerce(v, ctype, column) for v in f.values if v is not None]
        wants_null = any(v is None for v in f.values)
        value_set = pa.array(targets, type=_comparable_type(ctype)) if targets else None

        def pred(v):
            comp = _comparable(v, ctype)
            hit = pc.is_in(comp, value_set=value_set) if value_set is not None else pc.and_(comp.is_null(), False)
            hit = pc.if_else(comp.is_null(), pa.scalar(None, pa.bool_()), hit)
            return pc.or_kleene(hit, comp.is_null()) if wants_null else hit
        return pred
    if isinstance(f, Range):
        if ctype.is_string and f.value_type and f.value_type.upper() in ("LONG", "DOUBLE", "FLOAT"):
            return lambda v: _range_mask(_to_double(v), f, float)
        return lambda v: _range_mask(_comparable(v, ctype), f, lambda x: _coerce(x, ctype, column))
    if isinstance(f, Like):
        pattern = _like_to_arrow(f.pattern, f.escape)
        return lambda v: pc.match_like(_as_strings(v), pattern)
    if isinstance(f, Regex):
        return lambda v: pc.match_substring_regex(_as_strings(v), f.pattern)
    raise ValidationError(f"unsupported filter {f!r}")


def _range_mask(values: pa.Array, f: Range, coerce) -> pa.Array:
    out = None
    if f.lower is not None:
        lo = coerce(f.lower)
        out = pc.greater(values, lo) if f.lower_open else pc.greater_equal(values, lo)
    if f.upper is not None:
        hi = coerce(f.upper)
        up = pc.less(values, hi) if f.upper_open else pc.less_equal(values, hi)
        out = up if out is None else pc.and_kleene(out, up)
    if out is None:
        out = pc.invert(values.is_null())
        out = pc.if_else(out, True, pa.scalar(None, pa.bool_()))
    return out


def _is_numeric_match(value, value_type) -> bool:
    if value_type:
        return value_type.upper() in ("LONG", "DOUBLE", "FLOAT")
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_string(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 2**53 else repr(value)
    return str(value)


def _as_strings(values: pa.Array) -> pa.Array:
    return values if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) else values.cast(pa.string())


def _to_double(values: pa.Array) -> pa.Array:
    return strings_to_double(values)


def _numeric_dictionary_ids(dictionary: pa.Array, predicate) -> np.ndarray:
    hits = predicate(_to_double(dictionary))
    return np.flatnonzero(hits.fill_null(False).to_numpy(zero_copy_only=False))


def _comparable_type(ctype: ColumnType) -> pa.DataType:
    if ctype.kind is TypeKind.TIMESTAMP:
        return pa.int64()
    if ctype.kind is TypeKind.FLOAT:
        return pa.float64()
    if ctype.is_array or ctype.kind is TypeKind.COMPLEX:
        return pa.string()
    return ctype.to_arrow()


def _comparable(values: pa.Array, ctype: ColumnType) -> pa.Array:
    if pa.types.is_timestamp(values.type):
        return values.cast(pa.int64())
    if pa.types.is_float32(values.type):
        return values.cast(pa.float64())
    if ctype.is_array:
        raise ValidationError("filters on ARRAY columns need an expression filter (e.g. array_contains)")
    return values


def _coerce(value, ctype: ColumnType, column: str):
    """The filter value as the column's type, or a clear error naming both."""
    if ctype.is_string:
        return _as_string(value)
    if ctype.kind is TypeKind.TIMESTAMP:
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return parse_instant(value)
        return int(value)
    if ctype.is_numeric:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, (int, float)):
            return value if ctype.kind is TypeKind.LONG and isinstance(value, int) else float(value)
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


def _like_to_arrow(pattern: str, escape: str | None) -> str:
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


def _split_and(f: Filter | None) -> list[Filter]:
    if f is None:
        return []
    if isinstance(f, And):
        out = []
        for child in f.fields:
            out.extend(_split_and(child))
        return out
    return [f]


def select(source: RowSource, filter_: Filter | None, intervals: list[Interval] | None, virtual_columns=(),
           expected: dict[str, ColumnType] | None = None) -> Selection:
    """Rows of ``source`` inside ``intervals`` (None = all time) that pass ``filter_``."""
    expected = dict(expected or {})
    virtual_names = {vc.name for vc in virtual_columns}
    selector = _Selector(source, virtual_names, expected)
    n = source.num_rows

    pre: BitMap | None = None
    bounds = source.time_bounds()
    if intervals is not None and bounds is not None:
        lo_t, hi_t = bounds
        if not any(iv.start <= lo_t and hi_t < iv.end for iv in intervals):
            pre = BitMap()
            for lo, hi in interval_rows(source.time(), intervals):
                pre.add_range(lo, hi)

    parts = _split_and(filter_)
    indexed = [p for p in parts if selector.can_index(p)]
    residual = [p for p in parts if not selector.can_index(p)]
    for p in indexed:
        bm = selector.index(p, include_unknown=False)
        pre = bm if pre is None else pre & bm
        if not pre:
            break

    if pre is None:
        rows = None
        after_pre = n
    else:
        rows = np.frombuffer(pre.to_array(), dtype=np.uint32).astype(np.int64)
        after_pre = len(rows)
    cols = ColumnSource(source, rows, virtual_columns, expected)
    if residual and cols.num_rows:
        mask = evaluate_values(And(tuple(residual)) if len(residual) > 1 else residual[0], cols)
        cols = cols.subset(mask)
    return Selection(cols, after_pre)
