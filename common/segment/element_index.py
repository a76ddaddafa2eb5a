"""ElementIndex: an ARRAY column's rows by element value, stored with the column.

Druid answers ``ARRAY_CONTAINS(arr, 'x')`` (its ``arrayContainsElement`` filter) and an UNNEST's
filter on the element from the array column's per-element value index; without one every row's
array must be read and searched. The plain encoding of an ARRAY column stores, beside the values:

- ``elementDictionary``: the distinct non-null elements, sorted (Arrow, the element type);
- ``elementOffsets``: int64, cardinality + 1 entries, and ``elementRows``: uint32 row ids, so
  element id i's rows (each once, ascending) are ``elementRows[offsets[i]:offsets[i+1]]`` (a CSR
  layout, as InvertedIndex keeps in memory for strings);
- ``arrayNullRows``: uint32 ids of the rows whose array is null (the unknown rows of a NOT).

The spec says ``"elementIndex": true``. The parts are extra roles that no requiredFeatures entry
names: a reader from before the index opens the column and ignores them, and a segment written
before it (no ``elementIndex``) answers from values, as it always did.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.segment.column_reader import bitmap_of_rows

ROLES = ("elementDictionary", "elementOffsets", "elementRows", "arrayNullRows")


def encode_element_index(values: pa.Array) -> dict[str, pa.Array]:
    """The index parts (as Arrow arrays) of a list column's values."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    valid = values.is_valid()
    null_rows = np.flatnonzero(~valid.to_numpy(zero_copy_only=False)).astype(np.uint32)
    if values.null_count:
        values = pc.if_else(valid, values, pa.scalar([], values.type))  # a null list may span values
    flat = pc.list_flatten(values)
    parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False).astype(np.int64)
    keep = flat.is_valid()
    if flat.null_count:
        flat = flat.filter(keep)
        parents = parents[keep.to_numpy(zero_copy_only=False)]
    dictionary = pc.unique(flat)
    dictionary = dictionary.take(pc.sort_indices(dictionary))
    ids = pc.index_in(flat, value_set=dictionary).to_numpy(zero_copy_only=False).astype(np.int64)
    # Each (element, row) once, ordered by element then row.
    pairs = np.unique(ids * max(len(values), 1) + parents)
    pair_ids, rows = np.divmod(pairs, max(len(values), 1))
    offsets = np.zeros(len(dictionary) + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair_ids, minlength=len(dictionary)), out=offsets[1:])
    return {"elementDictionary": dictionary, "elementOffsets": pa.array(offsets),
            "elementRows": pa.array(rows.astype(np.uint32)), "arrayNullRows": pa.array(null_rows)}


class ElementIndex:
    def __init__(self, dictionary: pa.Array, offsets: np.ndarray, rows: np.ndarray, null_rows: np.ndarray,
                 num_rows: int) -> None:
        self.dictionary = dictionary
        self.offsets = offsets
        self.rows = rows
        self.null_rows_ids = null_rows
        self.num_rows = num_rows

    @property
    def cardinality(self) -> int:
        return len(self.dictionary)

    def ids_equal(self, value) -> np.ndarray:
        """Ids of the elements equal to ``value`` as ``arrayContainsElement`` compares them: as text
        in a string array, by number in a numeric one (2 matches 2.0)."""
        d = self.dictionary
        if pa.types.is_string(d.type) or pa.types.is_large_string(d.type):
            hit = pc.equal(d, pa.scalar(str(value)))
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                return np.array([], dtype=np.int64)
            if pa.types.is_integer(d.type) and isinstance(value, int) and not isinstance(value, bool):
                hit = pc.equal(d, pa.scalar(value, pa.int64()))
            else:
                hit = pc.equal(d.cast(pa.float64()), pa.scalar(number))
        return np.flatnonzero(hit.fill_null(False).to_numpy(zero_copy_only=False))

    def rows_with(self, value) -> BitMap:
        """Rows whose array holds ``value``."""
        ids = self.ids_equal(value)
        if len(ids) == 1:
            i = int(ids[0])
            return bitmap_of_rows(self.rows[self.offsets[i]:self.offsets[i + 1]])
        found = [self.rows[self.offsets[i]:self.offsets[i + 1]] for i in ids.tolist()]
        return bitmap_of_rows(np.sort(np.concatenate(found))) if found else BitMap()

    def null_bitmap(self) -> BitMap:
        """Rows whose array is null."""
        return bitmap_of_rows(self.null_rows_ids)

    @property
    def nbytes(self) -> int:
        return self.dictionary.nbytes + self.offsets.nbytes + self.rows.nbytes + self.null_rows_ids.nbytes


__all__ = ["ROLES", "ElementIndex", "encode_element_index"]
