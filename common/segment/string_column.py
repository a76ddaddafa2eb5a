"""Dictionary-encoded STRING columns: sorted dictionary, int32 codes, and a Roaring bitmap per value.

Parts: ``dictionary`` (sorted, no nulls), ``codes`` (int8/16/32 by cardinality; null rows are Arrow-null and hold -1
underneath, so both a DictionaryArray and a raw numpy view are free), and ``bitmaps`` (one
serialized Roaring bitmap per dictionary id, plus the null rows' bitmap at index ``cardinality``).

Since spec ``codeBits`` (requiredFeatures ``bitPackedCodes``) the writer stores codes narrower:
bit-packed to 1, 2 or 4 bits when the column has at most 16 ids counting null, and for wider
nullable columns without Arrow's validity bitmap (-1 already marks null). Readers unpack them
once into the decoded-part cache; columns without nulls and over 16 ids keep the mapped int codes.

The writer takes plain strings or an Arrow dictionary array (ingestion reads Parquet string
columns that way): from a dictionary it keeps the entries rows use, sorts them and renumbers the
indices, instead of hashing every row's string; the stored parts are the same either way.

Because the dictionary is sorted, equality is a binary search, IN is several, and a range or a
LIKE prefix is a contiguous run of ids.

Bitmaps are opt-in (column option ``bitmaps: true``, or ``string_bitmaps=True`` for a whole
build). A column without them (requiredFeatures ``stringIndexFromCodes``) answers the same index
questions by one pass over its codes, building the Roaring result straight from the match mask
(column_reader.bitmap_of_mask). Measured on the demo rows the stored bitmaps were 11.2 of 29.9
bytes/row of a compressed segment: an inverted index holds the same information as the codes
(about log2(cardinality) bits per row each), so it cannot be made cheap by encoding alone, while
the scan it saves costs about 1 ms per million rows once the codes are decoded. Segments written
before this default keep their bitmaps part and are read through it.

Code blocks (column option ``codeBlockRows``, requiredFeatures ``codeBlocks``; opt-in): codes
that are not bit-packed are stored as parts ``codes0..`` of that many rows, with each block's
[min, max] non-null code in the spec. A take of a few rows decodes only their blocks, and an
equality, IN or range filter scans only the blocks whose range may hold a matching id when that
rules out at least half of them. A value absent from the dictionary reads no codes at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.errors import SegmentCorruptError
from common.segment.bit_packing import WIDTHS, pack, unpack, width_for
from common.segment.bitmap_serializer import serialize_grouped
from common.segment.column_reader import IdRun, Ids, rows_with_ids, union_bitmaps
from common.segment import inverted_index
from common.segment.container import Container, ipc_bytes
from common.segment.encoding import EncodedColumn, Encoding, EncodingSpec, StoredColumn, register, register_feature
from common.segment.inverted_index import InvertedIndex, stable_order
from common.types.column_type import STRING, ColumnType


@dataclass
class EncodedString:
    parts: dict[str, pa.Buffer]
    stats: dict
    code_bits: int | None = None  # the codes part holds bit-packed codes of this width
    code_block_rows: int | None = None  # set: parts codes0, codes1, ... of this many rows each
    code_ranges: list | None = None  # [min, max] non-null code of each block ([-1, -1]: only nulls)


# Code blocks are opt-in (column option ``codeBlockRows``, e.g. 65536 like value blocks): on the
# storage benchmark's needle query (an equality on a high-cardinality column whose rows spread
# over every block, codes in random order) they saved nothing, warm or cold, and cost 0.7% of
# the bytes; they pay when a column's values cluster (the zone map skips blocks) or when the
# rows a query reads fall in few blocks. See docs/benchmarks.md (storage section).
CODE_BLOCK_ROWS = 0


def _code_blocks(narrow: np.ndarray, block_rows: int) -> tuple[dict[str, pa.Buffer], list]:
    """Parts ``codes0..`` of ``block_rows`` codes each (no validity: -1 marks null) and each
    block's [min, max] non-null code ([-1, -1] when it holds only nulls), the zone map an
    equality filter uses to skip blocks. Null rows are left out of the range so that a block
    with one null row does not cover every low code."""
    parts, ranges = {}, []
    for i, start in enumerate(range(0, len(narrow), block_rows)):
        block = narrow[start:start + block_rows]
        parts[f"codes{i}"] = ipc_bytes(pa.array(block))
        valid = block[block >= 0]
        ranges.append([int(valid.min()), int(valid.max())] if len(valid) else [-1, -1])
    return parts, ranges


def _bitmaps_binary(codes: np.ndarray, cardinality: int) -> pa.Array:
    """One serialized Roaring bitmap per code, plus the null rows' (code -1) at ``cardinality``."""
    keyed = np.where(codes < 0, cardinality, codes).astype(np.int32)
    order = stable_order(keyed, cardinality + 1)
    data, offsets = serialize_grouped(order, keyed[order], cardinality + 1)
    return pa.Array.from_buffers(pa.large_binary(), cardinality + 1,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def code_type(cardinality: int) -> pa.DataType:
    """The narrowest signed index type for the dictionary (codes need -1 for null)."""
    if cardinality < 127:
        return pa.int8()
    if cardinality < 32767:
        return pa.int16()
    return pa.int32()


def combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array; chunks of a dictionary type get one unified dictionary, or are decoded when
    Arrow cannot unify them (it refuses dictionaries holding nulls)."""
    if not isinstance(values, pa.ChunkedArray):
        return values
    if pa.types.is_dictionary(values.type) and values.num_chunks > 1:
        grown = _grown_dictionary(values)
        if grown is not None:
            return grown
    try:
        return values.combine_chunks()
    except pa.ArrowInvalid:
        if not pa.types.is_dictionary(values.type):
            raise
        return values.cast(values.type.value_type).combine_chunks()


def _grown_dictionary(values: pa.ChunkedArray) -> pa.DictionaryArray | None:
    """The chunks as one array over the longest chunk's dictionary, when every other chunk's
    dictionary is its prefix (None otherwise). Parquet's reader hands the batches of a row group
    over that way (each batch's dictionary is the entries read so far), and comparing prefixes
    is a memory compare where unifying hashes every entry of every chunk's dictionary again."""
    chunks = [c for c in values.chunks if len(c)]
    if not chunks:
        return None
    longest = max((c.dictionary for c in chunks), key=len)
    for chunk in chunks:
        dictionary = chunk.dictionary
        if dictionary is not longest and not longest.slice(0, len(dictionary)).equals(dictionary):
            return None
    indices = pa.concat_arrays([c.indices for c in chunks])
    return pa.DictionaryArray.from_arrays(indices, longest)


def _from_values(values: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray | None]:
    """(sorted distinct values, int32 codes with -1 for null, null mask or None) of any string array."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    encoded = pc.dictionary_encode(values, null_encoding="mask")
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    raw_dict = encoded.dictionary
    # Sort the dictionary (UTF-8 byte order) and renumber the codes through the inverse permutation.
    order = pc.sort_indices(raw_dict).to_numpy()
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    dictionary = raw_dict.take(pa.array(order, pa.int32()))
    idx = encoded.indices
    null_mask = idx.is_null().to_numpy(zero_copy_only=False) if idx.null_count else None
    raw = idx.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    codes = rank[raw] if len(rank) else np.zeros(len(raw), dtype=np.int32)
    if null_mask is not None:
        codes[null_mask] = -1
    return dictionary, codes, null_mask


def _from_dictionary(values: pa.DictionaryArray) -> tuple[pa.Array, np.ndarray, np.ndarray | None] | None:
    """What ``_from_values`` gives, from an Arrow dictionary array without hashing every row:
    only the values rows use are kept, sorted, and the row indices renumbered. Ingestion reads
    Parquet string columns this way (their pages are dictionary-encoded already). None (the
    caller hashes the values) when the dictionary holds nulls or repeats a value that rows use."""
    dictionary = values.dictionary
    if dictionary.null_count:
        return None
    if not pa.types.is_string(dictionary.type):
        try:
            dictionary = dictionary.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    idx = values.indices
    null_mask = idx.is_null().to_numpy(zero_copy_only=False) if idx.null_count else None
    raw = idx.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    used = np.zeros(len(dictionary), dtype=bool)
    used[raw if null_mask is None else raw[~null_mask]] = True
    present = np.flatnonzero(used)
    kept = dictionary.take(pa.array(present, pa.int64())) if len(present) != len(dictionary) else dictionary
    order = pc.sort_indices(kept).to_numpy()
    sorted_values = kept.take(pa.array(order, pa.int64()))
    if len(sorted_values) > 1 and pc.any(pc.equal(sorted_values.slice(1), sorted_values.slice(0, len(sorted_values) - 1))).as_py():
        return None
    remap = np.zeros(max(1, len(dictionary)), dtype=np.int32)  # null rows index 0 until masked
    remap[present[order]] = np.arange(len(order), dtype=np.int32)
    codes = remap[raw]
    if null_mask is not None:
        codes[null_mask] = -1
    return sorted_values, codes, null_mask


def encode_string(values: pa.Array, bitmaps: bool = True, pack_codes: bool = False,
                  code_block_rows: int = 0) -> EncodedString:
    """Dictionary-encode a string array (any string-like Arrow type, may hold nulls); ``bitmaps``
    False leaves out the per-value bitmaps part; ``pack_codes`` bit-packs the codes of a column
    with at most 16 ids (counting null); ``code_block_rows`` (with ``pack_codes``) splits codes
    that are not bit-packed into blocks of that many rows when the column is longer."""
    values = combined(values)
    found = _from_dictionary(values) if pa.types.is_dictionary(values.type) else None
    if found is None:
        found = _from_values(values)
    dictionary, codes, null_mask = found
    cardinality = len(dictionary)
    narrow = codes.astype(code_type(cardinality).to_pandas_dtype())
    codes_arr = pa.array(narrow, mask=null_mask) if null_mask is not None else pa.array(narrow)
    stats = {
        "nullCount": int(values.null_count),
        "cardinality": cardinality,
        "min": dictionary[0].as_py() if cardinality else None,
        "max": dictionary[cardinality - 1].as_py() if cardinality else None,
    }
    parts = {"dictionary": ipc_bytes(dictionary), "codes": ipc_bytes(codes_arr)}
    width = width_for(cardinality + (1 if null_mask is not None else 0)) if pack_codes else None
    if width is not None:
        # Null rows (-1) become 0 when the column has any, so stored values start at 0.
        shift = 1 if null_mask is not None else 0
        parts["codes"] = ipc_bytes(pa.array(pack(codes + shift, width), pa.uint8()))
    elif pack_codes and null_mask is not None:
        # Wider codes keep their type but drop Arrow's validity bitmap: -1 already marks null
        # rows, and the bitmap cost 0.08 bytes/row after zstd on the mostly-null geo columns.
        width = narrow.dtype.itemsize * 8
        parts["codes"] = ipc_bytes(pa.array(narrow))
    block_rows, ranges = None, None
    if pack_codes and code_block_rows and len(narrow) > code_block_rows and (width is None or width >= 8):
        # Blocks hold plain signed codes: no validity bitmap, -1 marks null (codeBits 8/16/32
        # says so when the column has nulls; without nulls there is no -1).
        del parts["codes"]
        blocks, ranges = _code_blocks(narrow, code_block_rows)
        parts.update(blocks)
        block_rows = code_block_rows
    if bitmaps:
        parts["bitmaps"] = ipc_bytes(_bitmaps_binary(codes, cardinality))
    return EncodedString(parts, stats, width, block_rows, ranges)


@dataclass(frozen=True)
class DictionarySpec(EncodingSpec):
    """``sharedDictionary`` names an entry of the manifest's ``dictionaries`` whose part holds this
    column's values, so a projection's column reuses the base table's dictionary."""

    shared_dictionary: str | None = None
    bitmaps: bool | None = None  # False: no bitmaps part, the index scans the codes
    # 1, 2, 4: the codes part is bit-packed (bit_packing.py), null rows 0 and ids from 1 when the
    # column has nulls; 8, 16, 32: signed codes with -1 for null and no Arrow validity bitmap.
    code_bits: int | None = None
    # Set: the codes are parts codes0 .. codes{codeBlocks-1} of codeBlockRows rows each (the
    # last may be shorter), and codeRanges[i] is block i's [min, max] non-null code ([-1, -1]
    # when it holds only nulls; null rows are not in the ranges, so the null id reads every block).
    code_block_rows: int | None = None
    code_blocks: int | None = None
    code_ranges: list | None = None
    KEYS: ClassVar = (("sharedDictionary", "shared_dictionary"), ("bitmaps", "bitmaps"), ("codeBits", "code_bits"),
                      ("codeBlockRows", "code_block_rows"), ("codeBlocks", "code_blocks"),
                      ("codeRanges", "code_ranges"))

    def features(self) -> tuple[str, ...]:
        # An older reader would find no bitmaps part and refuse with a less clear message.
        return ((INDEX_FROM_CODES,) if self.bitmaps is False else ()) + \
            ((BIT_PACKED_CODES,) if self.code_bits is not None else ()) + \
            ((CODE_BLOCKS,) if self.code_block_rows is not None else ())

    def roles(self, required: tuple[str, ...]) -> tuple[str, ...]:
        out = tuple(r for r in required if r != "bitmaps") if self.bitmaps is False else required
        if self.code_block_rows is not None and isinstance(self.code_blocks, int):
            out = tuple(r for r in out if r != "codes") + tuple(f"codes{i}" for i in range(self.code_blocks))
        return out


def encode_with_shared_dictionary(values: pa.Array, dictionary: pa.Array, name: str, bitmaps: bool = True,
                                  pack_codes: bool = False) -> EncodedString:
    """Codes (and with ``bitmaps`` the per-value bitmaps) of ``values`` against an existing sorted
    dictionary (no dictionary part): a projection's grouping column reuses the base table's
    dictionary this way. ``pack_codes``: bit-pack codes of a dictionary of at most 16 ids
    (counting null) and drop the validity bitmap of wider nullable codes, as ``encode_string``."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    idx = pc.index_in(values, value_set=dictionary)
    missing = pc.and_(pc.is_null(idx), pc.is_valid(values))
    if pc.any(missing).as_py():
        value = values.filter(missing)[0].as_py()
        raise ValueError(f"value {value!r} of '{name}' is not in the shared dictionary '{name}'")
    null_mask = values.is_null().to_numpy(zero_copy_only=False) if values.null_count else None
    codes = idx.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    cardinality = len(dictionary)
    narrow = codes.astype(code_type(cardinality).to_pandas_dtype())
    codes_arr = pa.array(narrow, mask=null_mask) if null_mask is not None else pa.array(narrow)
    present = np.unique(codes[codes >= 0])
    stats = {
        "nullCount": int(values.null_count),
        "cardinality": cardinality,
        "min": dictionary[int(present[0])].as_py() if len(present) else None,
        "max": dictionary[int(present[-1])].as_py() if len(present) else None,
    }
    parts = {"codes": ipc_bytes(codes_arr)}
    width = width_for(cardinality + (1 if null_mask is not None else 0)) if pack_codes else None
    if width is not None:
        parts["codes"] = ipc_bytes(pa.array(pack(codes + (1 if null_mask is not None else 0), width), pa.uint8()))
    elif pack_codes and null_mask is not None:
        width = narrow.dtype.itemsize * 8
        parts["codes"] = ipc_bytes(pa.array(narrow))
    if bitmaps:
        parts["bitmaps"] = ipc_bytes(_bitmaps_binary(codes, cardinality))
    return EncodedString(parts, stats, width)


class StringColumn:
    """Read side of a dictionary-encoded column; every accessor is lazy and zero-copy."""

    def __init__(self, container: Container, parts: dict[str, str], num_rows: int, stats: dict,
                 ctype: ColumnType = STRING, code_bits: int | None = None) -> None:
        self._container = container
        self._parts = parts
        self.num_rows = num_rows
        self.stats = stats
        self.type = ctype
        self._code_bits = code_bits

    @classmethod
    def open(cls, stored: StoredColumn) -> StringColumn:
        code_bits = getattr(stored.spec, "code_bits", None)
        if code_bits is not None and code_bits not in WIDTHS + UNPACKED_WIDTHS:
            raise SegmentCorruptError(f"segment {stored.container.label}: column '{stored.name}' has codeBits "
                                      f"{code_bits!r}; this version reads {', '.join(map(str, WIDTHS + UNPACKED_WIDTHS))}",
                                      getattr(stored.container, "segment_id", None))
        column = cls(stored.container, dict(stored.parts), stored.num_rows, dict(stored.stats), stored.type, code_bits)
        block_rows = getattr(stored.spec, "code_block_rows", None)
        if block_rows is not None:
            column._blocks = _checked_blocks(stored, block_rows, code_bits)
            column._block_rows = block_rows
        return column

    _block_rows: int | None = None
    _blocks: list | None = None  # [min, max] code per block

    # -- parts ------------------------------------------------------------------------------
    # Parts are not memoized here: the container reads mapped parts in place and keeps decoded
    # (compressed) ones in its bounded cache, which a reference held here would defeat.
    @property
    def dictionary(self) -> pa.StringArray:
        return self._container.array(self._parts["dictionary"])

    @property
    def cardinality(self) -> int:
        # Not stats.get(..., len(self.dictionary)): that would read the dictionary on every call.
        return int(self.stats["cardinality"]) if "cardinality" in self.stats else len(self.dictionary)

    @property
    def codes_array(self) -> pa.Int32Array:
        if self._block_rows is not None:
            return self._container.derived(self._parts["codes0"], "joined", self._joined, self.num_rows * 5)
        if self._code_bits is None:
            return self._container.array(self._parts["codes"])
        return self._container.derived(self._parts["codes"], "unpacked", self._unpacked, self.num_rows * 2)

    def _codes_entry(self) -> tuple[str, str]:
        """The cache entry (part, kind) that ``codes_array`` reads."""
        if self._block_rows is not None:
            return self._parts["codes0"], "joined"
        if self._code_bits is None:
            return self._parts["codes"], "array"
        return self._parts["codes"], "unpacked"

    def indexed_rows(self, ids: Ids) -> BitMap | None:
        """Rows of ``ids`` through the in-memory inverted index (inverted_index.py), or None when
        a scan of the codes answers instead: a column under MIN_CARDINALITY ids, codes not yet
        decoded and no index (a cold read: the scan decodes them, and the next filter on this
        column builds the index), an index too big for the cache's budget, or a dense match."""
        cardinality = self.cardinality
        if cardinality < inverted_index.MIN_CARDINALITY:
            return None
        name, kind = self._codes_entry()
        index = self._container.cached(name, "inverted")
        if index is None:
            nbytes = InvertedIndex.nbytes_for(self.num_rows, cardinality)
            if self._container.cached(name, kind) is None or not self._container.fits_cache(nbytes):
                return None
            index = self._container.derived(name, "inverted", lambda: InvertedIndex.build(self.codes(), cardinality),
                                            nbytes)
        return index.rows(ids)

    def _code_block(self, i: int) -> np.ndarray:
        """Block ``i``'s codes (-1 for null) as numpy, decoded alone."""
        name = self._parts[f"codes{i}"]
        arr = self._container.array(name)
        expected = min(self._block_rows, self.num_rows - i * self._block_rows)
        if len(arr) != expected or not pa.types.is_signed_integer(arr.type) or arr.null_count:
            raise SegmentCorruptError(f"segment {self._container.label}: codes part '{name}' holds {len(arr)} "
                                      f"{arr.type} values, not {expected} signed codes without validity",
                                      getattr(self._container, "segment_id", None))
        return np.frombuffer(arr.buffers()[1], dtype=arr.type.to_pandas_dtype(),
                             count=len(arr) + arr.offset)[arr.offset:]

    def _joined(self) -> pa.Array:
        codes = np.concatenate([self._code_block(i) for i in range(len(self._blocks))])
        mask = codes < 0
        return pa.array(codes, mask=mask) if mask.any() else pa.array(codes)

    def candidate_blocks(self, ids: Ids, cardinality: int) -> list[int] | None:
        """Blocks whose [min, max] code range may hold one of ``ids``, or None when the codes
        are not in blocks; every block when ``ids`` include the null rows (``cardinality``)."""
        if self._blocks is None:
            return None
        if isinstance(ids, IdRun):
            if ids.lo <= cardinality < ids.hi:
                return list(range(len(self._blocks)))
            lo, hi = ids.lo, ids.hi - 1
            return [i for i, (mn, mx) in enumerate(self._blocks) if mx >= 0 and lo <= mx and hi >= mn]
        wanted = np.asarray(ids, dtype=np.int64)
        if np.any(wanted == cardinality):
            return list(range(len(self._blocks)))
        wanted = np.sort(wanted)
        out = []
        for i, (mn, mx) in enumerate(self._blocks):
            # Some wanted id within [mn, mx]: the first id >= mn is <= mx.
            j = int(np.searchsorted(wanted, mn))
            if mx >= 0 and j < len(wanted) and wanted[j] <= mx:
                out.append(i)
        return out

    def rows_in_blocks(self, blocks: list[int], ids: Ids) -> BitMap:
        """Rows of ``ids`` found by scanning only ``blocks`` (the others hold none of them)."""
        out = BitMap()
        for i in blocks:
            found = rows_with_ids(self._code_block(i), self.cardinality, ids)
            out |= found.shift(i * self._block_rows) if i else found
        return out

    def _unpacked(self) -> pa.Array:
        packed = self._container.array(self._parts["codes"])
        if self._code_bits in UNPACKED_WIDTHS:
            if len(packed) != self.num_rows or packed.type.bit_width != self._code_bits:
                raise SegmentCorruptError(f"segment {self._container.label}: codes part '{self._parts['codes']}' "
                                          f"holds {len(packed)} {packed.type} values, not {self.num_rows} of "
                                          f"{self._code_bits} bits", getattr(self._container, "segment_id", None))
            codes = packed.to_numpy(zero_copy_only=False)
            return pa.array(codes, mask=codes < 0)
        raw = np.frombuffer(packed.buffers()[1], dtype=np.uint8, count=len(packed) + packed.offset)[packed.offset:]
        try:
            codes = unpack(raw, self._code_bits, self.num_rows).view(np.int8)  # fresh array: no copy
        except ValueError as exc:
            raise SegmentCorruptError(f"segment {self._container.label}: codes part "
                                      f"'{self._parts['codes']}' does not unpack: {exc}",
                                      getattr(self._container, "segment_id", None)) from None
        if int(self.stats.get("nullCount", 0)):
            codes -= 1
            return pa.array(codes, mask=codes < 0)
        return pa.array(codes)

    def codes(self) -> np.ndarray:
        """Codes (int8/16/32 by cardinality) with -1 for null rows, viewed straight from the mapped file."""
        arr = self.codes_array
        dtype = arr.type.to_pandas_dtype()
        return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr) + arr.offset)[arr.offset:]

    def part_bytes(self, roles: tuple[str, ...] = ("codes", "dictionary")) -> int:
        if self._blocks is not None and "codes" in roles:
            roles = tuple(r for r in roles if r != "codes") + tuple(f"codes{i}" for i in range(len(self._blocks)))
        return sum(self._container.part_length(self._parts[r]) for r in roles if r in self._parts)

    def _bitmap_array(self) -> pa.Array:
        return self._container.array(self._parts["bitmaps"])

    @property
    def has_bitmaps(self) -> bool:
        return "bitmaps" in self._parts

    def bitmap(self, code: int) -> BitMap:
        if not self.has_bitmaps:
            ids = np.array([code], dtype=np.int64)
            found = self.indexed_rows(ids)
            return found if found is not None else rows_with_ids(self.codes(), self.cardinality, ids)
        return BitMap.deserialize(self._bitmap_array()[code].as_py())

    def null_bitmap(self) -> BitMap:
        return self.bitmap(self.cardinality)

    # -- dictionary lookups (binary search over the sorted dictionary) -------------------------
    def _bisect(self, value: str, right: bool, d: pa.Array | None = None) -> int:
        d = self.dictionary if d is None else d
        lo, hi = 0, len(d)
        while lo < hi:
            mid = (lo + hi) // 2
            v = d[mid].as_py()
            if v < value or (right and v == value):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def lookup(self, value: str) -> int | None:
        d = self.dictionary
        i = self._bisect(value, right=False, d=d)
        if i < len(d) and d[i].as_py() == value:
            return i
        return None

    def code_range(self, lower: str | None, upper: str | None, lower_strict: bool, upper_strict: bool) -> tuple[int, int]:
        """Ids [lo, hi) of dictionary values within the bounds."""
        lo = 0 if lower is None else self._bisect(lower, right=lower_strict)
        hi = len(self.dictionary) if upper is None else self._bisect(upper, right=not upper_strict)
        return lo, max(lo, hi)

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        lo = self._bisect(prefix, right=False)
        # The smallest string greater than every string with this prefix bumps its last code point.
        if prefix:
            bumped = prefix[:-1] + chr(ord(prefix[-1]) + 1) if ord(prefix[-1]) < 0x10FFFF else None
        else:
            bumped = None
        hi = len(self.dictionary) if bumped is None else self._bisect(bumped, right=False)
        return lo, max(lo, hi)

    # -- ColumnReader -------------------------------------------------------------------------
    def values(self) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(self.codes_array, self.dictionary)

    to_arrow = values

    def take(self, rows: np.ndarray | None) -> pa.DictionaryArray:
        if rows is None:
            return self.values()
        codes = self._block_take(np.asarray(rows, dtype=np.int64)) if self._blocks is not None else None
        if codes is None:
            codes = self.codes_array.take(pa.array(rows))
        return pa.DictionaryArray.from_arrays(codes, self.dictionary)

    def _block_take(self, rows: np.ndarray) -> pa.Array | None:
        """Codes of a few ``rows`` from their blocks alone (a cold read of a needle's rows), or
        None when the joined codes are the cheaper read."""
        count = len(self._blocks)
        if len(rows) == 0 or len(rows) * 64 > self.num_rows:
            return None
        if rows.min() < 0 or rows.max() >= self.num_rows:
            bad = int(rows.max()) if rows.max() >= self.num_rows else int(rows.min())
            raise IndexError(f"row {bad} is out of range for a column of {self.num_rows} rows")
        of = rows // self._block_rows
        needed = np.unique(of)
        if len(needed) * 2 > count:
            return None
        out = None
        for b in needed:
            codes = self._code_block(int(b))
            if out is None:  # the blocks' type, so every take of this column has one index type
                out = np.empty(len(rows), dtype=codes.dtype)
            at = of == b
            out[at] = codes[rows[at] - int(b) * self._block_rows]
        mask = out < 0
        return pa.array(out, mask=mask) if mask.any() else pa.array(out)

    def dictionary_codes(self) -> tuple[np.ndarray, pa.Array]:
        return self.codes(), self.dictionary

    def field(self, path: str) -> None:
        return None

    paths_complete = False

    def index(self) -> SortedDictionaryIndex:
        return SortedDictionaryIndex(self)


def _checked_blocks(stored: StoredColumn, block_rows, code_bits) -> list:
    spec = stored.spec
    blocks, ranges = getattr(spec, "code_blocks", None), getattr(spec, "code_ranges", None)
    where = f"segment {stored.container.label}: column '{stored.name}'"
    if not isinstance(block_rows, int) or isinstance(block_rows, bool) or block_rows <= 0 or \
            not isinstance(blocks, int) or blocks != -(-stored.num_rows // block_rows):
        raise SegmentCorruptError(f"{where} has codeBlockRows {block_rows!r} and codeBlocks {blocks!r}, which do "
                                  f"not cover its {stored.num_rows} rows", getattr(stored.container, "segment_id", None))
    if code_bits is not None and code_bits not in UNPACKED_WIDTHS:
        raise SegmentCorruptError(f"{where} has code blocks with bit-packed codes (codeBits {code_bits})",
                                  getattr(stored.container, "segment_id", None))
    ok = isinstance(ranges, list) and len(ranges) == blocks and all(
        isinstance(r, list) and len(r) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in r)
        and -1 <= r[0] <= r[1] for r in ranges)
    if not ok:
        raise SegmentCorruptError(f"{where} has codeRanges {str(ranges)[:80]!r}; expected one [min, max] pair of "
                                  f"codes per block ({blocks})", getattr(stored.container, "segment_id", None))
    return ranges


class SortedDictionaryIndex:
    """The ColumnIndex of a dictionary column: binary searches and stored per-value bitmaps."""

    def __init__(self, column: StringColumn) -> None:
        self._column = column
        self.num_rows = column.num_rows

    @property
    def cardinality(self) -> int:
        return self._column.cardinality

    @property
    def dictionary(self) -> pa.Array:
        return self._column.dictionary

    def lookup(self, value: str) -> Ids:
        code = self._column.lookup(value)
        return np.array([] if code is None else [code], dtype=np.int64)

    def range(self, lower, upper, lower_strict: bool, upper_strict: bool) -> Ids:
        return IdRun(*self._column.code_range(lower, upper, lower_strict, upper_strict))

    def prefix(self, prefix: str) -> Ids:
        return IdRun(*self._column.prefix_range(prefix))

    def bitmap(self, ids: Ids) -> BitMap:
        if not self._column.has_bitmaps:
            if len(ids) == 0:
                return BitMap()  # a value absent from the dictionary: no code is read
            found = self._column.indexed_rows(ids)
            if found is not None:
                return found
            blocks = self._column.candidate_blocks(ids, self.cardinality)
            if blocks is not None and len(blocks) * 2 <= len(self._column._blocks):
                # The zone map rules out most blocks: scan only the others. When it rules out
                # fewer, one pass over the joined codes (one cache entry once warm) is cheaper
                # than a pass per block (measured on the storage benchmark's needle query).
                return self._column.rows_in_blocks(blocks, ids)
            return rows_with_ids(self._column.codes(), self.cardinality, ids)
        # One fetch of the bitmaps part for all ids (a compressed part is one cache lookup).
        stored = self._column._bitmap_array()
        return union_bitmaps(lambda code: BitMap.deserialize(stored[code].as_py()), self._column.codes,
                             self.cardinality, ids)

    def null_bitmap(self) -> BitMap:
        return self._column.null_bitmap()


def _encode(values: pa.Array, ctype: ColumnType, options: dict | None = None) -> EncodedColumn:
    # Bitmaps are opt-in (the column option ``bitmaps: true``): see the module docstring.
    bitmaps = (options or {}).get("bitmaps", False) is True
    block_rows = (options or {}).get("codeBlockRows", CODE_BLOCK_ROWS)
    if not isinstance(block_rows, int) or isinstance(block_rows, bool) or block_rows < 0:
        raise ValueError(f"column option codeBlockRows must be a non-negative integer (0: one codes part), "
                         f"got {block_rows!r}")
    enc = encode_string(values, bitmaps, pack_codes=(options or {}).get("packCodes", True) is not False,
                        code_block_rows=block_rows)
    blocks = None if enc.code_block_rows is None else len(enc.code_ranges)
    return EncodedColumn(enc.parts, enc.stats, DictionarySpec(bitmaps=None if bitmaps else False,
                                                              code_bits=enc.code_bits,
                                                              code_block_rows=enc.code_block_rows,
                                                              code_blocks=blocks, code_ranges=enc.code_ranges))


INDEX_FROM_CODES = register_feature("stringIndexFromCodes")
BIT_PACKED_CODES = register_feature("bitPackedCodes")
CODE_BLOCKS = register_feature("codeBlocks")
UNPACKED_WIDTHS = (8, 16, 32)
DICTIONARY = register(Encoding("dictionary", DictionarySpec, StringColumn.open, _encode,
                               required_roles=("dictionary", "codes", "bitmaps")))
