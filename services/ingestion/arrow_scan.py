"""ArrowScan: a SELECT that only picks and renames columns of Parquet files, read by pyarrow in
Spark tasks instead of by Spark's Parquet reader.

Segments are built in Python from Arrow, so rows read by Spark must be converted from Spark's
internal rows to Arrow, which costs several times more than reading the file. When the SELECT is
``SELECT a AS __time, b, c AS d FROM <one Parquet source>`` over files that parquet_source vouched
for (Spark's cast equals row_parser's, value for value), that conversion is skipped: each Spark
task reads its row groups with pyarrow and casts them to the Arrow types Spark would have handed
over (row_parser.arrow_type), so the builders get the same Arrow either way. Spark still plans the
SELECT (its errors and schema checks stay the same), schedules the tasks, shuffles the segment
blobs and builds the segments; only the per-row JVM-to-Python hop is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from common.errors import ValidationError
from common.types.column_type import TIME_COLUMN, TypeKind
from common.types.granularity import Granularity
from common.segment.builder import normalize_time
from services.ingestion.partitioning import CHUNK_COLUMN, chunk_starts
from common.ingest.row_parser import arrow_type, cast_column

BATCH_ROWS = 1 << 18
# Rows per slice whose __time bounds the driver's counting pass records (divides BATCH_ROWS, so a
# slice never straddles two batches of a row group).
SLICE_ROWS = 1 << 16
TASKS_PER_CORE = 2
MIN_TASK_ROWS = 1 << 16  # below this a task costs more to schedule than to run
TASK_COLUMN = "task"
# Up to this many rows the counting pass reads __time on the driver instead of in a Spark job:
# one column decodes at tens of millions of rows per second per core, and a Spark job (tasks,
# Python workers, collect) cost more than that read below it on the ingestion benchmark.
DRIVER_COUNT_ROWS = 1 << 24
COUNT_DDL = "chunk BIGINT, n BIGINT"
# Kinds whose value is the same before and after the SELECT's storable cast (spark_job._storable).
_PLAIN_KINDS = (TypeKind.STRING, TypeKind.LONG, TypeKind.DOUBLE, TypeKind.FLOAT)


@dataclass(frozen=True)
class ArrowScan:
    tasks: tuple[tuple[tuple[str, int, int, int], ...], ...]  # per task: (path, row group, offset, rows)
    columns: tuple[tuple[str, str, pa.DataType], ...]  # (output name, source column, Arrow type)

    @property
    def time_source(self) -> str:
        return next(src for out, src, _ in self.columns if out == TIME_COLUMN)


def select_items(select, source_name: str) -> list | None:
    """The SELECT list of ``select`` (sqlglot, Druid) when it reads only the one source
    ``source_name``: no WHERE, GROUP BY, join or other clause; else None."""
    from sqlglot import exp

    if not isinstance(select, exp.Select):
        return None
    for key, value in select.args.items():
        if key not in ("expressions", "from", "from_") and value:
            return None
    source = select.args.get("from_") or select.args.get("from")
    if source is None or not isinstance(source.this, exp.Table) or source.this.name != source_name:
        return None
    if source.this.args.get("joins") or source.this.args.get("laterals"):
        return None
    return select.expressions


def plain_projection(select, source_name: str, signature) -> list[tuple[str, str]] | None:
    """[(output name, source column)] when ``select`` (sqlglot, Druid) only names columns of the
    source ``source_name``, else None."""
    from sqlglot import exp

    items = select_items(select, source_name)
    if items is None:
        return None
    names = {n for n, _ in signature}
    out = []
    for item in items:
        column = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(column, exp.Column) or not isinstance(column.this, exp.Identifier):
            return None
        if column.name not in names:
            return None
        out.append((item.alias_or_name, column.name))
    return out


def plan_scan(select, source_name: str, source, native_groups, parsed_files: int, schema,
              parallelism: int) -> ArrowScan | None:
    """An ArrowScan for the statement, or None when Spark has to read the rows itself.
    ``schema`` is the Spark schema of the storable SELECT result, which must be exactly the
    source columns' types (so nothing was converted on the way)."""
    if parsed_files or not native_groups:
        return None
    projection = plain_projection(select, source_name, source.signature)
    if projection is None or [out for out, _ in projection] != [f.name for f in schema.fields]:
        return None
    from services.ingestion.source_reader import spark_type

    types = dict(source.signature)
    columns = []
    for (out, src), field in zip(projection, schema.fields):
        ctype = types[src]
        if out == TIME_COLUMN:
            if ctype.kind is not TypeKind.TIMESTAMP:
                return None
        elif ctype.kind not in _PLAIN_KINDS:
            return None
        if field.dataType.simpleString() != spark_type(ctype).lower():
            return None
        columns.append((out, src, arrow_type(ctype)))
    if TIME_COLUMN not in [c[0] for c in columns]:
        return None
    return ArrowScan(_tasks(native_groups, parallelism), tuple(columns))


def _tasks(groups, parallelism: int) -> tuple:
    """Row groups packed into about TASKS_PER_CORE tasks per core. A row group bigger than a task
    is cut, so one huge row group still keeps every core busy; cutting is the exception because a
    task reading the middle of a row group decodes it from the start (Parquet pages have no row
    index), and more, smaller tasks measured slower on the ingestion benchmark."""
    pieces = [(path, i, rows) for g in groups for path, sizes in zip(g.paths, g.row_groups)
              for i, rows in enumerate(sizes) if rows]
    total = sum(p[2] for p in pieces)
    if not total:
        return ()
    target = max(MIN_TASK_ROWS, -(-total // (TASKS_PER_CORE * max(1, parallelism))))
    tasks, current, current_rows = [], [], 0
    for path, group, rows in pieces:
        step = -(-rows // -(-rows // target))
        for offset in range(0, rows, step):
            n = min(step, rows - offset)
            if current and current_rows + n > target:
                tasks.append(tuple(current))
                current, current_rows = [], 0
            current.append((path, group, offset, n))
            current_rows += n
    if current:
        tasks.append(tuple(current))
    return tuple(tasks)


def scan_frame(spark, scan: ArrowScan):
    """Task numbers, one per Spark partition; executors look their pieces up in ``scan``. (A range
    rather than a DataFrame of the pieces: building that from Python rows needs a Python pass.)"""
    n = len(scan.tasks)
    return spark.range(n, numPartitions=max(1, n)).withColumnRenamed("id", TASK_COLUMN)


# ---- executors ----------------------------------------------------------------------------------------


def read_pieces(pieces: Iterable, columns, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The pieces' rows as batches of ``columns`` (output name, source column, Arrow type)."""
    for path, group, offset, rows in pieces:
        try:
            yield from _read_piece(path, group, offset, rows, columns, batch_rows)
        except (OSError, pa.ArrowException, IndexError) as exc:
            raise ValidationError(f"cannot read row group {group} of Parquet file '{path}': {exc}; did the file "
                                  "change after the ingestion listed it? Run the statement again") from None


def travel_type(kind: pa.DataType) -> pa.DataType:
    """The Arrow type a scanned column travels to the builders as: STRING columns as dictionary
    arrays, the way Parquet stores them (decoding every row's string only for the builder to hash
    it back into a dictionary cost more than the rest of the read; the builder takes the
    dictionary as it is, string_column.encode_string), everything else as declared."""
    return DICTIONARY_STRING if kind == pa.string() else kind


DICTIONARY_STRING = pa.dictionary(pa.int32(), pa.string())


def _as_travel(values: pa.Array, kind: pa.DataType) -> pa.Array:
    target = travel_type(kind)
    if values.type == target:
        return values
    if target != DICTIONARY_STRING:
        return cast_column(values, kind)
    if pa.types.is_dictionary(values.type):
        return values.cast(target)
    return values.cast(kind).dictionary_encode()


def _read_piece(path: str, group: int, offset: int, rows: int, columns, batch_rows: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    names = [out for out, _, _ in columns]
    end = offset + rows
    with pq.ParquetFile(path) as footer:
        schema = footer.schema_arrow
        metadata = footer.metadata
    present = set(schema.names)
    wanted = sorted({src for _, src, _ in columns if src in present})
    as_dictionary = [src for src in wanted if any(s == src and kind == pa.string() for _, s, kind in columns)
                     and (pa.types.is_string(schema.field(src).type) or pa.types.is_large_string(schema.field(src).type))]
    with pq.ParquetFile(path, metadata=metadata, read_dictionary=as_dictionary or None) as pf:
        position = 0
        for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[group], columns=wanted, use_threads=False):
            lo, hi = max(offset - position, 0), min(end - position, batch.num_rows)
            position += batch.num_rows
            if hi > lo:
                if lo or hi != batch.num_rows:
                    batch = batch.slice(lo, hi - lo)
                arrays = []
                for _, src, kind in columns:
                    if src not in present:
                        arrays.append(pa.nulls(batch.num_rows, travel_type(kind)))
                        continue
                    arrays.append(_as_travel(batch.column(src), kind))
                yield pa.RecordBatch.from_arrays(arrays, names=names)
            if position >= end:
                return
    if position < end:
        raise IndexError(f"it has {position} rows, {end} were expected")


def _pieces_of(batches: Iterable[pa.RecordBatch], scan: ArrowScan) -> Iterator[tuple]:
    for batch in batches:
        for task in batch.column(TASK_COLUMN).to_pylist():
            yield from scan.tasks[task]


def count_chunks(batches: Iterable[pa.RecordBatch], scan: ArrowScan,
                 granularity: Granularity) -> Iterator[pa.RecordBatch]:
    """Rows per chunk start (null: null __time) of a task's pieces; only __time's column is read."""
    columns = [(TIME_COLUMN, scan.time_source, arrow_type_of(scan, TIME_COLUMN))]
    counts: dict = {}
    for batch in read_pieces(_pieces_of(batches, scan), columns):
        starts = chunk_starts(batch.column(0), granularity)
        nulls = starts.null_count
        if nulls:
            counts[None] = counts.get(None, 0) + nulls
            starts = starts.drop_null()
        values, n = np.unique(starts.to_numpy(zero_copy_only=False), return_counts=True)
        for v, c in zip(values.tolist(), n.tolist()):
            counts[v] = counts.get(v, 0) + c
    yield pa.RecordBatch.from_arrays([pa.array(list(counts), pa.int64()), pa.array(list(counts.values()), pa.int64())],
                                     names=["chunk", "n"])


def scan_rows(scan: ArrowScan) -> int:
    return sum(rows for task in scan.tasks for _, _, _, rows in task)


@dataclass(frozen=True)
class ScanSlice:
    """SLICE_ROWS rows (fewer at a row group's end) of one row group and their non-null __time's
    bounds in epoch millis (scan_build.py plans from these)."""

    path: str
    group: int
    offset: int
    rows: int
    min_ms: int
    max_ms: int


def count_on_driver(scan: ArrowScan, granularity: Granularity, slices: list | None = None) -> dict:
    """What count_chunks gives over every task of ``scan``, read in this process; each row group
    is read once, whole (tasks may cut one into pieces, each of which decodes it from the start).
    ``slices``: a list to append every slice's ScanSlice to, in file order (a slice of only null
    times is left out: counting reports those rows)."""
    groups: dict[tuple[str, int], int] = {}
    for task in scan.tasks:
        for path, group, _offset, rows in task:
            groups[(path, group)] = groups.get((path, group), 0) + rows
    columns = [(TIME_COLUMN, scan.time_source, arrow_type_of(scan, TIME_COLUMN))]
    counts: dict = {}
    for (path, group), rows in groups.items():
        position = 0
        for batch in read_pieces([(path, group, 0, rows)], columns):
            starts = chunk_starts(batch.column(0), granularity)
            nulls = starts.null_count
            if nulls:
                counts[None] = counts.get(None, 0) + nulls
            values, n = np.unique(starts.drop_null().to_numpy(zero_copy_only=False), return_counts=True)
            for v, c in zip(values.tolist(), n.tolist()):
                counts[v] = counts.get(v, 0) + c
            if slices is not None:
                slices.extend(_slices(path, group, position, batch.column(0)))
            position += batch.num_rows
    return counts


def _slices(path: str, group: int, position: int, times: pa.Array) -> Iterator[ScanSlice]:
    """The slices of a batch of one row group that starts at row ``position`` (a multiple of SLICE_ROWS)."""
    ms = normalize_time(times)
    values = ms.fill_null(0).to_numpy(zero_copy_only=False)
    valid = ms.is_valid().to_numpy(zero_copy_only=False) if ms.null_count else None
    for lo in range(0, len(values), SLICE_ROWS):
        part = values[lo:lo + SLICE_ROWS]
        if valid is not None:
            part = part[valid[lo:lo + SLICE_ROWS]]
        if len(part):
            yield ScanSlice(path, group, position + lo, min(SLICE_ROWS, len(values) - lo), int(part.min()),
                            int(part.max()))


def with_chunks(batches: Iterable[pa.RecordBatch], scan: ArrowScan,
                granularity: Granularity) -> Iterator[pa.RecordBatch]:
    """A task's rows, each batch with its CHUNK_COLUMN (as spark_job.chunk_column computes it)."""
    for batch in read_pieces(_pieces_of(batches, scan), scan.columns):
        starts = chunk_starts(batch.column(TIME_COLUMN), granularity)
        yield pa.RecordBatch.from_arrays(batch.columns + [starts], names=batch.schema.names + [CHUNK_COLUMN])


def arrow_type_of(scan: ArrowScan, name: str) -> pa.DataType:
    return next(kind for out, _, kind in scan.columns if out == name)


__all__ = ["ArrowScan", "COUNT_DDL", "DICTIONARY_STRING", "DRIVER_COUNT_ROWS", "SLICE_ROWS", "ScanSlice", "count_chunks",
           "count_on_driver",
           "scan_rows", "plain_projection", "plan_scan", "read_pieces", "scan_frame",
           "travel_type", "with_chunks"]
