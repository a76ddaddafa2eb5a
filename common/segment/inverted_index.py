"""InvertedIndex: a STRING column's rows grouped by dictionary id, derived from its codes in memory.

Segments no longer store a Roaring bitmap per string value (they held the same information as
the codes and were 11 of 30 bytes/row), so an equality or IN filter scans the codes: about 0.1
ms per 300k-row segment once they are decoded. For a high-cardinality column that is most of a
needle query (a few rows of one user), where a stored bitmap was a lookup. This index brings the
lookup back without storing anything: the row ids stably sorted by code (``order``) and where
each id's run starts (``offsets``, a CSR layout), so the rows of ids are slices of ``order``.

It is built from the decoded codes only when a filter asks a column that already has its codes
decoded (the second such filter since they were decoded: a one-off cold query never pays the
sort) and is kept in the decoded-part cache beside them, so the cache's budget bounds it and an
eviction drops it. See StringColumn.indexed_rows for the policy.

Ids follow column_reader: ``0 .. cardinality-1`` are values and ``cardinality`` the null rows
(code -1), which sort last, so any run of ids, null included, is one contiguous slice.
"""

from __future__ import annotations

import numpy as np
from pyroaring import BitMap

from common.segment.column_reader import IdRun, Ids, bitmap_of_rows

# The index answers only when the matching rows are at most this fraction of the column; denser
# results are cheaper by one pass over the codes into a bitset (column_reader.bitmap_of_mask).
MAX_MATCH_FRACTION = 1 / 32
# More ids than this (a long IN list) take the scan: a Python step per id would cost more.
MAX_IDS = 256
# Columns with fewer distinct values are not indexed: an id holds on average 1/cardinality of
# the rows, so their equalities are rarely sparse enough to pay for the sort.
MIN_CARDINALITY = 64


class InvertedIndex:
    def __init__(self, order: np.ndarray, offsets: np.ndarray, cardinality: int) -> None:
        self.order = order  # uint32 row ids, ascending within each id's run
        self.offsets = offsets  # int64, cardinality + 2 entries: id i's rows are order[offsets[i]:offsets[i+1]]
        self.cardinality = cardinality

    @classmethod
    def build(cls, codes: np.ndarray, cardinality: int) -> InvertedIndex:
        """From codes (-1 for null) of a column with ``cardinality`` dictionary ids."""
        keyed = np.where(codes < 0, cardinality, codes).astype(np.int32, copy=False)
        order = stable_order(keyed, cardinality + 1)
        counts = np.bincount(keyed, minlength=cardinality + 1)
        offsets = np.zeros(cardinality + 2, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(order, offsets, cardinality)

    @staticmethod
    def nbytes_for(num_rows: int, cardinality: int) -> int:
        return num_rows * 4 + (cardinality + 2) * 8

    @property
    def nbytes(self) -> int:
        return self.order.nbytes + self.offsets.nbytes

    def rows(self, ids: Ids) -> BitMap | None:
        """Rows holding one of ``ids``, or None when the scan is the cheaper answer (many ids,
        or many matching rows)."""
        num_rows = len(self.order)
        limit = num_rows * MAX_MATCH_FRACTION
        if isinstance(ids, IdRun):
            lo, hi = max(ids.lo, 0), min(ids.hi, self.cardinality + 1)
            if hi <= lo:
                return BitMap()
            start, end = int(self.offsets[lo]), int(self.offsets[hi])
            if end - start > limit:
                return None
            found = self.order[start:end]
            return bitmap_of_rows(found if hi - lo == 1 else np.sort(found))
        if len(ids) == 1:  # an equality: one slice, already in row order
            i = int(ids[0])
            if not 0 <= i <= self.cardinality:
                return BitMap()
            start, end = self.offsets[i:i + 2].tolist()
            return None if end - start > limit else bitmap_of_rows(self.order[start:end])
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) > MAX_IDS:
            return None
        ids = np.unique(ids[(ids >= 0) & (ids <= self.cardinality)])
        if len(ids) == 0:
            return BitMap()
        starts, ends = self.offsets[ids], self.offsets[ids + 1]
        if int((ends - starts).sum()) > limit:
            return None
        found = np.concatenate([self.order[s:e] for s, e in zip(starts.tolist(), ends.tolist())])
        return bitmap_of_rows(np.sort(found))


def stable_order(keys: np.ndarray, bound: int) -> np.ndarray:
    """Row ids sorted by key (0 <= key < ``bound``), ascending within a key (so each key's rows
    form a sorted run).

    numpy's stable sort is a radix sort for 16-bit keys; wider keys take two 16-bit passes
    (least significant first), which is several times faster than a comparison sort.
    """
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable").astype(np.uint32)
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    high = np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")
    return low[high].astype(np.uint32)


__all__ = ["InvertedIndex", "MAX_IDS", "MAX_MATCH_FRACTION", "MIN_CARDINALITY", "stable_order"]
