"""Druid's test data files as strata segments, ingested as Druid's tests ingest them: schema
discovery over the file (``useSchemaDiscovery`` / ``auto`` columns), the ``timestamp`` column as
time, no rollup, and Druid's ``cnt`` count metric (1 per row without rollup)."""

from __future__ import annotations

import gzip
import json
import os

import pyarrow as pa

from common.ingest.row_parser import META_COLUMNS, parse_file
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType, TypeKind
from common.types.interval import Interval, parse_instant
from common.types.type_discovery import discover_rows

DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data"))


def discovered_table(name: str) -> tuple[pa.Table, dict[str, ColumnType]]:
    """The file (under DATA) through schema discovery and the ingestion row parser: a table with
    ``__time`` (millis), the discovered columns and ``cnt``; and the COMPLEX<json> column types."""
    path = os.path.join(DATA, name)
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    signature = tuple(discover_rows(rows, os.path.basename(name)).signature())
    with open(path, "rb") as f:
        table = pa.Table.from_batches(list(parse_file(os.path.basename(name), f, {"type": "json"}, signature)))
    errors = [e for e in table.column("__strata_error").to_pylist() if e]
    assert not errors, f"{name} parses without errors: {errors[:3]}"
    table = table.drop_columns(list(META_COLUMNS))
    times = pa.array([parse_instant(v) for v in table.column("timestamp").to_pylist()], pa.int64())
    table = table.drop_columns(["timestamp"]).add_column(0, "__time", times)
    table = table.append_column("cnt", pa.array([1] * table.num_rows, pa.int64()))
    return table, {n: t for n, t in signature if t.kind is TypeKind.COMPLEX}


def segment_of(table: pa.Table, json_types: dict, datasource: str, interval: str, path: str) -> Segment:
    build_segment(table, path, SegmentId(datasource, Interval.of(interval), "v1", 0), column_types=json_types)
    return Segment.open(path)


__all__ = ["DATA", "discovered_table", "segment_of"]
