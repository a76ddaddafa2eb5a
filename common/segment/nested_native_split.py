"""The compiled field split of a nested column, and its results as numpy/Arrow arrays per field.

``common.segment._nested_split`` (C, built by setup.py) reads each document's text once and appends
its values to per-field columns (row numbers, and per kind: longs, doubles, and ids of strings and
array texts in the column's tables of distinct values, which it interns as it goes), so the column
build makes its dictionaries with numpy/pyarrow and never holds a Python object per value. It gives
exactly what ``nested_fields.split_documents`` gives: a document it cannot be sure to
read the same way is split by ``nested_fields.row_paths`` (the Python code) in its place in row
order, and when even that yields something only the Python column build can word as an error (NaN
in an array, a lone surrogate), the whole column takes the Python split. Column options that filter
or type paths (skipPaths, typedPaths) also take the Python split.

When the extension is missing (not built), ``split_native`` returns None and logs it once.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.json.path_steps import key_text
from common.segment.nested_fields import NestedOptions, row_paths

try:
    from common.segment import _nested_split
except ImportError:  # not built: the pure Python split
    _nested_split = None

_log = logging.getLogger(__name__)
_warned = False

# "python" forces the pure Python split (tests compare the two; benchmarks measure both).
ENABLED = os.environ.get("STRATA_NESTED_SPLIT", "native") != "python"

_KINDS = ("STRING", "LONG", "DOUBLE", "ARRAY")


def available() -> bool:
    return _nested_split is not None


def _array_text(value: list) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass
class NativeField:
    path: str
    types: list[str]
    booleans: int
    index: int
    rows: np.ndarray  # int64, ascending
    # kind -> (positions in ``rows`` or None for all, values): STRING and ARRAY (its JSON text) as
    # Arrow dictionary arrays (int32 ids into the column's distinct values of the kind, one array
    # shared by all fields), LONG int64 and DOUBLE float64 numpy arrays.
    groups: dict = field(default_factory=dict)

    @property
    def long_count(self) -> int:
        g = self.groups.get("LONG")
        return 0 if g is None else len(g[1])


@dataclass
class NativeSplit:
    fields: list[NativeField]
    nulls: np.ndarray  # bool per row: a null row or a JSON null document
    rebuildable: bool
    dropped_paths: list[str]
    _source: object = None
    _python_texts: dict = field(default_factory=dict)  # row -> compact text of rows the Python code split
    uncoercible: list = field(default_factory=list)

    def null_rows(self) -> np.ndarray:
        return np.flatnonzero(self.nulls)

    def raw_texts(self) -> pa.Array:
        """Each row's document as compact JSON text (null for a null row), as the Python split's
        ``canonical`` holds it."""
        mask = self.nulls.astype(np.uint8)
        offsets, data = _nested_split.canonical(self._source, self._python_texts, mask.tobytes())
        validity = pa.array(~self.nulls).buffers()[1] if self.nulls.any() else None
        arr = pa.Array.from_buffers(pa.large_string(), len(self.nulls),
                                    [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
        return arr.cast(pa.string())


def _strings(offsets: bytes, data: bytes, count: int) -> pa.Array:
    arr = pa.Array.from_buffers(pa.large_string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return arr.cast(pa.string())


def _field(index: int, item: tuple, strings: pa.Array, arrays: pa.Array) -> NativeField:
    path, types, booleans, rows, tags, longs, doubles, sids, aids = item
    rows = np.frombuffer(rows, dtype=np.int64)
    tags = np.frombuffer(tags, dtype=np.uint8)
    values = {0: lambda n: _interned(sids, strings), 1: lambda n: np.frombuffer(longs, dtype=np.int64),
              2: lambda n: np.frombuffer(doubles, dtype=np.float64), 3: lambda n: _interned(aids, arrays)}
    present = np.flatnonzero(np.bincount(tags, minlength=4))
    groups: dict = {}
    if len(present) == 1:
        tag = int(present[0])
        groups[_KINDS[tag]] = (None, values[tag](len(rows)))
    else:
        firsts = sorted((int(np.argmax(tags == t)), int(t)) for t in present)  # kinds in order of first value
        for _, tag in firsts:
            pos = np.flatnonzero(tags == tag)
            groups[_KINDS[tag]] = (pos, values[tag](len(pos)))
    return NativeField(path, list(types), int(booleans), index, rows, groups)


def sort_order(values: pa.Array) -> np.ndarray:
    """The positions of ``values`` (a string array without nulls) in byte order, as
    ``pc.sort_indices`` gives them, from the compiled sort (a radix sort on the first 8 bytes) when
    it is built."""
    if _nested_split is None or values.null_count or not (pa.types.is_string(values.type)
                                                            or pa.types.is_large_string(values.type)):
        return pc.sort_indices(values).to_numpy()
    _, offsets, data = values.buffers()[:3]
    width = 8 if pa.types.is_large_string(values.type) else 4
    order = _nested_split.sort_strings(offsets, data if data is not None else b"", width, values.offset, len(values))
    return np.frombuffer(order, dtype=np.int64)


def _interned(ids: bytes, distinct: pa.Array) -> pa.DictionaryArray:
    """A field's strings (or array texts) as ids into the column's distinct values of that kind (in
    first-seen order, one array shared by every field, which the column build sorts once)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.frombuffer(ids, dtype=np.int32)), distinct, safe=False)


def _source(values) -> object:
    if isinstance(values, list):
        return values
    arr = values
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())
    validity, offsets, data = arr.buffers()[:3]
    width = 8 if pa.types.is_large_string(arr.type) else 4
    return (len(arr), arr.offset, validity if arr.null_count else None, offsets,
            data if data is not None else b"", width)


def split_native(values, options: NestedOptions | None = None) -> NativeSplit | None:
    """The compiled split of ``values`` (an Arrow string array, or a list of str/None), or None when
    the Python split must run: the extension is missing or turned off, the options filter or type
    paths, or a document needs the Python column build (see the module docstring)."""
    global _warned
    options = options or NestedOptions()
    if _nested_split is None or not ENABLED:
        if _nested_split is None and not _warned:
            _warned = True
            _log.warning("the compiled nested JSON split (common.segment._nested_split) is not built; "
                         "nested columns are split in Python (slower). Run `pip install -e .` to build it.")
        return None
    if options.skip_paths or options.skip_patterns or options.typed_paths:
        return None
    source = _source(values)
    out = _nested_split.split(source, row_paths, _array_text, key_text)
    if out is None:
        return None
    items, rebuildable, nulls, python_texts, (soff, sdata, scount), (aoff, adata, acount) = out
    strings, arrays = _strings(soff, sdata, scount), _strings(aoff, adata, acount)
    fields = [_field(i, item, strings, arrays) for i, item in enumerate(items)]
    dropped: list[str] = []
    if len(fields) > options.max_fields:
        ranked = sorted(fields, key=lambda f: (-len(f.rows), f.index))
        kept = {f.path for f in ranked[:options.max_fields]}
        dropped = [f.path for f in fields if f.path not in kept]
        fields = [f for f in fields if f.path in kept]
    return NativeSplit(fields, np.frombuffer(nulls, dtype=np.uint8).astype(bool), bool(rebuildable) and not dropped,
                       dropped, source, python_texts)


__all__ = ["NativeField", "NativeSplit", "available", "sort_order", "split_native"]
