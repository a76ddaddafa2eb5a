"""TextScan: a SELECT that only picks columns of one text source (newline-delimited JSON, CSV,
TSV), with its rows read, timed, counted and cut into segment blobs by the reading tasks.

The general path hands row_parser's rows to Spark: Arrow is turned into Spark rows, cached,
counted, turned back into Arrow for the blob cutter (spark_job._splitter), cut, and shuffled as
blobs, so every value crosses the Python/JVM boundary four times and the JVM converts each row
three times. When the SELECT is ``SELECT a AS __time, b, c AS d`` or
``SELECT MILLIS_TO_TIMESTAMP(a) AS __time, ...`` over one text source, nothing row-shaped needs
the JVM: each task parses its file or line-aligned byte range with row_parser, or for JSON lines
with the compiled reader that gives row_parser's batches (json_lines_reader; so parse exceptions
keep their file, line and reason), computes ``__time`` and its time chunk in Arrow,
and emits zstd Arrow IPC blobs, one chunk per blob, beside a few small rows: rows per chunk,
rows read, parse exceptions and the task's first ones. Spark caches those rows (the blobs as
opaque binary values), so the row count per chunk comes out of the same pass that parsed the
text, and so does a sample of the keys that range-partition a chunk. Blobs of a chunk that is one
segment go to their builder as they are (a Python pass only labels them with the segment); only
chunks cut into several segments are decoded once more, to split them by key range.

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
from services.ingestion.arrow_scan import select_items
from services.ingestion.build import BLOB_SCHEMA, encode_blob, split_into_blobs
from services.ingestion.ingestion_report import ParseExceptionSample
from services.ingestion.json_lines_reader import parse_text
from services.ingestion.partitioning import CHUNK_COLUMN, SAMPLES_PER_PARTITION, PartitionPlan, chunk_starts
from common.ingest.row_parser import META_ERROR, META_FILE, META_LINE, META_RAW, arrow_type

TEXT_FORMATS = ("json", "csv", "tsv")
MAX_SAMPLES = 10
# Row kinds of a scan task's output.
BLOB, COUNT, TOTALS, SAMPLE, KEYS = 0, 1, 2, 3, 4
SCAN_DDL = ("kind INT, chunk BIGINT, n BIGINT, blob BINARY, file STRING, line BIGINT, raw STRING, "
            "error STRING")
SCAN_SCHEMA = pa.schema([pa.field("kind", pa.int32()), pa.field("chunk", pa.int64()), pa.field("n", pa.int64()),
                         pa.field("blob", pa.binary()), pa.field("file", pa.string()), pa.field("line", pa.int64()),
                         pa.field("raw", pa.string()), pa.field("error", pa.string())])
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

    items = select_items(select, source_name)
    if items is None:
        return None
    names = {n for n, _ in signature}
    out = []
    for item in items:
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


def key_sample_rate(rows_per_segment: int) -> float:
    """The fraction of rows whose keys a scan task samples, for every chunk: at least what
    partitioning.sample_fraction gives any chunk that is cut (parts * SAMPLES_PER_PARTITION / rows
    is below 2 * SAMPLES_PER_PARTITION / rows_per_segment), decided before the counts are known."""
    return min(1.0, 2 * SAMPLES_PER_PARTITION / max(1, rows_per_segment))


class _Task:
    """One scan task's counts, first parse exceptions and sampled keys."""

    def __init__(self, scan: TextScan, granularity: Granularity, key_columns: tuple[str, ...] = (),
                 key_rate: float = 0.0, seed: int = 0) -> None:
        self.scan = scan
        self.granularity = granularity
        self.read = 0
        self.bad = 0
        self.samples: list[tuple] = []
        self.counts: dict[int | None, int] = {}
        self.key_columns = list(key_columns)
        self.key_rate = key_rate
        self.rng = np.random.default_rng([17, seed])
        self.keys: list[pa.RecordBatch] = []

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
        if self.key_rate > 0:
            picked = batch if self.key_rate >= 1.0 else batch.filter(
                pa.array(self.rng.random(batch.num_rows) < self.key_rate))
            if picked.num_rows:
                self.keys.append(picked.select(self.key_columns + [CHUNK_COLUMN]))
        return batch

    def sampled_keys(self) -> pa.RecordBatch | None:
        """A KEYS row: the sampled key columns and chunk starts as one Arrow IPC blob."""
        if not self.keys:
            return None
        return pa.RecordBatch.from_arrays([
            pa.array([KEYS], pa.int32()), pa.nulls(1, pa.int64()), pa.nulls(1, pa.int64()),
            encode_blob(pa.Table.from_batches(self.keys).combine_chunks().to_batches() or self.keys[:1]),
            pa.nulls(1, pa.string()), pa.nulls(1, pa.int64()), pa.nulls(1, pa.string()), pa.nulls(1, pa.string()),
        ], schema=SCAN_SCHEMA)

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


def scan_listing(batches: Iterable[pa.RecordBatch], scan: TextScan, granularity: Granularity,
                 key_columns: tuple[str, ...] = (), key_rate: float = 0.0) -> Iterator[pa.RecordBatch]:
    """SCAN_SCHEMA rows of the inputs in ``batches`` (source_reader.LISTING_DDL rows): a blob per
    chunk (cut at build.BLOB_ROWS rows), then the task's counts, totals, first parse exceptions and
    a Bernoulli sample (``key_rate``) of its rows' ``key_columns``."""
    from services.ingestion.source_reader import open_listed

    batches = list(batches)
    firsts = [v for b in batches for v in b.column("start").to_pylist()]
    task = _Task(scan, granularity, key_columns, key_rate, seed=int(firsts[0] or 0) if firsts else 0)
    ids: dict[int, int] = {}  # chunk start -> blob routing id inside this task
    chunks: list[int] = []

    def timed() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                with open_listed(row) as stream:
                    for parsed in parse_text(row["name"], stream, scan.input_format, scan.signature,
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
    keys = task.sampled_keys()
    if keys is not None:
        yield keys


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


# ---- executors: the cut of chunks into several segments ---------------------------------------------------


def _decode(blob: pa.Buffer) -> pa.Table:
    with pa.ipc.open_stream(blob) as reader:
        return reader.read_all()


def route_blobs(batches: Iterable[pa.RecordBatch], plan: PartitionPlan) -> Iterator[pa.RecordBatch]:
    """BLOB_SCHEMA rows, one segment per blob, of the scan's (chunk, blob) rows: a blob whose rows
    all go to one segment keeps its bytes (always so in a chunk that is one segment; in a chunk cut
    into several, found by decoding only the blob's key columns); the others are decoded and split
    (one input batch at a time, so a task holds at most a batch of blobs and build.BLOB_BYTES of rows)."""
    for batch in batches:
        chunks = batch.column("chunk").to_pylist()
        blobs = batch.column("blob")
        to_cut = []
        for i, chunk in enumerate(chunks):
            planned = plan.chunks.get(chunk)
            if planned is None:
                raise ValidationError(f"rows in chunk starting {chunk} were not planned; the input changed while it "
                                      "was read")
            part = _one_part(blobs[i].as_buffer(), chunk, plan) if planned.boundaries else planned.first_index
            if part is None:
                to_cut.append(i)
            else:
                yield pa.RecordBatch.from_arrays([pa.array([part], pa.int32()), blobs.slice(i, 1)], schema=BLOB_SCHEMA)
        if to_cut:
            yield from split_into_blobs(_timed_rows([(chunks[i], blobs[i].as_buffer()) for i in to_cut]), plan.assign,
                                        drop=(CHUNK_COLUMN,))


def _one_part(blob: pa.Buffer, chunk: int, plan: PartitionPlan) -> int | None:
    """The partition index of every row of ``blob`` when they all have the same, else None. Reads
    only the key columns (the text scan's blobs hold a task's rows in input order, so with time-
    ordered input most blobs of a chunk cut by __time lie inside one range and need no re-cut)."""
    with pa.ipc.open_stream(blob) as reader:
        names = reader.schema.names
    if not all(c in names for c in plan.key_columns):
        return None
    wanted = sorted(names.index(c) for c in plan.key_columns)
    with pa.ipc.open_stream(blob, options=pa.ipc.IpcReadOptions(included_fields=wanted)) as reader:
        keys = reader.read_all()
    if keys.num_rows == 0:
        return None
    keys = keys.combine_chunks()
    starts = pa.array(np.full(keys.num_rows, chunk, dtype=np.int64))
    batch = pa.RecordBatch.from_arrays([keys.column(c).combine_chunks() for c in plan.key_columns] + [starts],
                                       names=list(plan.key_columns) + [CHUNK_COLUMN])
    parts = plan.assign(batch).to_numpy(zero_copy_only=False)
    return int(parts[0]) if parts[0] == parts[-1] and bool((parts == parts[0]).all()) else None


def _timed_rows(blobs: list[tuple[int, pa.Buffer]]) -> Iterator[pa.RecordBatch]:
    """The rows of (chunk start, blob) pairs, each batch with its CHUNK_COLUMN (as plan.assign reads it)."""
    for chunk, blob in blobs:
        for piece in _decode(blob).to_batches():
            starts = pa.array(np.full(piece.num_rows, chunk, dtype=np.int64))
            yield pa.RecordBatch.from_arrays(piece.columns + [starts], names=piece.schema.names + [CHUNK_COLUMN])


def keys_of(rows, key_columns: tuple[str, ...]) -> dict[int, list[tuple]]:
    """Sampled keys by chunk start from the scan's KEYS rows (blobs of key columns + CHUNK_COLUMN)."""
    from services.ingestion.partitioning import row_keys

    out: dict[int, list[tuple]] = {}
    for r in rows:
        table = _decode(pa.py_buffer(r["blob"]))
        keys = row_keys([table.column(c) for c in key_columns])
        for chunk, key in zip(table.column(CHUNK_COLUMN).to_pylist(), keys):
            out.setdefault(chunk, []).append(key)
    return out


# ---- driver -----------------------------------------------------------------------------------------------


def read_text(spark, scan: TextScan, source, files, granularity: Granularity, key_columns: tuple[str, ...],
              rows_per_segment: int, listing: list[tuple] | None = None):
    """Run the scan over ``files`` (source_reader.InputFile) and cache its output; (the cached
    SCAN_DDL frame, its ScanTotals, the sampled keys by chunk start). ``listing``: the files'
    listing_rows when the caller already has them."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from services.ingestion.source_reader import LISTING_DDL, listing_rows
    from services.ingestion.spark_api import spark_api

    api = spark_api(spark)
    if listing is None:
        listing = listing_rows(api, source, files)
    listing = api.listing_frame(listing, LISTING_DDL)
    rate = key_sample_rate(rows_per_segment)

    def run(batches):
        yield from scan_listing(batches, scan, granularity, key_columns, rate)

    frame = listing.mapInArrow(run, SCAN_DDL).persist(StorageLevel.DISK_ONLY)
    rows = frame.where(F.col("kind") != BLOB).collect()  # the key samples are the only blobs here
    return frame, totals_of(rows), keys_of([r for r in rows if r["kind"] == KEYS], key_columns)


def routed_blobs(frame, plan: PartitionPlan):
    """build.BLOB_DDL rows of the cached scan, one segment per blob (route_blobs)."""
    from pyspark.sql import functions as F

    from services.ingestion.build import BLOB_DDL

    def run(batches):
        yield from route_blobs(batches, plan)

    return frame.where(F.col("kind") == BLOB).select("chunk", "blob").mapInArrow(run, BLOB_DDL)


__all__ = ["BLOB", "KEYS", "SCAN_DDL", "SCAN_SCHEMA", "TEXT_FORMATS", "ScanTotals", "TextScan", "key_sample_rate",
           "keys_of", "picked_columns", "plan_text_scan", "read_text", "route_blobs", "routed_blobs", "scan_listing",
           "totals_of"]
