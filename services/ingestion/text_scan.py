"""TextScan: a SELECT that only picks columns of one text source (newline-delimited JSON, CSV,
TSV), with its rows read, timed, counted and cut into segment blobs by the reading tasks.

The general path hands row_parser's rows to Spark: Arrow is turned into Spark rows, cached,
counted, turned back into Arrow for the blob cutter (spark_job._splitter), cut, and shuffled as
blobs, so every value crosses the Python/JVM boundary four times and the JVM converts each row
three times. When the SELECT is ``SELECT a AS __time, b, c AS d`` or
``SELECT MILLIS_TO_TIMESTAMP(a) AS __time, ...`` over one text source, nothing row-shaped needs
the JVM: each task parses its file or line-aligned byte range with row_parser (so parse
exceptions keep their file, line and reason), computes ``__time`` and its time chunk in Arrow,
and emits zstd Arrow IPC blobs, one chunk per blob, beside a few small rows: rows per chunk,
rows read, parse exceptions and the task's first ones. Spark caches those rows (the blobs as
opaque binary values), so the row count per chunk comes out of the same pass that parsed the
text. Chunks that hold one segment go to their builder as they are (the JVM relabels the blob);
only chunks cut into several segments are decoded once more, in Python, to sample their keys and
to split them by key range.

Spark still plans the SELECT against the source's schema (its errors and type checks stay the
same); the scan is used only when the planned result is exactly the picked columns' types, so
the builders receive the same Arrow either way (what row_parser.arrow_type says Spark hands
over). Any other SELECT, or a source that is not text, takes the general path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.errors import ValidationError
from common.types.column_type import TIME_COLUMN, TypeKind
from common.types.granularity import Granularity
from services.ingestion.build import split_into_blobs
from services.ingestion.ingestion_report import ParseExceptionSample
from services.ingestion.partitioning import CHUNK_COLUMN, PartitionPlan, chunk_starts
from services.ingestion.row_parser import META_ERROR, META_FILE, META_LINE, META_RAW, arrow_type, parse_file

TEXT_FORMATS = ("json", "csv", "tsv")
MAX_SAMPLES = 10
# Row kinds of a scan task's output.
BLOB, COUNT, TOTALS, SAMPLE = 0, 1, 2, 3
SCAN_DDL = ("kind INT, chunk BIGINT, n BIGINT, blob BINARY, file STRING, line BIGINT, raw STRING, "
            "error STRING")
SCAN_SCHEMA = pa.schema([pa.field("kind", pa.int32()), pa.field("chunk", pa.int64()), pa.field("n", pa.int64()),
                         pa.field("blob", pa.binary()), pa.field("file", pa.string()), pa.field("line", pa.int64()),
                         pa.field("raw", pa.string()), pa.field("error", pa.string())])
KEYS_DDL = "chunk BIGINT, blob BINARY"
# Value kinds that Spark passes through a plain pick unchanged (spark_job._storable leaves them be;
# a COMPLEX<json> column is JSON text in a string column).
_PLAIN_KINDS = (TypeKind.STRING, TypeKind.LONG, TypeKind.DOUBLE, TypeKind.FLOAT, TypeKind.COMPLEX)
PICK, MILLIS = "pick", "millis"


@dataclass(frozen=True)
class TextScan:
    input_format: dict
    signature: tuple
    columns: tuple[tuple[str, str, str, pa.DataType], ...]  # (output name, source column, PICK/MILLIS, Arrow type)

    @property
    def names(self) -> list[str]:
        return [out for out, _, _, _ in self.columns]


def picked_columns(select, source_name: str, signature) -> list[tuple[str, str, str]] | None:
    """[(output name, source column, PICK or MILLIS)] when ``select`` (sqlglot, Druid) only names
    columns of ``source_name``, ``__time`` possibly as MILLIS_TO_TIMESTAMP(column); else None."""
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
    names = {n for n, _ in signature}
    out = []
    for item in select.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        op = PICK
        if (isinstance(node, exp.Anonymous) and node.name.upper() == "MILLIS_TO_TIMESTAMP"
                and len(node.expressions) == 1 and item.alias_or_name == TIME_COLUMN):
            node, op = node.expressions[0], MILLIS
        if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier) or node.table:
            return None
        if node.name not in names:
            return None
        out.append((item.alias_or_name, node.name, op))
    return out


def plan_text_scan(select, source_name: str, source, schema) -> TextScan | None:
    """A TextScan for the statement, or None when Spark has to run the SELECT over the rows.
    ``schema``: the Spark schema of the storable SELECT result, planned over the source."""
    if source.format_type not in TEXT_FORMATS or source.discover:
        return None
    projection = picked_columns(select, source_name, source.signature)
    if projection is None or [out for out, _, _ in projection] != [f.name for f in schema.fields]:
        return None
    from services.ingestion.source_reader import spark_type

    types = dict(source.signature)
    columns = []
    for (out, src, op), field in zip(projection, schema.fields):
        ctype = types[src]
        if out == TIME_COLUMN:
            wanted = TypeKind.LONG if op == MILLIS else TypeKind.TIMESTAMP
            if ctype.kind is not wanted or field.dataType.simpleString() != "timestamp":
                return None
            columns.append((out, src, op, pa.timestamp("us", tz="UTC")))
            continue
        if ctype.kind not in _PLAIN_KINDS or field.dataType.simpleString() != spark_type(ctype).lower():
            return None
        columns.append((out, src, op, arrow_type(ctype)))
    if TIME_COLUMN not in [c[0] for c in columns]:
        return None
    return TextScan(dict(source.input_format), tuple(source.signature), tuple(columns))


# ---- executors: read, time, count, cut ------------------------------------------------------------------


def _millis_to_time(values: pa.Array, column: str) -> pa.Array:
    """MILLIS_TO_TIMESTAMP as Spark's timestamp_millis computes it: millis * 1000 microseconds."""
    try:
        micros = pc.multiply_checked(values, pa.scalar(1000, pa.int64()))
    except pa.ArrowInvalid:
        big = pc.max(pc.abs(values)).as_py()
        raise ValidationError(f"column '{column}': {big} is out of range for MILLIS_TO_TIMESTAMP (at most "
                              f"{(2**63 - 1) // 1000} milliseconds from 1970); fix the input") from None
    return micros.cast(pa.timestamp("us", tz="UTC"))


class _Task:
    """One scan task's counts and first parse exceptions."""

    def __init__(self, scan: TextScan, granularity: Granularity) -> None:
        self.scan = scan
        self.granularity = granularity
        self.read = 0
        self.bad = 0
        self.samples: list[tuple] = []
        self.counts: dict[int | None, int] = {}

    def rows(self, parsed: pa.RecordBatch) -> pa.RecordBatch | None:
        """The good rows of a row_parser batch as output columns plus CHUNK_COLUMN (null-time rows
        only counted), or None when none is left."""
        n = parsed.num_rows
        self.read += n
        errors = parsed.column(META_ERROR)
        if errors.null_count < n:
            failed = parsed.filter(errors.is_valid())
            self.bad += failed.num_rows
            if len(self.samples) < MAX_SAMPLES:
                picked = failed.slice(0, MAX_SAMPLES - len(self.samples))
                self.samples.extend(zip(*(picked.column(c).to_pylist() for c in (META_FILE, META_LINE, META_RAW,
                                                                                    META_ERROR))))
            parsed = parsed.filter(errors.is_null())
        if parsed.num_rows == 0:
            return None
        arrays = []
        for _out, src, op, kind in self.scan.columns:
            values = parsed.column(src)
            arrays.append(_millis_to_time(values, src) if op == MILLIS else values)
        names = self.scan.names
        starts = chunk_starts(arrays[names.index(TIME_COLUMN)], self.granularity)
        batch = pa.RecordBatch.from_arrays(arrays + [starts], names=names + [CHUNK_COLUMN])
        if starts.null_count:
            self.counts[None] = self.counts.get(None, 0) + starts.null_count
            batch = batch.filter(starts.is_valid())
            starts = batch.column(CHUNK_COLUMN)
        if batch.num_rows == 0:
            return None
        values, counts = np.unique(starts.to_numpy(zero_copy_only=False), return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist()):
            self.counts[v] = self.counts.get(v, 0) + c
        return batch

    def summary(self) -> pa.RecordBatch:
        kinds = [COUNT] * len(self.counts) + [TOTALS] + [SAMPLE] * len(self.samples)
        chunks = list(self.counts) + [None] * (1 + len(self.samples))
        ns = list(self.counts.values()) + [self.read] + [None] * len(self.samples)
        samples = list(zip(*self.samples)) if self.samples else ([], [], [], [])
        lead = [None] * (len(self.counts) + 1)
        return pa.RecordBatch.from_arrays([
            pa.array(kinds, pa.int32()), pa.array(chunks, pa.int64()), pa.array(ns, pa.int64()),
            pa.nulls(len(kinds), pa.binary()), pa.array(lead + list(samples[0]), pa.string()),
            # TOTALS carries the task's parse exception count in ``line``.
            pa.array([None] * len(self.counts) + [self.bad] + list(samples[1]), pa.int64()),
            pa.array(lead + list(samples[2]), pa.string()), pa.array(lead + list(samples[3]), pa.string()),
        ], schema=SCAN_SCHEMA)


def _blob_row(chunk: int, blob: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([
        pa.array([BLOB], pa.int32()), pa.array([chunk], pa.int64()), pa.nulls(1, pa.int64()), blob,
        pa.nulls(1, pa.string()), pa.nulls(1, pa.int64()), pa.nulls(1, pa.string()), pa.nulls(1, pa.string()),
    ], schema=SCAN_SCHEMA)


def scan_listing(batches: Iterable[pa.RecordBatch], scan: TextScan,
                 granularity: Granularity) -> Iterator[pa.RecordBatch]:
    """SCAN_SCHEMA rows of the inputs in ``batches`` (source_reader.LISTING_DDL rows): a blob per
    chunk (cut at build.BLOB_ROWS rows), then the task's counts, totals and first parse exceptions."""
    from services.ingestion.source_reader import open_listed

    task = _Task(scan, granularity)
    ids: dict[int, int] = {}  # chunk start -> blob routing id inside this task
    chunks: list[int] = []

    def timed() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                with open_listed(row) as stream:
                    for parsed in parse_file(row["name"], stream, scan.input_format, scan.signature,
                                             first_line=row["first_line"]):
                        out = task.rows(parsed)
                        if out is not None:
                            yield out

    def local_ids(batch: pa.RecordBatch) -> pa.Array:
        starts = batch.column(CHUNK_COLUMN).to_numpy(zero_copy_only=False)
        uniq, inverse = np.unique(starts, return_inverse=True)
        for start in uniq.tolist():
            if start not in ids:
                ids[start] = len(chunks)
                chunks.append(start)
        return pa.array(np.array([ids[s] for s in uniq.tolist()], dtype=np.int64)[inverse])

    for cut in split_into_blobs(timed(), local_ids, drop=(CHUNK_COLUMN,)):
        yield _blob_row(chunks[cut.column(0)[0].as_py()], cut.column(1))
    yield task.summary()


@dataclass
class ScanTotals:
    rows_read: int
    parse_exceptions: int
    samples: list[ParseExceptionSample]
    counts: dict  # chunk start (None: null __time) -> rows


def totals_of(rows) -> ScanTotals:
    """The scan's small rows (Spark Rows of every kind but BLOB) summed up."""
    read = bad = 0
    counts: dict = {}
    samples = []
    for r in rows:
        if r["kind"] == COUNT:
            counts[r["chunk"]] = counts.get(r["chunk"], 0) + int(r["n"])
        elif r["kind"] == TOTALS:
            read += int(r["n"])
            bad += int(r["line"])
        elif r["kind"] == SAMPLE:
            samples.append(ParseExceptionSample(r["file"], int(r["line"]), r["raw"] or "", r["error"]))
    samples.sort(key=lambda s: (s.source, s.line))
    return ScanTotals(read, bad, samples[:MAX_SAMPLES], counts)


# ---- executors: keys of the chunks cut into several segments, and the cut -------------------------------


def _decode(blob: pa.Buffer, columns: list[str] | None = None) -> pa.Table:
    options = None
    with pa.ipc.open_stream(blob) as reader:
        if columns is None:
            return reader.read_all()
        schema = reader.schema
    options = pa.ipc.IpcReadOptions(included_fields=[schema.get_field_index(c) for c in columns])
    with pa.ipc.open_stream(blob, options=options) as reader:
        return reader.read_all()


def sample_blob_keys(batches: Iterable[pa.RecordBatch], key_columns: tuple[str, ...],
                     fraction: float) -> Iterator[pa.RecordBatch]:
    """KEYS_DDL rows: for each (chunk, blob) row, a Bernoulli sample of its key columns as an
    Arrow IPC stream (only those columns are decoded)."""
    from services.ingestion.build import encode_blob

    for batch in batches:
        chunks = batch.column("chunk").to_pylist()
        blobs = batch.column("blob")
        for i, chunk in enumerate(chunks):
            table = _decode(blobs[i].as_buffer(), list(key_columns))
            if fraction < 1.0:
                rng = np.random.default_rng([17, table.num_rows, chunk & 0xFFFFFFFF])
                table = table.filter(pa.array(rng.random(table.num_rows) < fraction))
            if table.num_rows:
                yield pa.RecordBatch.from_arrays([pa.array([chunk], pa.int64()),
                                                  encode_blob(table.combine_chunks().to_batches())],
                                                 names=["chunk", "blob"])


def keys_of(rows, key_columns: tuple[str, ...]) -> dict[int, list[tuple]]:
    """Sampled keys by chunk start from the collected KEYS_DDL rows (as spark_job.sample_keys)."""
    from services.ingestion.partitioning import row_keys

    out: dict[int, list[tuple]] = {}
    for r in rows:
        table = _decode(pa.py_buffer(r["blob"]))
        out.setdefault(r["chunk"], []).extend(row_keys([table.column(c) for c in key_columns]))
    return out


def split_chunk_blobs(batches: Iterable[pa.RecordBatch], plan: PartitionPlan) -> Iterator[pa.RecordBatch]:
    """BLOB_SCHEMA rows, one segment per blob, of (chunk, blob) rows of chunks cut into several
    segments."""

    def rows() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            chunks = batch.column("chunk").to_pylist()
            blobs = batch.column("blob")
            for i, chunk in enumerate(chunks):
                for piece in _decode(blobs[i].as_buffer()).to_batches():
                    starts = pa.array(np.full(piece.num_rows, chunk, dtype=np.int64))
                    yield pa.RecordBatch.from_arrays(piece.columns + [starts],
                                                     names=piece.schema.names + [CHUNK_COLUMN])

    yield from split_into_blobs(rows(), plan.assign, drop=(CHUNK_COLUMN,))




# ---- driver -----------------------------------------------------------------------------------------------


def read_text(spark, scan: TextScan, source, files, granularity: Granularity):
    """Run the scan over ``files`` (source_reader.InputFile) and cache its output; (the cached
    SCAN_DDL frame, its ScanTotals)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from services.ingestion.source_reader import LISTING_DDL, listing_rows
    from services.ingestion.spark_api import spark_api

    api = spark_api(spark)
    listing = api.listing_frame(listing_rows(api, source, files), LISTING_DDL)

    def run(batches):
        yield from scan_listing(batches, scan, granularity)

    frame = listing.mapInArrow(run, SCAN_DDL).persist(StorageLevel.MEMORY_AND_DISK)
    rows = frame.where(F.col("kind") != BLOB).drop("blob").collect()
    return frame, totals_of(rows)


def sample_keys(frame, chunks: list[int], key_columns: tuple[str, ...], fraction: float) -> dict[int, list[tuple]]:
    """Sampled keys of ``chunks`` (those cut into several segments) from the cached scan."""
    from pyspark.sql import functions as F

    if not chunks or fraction <= 0:
        return {}

    def run(batches):
        yield from sample_blob_keys(batches, key_columns, fraction)

    blobs = frame.where((F.col("kind") == BLOB) & F.col("chunk").isin(chunks)).select("chunk", "blob")
    return keys_of(blobs.mapInArrow(run, KEYS_DDL).collect(), key_columns)


def routed_blobs(spark, frame, plan: PartitionPlan):
    """build.BLOB_DDL rows of the cached scan: a chunk of one segment keeps its blobs (the JVM
    labels them with the segment's partition index); a chunk of several is split in Python."""
    from pyspark.sql import functions as F

    from services.ingestion.build import BLOB_DDL

    blobs = frame.where(F.col("kind") == BLOB).select("chunk", "blob")
    whole = [(start, c.first_index) for start, c in plan.chunks.items() if not c.boundaries]
    cut = [start for start, c in plan.chunks.items() if c.boundaries]
    out = []
    if whole:
        labels = spark.createDataFrame(whole, "chunk BIGINT, part INT")
        out.append(blobs.join(F.broadcast(labels), "chunk").select("part", "blob"))
    if cut:
        def run(batches):
            yield from split_chunk_blobs(batches, plan)

        out.append(blobs.where(F.col("chunk").isin(cut)).mapInArrow(run, BLOB_DDL))
    routed = out[0]
    for more in out[1:]:
        routed = routed.unionByName(more)
    return routed


__all__ = ["BLOB", "KEYS_DDL", "SCAN_DDL", "SCAN_SCHEMA", "TEXT_FORMATS", "ScanTotals", "TextScan", "keys_of",
           "picked_columns", "plan_text_scan", "read_text", "routed_blobs", "sample_blob_keys", "sample_keys", "scan_listing",
           "split_chunk_blobs", "totals_of"]
