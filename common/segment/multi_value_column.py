"""Multi-value STRING columns (Druid's multi-value dimensions): a sorted dictionary, each row's
list of dictionary ids, and a Roaring bitmap per value.

Parts (encoding ``multiValue``, requiredFeatures ``multiValueStrings``):

- ``dictionary``: the distinct non-null values, sorted (as a dictionary column's);
- ``offsets``: int64, rows + 1 entries; row r's ids are ``ids[offsets[r]:offsets[r+1]]``;
- ``ids``: int32 dictionary ids of every row's values in stored order, -1 for a null element;
- ``bitmaps``: one serialized Roaring bitmap per id (the rows holding that value, each once),
  and at index ``cardinality`` the rows a null matches: rows without values and rows holding a
  null element.

A row with no values (an empty list or a null) reads as null, as Druid reads an empty row. The
column's ``multiValueHandling`` (Druid's dimension setting, recorded in the spec) decides how a
row's values are kept when written: SORTED_ARRAY (Druid's default) sorts them, SORTED_SET sorts
them and drops repeats, ARRAY keeps them as given.

The index is Druid's: ``bitmap(ids)`` is the rows holding *any* of the ids, so an equality, IN,
range or LIKE filter matches a row when any of its values matches, and the column answers
``arrayContainsElement`` (MV_CONTAINS / ARRAY_CONTAINS of one value) from the same bitmaps.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.errors import SegmentCorruptError
from common.segment.bitmap_serializer import serialize_grouped
from common.segment.column_reader import IdRun, Ids, bitmap_of_rows
from common.segment.container import Container, ipc_bytes
from common.segment.encoding import EncodedColumn, Encoding, EncodingSpec, StoredColumn, register
from common.segment.inverted_index import stable_order
from common.types.column_type import MULTI_VALUE_STRING, ColumnType

HANDLING_MODES = ("SORTED_ARRAY", "SORTED_SET", "ARRAY")
DEFAULT_HANDLING = "SORTED_ARRAY"


@dataclass(frozen=True)
class MultiValueSpec(EncodingSpec):
    handling: str | None = None

    KEYS: ClassVar = (("multiValueHandling", "handling"),)


def check_handling(mode, column: str = "?") -> str:
    if mode is None:
        return DEFAULT_HANDLING
    if not isinstance(mode, str) or mode.upper() not in HANDLING_MODES:
        raise ValueError(f"column '{column}': multiValueHandling must be one of {', '.join(HANDLING_MODES)}, "
                         f"got {mode!r}")
    return mode.upper()


def _as_lists(values: pa.Array) -> pa.ListArray:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_large_list(values.type):
        values = values.cast(pa.list_(values.type.value_type))
    if not pa.types.is_list(values.type):
        # A single string per row is a one-value row (a null stays a row without values).
        strings = values.cast(pa.string())
        offsets = np.arange(len(strings) + 1, dtype=np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), strings, mask=strings.is_null())
    if not pa.types.is_string(values.type.value_type):
        values = values.cast(pa.list_(pa.string()))
    return values


def apply_handling(values: pa.Array, mode: str = DEFAULT_HANDLING) -> pa.ListArray:
    """Each row's values as ``mode`` keeps them; a row without values is null."""
    values = _as_lists(values)
    n = len(values)
    if values.null_count:
        values = pc.if_else(values.is_valid(), values, pa.scalar([], values.type))
    flat = pc.list_flatten(values)
    parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False).astype(np.int64)
    if mode != "ARRAY" and len(flat):
        # Sort by row, then value with nulls first (Druid sorts null before every string).
        order = pc.sort_indices(pa.table({"r": parents, "v": flat}),
                                sort_keys=[("r", "ascending", "at_start"), ("v", "ascending", "at_start")])
        flat = flat.take(order)
        parents = parents[order.to_numpy(zero_copy_only=False)]
        if mode == "SORTED_SET" and len(flat) > 1:
            same_value = pc.equal(flat.slice(1), flat.slice(0, len(flat) - 1)).fill_null(False)
            both_null = pc.and_(flat.slice(1).is_null(), flat.slice(0, len(flat) - 1).is_null())
            repeat = np.zeros(len(flat), dtype=bool)
            repeat[1:] = (parents[1:] == parents[:-1]) & pc.or_(same_value, both_null).to_numpy(zero_copy_only=False)
            if repeat.any():
                flat = flat.filter(pa.array(~repeat))
                parents = parents[~repeat]
    counts = np.bincount(parents, minlength=n) if n else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), flat.cast(pa.string()), mask=pa.array(counts == 0))


def _encode(values: pa.Array, ctype: ColumnType, options: dict | None = None) -> EncodedColumn:
    mode = check_handling((options or {}).get("multiValueHandling"))
    lists = apply_handling(values, mode)
    n = len(lists)
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    present = flat.drop_null()
    dictionary = pc.unique(present)
    dictionary = dictionary.take(pc.sort_indices(dictionary))
    cardinality = len(dictionary)
    ids = pc.index_in(flat, value_set=dictionary).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    # Bitmaps: each (value, row) once, grouped by value with rows ascending; the null entry
    # (id ``cardinality``) holds rows without values and rows holding a null element.
    keyed = np.where(ids < 0, cardinality, ids).astype(np.int64)
    empty_rows = np.flatnonzero(np.diff(offsets) == 0)
    keys = np.concatenate([keyed, np.full(len(empty_rows), cardinality, dtype=np.int64)])
    rows = np.concatenate([parents, empty_rows])
    order = stable_order(keys, cardinality + 1) if len(keys) else np.zeros(0, dtype=np.int64)
    keys, rows = keys[order], rows[order]
    # Within one key rows may repeat (a value twice in a row under ARRAY) and the appended empty
    # rows may come after larger rows: sort each key's rows, then drop repeats.
    if len(rows) > 1:
        pair = np.lexsort((rows, keys))
        keys, rows = keys[pair], rows[pair]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (keys[1:] != keys[:-1]) | (rows[1:] != rows[:-1])
        keys, rows = keys[first], rows[first]
    data, bitmap_offsets = serialize_grouped(rows, keys, cardinality + 1)
    bitmaps = pa.Array.from_buffers(pa.large_binary(), cardinality + 1,
                                    [None, pa.py_buffer(bitmap_offsets), pa.py_buffer(data)])
    parts = {
        "dictionary": ipc_bytes(dictionary),
        "offsets": ipc_bytes(pa.array(offsets, pa.int64())),
        "ids": ipc_bytes(pa.array(ids, pa.int32())),
        "bitmaps": ipc_bytes(bitmaps),
    }
    stats = {"cardinality": cardinality, "nullCount": int(lists.null_count), "values": int(len(flat))}
    if cardinality:
        stats["min"] = dictionary[0].as_py()
        stats["max"] = dictionary[cardinality - 1].as_py()
    return EncodedColumn(parts, stats, MultiValueSpec(handling=mode))


class MultiValueColumn:
    """Read side: values as lists of strings (null for a row without values), a ColumnIndex whose
    bitmaps match a row by any of its values, and an element index over the same bitmaps."""

    def __init__(self, container: Container, parts: dict[str, str], num_rows: int, stats: dict,
                 ctype: ColumnType = MULTI_VALUE_STRING, name: str = "?") -> None:
        self._container = container
        self._parts = parts
        self.num_rows = num_rows
        self.stats = stats
        self.type = ctype
        self.name = name

    @classmethod
    def open(cls, stored: StoredColumn) -> MultiValueColumn:
        return cls(stored.container, dict(stored.parts), stored.num_rows, dict(stored.stats), stored.type, stored.name)

    def _fail(self, what: str):
        raise SegmentCorruptError(f"segment {self._container.label}: multi-value column '{self.name}' {what}",
                                  getattr(self._container, "segment_id", None))

    @property
    def dictionary(self) -> pa.Array:
        return self._container.array(self._parts["dictionary"])

    @property
    def cardinality(self) -> int:
        return int(self.stats["cardinality"]) if "cardinality" in self.stats else len(self.dictionary)

    def offsets(self) -> np.ndarray:
        out = self._container.array(self._parts["offsets"]).to_numpy(zero_copy_only=False)
        if len(out) != self.num_rows + 1:
            self._fail(f"has {len(out) - 1} rows of offsets for {self.num_rows} rows")
        return out

    def ids(self) -> np.ndarray:
        return self._container.array(self._parts["ids"]).to_numpy(zero_copy_only=False)

    def _lists(self) -> pa.ListArray:
        offsets = self.offsets()
        ids = self.ids()
        if len(ids) != int(offsets[-1]) or (len(ids) and (ids.max() >= self.cardinality or ids.min() < -1)):
            self._fail("has value ids that do not match its dictionary or offsets")
        flat = self.dictionary.take(pa.array(ids, mask=ids < 0))
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), flat, mask=pa.array(np.diff(offsets) == 0))

    # -- ColumnReader -------------------------------------------------------------------------
    def values(self) -> pa.ListArray:
        return self._container.derived(self._parts["ids"], "lists", self._lists,
                                       self.num_rows * 8 + self._container.part_length(self._parts["ids"]) * 4)

    to_arrow = values

    def take(self, rows: np.ndarray | None) -> pa.Array:
        values = self.values()
        return values if rows is None else values.take(pa.array(np.asarray(rows, dtype=np.int64)))

    def dictionary_codes(self) -> None:
        return None  # a row holds several codes: no one code per row

    def field(self, path: str) -> None:
        return None

    paths_complete = False

    def part_bytes(self, roles: tuple[str, ...] = ("offsets", "ids", "dictionary")) -> int:
        roles = tuple(("offsets", "ids") if r in ("values", "codes") else (r,) for r in roles)
        return sum(self._container.part_length(self._parts[r]) for rs in roles for r in rs if r in self._parts)

    def bitmap(self, i: int) -> BitMap:
        return BitMap.deserialize(self._container.array(self._parts["bitmaps"])[i].as_py())

    def index(self) -> MultiValueIndex:
        return MultiValueIndex(self)

    def element_index(self) -> MultiValueElementIndex:
        return MultiValueElementIndex(MultiValueIndex(self))


class MultiValueIndex:
    """ColumnIndex of a multi-value column (a row matches when any of its values does), which
    also answers ``arrayContainsElement`` as an ARRAY column's element index does."""

    def __init__(self, column: MultiValueColumn) -> None:
        self._column = column
        self.num_rows = column.num_rows

    @property
    def cardinality(self) -> int:
        return self._column.cardinality

    @property
    def dictionary(self) -> pa.Array:
        return self._column.dictionary

    def _sorted(self) -> list[str]:
        c = self._column
        return c._container.derived(c._parts["dictionary"], "pylist", lambda: c.dictionary.to_pylist(),
                                    c._container.part_length(c._parts["dictionary"]) * 2 + 64 * c.cardinality)

    def lookup(self, value: str) -> Ids:
        d = self._sorted()
        i = bisect.bisect_left(d, value)
        return np.array([i] if i < len(d) and d[i] == value else [], dtype=np.int64)

    def range(self, lower, upper, lower_strict: bool, upper_strict: bool) -> Ids:
        d = self._sorted()
        lo = 0 if lower is None else (bisect.bisect_right if lower_strict else bisect.bisect_left)(d, lower)
        hi = len(d) if upper is None else (bisect.bisect_left if upper_strict else bisect.bisect_right)(d, upper)
        return IdRun(lo, max(lo, hi))

    def prefix(self, prefix: str) -> Ids:
        d = self._sorted()
        lo = bisect.bisect_left(d, prefix)
        hi = lo
        while hi < len(d) and d[hi].startswith(prefix):
            hi += 1
        return IdRun(lo, hi)

    def bitmap(self, ids: Ids) -> BitMap:
        if isinstance(ids, IdRun):
            members = range(ids.lo, min(ids.hi, self.cardinality + 1))
        else:
            members = [int(i) for i in ids]
        stored = self._column._container.array(self._column._parts["bitmaps"])
        found = [BitMap.deserialize(stored[i].as_py()) for i in members]
        return BitMap.union(*found) if found else BitMap()

    def null_bitmap(self) -> BitMap:
        return self._column.bitmap(self.cardinality)



class MultiValueElementIndex:
    """The element index ``arrayContainsElement`` asks for: rows holding a value, and as its
    unknown rows those without values (a null array), not those holding a null element."""

    def __init__(self, index: MultiValueIndex) -> None:
        self._index = index
        self.num_rows = index.num_rows

    @property
    def cardinality(self) -> int:
        return self._index.cardinality

    def rows_with(self, value) -> BitMap:
        return self._index.bitmap(self._index.lookup(str(value)))

    def null_bitmap(self) -> BitMap:
        return bitmap_of_rows(np.flatnonzero(np.diff(self._index._column.offsets()) == 0))


MULTI_VALUE = register(Encoding("multiValue", MultiValueSpec, MultiValueColumn.open, _encode,
                                required_roles=("dictionary", "offsets", "ids", "bitmaps"),
                                feature="multiValueStrings"))

__all__ = ["DEFAULT_HANDLING", "HANDLING_MODES", "MULTI_VALUE", "MultiValueColumn", "MultiValueElementIndex", "MultiValueIndex", "MultiValueSpec",
           "apply_handling", "check_handling"]
