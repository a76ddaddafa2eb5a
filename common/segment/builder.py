"""SegmentBuilder: Arrow record batches in, one sorted, indexed segment file out.

This is what ingestion executors call. It normalizes input types to strata's logical types,
checks every row's ``__time`` against the segment interval, sorts by ``__time`` then the sort
columns, encodes each column and writes the container atomically.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.segment.container import ipc_bytes, write_container
from common.segment.encoding import EncodedColumn, encoding_for
from common.segment.manifest import (
    ColumnManifest,
    DictionaryManifest,
    PartEntry,
    ProjectionManifest,
    SegmentManifest,
)
from common.segment.part_codec import COMPRESSED_PARTS, DEFAULT_COMPRESSION, PartCompression, for_sketches
from common.segment.segment_id import SegmentId
from common.segment.string_column import DictionarySpec, combined, encode_with_shared_dictionary
from common.types.column_type import TIME_COLUMN, TIMESTAMP, ColumnType, TypeKind
from common.types.interval import format_instant


def normalize_time(values: pa.Array | pa.ChunkedArray, column: str = TIME_COLUMN) -> pa.Array:
    """Any timestamp/date/integer-millis column -> int64 epoch millis (nulls kept for the caller)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if pa.types.is_timestamp(t):
        if t.unit != "ms":
            values = values.cast(pa.timestamp("ms", tz=t.tz), safe=False)
        return values.view(pa.int64()) if values.offset == 0 else values.cast(pa.int64())
    if pa.types.is_date(t):
        return values.cast(pa.timestamp("ms")).cast(pa.int64())
    if pa.types.is_integer(t):
        return values.cast(pa.int64())
    raise ValidationError(
        f"column '{column}' must be a timestamp or epoch milliseconds, got Arrow type {t}; "
        "parse it first (e.g. TIME_PARSE in SQL)"
    )


def normalize_column(name: str, values: pa.Array | pa.ChunkedArray, declared: ColumnType | None) -> tuple[pa.Array, ColumnType]:
    """Cast an input column to the Arrow type of its logical type."""
    values = combined(values)  # dictionary chunks get one unified dictionary
    if pa.types.is_dictionary(values.type):
        value_type = values.type.value_type
        ctype = declared or ColumnType.from_arrow(value_type, name)
        if ctype.kind is TypeKind.STRING and value_type == ctype.to_arrow():
            # A STRING column keeps its Arrow dictionary: the dictionary encoding starts from
            # it instead of hashing every row's string again (see string_column.encode_string).
            return values, ctype
        values = values.cast(value_type)
    ctype = declared or ColumnType.from_arrow(values.type, name)
    if ctype.multi_value:
        return values, ctype  # lists or single strings: the multi-value encoding takes either
    target = ctype.to_arrow()
    if ctype.kind is TypeKind.TIMESTAMP:
        return normalize_time(values, name).cast(target), ctype
    if values.type != target:
        try:
            values = values.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValidationError(f"column '{name}': cannot store {values.type} as {ctype.sql_name}: {exc}") from None
    return values, ctype


@dataclass(frozen=True)
class ProjectionTable:
    """A projection's rows, already aggregated: grouping columns plus one intermediate column per
    stored aggregator. The builder sorts them by the grouping columns and encodes them; string
    grouping columns that the base table also has share its dictionary."""

    name: str
    spec: dict
    grouping_columns: tuple[str, ...]
    aggregators: tuple[dict, ...]
    rows: pa.Table
    column_types: dict[str, ColumnType] = field(default_factory=dict)
    # The projection's time column as its definition names it (see ProjectionManifest), when known.
    time_column: str | None = None
    time_column_known: bool = False


class SegmentBuilder:
    """Accumulates batches for one segment; ``build(path)`` writes it and returns the manifest."""

    def __init__(self, segment_id: SegmentId, *, sort_columns: Iterable[str] = (),
                 column_types: dict[str, ColumnType] | None = None) -> None:
        self.segment_id = segment_id
        self.sort_columns = tuple(c for c in sort_columns if c != TIME_COLUMN)
        self.column_types = dict(column_types or {})
        self._batches: list[pa.RecordBatch] = []

    def add(self, data: pa.RecordBatch | pa.Table) -> None:
        if isinstance(data, pa.Table):
            self._batches.extend(data.to_batches())
        else:
            self._batches.append(data)

    def build(self, path: str) -> SegmentManifest:
        table = pa.Table.from_batches(self._batches) if self._batches else None
        if table is None:
            raise ValidationError(f"segment {self.segment_id}: no rows to build from")
        return build_segment(table, path, self.segment_id, self.sort_columns, self.column_types)


def _check_time(times: pa.Array, segment_id: SegmentId) -> np.ndarray:
    if times.null_count:
        row = int(pc.index(times.is_null(), True).as_py())
        raise ValidationError(f"segment {segment_id}: row {row} has a null {TIME_COLUMN}; every row needs a time")
    ms = times.to_numpy(zero_copy_only=False)
    iv = segment_id.interval
    outside = (ms < iv.start) | (ms >= iv.end)
    if outside.any():
        row = int(np.argmax(outside))
        raise ValidationError(
            f"segment {segment_id}: row {row} has {TIME_COLUMN} {format_instant(int(ms[row]))} outside the "
            f"segment interval {iv}"
        )
    return ms


def _sortable(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Arrow sorts no dictionary arrays: a dictionary sort key is compared by its values."""
    if pa.types.is_dictionary(values.type):
        return values.cast(values.type.value_type)
    return values


def build_segment(table: pa.Table, path: str, segment_id: SegmentId, sort_columns: Iterable[str] = (),
                  column_types: dict[str, ColumnType] | None = None,
                  projections: Sequence[ProjectionTable] = (),
                  column_options: dict[str, dict] | None = None,
                  compression: PartCompression | None = DEFAULT_COMPRESSION,
                  string_bitmaps: bool = False, metrics: dict[str, str | None] | None = None,
                  durable: bool = True) -> SegmentManifest:
    """``metrics``: a rollup's aggregated columns with their Druid aggregator types (None where
    Druid has none), recorded in the manifest; every other column is a dimension.
    ``column_options``: per column, its encoding's settings (for a JSON column: maxFields,
    skipPaths, typedPaths, keepRaw, elementIndex; for a STRING column: bitmaps, packCodes, codeBlockRows (0 for one codes part); for a DOUBLE/FLOAT
    column: valueDictionary; for a fixed-width column, __time included: blockRows, 0 for one part). ``compression``: which parts
    are stored compressed (see part_codec.py); None writes every part uncompressed, as segments
    before compression were. ``string_bitmaps`` True also stores a Roaring bitmap per value of
    the base table's STRING columns (by default filters scan their codes: see string_column); a
    projection's grouping column that shares a base dictionary has bitmaps when its base column
    does, and the projection's sketch parts are compressed harder (part_codec.for_sketches).
    ``durable`` False skips the fsync: for a file that is copied elsewhere (and synced there) and
    then deleted, as an ingestion task's local build is."""
    column_types = dict(column_types or {})
    names = table.column_names
    if TIME_COLUMN not in names:
        raise ValidationError(
            f"segment {segment_id}: input has no '{TIME_COLUMN}' column (columns: {', '.join(names)}); "
            "every row needs a time"
        )
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"segment {segment_id}: duplicate column names {dupes}")
    sort_columns = tuple(c for c in sort_columns if c != TIME_COLUMN)
    metrics = dict(metrics or {})
    for col in metrics:
        if col not in names or col == TIME_COLUMN:
            raise ValidationError(f"segment {segment_id}: metric '{col}' is not a column of the input "
                                  f"({', '.join(names)}); only stored columns other than {TIME_COLUMN} can be metrics")
    for col in sort_columns:
        if col not in names:
            raise ValidationError(f"segment {segment_id}: sort column '{col}' is not in the input ({', '.join(names)})")

    times = normalize_time(table.column(TIME_COLUMN))
    ms = _check_time(times, segment_id)

    # Sort by time then sort columns; skip the sort when input is already time-ordered.
    if sort_columns:
        keyed = pa.table({"t": times, **{f"k{i}": _sortable(table.column(c)) for i, c in enumerate(sort_columns)}})
        keys = [("t", "ascending", "at_start")] + [(f"k{i}", "ascending", "at_start") for i in range(len(sort_columns))]
        order = pc.sort_indices(keyed, sort_keys=keys)
    elif len(ms) > 1 and not bool(np.all(ms[1:] >= ms[:-1])):
        order = pa.array(np.argsort(ms, kind="stable"))
    else:
        order = None
    if order is not None:
        table = table.take(order)
        times = normalize_time(table.column(TIME_COLUMN))
        ms = times.to_numpy(zero_copy_only=False)

    parts: dict[str, pa.Buffer] = {}
    columns: list[ColumnManifest] = []

    def encode(name: str):
        if name == TIME_COLUMN:
            time_encoding = encoding_for(TIMESTAMP)
            return name, TIMESTAMP, time_encoding.name, time_encoding.encode(
                times.cast(TIMESTAMP.to_arrow()), TIMESTAMP, (column_options or {}).get(TIME_COLUMN))
        values, ctype = normalize_column(name, table.column(name), column_types.get(name))
        if ctype.kind is TypeKind.TIMESTAMP:
            raise ValidationError(f"column '{name}': only {TIME_COLUMN} may be a TIMESTAMP; store others as LONG millis")
        encoding = encoding_for(ctype)
        options = (column_options or {}).get(name)
        if encoding.name == "dictionary":
            options = {"bitmaps": string_bitmaps, **(options or {})}
        return name, ctype, encoding.name, encoding.encode(values, ctype, options)

    # Columns encode independently and Arrow/numpy release the GIL, so threads overlap them.
    # __time goes first in the pool (and in the file), as before it was encoded apart.
    ordered = [TIME_COLUMN, *(n for n in names if n != TIME_COLUMN)]
    for name, ctype, encoding, encoded in _encoder_pool().map(encode, ordered):
        columns.append(_add(parts, name, ctype, encoding, encoded))
    # Base string dictionaries are listed as shareable, so projections can reuse them by name.
    dictionaries = {c.name: DictionaryManifest(c.name, c.type, c.parts["dictionary"], int(c.stats["cardinality"]))
                    for c in columns if c.encoding == "dictionary"}
    names_seen = set()
    projection_manifests = []
    for proj in projections:
        if proj.name in names_seen:
            raise ValidationError(f"segment {segment_id}: projection '{proj.name}' is defined twice")
        names_seen.add(proj.name)
        projection_manifests.append(_build_projection(proj, parts, dictionaries, segment_id, columns, string_bitmaps))

    created = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    min_time = int(ms[0]) if len(ms) else None
    max_time = int(ms[-1]) if len(ms) else None
    holder: dict = {}

    def make_manifest(entries: dict) -> bytes:
        files = {k: PartEntry(*v) for k, v in entries.items()}
        features = _required_features(columns, projection_manifests)
        if any(e.codec is not None for e in files.values()):
            features = tuple(sorted({*features, COMPRESSED_PARTS}))
        manifest = SegmentManifest(
            segment_id=segment_id,
            num_rows=table.num_rows,
            min_time=min_time,
            max_time=max_time,
            ordering=(TIME_COLUMN, *sort_columns),
            columns=tuple(columns),
            files=files,
            created=created,
            dictionaries=dictionaries,
            projections=tuple(projection_manifests),
            required_features=features,
            metrics=metrics,
        )
        holder["manifest"] = manifest
        return manifest.to_bytes()

    overrides = None
    if compression is not None:
        # Serialized sketches are most of a projection's bytes; a harder zstd level pays there
        # (part_codec.SKETCH_ZSTD_LEVEL) and nowhere else, so only those parts get it.
        sketch = for_sketches(compression)
        overrides = {part: sketch for p in projection_manifests for c in p.columns
                     if (c.type.complex_name or "").endswith("Sketch") for part in c.parts.values()}
    write_container(path, parts, make_manifest, compression, _encoder_pool(), overrides, durable)
    return holder["manifest"]


def _build_projection(proj: ProjectionTable, parts: dict, dictionaries: dict, segment_id: SegmentId,
                      base_columns: Sequence[ColumnManifest] = (), string_bitmaps: bool = False) -> ProjectionManifest:
    rows = proj.rows
    missing = [c for c in proj.grouping_columns if c not in rows.column_names]
    if missing:
        raise ValidationError(f"segment {segment_id}: projection '{proj.name}' rows lack grouping columns {missing}")
    if proj.grouping_columns and rows.num_rows > 1:
        order = pc.sort_indices(rows, sort_keys=[(c, "ascending", "at_start") for c in proj.grouping_columns])
        rows = rows.take(order)
    prefix = f"projections/{proj.name}/"
    # A grouping column that shares a base dictionary is encoded as its base column is: bitmaps
    # only when the base column has them (a filter otherwise scans the projection's codes: a
    # few thousand rows), bit-packed codes when the dictionary is small.
    base_bitmaps = {c.name: "bitmaps" in c.parts for c in base_columns}
    columns = []
    for name in rows.column_names:
        values, ctype = normalize_column(name, rows.column(name), proj.column_types.get(name))
        shared = dictionaries.get(name)
        if ctype.is_string and shared is not None and name in proj.grouping_columns:
            base_dictionary = _shared_dictionary_values(parts, shared)
            try:
                bitmaps = base_bitmaps.get(name, True)
                enc = encode_with_shared_dictionary(values, base_dictionary, name, bitmaps=bitmaps, pack_codes=True)
            except ValueError as exc:
                raise ValidationError(f"segment {segment_id}: projection '{proj.name}': {exc}") from None
            encoded = EncodedColumn(enc.parts, enc.stats, DictionarySpec(shared_dictionary=name,
                                                                         bitmaps=None if bitmaps else False,
                                                                         code_bits=enc.code_bits))
            columns.append(_add(parts, name, ctype, "dictionary", encoded, prefix))
            continue
        encoding = encoding_for(ctype)
        options = {"bitmaps": string_bitmaps} if encoding.name == "dictionary" else None
        columns.append(_add(parts, name, ctype, encoding.name, encoding.encode(values, ctype, options), prefix))
    return ProjectionManifest(proj.name, dict(proj.spec), tuple(proj.grouping_columns), tuple(proj.aggregators),
                              rows.num_rows, tuple(proj.grouping_columns), tuple(columns), proj.time_column,
                              proj.time_column_known)


def _required_features(columns, projections) -> tuple[str, ...]:
    from common.segment.encoding import lookup_encoding

    every = [*columns, *(c for p in projections for c in p.columns)]
    used = {c.encoding for c in every}
    features = {lookup_encoding(e).feature for e in used if lookup_encoding(e).feature}
    return tuple(sorted(features | {f for c in every for f in c.spec.features()}))


def _shared_dictionary_values(parts: dict, shared: DictionaryManifest) -> pa.Array:
    """The base column's dictionary, read back from the part bytes the builder already holds."""
    reader = pa.ipc.open_stream(pa.BufferReader(parts[shared.part]))
    return reader.read_next_batch().column(0)


_POOL: ThreadPoolExecutor | None = None


def _encoder_pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="strata-encode")
    return _POOL


def _add(parts: dict, name: str, ctype: ColumnType, encoding: str, encoded: EncodedColumn,
         prefix: str = "") -> ColumnManifest:
    refs = {}
    for role, data in encoded.parts.items():
        part_name = f"{prefix}{name}/{role}"
        parts[part_name] = data
        refs[role] = part_name
    return ColumnManifest(name, ctype, encoding, refs, encoded.stats, encoded.spec)


__all__ = ["ProjectionTable", "SegmentBuilder", "build_segment", "ipc_bytes", "normalize_column", "normalize_time"]
