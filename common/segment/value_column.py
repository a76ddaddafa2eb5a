"""Plain columns: numbers, ``__time``, arrays and (for now) JSON text, stored as Arrow arrays.

Arrow's own validity bitmap is the null bitmap, so a LONG column with nulls keeps them as nulls
(never 0), and the values are read straight from the memory map (or, when the container stored
the part compressed, from its decoded-part cache).

A DOUBLE or FLOAT column with few distinct values (at most one per four rows) is stored instead
as a ``dictionary`` of its distinct values (most frequent first) plus ``codes`` (int16 or int32, Arrow-null for null
rows), spec ``valueDictionary`` and requiredFeatures ``numberDictionary``, as Parquet's
dictionary pages do: ratios and rounded measures repeat, and their random low mantissa bits
defeat zstd (3.5 bytes/row on the demo ratio column, 2.4 as a dictionary). Distinct means
distinct bit patterns, so -0.0, 0.0 and every NaN payload read back exactly as written. Readers
look the values up once and keep them in the bounded decoded-part cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import SegmentCorruptError
from common.segment.container import Container, ipc_bytes
from common.segment.element_index import ROLES as ELEMENT_ROLES
from common.segment.element_index import ElementIndex, encode_element_index, read_element_index
from common.segment.encoding import EncodedColumn, Encoding, EncodingSpec, StoredColumn, register, register_feature
from common.types.column_type import ColumnType, TypeKind


@dataclass(frozen=True)
class PlainSpec(EncodingSpec):
    value_dictionary: bool | None = None  # True: parts dictionary + codes instead of values
    block_rows: int | None = None  # set: parts block0, block1, ... of this many rows each
    blocks: int | None = None
    # True: an ARRAY column's per-element index parts (element_index.py); no feature is required,
    # an older reader ignores them.
    element_index: bool | None = None
    KEYS: ClassVar = (("valueDictionary", "value_dictionary"), ("blockRows", "block_rows"), ("blocks", "blocks"),
                      ("elementIndex", "element_index"))

    def features(self) -> tuple[str, ...]:
        return ((NUMBER_DICTIONARY,) if self.value_dictionary else ()) + \
            ((VALUE_BLOCKS,) if self.block_rows is not None else ())

    def roles(self, required: tuple[str, ...]) -> tuple[str, ...]:
        if self.value_dictionary:
            return ("dictionary", "codes")
        if self.block_rows is not None:
            return tuple(f"block{i}" for i in range(int(self.blocks or 0)))
        if self.element_index:
            return required + ELEMENT_ROLES
        return required


# Fixed-width columns longer than this are stored in blocks of this many rows, each its own
# (compressed) part, so reading a few rows decodes only their blocks. On the storage benchmark
# (2M demo rows, 7 day segments) 8192-row blocks against 65536: the whole table 16.52 -> 16.49
# bytes/row (zstd picks the shuffle per block), the cold needle query (7 rows per segment)
# decodes 7 of 35 blocks instead of all 5 (CPU 51 -> 25 ms), and a cold full-column read pays
# only the per-part steps (hourly timeseries 40 -> 42 ms). See docs/benchmarks.md.
BLOCK_ROWS = 1 << 13


# A column qualifies for a value dictionary with at least this many rows per distinct value.
ROWS_PER_DISTINCT = 4
_MIN_ROWS = 1024


def value_dictionary(values: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """(distinct values, codes) of a float column when it has few distinct bit patterns, else None."""
    if not pa.types.is_floating(values.type) or len(values) < _MIN_ROWS:
        return None
    width = values.type.bit_width // 8
    bits = np.frombuffer(values.buffers()[1], dtype=f"<u{width}", count=len(values) + values.offset)[values.offset:]
    valid = values.is_valid().to_numpy(zero_copy_only=False) if values.null_count else None
    present = bits if valid is None else bits[valid]
    # A cheap bound first: a sample with many distinct values rules the column out.
    sample = present[:: max(1, len(present) // 4096)]
    if len(np.unique(sample)) * ROWS_PER_DISTINCT > max(len(sample), 1) * 2:
        return None
    distinct, inverse, counts = np.unique(present, return_inverse=True, return_counts=True)
    if len(distinct) * ROWS_PER_DISTINCT > len(values):
        return None
    # Most frequent first: small codes dominate, so their high bytes compress (on the demo
    # ratio column 2.0 -> 1.4 bytes/row for the int16 codes after zstd).
    order = np.lexsort((distinct, -counts))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    distinct, inverse = distinct[order], rank[inverse.ravel()]
    code_dtype = np.int16 if len(distinct) <= 1 << 15 else np.int32
    codes = np.zeros(len(values), dtype=code_dtype)
    if valid is None:
        codes[:] = inverse
    else:
        codes[valid] = inverse
    dictionary = pa.Array.from_buffers(values.type, len(distinct), [None, pa.py_buffer(distinct.tobytes())])
    return dictionary, pa.array(codes, mask=None if valid is None else ~valid)


def encode_values(values: pa.Array, ctype: ColumnType) -> tuple[dict[str, pa.Buffer], dict]:
    return {"values": ipc_bytes(values)}, value_stats(values, ctype)


def value_stats(values: pa.Array, ctype: ColumnType) -> dict:
    stats: dict = {"nullCount": int(values.null_count)}
    if ctype.is_numeric and len(values) > values.null_count:
        # Timestamps as epoch millis; a projection's time column need not be its first sort key.
        mm = pc.min_max(values.cast(pa.int64()) if ctype.kind is TypeKind.TIMESTAMP else values)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        stats["min"], stats["max"] = lo, hi
        stats["cardinality"] = _distinct_count(values)
    return stats


def _distinct_count(values: pa.Array) -> int:
    """Distinct non-null values. A sorted integer column without nulls (``__time`` always is)
    counts its changes in one numpy pass; hashing 700k timestamps cost more than encoding them."""
    t = values.type
    if not values.null_count and len(values) > 1 and (pa.types.is_integer(t) or pa.types.is_timestamp(t)):
        width = t.bit_width // 8
        kind = "u" if pa.types.is_unsigned_integer(t) else "i"
        v = np.frombuffer(values.buffers()[1], dtype=f"<{kind}{width}",
                          count=len(values) + values.offset)[values.offset:]
        if bool(np.all(v[1:] >= v[:-1])):
            return 1 + int(np.count_nonzero(v[1:] != v[:-1]))
    return int(pc.count_distinct(values).as_py())


def _value_dictionary_parts(values: pa.Array) -> dict[str, pa.Buffer] | None:
    found = value_dictionary(values)
    if found is None:
        return None
    return {"dictionary": ipc_bytes(found[0]), "codes": ipc_bytes(found[1])}


class ValueColumn:
    def __init__(self, container: Container, parts: dict[str, str], num_rows: int, stats: dict,
                 ctype: ColumnType) -> None:
        self._container = container
        self._parts = parts
        self.num_rows = num_rows
        self.stats = stats
        self.type = ctype

    @classmethod
    def open(cls, stored: StoredColumn) -> ValueColumn:
        column = cls(stored.container, dict(stored.parts), stored.num_rows, dict(stored.stats), stored.type)
        block_rows = getattr(stored.spec, "block_rows", None)
        if block_rows is not None:
            blocks = getattr(stored.spec, "blocks", None)
            if not isinstance(block_rows, int) or block_rows <= 0 or not isinstance(blocks, int) or \
                    blocks != -(-stored.num_rows // block_rows):
                raise SegmentCorruptError(
                    f"segment {stored.container.label}: column '{stored.name}' has blockRows {block_rows!r} and "
                    f"blocks {blocks!r}, which do not cover its {stored.num_rows} rows",
                    getattr(stored.container, "segment_id", None))
            column._block_rows = block_rows
        return column

    _block_rows: int | None = None
    _stored_bytes: int | None = None

    def element_index(self) -> ElementIndex | None:
        """The ARRAY column's per-element index, when the segment stores one (see element_index.py);
        None for other columns and for segments written before it (filters then read values)."""
        return read_element_index(self._container, self._parts, self.num_rows, "an ARRAY column")

    def values(self, check: bool = True) -> pa.Array:
        # Not memoized here: the container reads mapped parts in place and keeps decoded
        # (compressed) ones in its bounded cache, which a reference held here would defeat.
        # ``check=False``: the caller checked the file is unchanged just before (see Container).
        name = self._parts.get("values")
        if name is not None:
            return self._container.array(name, check)
        if self._block_rows is not None:
            return self._container.derived(self._parts["block0"], "values", self._joined, self.num_rows * 9)
        codes = self._parts["codes"]
        return self._container.derived(codes, "values", self._looked_up, self.num_rows * 8)

    def derived_values(self, kind: str, make: Callable[[pa.Array], Any]):
        """``make(self.values())`` (something with ``nbytes``, or None: nothing kept), kept in the
        node's part cache under this open file, as decoded parts are: charged to its budget and
        dropped when the file closes. Keyed by the file and part, never by buffer addresses."""
        part = self._parts.get("values") or self._parts.get("block0") or self._parts["codes"]
        kind = f"derived:{kind}"
        hit = self._container.cached(part, kind)
        if hit is not None:
            return hit
        value = make(self.values())
        if value is None:
            return None
        return self._container.derived(part, kind, lambda: value, value.nbytes)

    def _block(self, i: int) -> pa.Array:
        arr = self._container.array(self._parts[f"block{i}"])
        expected = min(self._block_rows, self.num_rows - i * self._block_rows)
        if len(arr) != expected:
            raise SegmentCorruptError(f"segment {self._container.label}: part '{self._parts[f'block{i}']}' holds "
                                      f"{len(arr)} rows, not {expected}", getattr(self._container, "segment_id", None))
        return arr

    def _joined(self) -> pa.Array:
        count = -(-self.num_rows // self._block_rows)
        blocks = [self._block(i) for i in range(count)]
        return pa.concat_arrays(blocks) if len(blocks) != 1 else blocks[0]

    def _looked_up(self) -> pa.Array:
        dictionary = self._container.array(self._parts["dictionary"])
        return dictionary.take(self._container.array(self._parts["codes"]))

    def part_bytes(self, roles: tuple[str, ...] = ("values",)) -> int:
        # Reading values reads every part of the column, however it is stored (but not the element
        # index, which only filters read). Summed once: a
        # column of many blocks would otherwise pay a step per block on every query.
        if self._stored_bytes is None:
            total = sum(self._container.part_length(p) for role, p in self._parts.items()
                        if role not in ELEMENT_ROLES)
            if not total:
                return total  # not memoized: the container did not know its parts yet
            self._stored_bytes = total
        return self._stored_bytes

    def numpy(self) -> np.ndarray:
        """Values as numpy without copying where Arrow allows; null slots hold unspecified values."""
        arr = self.values()
        if pa.types.is_timestamp(arr.type):
            arr = arr.view(pa.int64())
        dtype = arr.type.to_pandas_dtype()
        return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr) + arr.offset)[arr.offset:]

    def take(self, rows: np.ndarray | None) -> pa.Array:
        if rows is None:
            return self.values()
        if self._block_rows is None or len(rows) * 64 > self.num_rows:
            return self.values().take(pa.array(rows))
        joined = self._container.cached(self._parts["block0"], "values")
        if joined is not None:  # warm: one take from the joined column beats grouping rows by block
            return joined.take(pa.array(rows))
        # A few rows: decode only their blocks (a cold read of a needle's rows).
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return self.values().slice(0, 0)
        if rows.min() < 0 or rows.max() >= self.num_rows:
            raise IndexError(f"row {int(rows.max()) if rows.max() >= self.num_rows else int(rows.min())} is out of "
                             f"range for a column of {self.num_rows} rows")
        of = rows // self._block_rows
        if self._container.cached(self._parts[f"block{int(of[0])}"], "array") is not None:
            # A block of these rows was read before: the column is being read again, so join it
            # once (from mostly cached blocks) and take from that, as the warm needle query does,
            # instead of a take per block on every read.
            return self.values().take(pa.array(rows))
        needed = np.unique(of)
        if len(needed) * 2 > -(-self.num_rows // self._block_rows):
            # Rows spread over most blocks: the joined column (one cache entry once warm) is
            # cheaper than a take per block, and a cold read decodes most blocks anyway.
            return self.values().take(pa.array(rows))
        # Each block gives its own rows (no block is copied whole), then the pieces go back to
        # the order asked for.
        order = np.argsort(of, kind="stable")
        grouped = of[order]
        bounds = np.flatnonzero(np.diff(grouped)) + 1
        pieces = []
        for chunk in np.split(order, bounds):
            b = int(of[chunk[0]])
            pieces.append(self._block(b).take(pa.array(rows[chunk] - b * self._block_rows)))
        out = pa.concat_arrays(pieces) if len(pieces) != 1 else pieces[0]
        if np.all(order[1:] > order[:-1]):
            return out
        back = np.empty(len(order), dtype=np.int64)
        back[order] = np.arange(len(order))
        return out.take(pa.array(back))

    def dictionary_codes(self) -> None:
        return None

    def field(self, path: str) -> None:
        return None

    paths_complete = False

    def index(self) -> None:
        return None


def _encode(values: pa.Array, ctype: ColumnType, options: dict | None = None) -> EncodedColumn:
    stats = value_stats(values, ctype)
    allowed = (options or {}).get("valueDictionary", True) is not False
    looked_up = _value_dictionary_parts(values) if allowed else None
    if looked_up is not None:
        return EncodedColumn(looked_up, stats, PlainSpec(value_dictionary=True))
    if pa.types.is_list(values.type) and (options or {}).get("elementIndex", True) is not False:
        parts = {"values": ipc_bytes(values)}
        parts.update({role: ipc_bytes(arr) for role, arr in encode_element_index(values).items()})
        return EncodedColumn(parts, stats, PlainSpec(element_index=True))
    block_rows = (options or {}).get("blockRows", BLOCK_ROWS)
    fixed = pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_timestamp(values.type)
    if fixed and block_rows and len(values) > block_rows:
        count = -(-len(values) // block_rows)
        blocks = {f"block{i}": ipc_bytes(values.slice(i * block_rows, block_rows)) for i in range(count)}
        return EncodedColumn(blocks, stats, PlainSpec(block_rows=block_rows, blocks=count))
    return EncodedColumn({"values": ipc_bytes(values)}, stats, PlainSpec())


NUMBER_DICTIONARY = register_feature("numberDictionary")
VALUE_BLOCKS = register_feature("valueBlocks")
PLAIN = register(Encoding("plain", PlainSpec, ValueColumn.open, _encode, required_roles=("values",)))
