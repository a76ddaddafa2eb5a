"""The ``nested`` encoding: a COMPLEX<json> column stored as many indexed field columns.

At build time every path that leads to a literal or to an array of literals becomes a field
("a bunch of columns in a trench coat", as Druid's design puts it). The column owns global value
dictionaries shared by all its fields, split by type and stacked into one id space
(strings, then longs, then doubles, then arrays of literals). Each field stores:
- ``local``: its local dictionary (sorted global ids it uses), so its values are sorted too;
- ``codes``: a local id per row (-1 where the path is missing or null);
- ``bitmaps``: one Roaring bitmap per local id, plus the missing/null rows;
- ``values``: for fields holding only numbers, the plain numeric column (sums read it).
The raw documents are kept zstd-compressed (whole-object reads, JSON_QUERY of objects, paths
beyond the field guard) together with the null bitmap of the column.

Readers: the column itself reads as JSON text; ``field(path)`` is a ``ColumnReader`` over one
field: a string field is a dictionary column with a sorted dictionary and an index, a numeric
field reads its value column, an array field its arrays; a field of mixed types reads as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from common.json.document_text import dumps_document
from common.segment.container import Container, ipc_bytes
from common.segment.element_index import ROLES as ELEMENT_ROLES
from common.segment.element_index import encode_element_index, read_element_index
from common.segment.encoding import EncodedColumn, Encoding, EncodingSpec, StoredColumn, register, register_feature
from common.segment.nested_fields import NestedOptions, SplitField, split_documents
from common.segment.nested_native_split import NativeField, sort_order, split_native
from common.segment.string_column import StringColumn, _bitmaps_binary, code_type
from common.segment.value_column import ValueColumn
from common.types.column_type import DOUBLE, JSON, LONG, STRING, ColumnType, TypeKind

KINDS = ("STRING", "LONG", "DOUBLE", "ARRAY")


@dataclass(frozen=True)
class NestedSpec(EncodingSpec):
    """What a reader needs to find fields: each field's path, types and part prefix, the global
    dictionary sizes, and what the guard left out."""

    fields: tuple = ()  # ({"path": "$.a", "types": ["LONG"], "part": "f0"}, ...)
    dictionary_sizes: dict = field(default_factory=dict)  # kind -> size, in id order
    max_fields: int | None = None
    dropped_paths: tuple = ()  # the first few paths the guard kept only in the raw values
    dropped_count: int = 0
    raw: bool = True
    KEYS: ClassVar = (("fields", "fields"), ("dictionarySizes", "dictionary_sizes"), ("maxFields", "max_fields"),
                      ("droppedPaths", "dropped_paths"), ("droppedCount", "dropped_count"), ("raw", "raw"))

    def features(self) -> tuple[str, ...]:
        # Fields without codes or bitmaps, or documents rebuilt from the fields (booleans marked),
        # would be misread by a reader from before them; it refuses the segment instead.
        sparse = not self.raw or any(f.get("codes") is False or f.get("bitmaps") is False for f in self.fields)
        return (SPARSE_FIELDS,) if sparse else ()

    def to_json(self) -> dict:
        out = super().to_json()
        out["fields"] = [dict(f) for f in self.fields]
        out["droppedPaths"] = list(self.dropped_paths)
        return out

    @classmethod
    def from_json(cls, obj) -> NestedSpec:
        spec = super().from_json(obj)
        return NestedSpec(extra=spec.extra, fields=tuple(dict(f) for f in spec.fields or ()),
                          dictionary_sizes=dict(spec.dictionary_sizes or {}), max_fields=spec.max_fields,
                          dropped_paths=tuple(spec.dropped_paths or ()), dropped_count=int(spec.dropped_count or 0),
                          raw=bool(spec.raw if spec.raw is not None else True))


# ---- writing ------------------------------------------------------------------------------------
def _zstd_ipc(array: pa.Array) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, pa.schema([pa.field("v", array.type)]), options=options) as writer:
        writer.write_batch(pa.record_batch([array], names=["v"]))
    return sink.getvalue()


def _bitmap_bytes(rows: np.ndarray) -> pa.Buffer:
    bm = BitMap(np.asarray(rows, dtype=np.uint32))
    return pa.py_buffer(bm.serialize())


def _array_text(value: list) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _kind(label: str) -> str:
    return "ARRAY" if label.startswith("ARRAY") else label


class _FieldValues:
    """One field's values split by kind: kind -> (positions in the field's row list, values),
    positions None meaning all of them. A single-kind field is split without a per-value loop."""

    def __init__(self, f: SplitField | NativeField) -> None:
        if isinstance(f, NativeField):  # the compiled split grouped them already
            self.rows, self.groups = f.rows, f.groups
            return
        kinds = {_kind(t) for t in f.types}
        self.rows = np.asarray(f.rows, dtype=np.int64)
        if len(kinds) == 1:
            kind = kinds.pop()
            self.groups = {kind: (None, f.values)}
            return
        groups: dict[str, tuple[list, list]] = {}
        for i, v in enumerate(f.values):
            t = type(v)
            kind = "STRING" if t is str else "LONG" if t is int or t is bool else "DOUBLE" if t is float else "ARRAY"
            g = groups.get(kind)
            if g is None:
                g = groups[kind] = ([], [])
            g[0].append(i)
            g[1].append(int(v) if t is bool else v)
        self.groups = {k: (np.asarray(pos, dtype=np.int64), vals) for k, (pos, vals) in groups.items()}


def _array_texts(values: list) -> list[str]:
    """Each array's dictionary text. orjson prints arrays of strings and whole numbers as
    json.dumps does; arrays holding doubles (whose exponent form differs) go through json."""
    try:
        if not any(type(e) is float for v in values for e in v):
            dumps = orjson.dumps
            return [dumps(v).decode() for v in values]
    except (TypeError, orjson.JSONEncodeError):
        pass
    return [_array_text(v) for v in values]


class _Dictionaries:
    """The column's global dictionaries: sorted values per kind, stacked into one id space."""

    def __init__(self, fields: list[_FieldValues]) -> None:
        strings: list[pa.Array] = []
        longs: list[np.ndarray] = []
        doubles: list[np.ndarray] = []
        arrays: list[pa.Array] = []
        self._cache: dict[tuple[int, str], object] = {}
        for i, f in enumerate(fields):
            for kind, (_, vals) in f.groups.items():
                if isinstance(vals, pa.Array):  # from the compiled split (array kinds as text)
                    arr = vals
                    (strings if kind == "STRING" else arrays).append(arr)
                elif kind == "STRING":
                    arr = pa.array(vals, pa.string())
                    strings.append(arr)
                elif kind == "LONG":
                    arr = np.array(vals, dtype=np.int64)
                    longs.append(arr)
                elif kind == "DOUBLE":
                    arr = np.array(vals, dtype=np.float64)
                    doubles.append(arr)
                else:
                    arr = pa.array(_array_texts(vals), pa.string())
                    arrays.append(arr)
                self._cache[(i, kind)] = arr
        self.doubles = _sorted_unique_doubles(doubles)
        self._ids: dict[tuple[int, str], np.ndarray] = {}
        # Numbers: one sort of all fields' values gives the dictionary and every value's id in it.
        self.longs = np.array([], dtype=np.int64)
        for kind in ("LONG", "DOUBLE"):
            keys = [k for k in self._cache if k[1] == kind]
            if not keys:
                continue
            values = np.concatenate([self._cache[k] for k in keys])
            unique, ids = np.unique(values, return_inverse=True)
            if kind == "LONG":
                self.longs = unique
            elif len(unique) != len(self.doubles):  # (np.unique merges 0.0/-0.0 and NaNs as the dictionary does)
                ids = np.searchsorted(self.doubles, values)
            ids = ids.reshape(-1).astype(np.int64, copy=False)
            at = 0
            for k in keys:
                n = len(self._cache[k])
                self._ids[k] = ids[at:at + n]
                at += n
        # Strings (and arrays as text): one hash pass over all fields' values gives the dictionary
        # and every value's id in it.
        self.strings = self.arrays = pa.array([], pa.string())
        for kind in ("STRING", "ARRAY"):
            keys = [k for k in self._cache if k[1] == kind]
            if not keys:
                continue
            chunks = [self._cache[k] for k in keys]
            dictionary, ids = _sorted_string_ids(chunks)
            if kind == "STRING":
                self.strings = dictionary
            else:
                self.arrays = dictionary
            at = 0
            for k, chunk in zip(keys, chunks):
                self._ids[k] = ids[at:at + len(chunk)]
                at += len(chunk)
        self.offsets = {"STRING": 0, "LONG": len(self.strings)}
        self.offsets["DOUBLE"] = self.offsets["LONG"] + len(self.longs)
        self.offsets["ARRAY"] = self.offsets["DOUBLE"] + len(self.doubles)

    @property
    def sizes(self) -> dict:
        return {"STRING": len(self.strings), "LONG": len(self.longs), "DOUBLE": len(self.doubles),
                "ARRAY": len(self.arrays)}

    def global_ids(self, index: int, f: _FieldValues, num_rows: int) -> np.ndarray:
        """Each row's id in the stacked dictionaries (-1 for missing or null); vectorized per kind."""
        out = np.full(num_rows, -1, dtype=np.int64)
        for kind, (pos, _) in f.groups.items():
            if kind == "STRING":
                ids = self._ids[(index, kind)]
            else:
                ids = self.offsets[kind] + self._ids[(index, kind)]
            out[f.rows if pos is None else f.rows[pos]] = ids
        return out

    def parts(self) -> dict[str, pa.Buffer]:
        return {"dict/strings": ipc_bytes(self.strings), "dict/longs": ipc_bytes(pa.array(self.longs, pa.int64())),
                "dict/doubles": ipc_bytes(pa.array(self.doubles, pa.float64())),
                "dict/arrays": ipc_bytes(self.arrays)}


def _sorted_unique_strings(chunks: list[pa.Array]) -> pa.Array:
    """Distinct strings in byte order (Arrow compares strings by their UTF-8 bytes)."""
    if not chunks:
        return pa.array([], pa.string())
    unique = pc.unique(pa.chunked_array(chunks, pa.string()))
    return unique.take(pa.array(sort_order(unique)))


def _sorted_string_ids(chunks: list[pa.Array]) -> tuple[pa.Array, np.ndarray]:
    """(distinct strings in byte order, every value's id in them as int64) of the non-null strings
    in ``chunks``: one dictionary_encode (the distinct values in first-seen order, as pc.unique
    gives them), a sort of the distinct values and a renumbering, instead of hashing every value
    twice (unique, then index_in). Chunks of the compiled split are already ids into one shared
    array of distinct values: only that array is sorted."""
    if chunks and all(isinstance(c, pa.DictionaryArray) for c in chunks):
        distinct = chunks[0].dictionary
        if len({_buffers_of(c.dictionary) for c in chunks}) == 1:  # (each .dictionary is a new wrapper)
            return _sorted_interned_ids(distinct, np.concatenate([c.indices.to_numpy() for c in chunks]))
    chunks = [c.dictionary_decode() if isinstance(c, pa.DictionaryArray) else c for c in chunks]
    values = pa.chunked_array(chunks, pa.string())
    encoded = pc.dictionary_encode(values)
    dictionary = encoded.chunk(0).dictionary if encoded.num_chunks else pa.array([], pa.string())
    if values.null_count or any(len(c.dictionary) != len(dictionary) for c in encoded.chunks):
        # Not one shared dictionary (or nulls, which the fields never hold): hash twice.
        dictionary = _sorted_unique_strings(chunks)
        ids = pc.index_in(values, value_set=dictionary)
        return dictionary, ids.to_numpy().astype(np.int64)
    order = sort_order(dictionary)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    codes = [c.indices.to_numpy(zero_copy_only=False) for c in encoded.chunks]
    ids = rank[np.concatenate(codes)] if codes else np.array([], dtype=np.int64)
    return dictionary.take(pa.array(order)), ids


def _buffers_of(arr: pa.Array) -> tuple:
    return (arr.offset, len(arr), *(b.address if b is not None else 0 for b in arr.buffers()))


def _sorted_interned_ids(distinct: pa.Array, codes: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """(the distinct values ``codes`` use, in byte order; each code's id in them as int64). Values
    no code uses (those of fields the guard dropped) are left out."""
    used = np.zeros(len(distinct), dtype=bool)
    used[codes] = True
    if not used.all():
        keep = np.flatnonzero(used)
        distinct = distinct.take(pa.array(keep))
        codes = (np.cumsum(used, dtype=np.int64) - 1)[codes]
    order = sort_order(distinct)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return distinct.take(pa.array(order)), rank[codes]


def _sorted_unique_doubles(chunks: list[np.ndarray]) -> np.ndarray:
    if not chunks:
        return np.array([], dtype=np.float64)
    values = np.concatenate(chunks)
    nan = np.isnan(values)
    zero = values == 0
    if not (nan.any() or zero.any()):
        return np.unique(values)
    # 0.0 and -0.0 are one value: the one seen first stays (as a Python set keeps it); NaNs are
    # one value too, sorted last (numpy's order, so searchsorted finds it).
    out = np.unique(values[~nan & ~zero])
    if zero.any():
        out = np.insert(out, np.searchsorted(out, 0.0), values[np.flatnonzero(zero)[0]])
    if nan.any():
        out = np.append(out, np.nan)
    return out


# A STRING field whose values hold fewer rows than this on average gets no bitmaps: they would be
# mostly per-bitmap overhead (ids, session keys), and an equality filter scans its codes instead.
MIN_ROWS_PER_BITMAP = 16
MIN_CARDINALITY_WITHOUT_BITMAPS = 256


def _local_ids(gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A field's local dictionary (its sorted distinct global ids) and each value's local id. The
    ids of one field lie close together in the stacked id space, so a mark per id in their range
    finds both without sorting the values."""
    if not len(gids):
        return np.array([], dtype=np.int64), np.array([], dtype=np.int32)
    lo, hi = int(gids.min()), int(gids.max())
    if hi - lo > 8 * len(gids) + 4096:  # sparse over a wide range (a field of several kinds): sort
        local = np.unique(gids)
        return local, np.searchsorted(local, gids).astype(np.int32)
    seen = np.zeros(hi - lo + 1, dtype=bool)
    seen[gids - lo] = True
    local = np.flatnonzero(seen).astype(np.int64) + lo
    return local, (np.cumsum(seen, dtype=np.int32) - 1)[gids - lo]


def _field_parts(index: int, f: _FieldValues, kinds: set[str], dicts: _Dictionaries, prefix: str,
                 num_rows: int, element_index: bool = True) -> tuple[dict[str, pa.Buffer], dict]:
    """A field's parts. Only what its reader uses is stored: a numbers-only field reads its value
    column (no codes, no bitmaps); a field of several types or of arrays reads its codes through
    the local dictionary without an index (no bitmaps), as does one of LONG and DOUBLE values beside
    its value column; a STRING field has codes and, unless its
    values are near-unique, bitmaps. A field of arrays only also has a per-element index."""
    gids = dicts.global_ids(index, f, num_rows)
    present = gids >= 0
    local, present_codes = _local_ids(gids[present])
    cardinality = len(local)
    mask = ~present
    parts = {f"{prefix}/local": ipc_bytes(pa.array(local, pa.int64()))}
    meta: dict = {}
    numeric = bool(kinds) and kinds <= {"LONG", "DOUBLE"}
    if numeric and len(kinds) == 1:
        meta["codes"] = meta["bitmaps"] = False
    else:
        # (A field of both LONG and DOUBLE values keeps its codes: they say which rows were whole
        # numbers, which rebuilt documents print as such.)
        codes = np.full(len(gids), -1, dtype=np.int32)
        codes[present] = present_codes
        narrow = codes.astype(code_type(cardinality).to_pandas_dtype())
        parts[f"{prefix}/codes"] = ipc_bytes(pa.array(narrow, mask=mask if mask.any() else None))
        rows = int(present.sum())
        if kinds == {"STRING"} and not (cardinality >= MIN_CARDINALITY_WITHOUT_BITMAPS
                                        and rows < MIN_ROWS_PER_BITMAP * cardinality):
            parts[f"{prefix}/bitmaps"] = ipc_bytes(_bitmaps_binary(codes, cardinality))
        else:
            meta["bitmaps"] = False
    if element_index and kinds and all(k.startswith("ARRAY") for k in kinds):
        parts.update(_element_index_parts(prefix, dicts, local, codes, kinds))
        meta["elementIndex"] = True
    if numeric:
        dtype = np.int64 if kinds == {"LONG"} else np.float64
        nums = np.zeros(num_rows, dtype=dtype)
        for kind, (pos, _) in f.groups.items():
            nums[f.rows if pos is None else f.rows[pos]] = dicts._cache[(index, kind)]
        parts[f"{prefix}/values"] = ipc_bytes(pa.array(nums, mask=mask if mask.any() else None))
    return parts, {"cardinality": cardinality, "rows": int(present.sum()), **meta}


def _element_index_parts(prefix: str, dicts: _Dictionaries, local: np.ndarray, codes: np.ndarray,
                         kinds: set[str]) -> dict[str, pa.Buffer]:
    """An arrays-only field's per-element index (element_index.py), over the arrays as its reader
    types them (the widened element type), a row without the path holding a null array."""
    element = _array_element_type(sorted(kinds))
    texts = dicts.arrays.take(pa.array(local - dicts.offsets["ARRAY"])).to_pylist()
    distinct = pa.array([_as_element(json.loads(t), element) for t in texts],
                        ColumnType(TypeKind.ARRAY, element).to_arrow())
    per_row = distinct.take(pa.array(codes, mask=codes < 0))
    return {f"{prefix}/{role}": ipc_bytes(arr) for role, arr in encode_element_index(per_row).items()}


def encode_nested(values: pa.Array, ctype: ColumnType, options: NestedOptions | None = None) -> EncodedColumn:
    """Split JSON documents (text, one per row, null for a null row) into field columns."""
    options = options or NestedOptions()
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    num_rows = len(values)
    split = split_native(values, options)
    if split is None:
        split = split_documents(values.cast(pa.string()).to_pylist(), options)
    grouped = [_FieldValues(f) for f in split.fields]
    rebuildable = split.rebuildable and all(_path_round_trips(f.path) for f in split.fields)
    dicts = _Dictionaries(grouped)
    parts: dict[str, pa.Buffer] = dict(dicts.parts())
    fields_meta = []
    for i, f in enumerate(split.fields):
        prefix = f"f{i}"
        field_parts, stats = _field_parts(i, grouped[i], set(f.types), dicts, prefix, num_rows, options.element_index)
        parts.update(field_parts)
        meta = {"path": f.path, "types": list(f.types), "part": prefix, **stats}
        if f.booleans:
            if f.booleans == f.long_count:
                meta["booleans"] = True  # every LONG value was true/false: rebuilt documents say so
            else:
                rebuildable = False
        fields_meta.append(meta)
    nulls = split.null_rows()
    parts["nulls"] = _bitmap_bytes(nulls)
    # The raw values are kept when asked for, when the guard left paths out, and by default unless
    # the fields rebuild every document's text exactly (then reads of the whole column rebuild it).
    keep = options.keep_raw if options.keep_raw is not None else not rebuildable
    if keep or split.dropped_paths:
        parts["raw"] = _zstd_ipc(split.raw_texts())
    spec = NestedSpec(fields=tuple(fields_meta), dictionary_sizes=dicts.sizes, max_fields=options.max_fields,
                      dropped_paths=tuple(split.dropped_paths[:100]), dropped_count=len(split.dropped_paths),
                      raw="raw" in parts)
    stats = {"nullCount": int(len(nulls)), "fields": len(fields_meta), "guardTriggered": bool(split.dropped_paths)}
    if split.uncoercible:
        stats["uncoercibleValues"] = len(split.uncoercible)  # values a typed path could not take
    return EncodedColumn(parts, stats, spec)


def _path_round_trips(path: str) -> bool:
    from common.json.path_steps import parse_path, path_text

    try:
        return path_text(parse_path(path)) == path
    except Exception:  # noqa: BLE001 - a path that does not parse back cannot be rebuilt
        return False


# ---- reading ------------------------------------------------------------------------------------
class NestedColumn:
    """A COMPLEX<json> column: reads as JSON text; ``field(path)`` reads one field column."""

    def __init__(self, stored: StoredColumn) -> None:
        self._stored = stored
        self._container: Container = stored.container
        self._parts = dict(stored.parts)
        self.num_rows = stored.num_rows
        self.stats = dict(stored.stats)
        self.type = stored.type
        self.spec: NestedSpec = stored.spec
        self._fields = {f["path"]: f for f in self.spec.fields}
        self._dicts: dict[str, pa.Array] = {}
        self._open: dict[str, object] = {}

    @classmethod
    def open(cls, stored: StoredColumn) -> NestedColumn:
        return cls(stored)

    # -- the whole column -------------------------------------------------------------------------
    def values(self) -> pa.Array:
        if "raw" in self._parts:
            return self._container.array(self._parts["raw"])
        return self._rebuild()

    def take(self, rows: np.ndarray | None) -> pa.Array:
        if rows is not None and "raw" not in self._parts:
            return self._rebuild(np.asarray(rows, dtype=np.int64))
        vals = self.values()
        return vals if rows is None else vals.take(pa.array(rows))

    def dictionary_codes(self) -> None:
        return None

    def index(self) -> None:
        return None

    def part_bytes(self, roles: tuple[str, ...] = ("raw",)) -> int:
        return sum(self._container.part_length(self._parts[r]) for r in roles if r in self._parts)

    def null_rows(self) -> BitMap:
        return BitMap.deserialize(self._container.part(self._parts["nulls"]).to_pybytes())

    # -- fields -------------------------------------------------------------------------------------
    @property
    def paths_complete(self) -> bool:
        return self.spec.dropped_count == 0

    def paths(self) -> list[str]:
        return list(self._fields)

    def field_types(self, path: str) -> list[str] | None:
        meta = self._fields.get(path)
        return None if meta is None else list(meta["types"])

    def field(self, path: str):
        """The ColumnReader of one field, or None when the path was not split out."""
        if path in self._open:
            return self._open[path]
        meta = self._fields.get(path)
        if meta is None:
            return None
        reader = self._field_reader(meta)
        self._open[path] = reader
        return reader

    def _dictionary(self, kind: str) -> pa.Array:
        if kind not in self._dicts:
            part = {"STRING": "dict/strings", "LONG": "dict/longs", "DOUBLE": "dict/doubles", "ARRAY": "dict/arrays"}[kind]
            self._dicts[kind] = self._container.array(self._parts[part])
        return self._dicts[kind]

    def _offsets(self) -> dict[str, int]:
        sizes = self.spec.dictionary_sizes
        out, at = {}, 0
        for kind in KINDS:
            out[kind] = at
            at += int(sizes.get(kind, 0))
        return out

    def _field_reader(self, meta: dict):
        prefix = meta["part"]
        roles = ("codes", "bitmaps", "local", "values") + ELEMENT_ROLES
        parts = {role: self._parts[f"{prefix}/{role}"] for role in roles if f"{prefix}/{role}" in self._parts}
        local = self._container.array(parts["local"]).to_numpy()
        offsets = self._offsets()
        kinds = sorted({t.split("<")[0] for t in meta["types"]})
        dictionary = self._local_values(local, offsets)
        stats = {"cardinality": len(local)}
        if kinds == ["STRING"]:
            return FieldColumn(self._container, parts, self.num_rows, stats, STRING, dictionary)
        if set(kinds) <= {"DOUBLE", "LONG"} and "values" in parts:
            ctype = LONG if kinds == ["LONG"] else DOUBLE
            return NumericFieldColumn(self._container, parts, self.num_rows, stats, ctype)
        if kinds == ["ARRAY"]:
            element = _array_element_type(meta["types"])
            texts = dictionary
            arrays = pa.array([_as_element(json.loads(t), element) for t in texts.to_pylist()],
                              ColumnType(TypeKind.ARRAY, element).to_arrow())
            return FieldColumn(self._container, parts, self.num_rows, stats, ColumnType(TypeKind.ARRAY, element),
                               arrays, indexed=False)
        # A field of several types reads as text, as Druid answers VARCHAR when a path is ambiguous;
        # its rows holding arrays read as null there (a literal was asked for, as JSON_VALUE does).
        dictionary = self._local_values(local, offsets, arrays_as_null=True)
        return FieldColumn(self._container, parts, self.num_rows, stats, STRING, dictionary, indexed=False)

    def _typed_values(self, local: np.ndarray, offsets: dict[str, int]) -> list:
        """Python values of local ids with their own types (strings, numbers, arrays)."""
        out = []
        for gid in local.tolist():
            for kind in reversed(KINDS):
                if gid >= offsets[kind]:
                    v = self._dictionary(kind)[gid - offsets[kind]].as_py()
                    out.append(json.loads(v) if kind == "ARRAY" else v)
                    break
        return out

    def _local_values(self, local: np.ndarray, offsets: dict[str, int], arrays_as_null: bool = False) -> pa.Array:
        """The local dictionary's values, as text for strings and arrays and numbers as Druid prints them."""
        out: list = []
        bounds = [(k, offsets[k], offsets[k] + int(self.spec.dictionary_sizes.get(k, 0))) for k in KINDS]
        for kind, lo, hi in bounds:
            ids = local[(local >= lo) & (local < hi)] - lo
            if not len(ids):
                continue
            if kind == "ARRAY" and arrays_as_null:
                out.append(pa.nulls(len(ids), pa.string()))
                continue
            values = self._dictionary(kind).take(pa.array(ids))
            if kind in ("LONG", "DOUBLE"):
                values = pc.cast(values, pa.string()) if kind == "LONG" else _double_text(values)
            out.append(values)
        if not out:
            return pa.array([], pa.string())
        return pa.concat_arrays(out) if len(out) > 1 else out[0]

    def _field_rows(self, meta: dict, offsets: dict[str, int], rows: np.ndarray | None) -> tuple[np.ndarray, list]:
        """(positions among ``rows`` (or all rows) holding a value, their Python values) of a field."""
        prefix = meta["part"]
        codes_part = self._parts.get(f"{prefix}/codes")
        if codes_part is None:  # numbers only: the value column
            values = self._container.array(self._parts[f"{prefix}/values"])
            if rows is not None:
                values = values.take(pa.array(rows))
            where = np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False))
            found = values.filter(values.is_valid()).to_pylist()
        else:
            local = self._container.array(self._parts[f"{prefix}/local"]).to_numpy()
            typed = self._typed_values(local, offsets)  # the exact value of each local id
            codes = self._container.array(codes_part)
            if rows is not None:
                codes = codes.take(pa.array(rows))
            codes = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False).astype(np.int64)
            where = np.flatnonzero(codes >= 0)
            found = [typed[c] for c in codes[where].tolist()]
        if meta.get("booleans"):
            found = [v if type(v) is not int else v != 0 for v in found]
        return where, found

    def _rebuild(self, rows: np.ndarray | None = None) -> pa.Array:
        """Documents (of ``rows``, or all) assembled from the fields, when the raw values were not
        kept. By default the builder drops them only when this gives back every document's text;
        with ``keepRaw: false`` JSON nulls and empty objects, which are not fields, do not come back."""
        from common.json.path_steps import parse_path

        count = self.num_rows if rows is None else len(rows)
        docs: list = [None] * count
        offsets = self._offsets()
        for meta in self.spec.fields:
            parts = parse_path(meta["path"])
            where, found = self._field_rows(meta, offsets, rows)
            first_list = bool(parts) and isinstance(parts[0], int)
            for row, v in zip(where.tolist(), found):
                if not parts:
                    docs[row] = v
                    continue
                doc = docs[row]
                if doc is None:
                    doc = docs[row] = [] if first_list else {}
                if len(parts) == 1 and not first_list:
                    doc[parts[0]] = v
                else:
                    _place(doc, parts, v)
        nulls = self.null_rows()
        wanted = range(self.num_rows) if rows is None else rows.tolist()
        dumps = dumps_document  # (a segment built before documents kept NaN as "NaN" may hold a NaN field)
        return pa.array([None if (row in nulls or d is None) else dumps(d)
                         for row, d in zip(wanted, docs)], pa.string())


def _place(doc, parts: tuple, value) -> None:
    """Set ``value`` at ``parts`` inside ``doc``, making objects and lists on the way."""
    node = doc
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        nxt = None if last else ([] if isinstance(parts[i + 1], int) else {})
        if isinstance(p, int):
            while len(node) <= p:
                node.append(None)
            if last:
                node[p] = value
            else:
                if node[p] is None:
                    node[p] = nxt
                node = node[p]
        else:
            if last:
                node[p] = value
            else:
                node = node.setdefault(p, nxt)


def _double_text(values: pa.Array) -> pa.Array:
    return pa.array([None if v is None else repr(float(v)) for v in values.to_pylist()], pa.string())


def _as_element(values: list, element: ColumnType) -> list:
    """An array's elements as the field's widened element type (a variant array reads as strings)."""
    if element.is_string:
        return [v if v is None or isinstance(v, str) else json.dumps(v) for v in values]
    if element.kind is TypeKind.DOUBLE:
        return [None if v is None else float(v) for v in values]
    return values


def _array_element_type(types: list[str]) -> ColumnType:
    inner = {t[len("ARRAY<"):-1] for t in types if t.startswith("ARRAY<")}
    if "STRING" in inner:
        return STRING
    if "DOUBLE" in inner:
        return DOUBLE
    return LONG


class FieldColumn(StringColumn):
    """A field read through its local dictionary (values come from the column's global one)."""

    def __init__(self, container, parts, num_rows, stats, ctype, dictionary: pa.Array, indexed: bool = True) -> None:
        super().__init__(container, parts, num_rows, stats, ctype)
        self._local_dictionary = dictionary
        self._indexed = indexed

    @property
    def dictionary(self) -> pa.Array:
        return self._local_dictionary

    def index(self):
        return super().index() if self._indexed else None

    def dictionary_codes(self):
        return self.dictionary_codes_if_string()

    def element_index(self):
        """An arrays-only field's per-element index, when the segment stores one (element_index.py)."""
        if not self.type.is_array:
            return None
        return read_element_index(self._container, self._parts, self.num_rows, "a nested column's array field")

    def dictionary_codes_if_string(self):
        return (self.codes(), self.dictionary) if self._indexed else None

    def values(self) -> pa.Array:
        if self._indexed:
            return super().values()
        codes = self.codes_array
        return self._local_dictionary.take(codes)

    def take(self, rows: np.ndarray | None) -> pa.Array:
        if self._indexed:
            return super().take(rows)
        codes = self.codes_array if rows is None else self.codes_array.take(pa.array(rows))
        return self._local_dictionary.take(codes)


class NumericFieldColumn(ValueColumn):
    """A numbers-only field: its plain value column, as a flat LONG/DOUBLE column reads."""


def _encode(values: pa.Array, ctype: ColumnType, options: dict | None = None) -> EncodedColumn:
    return encode_nested(values, ctype, NestedOptions.from_properties(options))


SPARSE_FIELDS = register_feature("nestedSparseFields")

# Older readers must refuse such segments rather than read the field parts as nothing.
NESTED = register(Encoding("nested", NestedSpec, NestedColumn.open, _encode, required_roles=("nulls",),
                           feature="nestedColumns"))

__all__ = ["FieldColumn", "NestedColumn", "NestedSpec", "encode_nested", "JSON"]
