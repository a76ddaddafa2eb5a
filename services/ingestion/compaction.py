"""Compaction: rewrite a datasource's segments of an interval as a new version, with the same rows
and the catalog's current projections (how existing segments get new, changed or dropped
projections).

A compaction is a REPLACE of the datasource by itself: the driver pulls the used segments of the
interval from deep storage, exports their rows to one Parquet file, and runs the ordinary
ingestion (Spark builds, one publish that overshadows the old version). Queries keep answering
from the old segments until the new version is served, so answers never change.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from common.errors import ValidationError
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.segment.timeline import Timeline, TimelineSegment
from common.types.column_properties import MULTI_VALUE_PROPERTY
from common.types.column_type import TIME_COLUMN, ColumnType
from common.types.granularity import SIMPLE_GRANULARITIES, Granularity
from common.types.interval import Interval, format_instant

_BY_SPAN = {86_400_000: "DAY", 3_600_000: "HOUR", 60_000: "MINUTE", 7 * 86_400_000: "WEEK"}


def chunk_granularity(intervals: Sequence[Interval]) -> str:
    """The PARTITIONED BY that cuts time as the existing segments do (DAY, HOUR, MONTH, ...)."""
    spans = {iv.end - iv.start for iv in intervals}
    if len(spans) == 1 and next(iter(spans)) in _BY_SPAN:
        return _BY_SPAN[next(iter(spans))]
    for name in ("month", "quarter", "year"):
        gran = Granularity.parse(SIMPLE_GRANULARITIES[name])
        if all(int(gran.bucket_start([iv.start])[0]) == iv.start and gran.next_bucket(iv.start) == iv.end
               for iv in intervals):
            return name.upper()
    if len(intervals) == 1:
        return "ALL"
    raise ValidationError(f"segments of these intervals do not share one granularity: "
                          f"{', '.join(str(iv) for iv in intervals[:5])}; compact a smaller interval")


def chosen_segments(descriptors: Sequence[SegmentDescriptor], interval: Interval | None) -> list[SegmentDescriptor]:
    """The used segments whose time chunk lies inside ``interval`` (all when None): a chunk is
    rewritten whole or not at all. Segments a newer used version overshadows are left out: they
    stay used until that version is served (a stream handoff's small segments, an earlier
    compaction's input), and reading them too would write their rows twice."""
    hidden = Timeline(segments=[TimelineSegment(d.id, d.num_partitions) for d in descriptors]).overshadowed() \
        if descriptors else set()
    return [d for d in descriptors if d.id not in hidden
            and (interval is None or (interval.start <= d.id.interval.start and d.id.interval.end <= interval.end))]


def present_segments(descriptors: Sequence[SegmentDescriptor], interval: Interval | None) -> list[SegmentId]:
    """Every used segment overlapping ``interval`` (all when None), overshadowed ones included:
    what the compaction's publish expects to find there (anything else was appended meanwhile,
    and the new version would hide its rows)."""
    return [d.id for d in descriptors
            if interval is None or (d.id.interval.start < interval.end and interval.start < d.id.interval.end)]


def export_rows(segments: Sequence[Segment], path: str) -> dict[str, ColumnType]:
    """Every row of the segments' base tables into one Parquet file; the union schema is returned.
    JSON columns travel as their documents' text."""
    schema: dict[str, ColumnType] = {}
    for seg in sorted(segments, key=lambda s: (s.id.version, s.id.interval.start, s.id.partition)):
        schema.update(seg.schema)
    arrow_schema = pa.schema([pa.field(n, t.to_arrow()) for n, t in schema.items()])
    with pq.ParquetWriter(path, arrow_schema) as writer:
        for seg in segments:
            cols = []
            for name, ctype in schema.items():
                if seg.has_column(name):
                    values = seg.column(name).values()
                    if pa.types.is_dictionary(values.type):
                        values = values.cast(values.type.value_type)
                    cols.append(values.cast(ctype.to_arrow()))
                else:
                    cols.append(pa.nulls(seg.num_rows, ctype.to_arrow()))
            writer.write_table(pa.Table.from_arrays(cols, schema=arrow_schema))
    return schema


def _type_text(ctype: ColumnType) -> str:
    if ctype.complex_name == "json":
        return "TYPE('COMPLEX<json>')"
    if ctype.multi_value:
        return "VARCHAR ARRAY"  # its lists; the job's column option makes them multi-value again
    return ctype.sql_name


def multi_value_options(segments: Sequence[Segment]) -> dict[str, dict]:
    """The column options that keep the segments' multi-value strings multi-value when rewritten,
    with the multiValueHandling they were written with (the newest segment's)."""
    out: dict[str, dict] = {}
    for seg in sorted(segments, key=lambda s: (s.id.version, s.id.interval.start, s.id.partition)):
        for column in seg.manifest.columns:
            if column.type.multi_value:
                handling = column.spec.to_json().get(MULTI_VALUE_PROPERTY)
                out[column.name] = {MULTI_VALUE_PROPERTY: handling or "SORTED_ARRAY"}
    return out


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def compaction_sql(datasource: str, intervals: Sequence[Interval], schema: dict[str, ColumnType],
                   parquet_path: str, granularity: str) -> str:
    """The REPLACE that rewrites ``intervals`` of ``datasource`` from the exported rows."""
    if not intervals:
        raise ValidationError(f"nothing to compact in {datasource}")
    ranges = " OR ".join(f"(__time >= TIMESTAMP '{format_instant(iv.start)}' AND "
                         f"__time < TIMESTAMP '{format_instant(iv.end)}')" for iv in _merged(intervals))
    names = [TIME_COLUMN] + [n for n in schema if n != TIME_COLUMN]
    extend = ", ".join(f"{_quoted(n)} {_type_text(schema.get(n, ColumnType.parse('TIMESTAMP')))}" for n in names)
    columns = ", ".join(_quoted(n) for n in names)
    return (f"REPLACE INTO {_quoted(datasource)} OVERWRITE WHERE {ranges}\n"
            f"SELECT {columns} FROM TABLE(localfiles(files => ARRAY['{parquet_path}'], format => 'parquet'))\n"
            f"EXTEND ({extend})\nPARTITIONED BY {granularity}")


def _merged(intervals: Sequence[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for iv in sorted(set(intervals), key=lambda i: i.start):
        if out and out[-1].end >= iv.start:
            out[-1] = Interval(out[-1].start, max(out[-1].end, iv.end))
        else:
            out.append(iv)
    return out


def compaction_metrics(descriptors: Sequence[SegmentDescriptor], interval: Interval | None) -> dict[str, str | None]:
    """The metrics the compacted segments keep: every chosen segment's (a compaction rewrites rows
    without a GROUP BY, so the rollup's metrics would otherwise read as dimensions). A column two
    segments name with different aggregators keeps no type (null)."""
    out: dict[str, str | None] = {}
    for d in chosen_segments(descriptors, interval):
        for name, kind in d.metrics().items():
            out[name] = kind if out.get(name, kind) == kind else None
    return out


def prepare_compaction(datasource: str, descriptors: Sequence[SegmentDescriptor], interval: Interval | None,
                       pull, work_dir: str) -> tuple[str, dict[str, dict]]:
    """Pull the chosen segments (``pull(descriptor, local_path)``), export their rows, and return
    the REPLACE statement that rewrites them with the column options their columns need
    (multi-value strings stay multi-value)."""
    chosen = chosen_segments(descriptors, interval)
    if not chosen:
        where = f" inside {interval}" if interval is not None else ""
        raise ValidationError(f"datasource {datasource} has no used segments{where} to compact")
    os.makedirs(work_dir, exist_ok=True)
    segments = []
    try:
        for d in chosen:
            local = os.path.join(work_dir, f"{d.key}.sseg")
            pull(d, local)
            segments.append(Segment.open(local, verify=True))
        parquet_path = os.path.join(work_dir, "compaction-input.parquet")
        schema = export_rows(segments, parquet_path)
        options = multi_value_options(segments)
    finally:
        for seg in segments:
            seg.close()
    chunks = sorted({d.id.interval for d in chosen}, key=lambda iv: iv.start)
    return compaction_sql(datasource, chunks, schema, parquet_path, chunk_granularity(chunks)), options


__all__ = ["chosen_segments", "chunk_granularity", "compaction_metrics", "compaction_sql", "export_rows",
           "multi_value_options", "prepare_compaction", "present_segments"]
