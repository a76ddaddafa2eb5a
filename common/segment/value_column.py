"""Plain columns: numbers, ``__time``, arrays and (for now) JSON text, stored as Arrow arrays.

Arrow's own validity bitmap is the null bitmap, so a LONG column with nulls keeps them as nulls
(never 0), and the values are read straight from the memory map (or, when the container stored
the part compressed, from its decoded-part cache).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.segment.container import Container, ipc_bytes
from common.segment.encoding import EncodedColumn, Encoding, EncodingSpec, StoredColumn, register
from common.types.column_type import ColumnType, TypeKind


@dataclass(frozen=True)
class PlainSpec(EncodingSpec):
    pass


def encode_values(values: pa.Array, ctype: ColumnType) -> tuple[dict[str, pa.Buffer], dict]:
    stats: dict = {"nullCount": int(values.null_count)}
    if ctype.is_numeric and len(values) > values.null_count:
        # Timestamps as epoch millis; a projection's time column need not be its first sort key.
        mm = pc.min_max(values.cast(pa.int64()) if ctype.kind is TypeKind.TIMESTAMP else values)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        stats["min"], stats["max"] = lo, hi
        stats["cardinality"] = int(pc.count_distinct(values).as_py())
    return {"values": ipc_bytes(values)}, stats


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
        return cls(stored.container, dict(stored.parts), stored.num_rows, dict(stored.stats), stored.type)

    def values(self) -> pa.Array:
        # Not memoized here: the container reads mapped parts in place and keeps decoded
        # (compressed) ones in its bounded cache, which a reference held here would defeat.
        return self._container.array(self._parts["values"])

    def part_bytes(self, roles: tuple[str, ...] = ("values",)) -> int:
        return self._container.part_length(self._parts["values"])

    def numpy(self) -> np.ndarray:
        """Values as numpy without copying where Arrow allows; null slots hold unspecified values."""
        arr = self.values()
        if pa.types.is_timestamp(arr.type):
            arr = arr.view(pa.int64())
        dtype = arr.type.to_pandas_dtype()
        return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr) + arr.offset)[arr.offset:]

    def take(self, rows: np.ndarray | None) -> pa.Array:
        return self.values() if rows is None else self.values().take(pa.array(rows))

    def dictionary_codes(self) -> None:
        return None

    def field(self, path: str) -> None:
        return None

    paths_complete = False

    def index(self) -> None:
        return None


def _encode(values: pa.Array, ctype: ColumnType, options: dict | None = None) -> EncodedColumn:
    parts, stats = encode_values(values, ctype)
    return EncodedColumn(parts, stats, PlainSpec())


PLAIN = register(Encoding("plain", PlainSpec, ValueColumn.open, _encode, required_roles=("values",)))
