"""Row-wise work on Arrow list arrays without a Python loop per row.

A list column is read as ``ListRows``: the flat element values, each element's row (its parent),
each row's start and length, and which rows are null. The array functions build on three moves:
compare the flat values with a per-row value gathered through the parents, count hits per row
with ``np.bincount``, and gather new arrays from the flat values with one ``take``.

Set-like questions between two lists of the same row (overlap, contains-all) give every element
an equality code shared by both sides (``equality_codes``) and ask ``np.isin`` of (row, code)
keys, so the cost is a sort of the elements, not a loop over rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class ListRows:
    values: pa.Array       # the elements of rows 0..n-1, in order (the child array's used span)
    starts: np.ndarray     # int64, row r's first element in ``values``
    lengths: np.ndarray    # int64, elements per row (0 for a null row)
    valid: np.ndarray      # bool, the row is not a null array

    @property
    def n(self) -> int:
        return len(self.valid)

    @property
    def parents(self) -> np.ndarray:
        """The row of each element of ``values``."""
        return np.repeat(np.arange(self.n, dtype=np.int64), self.lengths)

    @classmethod
    def of(cls, arrays: pa.ListArray) -> ListRows:
        offsets = arrays.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        base = int(offsets[0]) if len(offsets) else 0
        valid = arrays.is_valid().to_numpy(zero_copy_only=False)
        lengths = np.diff(offsets)
        if not valid.all() and lengths[~valid].any():
            # A null row may span elements in Arrow; they belong to no array, so drop them.
            arrays = pa.ListArray.from_arrays(pa.array(np.concatenate(([0], np.cumsum(np.where(valid, lengths, 0))))
                                                       .astype(np.int32)),
                                              arrays.values.take(pa.array(_spans(offsets[:-1][valid],
                                                                                 lengths[valid]))),
                                              mask=pa.array(~valid))
            return cls.of(arrays)
        values = arrays.values.slice(base, int(offsets[-1]) - base) if len(offsets) else arrays.values.slice(0, 0)
        return cls(values, offsets[:-1] - base, lengths, valid)


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indexes starts[i] .. starts[i] + lengths[i] - 1 of every span, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    out_starts = np.cumsum(lengths) - lengths
    return np.repeat(starts - out_starts, lengths) + np.arange(total, dtype=np.int64)


def gather(rows: ListRows, pieces: list[tuple[np.ndarray, np.ndarray]], valid: np.ndarray,
           values: pa.Array | None = None) -> pa.ListArray:
    """A new list array whose row r is the concatenation of spans (starts[r], lengths[r]) of each
    piece, taken from ``values`` (default ``rows.values``); rows not ``valid`` are null."""
    values = rows.values if values is None else values
    lengths = [np.where(valid, length, 0) for _, length in pieces]
    total = np.sum(lengths, axis=0) if lengths else np.zeros(len(valid), dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(total))).astype(np.int64)
    # Interleave row by row: lay each piece's spans into the output at its place in the row.
    index = np.zeros(int(offsets[-1]), dtype=np.int64)
    before = np.zeros(len(valid), dtype=np.int64)
    for (start, _), length in zip(pieces, lengths):
        dest = _spans(offsets[:-1] + before, length)
        index[dest] = _spans(start, length)
        before = before + length
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values.take(pa.array(index)),
                                    mask=pa.array(~valid))


def equality_codes(*arrays: pa.Array) -> list[np.ndarray]:
    """An int64 code per element of each array (all of one type) such that two elements share a
    code exactly when they are equal as Druid's array functions compare: 0.0 and -0.0 alike, null
    equal to null. NaN equals nothing and gets -1."""
    lengths = [len(a) for a in arrays]
    combined = pa.concat_arrays([a.cast(arrays[0].type) for a in arrays]) if arrays else pa.array([])
    nan = None
    if pa.types.is_floating(combined.type):
        nan = pc.is_nan(combined).fill_null(False).to_numpy(zero_copy_only=False)
        combined = pc.add(combined, pa.scalar(0.0, combined.type))  # -0.0 + 0.0 is 0.0
    codes = pc.dictionary_encode(combined, null_encoding="encode").indices.to_numpy(zero_copy_only=False)
    codes = codes.astype(np.int64)
    if nan is not None and nan.any():
        codes[nan] = -1
    return np.split(codes, np.cumsum(lengths)[:-1])


def member_rows(hay: ListRows, needles: ListRows) -> tuple[np.ndarray, np.ndarray]:
    """For each element of ``needles``: whether the same row of ``hay`` holds an equal element.
    Returns (found per needle element, the needle elements' rows)."""
    hay_codes, needle_codes = equality_codes(hay.values, needles.values)
    width = int(max(hay_codes.max(initial=-1), needle_codes.max(initial=-1))) + 1
    hay_keys = hay.parents * width + hay_codes
    hay_keys = np.sort(hay_keys[hay_codes >= 0])
    needle_rows = needles.parents
    needle_keys = needle_rows * width + needle_codes
    # A sorted search, not np.isin: isin may pick a lookup table as large as the key range.
    at = np.minimum(np.searchsorted(hay_keys, needle_keys), max(len(hay_keys) - 1, 0))
    found = (hay_keys[at] == needle_keys) & (needle_codes >= 0) if len(hay_keys) else np.zeros(len(needle_keys), bool)
    return found, needle_rows


def rows_with(hit: np.ndarray, parents: np.ndarray, n: int) -> np.ndarray:
    """Whether each of n rows has at least one hit among its elements."""
    return np.bincount(parents[hit], minlength=n)[:n] > 0


def in_constant_set(values: pa.Array, constants: pa.Array) -> np.ndarray:
    """Whether each element equals one of ``constants`` (null matches null; NaN matches nothing)."""
    if pa.types.is_floating(values.type):
        constants = constants.filter(pc.invert(pc.is_nan(constants).fill_null(False)))
        values = pc.add(values, pa.scalar(0.0, values.type))
        constants = pc.add(constants, pa.scalar(0.0, constants.type))
    return pc.is_in(values, value_set=constants, skip_nulls=False).fill_null(False).to_numpy(zero_copy_only=False)


__all__ = ["ListRows", "equality_codes", "gather", "in_constant_set", "member_rows", "rows_with"]
