"""Grouping: dense group ids for rows from one or more key columns, without per-row Python.

Each key is first turned into dense codes (dictionary ids for string columns, packed element
codes for arrays, Arrow's dictionary_encode for anything else); codes combine by mixed radix and are compacted to
0..G-1 through a lookup table when the key space is small, else with ``np.unique``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class KeyCodes:
    """Dense codes for one key: row ``i`` has key ``values[codes[i]]`` (``values`` may hold a null)."""

    codes: np.ndarray  # int64 in [0, len(values))
    values: pa.Array
    run_starts: np.ndarray | None = None  # set when codes are ascending runs 0,0,1,1,1,2...; all used


def codes_from_dictionary(codes: np.ndarray, dictionary: pa.Array) -> KeyCodes:
    """Dictionary ids with -1 for null -> KeyCodes whose id 0 is the null value."""
    values = pa.concat_arrays([pa.nulls(1, dictionary.type), dictionary])
    return KeyCodes(codes.astype(np.int64) + 1, values)


def codes_from_array(arr: pa.Array) -> KeyCodes:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        return codes_from_lists(arr)
    if pa.types.is_dictionary(arr.type):
        codes = arr.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        return codes_from_dictionary(codes, arr.dictionary)
    if pa.types.is_floating(arr.type):
        arr = canonical_floats(arr)
    enc = pc.dictionary_encode(arr, null_encoding="mask")
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return codes_from_dictionary(codes, enc.dictionary)


def canonical_floats(arr: pa.Array) -> pa.Array:
    """-0.0 as 0.0 and every NaN as one NaN: SQL (and DuckDB) treat each as one value, but hashing
    tells their bit patterns apart, so GROUP BY and COUNT(DISTINCT) would split them."""
    arr = pc.add(arr, pa.scalar(0.0, arr.type))
    nan = pc.is_nan(arr)
    if pc.any(nan).as_py():
        arr = pc.if_else(nan, pa.scalar(float("nan"), arr.type), arr)
    return arr


def int64_array(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """int64 numpy values as an Arrow array of ``arrow_type`` (int64, or a timestamp: epoch
    values), sharing the numpy buffer: building it this way took a sixth of pa.array + cast."""
    if not (arrow_type == pa.int64() or pa.types.is_timestamp(arrow_type)):
        return pa.array(values, pa.int64()).cast(arrow_type)
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def codes_from_sorted(values: np.ndarray, arrow_type: pa.DataType) -> KeyCodes:
    """Codes for an ascending int64 array (time buckets of a time-sorted segment): run lengths, no sort."""
    n = len(values)
    if n == 0:
        return KeyCodes(np.zeros(0, np.int64), pa.array([], arrow_type))
    starts = np.flatnonzero(values[1:] != values[:-1])
    starts += 1
    starts = np.concatenate((np.zeros(1, np.int64), starts))
    lengths = np.empty(len(starts), np.int64)
    lengths[:-1] = starts[1:] - starts[:-1]
    lengths[-1] = n - starts[-1]
    codes = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)
    return KeyCodes(codes, int64_array(values[starts], arrow_type), starts)


def codes_from_int64(values: np.ndarray, arrow_type: pa.DataType) -> KeyCodes:
    if len(values) and bool(np.all(values[1:] >= values[:-1])):
        return codes_from_sorted(values, arrow_type)
    uniq, inverse = np.unique(values, return_inverse=True)
    return KeyCodes(inverse.astype(np.int64), int64_array(uniq, arrow_type))


def codes_from_lists(arr: pa.Array) -> KeyCodes:
    """Arrays group as whole values, as Druid groups ARRAY columns: each row's elements become
    dense element codes packed into one binary key, so equal arrays get equal keys (a null
    element is a code of its own; an empty array and a null array differ)."""
    n = len(arr)
    flat = arr.flatten()
    if pa.types.is_floating(flat.type):
        flat = pc.add(flat, 0.0)  # -0.0 + 0.0 is 0.0: the two zeros group together, as scalar doubles do
    elements = pc.dictionary_encode(flat, null_encoding="encode").indices
    packed = elements.to_numpy(zero_copy_only=False).astype(np.int32).tobytes()
    lengths = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths) * 4)).astype(np.int64)
    keys = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(packed)])
    keys = pc.if_else(arr.is_null(), pa.scalar(None, pa.large_binary()), keys)
    enc = pc.dictionary_encode(keys, null_encoding="mask")
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    present = np.flatnonzero(codes >= 0)
    first = np.zeros(len(enc.dictionary), dtype=np.int64)
    if len(present):
        ids, at = np.unique(codes[present], return_index=True)
        first[ids] = present[at]
    return codes_from_dictionary(codes, arr.take(pa.array(first, pa.int64())))


@dataclass
class Groups:
    gid: np.ndarray  # int64 group id per row
    count: int
    keys: list[pa.Array]  # one array per key, one value per group
    run_starts: np.ndarray | None = None  # rows are sorted by group: group g starts at run_starts[g]


def group(keys: list[KeyCodes], num_rows: int) -> Groups:
    if not keys:
        gid = np.zeros(num_rows, dtype=np.int64)
        return Groups(gid, 1 if num_rows else 0, [])
    if len(keys) == 1 and keys[0].run_starts is not None:
        k = keys[0]  # already dense and sorted: nothing to compact
        return Groups(k.codes, len(k.values), [k.values], k.run_starts)
    widths = [max(len(k.values), 1) for k in keys]
    space = 1
    for w in widths:
        space *= w
    if space >= 2**62:
        # Too many key combinations for one int64: unique rows of the stacked codes instead.
        stacked = np.stack([k.codes for k in keys], axis=1)
        uniq_rows, gid = np.unique(stacked, axis=0, return_inverse=True)
        out_keys = [k.values.take(pa.array(uniq_rows[:, i])) for i, k in enumerate(keys)]
        return Groups(gid.reshape(-1).astype(np.int64), len(uniq_rows), out_keys)
    if len(keys) == 1:
        combined = keys[0].codes  # one key: its codes are the combined codes (read, never written)
    else:
        combined = np.zeros(num_rows, dtype=np.int64)
        for k, w in zip(keys, widths):
            combined = combined * w + k.codes
    if space <= max(4 * num_rows, 1 << 16):
        present = np.zeros(space, dtype=bool)
        present[combined] = True
        gid = (np.cumsum(present) - 1)[combined]
        uniq = np.flatnonzero(present)
    else:
        uniq, gid = np.unique(combined, return_inverse=True)
    out_keys = []
    rest = uniq.astype(np.int64)
    for k, w in zip(reversed(keys), reversed(widths)):
        out_keys.append(k.values.take(pa.array(rest % w)))
        rest = rest // w
    out_keys.reverse()
    return Groups(gid.astype(np.int64), len(uniq), out_keys)


# Below this many rows the code paths above are as fast (and keep their group order).
_VALUE_GROUPING_ROWS = 4096
# Odd 64-bit multipliers (splitmix64's) that spread each key's bits over the whole hash.
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def groupable_values(arr: pa.Array | pa.ChunkedArray) -> bool:
    """Whether ``group_values`` takes a key column of this type: integers and timestamps."""
    t = arr.type
    return pa.types.is_signed_integer(t) or pa.types.is_timestamp(t) or t in (pa.uint8(), pa.uint16(), pa.uint32())


def group_values(arrays: list[pa.Array], num_rows: int) -> Groups | None:
    """The groups of ``num_rows`` rows by integer or timestamp key columns, from one int64 per
    row instead of a hash table per key plus one for their combination (Arrow's
    dictionary_encode of a million distinct int64 took 3x numpy's sort of them). The int64 is the
    keys packed exactly when their value ranges fit in 63 bits together (groups then come in key
    order), else a hash of them. Few possible packed keys (up to 4 per row) group through a table
    of the keys present, no sort (a sort of a million rows of a thousand values took 2.5x Arrow's
    hash); others through one numpy sort, where equal hashes are checked to hold equal keys: a
    collision (about one run in 10^10 at a million groups) gives None, as does a key of another
    type or too few rows to pay off; the caller then groups by codes (``group``)."""
    if num_rows < _VALUE_GROUPING_ROWS or not arrays or not all(groupable_values(a) for a in arrays):
        return None
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    values, valids = [], []
    for arr in arrays:
        plain = arr.cast(pa.int64()) if arr.type != pa.int64() else arr
        if plain.null_count:
            valids.append(plain.is_valid().to_numpy(zero_copy_only=False))
            plain = plain.fill_null(0)
        else:
            valids.append(None)
        values.append(plain.to_numpy(zero_copy_only=False))
    key, spans = _packed(values, valids)
    span = None if spans is None else int(np.prod([width for _, width in spans], dtype=object))
    if span is not None and span <= max(4 * num_rows, 1 << 16):
        return _dense_groups(arrays, valids, key, span, spans)  # few possible keys: no sort at all
    exact = key is not None
    if not exact:
        key = _hashed(values, valids)
    order = np.argsort(key)
    ordered = key[order]
    same = ordered[1:] == ordered[:-1]
    if not exact:
        # Rows next to each other in hash order with equal hashes must hold equal keys (a run of
        # equal hashes holding two keys has such a pair). Only those pairs are read: in a merge
        # of partials without common groups, none.
        pairs = np.flatnonzero(same)
        if len(pairs):
            this, after = order[pairs], order[pairs + 1]
            for v, valid in zip(values, valids):
                if np.any(v[this] != v[after]) or (valid is not None and np.any(valid[this] != valid[after])):
                    return None
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    run_ids = np.cumsum(np.concatenate(([0], ~same)), dtype=np.int64)
    gid = np.empty(num_rows, np.int64)
    gid[order] = run_ids
    first = order[starts]
    keys = [int64_array(v[first], arr.type) if valid is None and (arr.type == pa.int64() or pa.types.is_timestamp(arr.type))
            else arr.take(pa.array(first)) for arr, v, valid in zip(arrays, values, valids)]
    return Groups(gid, len(starts), keys)


def _packed(values: list[np.ndarray], valids: list) -> tuple[np.ndarray | None, list | None]:
    """(key, spans): one int64 per row that orders and tells apart the rows' keys exactly, each
    key's (lowest value, width) packed into it (the key in [0, product of widths)); spans None
    when only one key's own values do that (its range is 2^63 or more); (None, None) when the
    ranges (a null is one value more) do not fit in 63 bits together."""
    spans = []
    total = 1
    for v, valid in zip(values, valids):
        present = v if valid is None else v[valid]
        lo = int(present.min()) if len(present) else 0
        hi = int(present.max()) if len(present) else 0
        width = hi - lo + 1 + (valid is not None)
        total *= width
        if total >= 2**63:
            if len(values) == 1 and valid is None:
                return v, None  # one key without nulls: its values order themselves
            return None, None
        spans.append((lo, width))
    key = np.zeros(len(values[0]), np.int64)
    for v, valid, (lo, width) in zip(values, valids, spans):
        code = v - lo  # in [0, width): fits, since the width does
        if valid is not None:
            code = np.where(valid, code + 1, 0)  # null first, as an ascending sort puts it
        key *= width
        key += code
    return key, spans


def _dense_groups(arrays: list[pa.Array], valids: list, key: np.ndarray, span: int, spans: list) -> Groups:
    """The groups of packed keys in [0, span) through a table of the keys present (as ``group``
    does with codes): a pass over the rows, no sort; the group keys decoded from the packing."""
    present = np.zeros(span, dtype=bool)
    present[key] = True
    gid = (np.cumsum(present) - 1)[key]
    rest = np.flatnonzero(present).astype(np.int64)
    out = []
    for arr, valid, (lo, width) in zip(reversed(arrays), reversed(valids), reversed(spans)):
        code = rest % width
        rest = rest // width
        if valid is None:
            out.append(_typed(code + lo, arr.type, None))
        else:
            missing = code == 0
            out.append(_typed(np.where(missing, 0, code - 1 + lo), arr.type, missing))
    out.reverse()
    return Groups(gid.astype(np.int64, copy=False), int(present.sum()), out)


def _typed(values: np.ndarray, arrow_type: pa.DataType, missing: np.ndarray | None) -> pa.Array:
    """int64 key values as an array of the key column's type (nulls where ``missing``)."""
    if missing is None and (arrow_type == pa.int64() or pa.types.is_timestamp(arrow_type)):
        return int64_array(values, arrow_type)
    arr = pa.array(values, pa.int64(), mask=missing)
    return arr if arrow_type == pa.int64() else arr.cast(arrow_type)


def _hashed(values: list[np.ndarray], valids: list) -> np.ndarray:
    """A 64-bit mix of the keys (a null and a zero differ by a term of their own)."""
    h = np.zeros(len(values[0]), np.uint64)
    with np.errstate(over="ignore"):
        for i, (v, valid) in enumerate(zip(values, valids)):
            h ^= v.view(np.uint64)
            if valid is not None:
                h ^= (~valid).astype(np.uint64) << np.uint64(32 + i)
            h *= _MIX[i % 3]
            h ^= h >> np.uint64(31)
    return h.view(np.int64)
