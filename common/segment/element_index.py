"""ElementIndex: an ARRAY column's rows by element value, stored with the column.

Druid answers ``ARRAY_CONTAINS(arr, 'x')`` (its ``arrayContainsElement`` filter) and an UNNEST's
filter on the element from the array column's per-element value index; without one every row's
array must be read and searched. The plain encoding of an ARRAY column stores, beside the values:

- ``elementDictionary``: the distinct non-null elements, sorted (Arrow, the element type);
- ``elementOffsets``: int64, cardinality + 1 entries, and ``elementRows``: uint32, so element id
  i's rows (each once, ascending) are the running sum of ``elementRows[offsets[i]:offsets[i+1]]``
  (a CSR layout, as InvertedIndex keeps in memory for strings, its row ids stored as gaps: the
  run's first row, then the distance to the next; on the bench's tag arrays the index is 40% of
  the column's size instead of 67% with plain row ids);
- ``arrayNullRows``: uint32 ids of the rows whose array is null (the unknown rows of a NOT).

The spec says ``"elementIndex": true``. The parts are extra roles that no requiredFeatures entry
names: a reader from before the index opens the column and ignores them, and a segment written
before it (no ``elementIndex``) answers from values, as it always did.

A nested JSON column keeps the same parts for each of its fields that holds only arrays (under the
field's part prefix, its field entry saying ``"elementIndex": true``): the rows whose array at
that path holds an element, a row without the path counting as a null array.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.errors import SegmentCorruptError
from common.segment.column_reader import bitmap_of_rows
from common.segment.inverted_index import stable_order

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
    # Each (element, row) once, ordered by element then row: parents ascend already, so a stable
    # radix sort by element keeps each element's rows ascending and a repeat is its neighbour
    # (np.unique of the pairs hashed them: 5 s for 400k pairs, this 20 ms).
    order = stable_order(ids, len(dictionary))
    pair_ids, rows = ids[order], parents[order]
    if len(rows) > 1:
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (pair_ids[1:] != pair_ids[:-1]) | (rows[1:] != rows[:-1])
        pair_ids, rows = pair_ids[first], rows[first]
    offsets = np.zeros(len(dictionary) + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair_ids, minlength=len(dictionary)), out=offsets[1:])
    # Stored as gaps: each element's first row, then the distance to its next row (small numbers
    # with zero high bytes, which zstd packs several times tighter than the row ids themselves).
    gaps = rows.copy()
    if len(rows) > 1:
        gaps[1:] -= rows[:-1]
        gaps[offsets[1:-1][offsets[1:-1] < len(rows)]] = rows[offsets[1:-1][offsets[1:-1] < len(rows)]]
    return {"elementDictionary": dictionary, "elementOffsets": pa.array(offsets),
            "elementRows": pa.array(gaps.astype(np.uint32)), "arrayNullRows": pa.array(null_rows)}


def read_element_index(container, parts: dict[str, str], num_rows: int, what: str):
    """The ElementIndex stored in ``parts`` (role -> part name) of a column (or a nested column's
    field, ``what`` naming it in errors), decoded once per container; None when it has none."""
    rows_part = parts.get("elementRows")
    if rows_part is None:
        return None
    hit = container.cached(rows_part, "elementIndex")
    if hit is not None:
        return hit
    dictionary = container.array(parts["elementDictionary"])
    offsets = container.array(parts["elementOffsets"]).to_numpy(zero_copy_only=False)
    rows = container.array(rows_part).to_numpy(zero_copy_only=False)
    null_rows = container.array(parts["arrayNullRows"]).to_numpy(zero_copy_only=False)
    segment_id = getattr(container, "segment_id", None)
    if len(offsets) != len(dictionary) + 1 or int(offsets[-1]) != len(rows):
        raise SegmentCorruptError(f"segment {container.label}: the element index of {what} does not match its "
                                  f"{num_rows} rows", segment_id)
    index = ElementIndex(dictionary, offsets, rows, null_rows, num_rows, container.label, segment_id)
    return container.derived(rows_part, "elementIndex", lambda: index, index.nbytes)


class ElementIndex:
    def __init__(self, dictionary: pa.Array, offsets: np.ndarray, rows: np.ndarray, null_rows: np.ndarray,
                 num_rows: int, label: str = "?", segment_id=None) -> None:
        self.label = label
        self.segment_id = segment_id
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

    def _rows_of(self, i: int) -> np.ndarray:
        rows = np.cumsum(self.rows[self.offsets[i]:self.offsets[i + 1]], dtype=np.int64)
        if len(rows) and rows[-1] >= self.num_rows:
            raise SegmentCorruptError(f"segment {self.label}: the element index of an ARRAY column names row "
                                      f"{int(rows[-1])} of {self.num_rows}", self.segment_id)
        return rows

    def rows_with(self, value) -> BitMap:
        """Rows whose array holds ``value``."""
        ids = self.ids_equal(value)
        if len(ids) == 1:
            return bitmap_of_rows(self._rows_of(int(ids[0])))
        found = [self._rows_of(i) for i in ids.tolist()]
        return bitmap_of_rows(np.sort(np.concatenate(found))) if found else BitMap()

    def null_bitmap(self) -> BitMap:
        """Rows whose array is null."""
        return bitmap_of_rows(self.null_rows_ids)

    @property
    def nbytes(self) -> int:
        return self.dictionary.nbytes + self.offsets.nbytes + self.rows.nbytes + self.null_rows_ids.nbytes


__all__ = ["ROLES", "ElementIndex", "encode_element_index", "read_element_index"]
