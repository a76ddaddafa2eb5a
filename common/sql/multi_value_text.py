"""How a multi-value string leaves a SQL statement: as Druid's SQL results show it (VARCHAR).

A row without values is null, a row with one value is that value, and a row with several is
the JSON array of its values (``["t1","t2"]``, a null value as ``null``), as Druid writes a
multi-value row into a VARCHAR result column (its ``sqlStringifyArrays`` default).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def multi_value_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
        return values.cast(pa.string())  # already single values (a grouped multi-value column)
    lengths = pc.list_value_length(values).fill_null(0).to_numpy(zero_copy_only=False)
    out = np.full(len(values), None, dtype=object)
    one = np.flatnonzero(lengths == 1)
    if len(one):
        out[one] = pc.list_element(values.take(pa.array(one)), 0).cast(pa.string()).to_numpy(zero_copy_only=False)
    many = np.flatnonzero(lengths > 1)
    if len(many):
        rows = values.take(pa.array(many)).to_pylist()
        out[many] = [json.dumps([None if v is None else str(v) for v in row], ensure_ascii=False,
                                separators=(",", ":")) for row in rows]
    return pa.array(out, pa.string())


__all__ = ["multi_value_text"]
