"""The ingestion driver: one INSERT or REPLACE, run on a SparkSession, published atomically.

    read sources (parse exceptions counted) -> Spark SQL SELECT -> rows per time chunk (one pass
    over __time only) -> publisher.allocate (versions, partition numbers) -> range partitions inside
    chunks -> executors cut rows into per-segment Arrow blobs, Spark shuffles the blobs to one
    task per segment, which builds + pushes it (build.py) -> publisher.publish(descriptors) once

The SELECT runs twice (counting, then building) rather than being cached in between: Spark
prunes the counting pass to the columns __time needs, and re-reading a Parquet or already-cached
source costs less than caching every row. A SELECT that is not cheap to repeat (aggregation,
join, ...) or whose result could change between passes (rand(), CURRENT_TIMESTAMP) is cached.
A SELECT that only picks columns of Parquet files skips Spark's row format altogether: its tasks
read the files with pyarrow (arrow_scan.py), and up to arrow_scan.DRIVER_COUNT_ROWS rows its
counting pass reads __time on the driver rather than in a Spark job.

Every upload of a run goes under one deep storage folder of its own, so a failed or cancelled
run publishes nothing and removes exactly what it uploaded (a task still pushing when Spark
cancels it cannot leave a file behind once the folder is deleted after the job group drains).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa

from common.errors import StrataError, ValidationError
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.segment.time_partitioner import DEFAULT_ROWS_PER_SEGMENT
from common.types.column_properties import MULTI_VALUE_PROPERTY
from common.types.column_type import TIME_COLUMN
from common.types.granularity import Granularity
from common.types.interval import MIN_MS, Interval
from common.segment.allocation import Allocation
from services.deep_storage import deep_storage_from_url
from services.ingestion import arrow_scan, scan_build, text_scan
from services.ingestion.arrow_scan import COUNT_DDL, ArrowScan, plan_scan, scan_frame, with_chunks
from services.ingestion.arrow_scan import count_chunks as count_scan_chunks
from services.ingestion.build import (
    BLOB_DDL,
    DESCRIPTOR_DDL,
    BuildSpec,
    PlannedSegment,
    build_blobs,
    descriptor_of,
    split_into_blobs,
)
from services.ingestion.failure_message import failure_message
from services.ingestion.ingestion_report import (
    IngestionCancelled,
    IngestionFailed,
    IngestionReport,
    ParseExceptionSample,
    SegmentReport,
    TooManyParseExceptions,
)
from services.ingestion.partitioning import (
    CHUNK_COLUMN,
    PartitionPlan,
    chunk_interval,
    chunk_starts,
    key_columns_for,
    partitions_for,
    plan_partitions,
    row_keys,
    sample_fraction,
)
from services.ingestion.schema_discovery import expand_dynamic
from services.ingestion.spark_api import spark_api
from services.ingestion.text_listing import TextListing
from services.ingestion.spark_sql import check_time_column, to_spark_sql
from common.ingest.statement import IngestionStatement
from common.ingest.rollup_metrics import rollup_metrics
from services.deep_storage.upload_folder import ingest_root, new_run_token

log = logging.getLogger("strata.ingestion")
_DRAIN_TIMEOUT_S = 60.0
# Longer than spark.python.task.killTimeout (2 s): a cancelled task's Python worker is gone by then.
_QUIET_S = 5.0


class SegmentPublisher(Protocol):
    """What the coordinator offers an ingestion job."""

    def allocate(self, datasource: str, intervals: list[Interval], mode: str,
                 partitions: Mapping[Interval, int] | None = None) -> Mapping[Interval, Allocation]:
        """Versions and partition numbers for the chunks (mode 'insert' or 'replace'); ``partitions``
        says how many each chunk builds, so concurrent appenders get numbers after them."""

    def publish(self, descriptors: list[SegmentDescriptor], replace_intervals: list[Interval] | None) -> None:
        """Publish all descriptors (and retire what REPLACE overwrites) in one transaction, or nothing."""


@dataclass(frozen=True)
class IngestionJob:
    job_id: str
    statement: IngestionStatement
    default_granularity: Granularity | None = None  # the catalog's, when PARTITIONED BY is absent
    context: Mapping[str, object] = field(default_factory=dict)  # the statement's SET values win
    projections: tuple[dict, ...] = ()  # the target table's projections (catalog), built into each segment
    column_options: Mapping[str, dict] = field(default_factory=dict)  # per column encoding settings (catalog)
    declared_types: Mapping[str, object] = field(default_factory=dict)  # catalog column -> ColumnType (provided schema)
    sealed_columns: tuple[str, ...] | None = None  # a sealed target's declared columns (checked after discovery)
    kept_metrics: Mapping[str, str | None] = field(default_factory=dict)  # a compaction's: metric -> aggregator type

    @property
    def settings(self) -> dict:
        return {**dict(self.context), **dict(self.statement.context)}

    @property
    def granularity(self) -> Granularity:
        gran = self.statement.partitioned_by or self.default_granularity
        if gran is None:
            raise ValidationError(f"{self.statement.mode} INTO {self.statement.datasource} has no PARTITIONED BY and "
                                  "the datasource has no default segment granularity; add e.g. PARTITIONED BY DAY")
        return gran

    def _int(self, key: str, default: int) -> int:
        value = self.settings.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)) or not str(value).lstrip("-").isdigit():
            raise ValidationError(f"context parameter '{key}' must be a whole number, got {value!r}")
        return int(value)

    @property
    def rows_per_segment(self) -> int:
        key = "rowsPerSegment" if "rowsPerSegment" in self.settings else "targetSegmentRows"
        rows = self._int(key, DEFAULT_ROWS_PER_SEGMENT)
        if rows <= 0:
            raise ValidationError(f"context parameter '{key}' must be positive, got {rows}")
        return rows

    @property
    def max_parse_exceptions(self) -> int:
        """-1 means no limit."""
        return self._int("maxParseExceptions", 0)


ProgressCallback = Callable[[str, dict], None]


class _Run:
    """State of one run, so failure handling sees how far it got."""

    def __init__(self, spark, job: IngestionJob, storage_url: str, storage_endpoint: str, publisher,
                 progress: ProgressCallback | None, cancel_event: threading.Event | None) -> None:
        self.spark = spark
        self.api = spark_api(spark)  # classic SparkContext or Spark Connect
        self.job = job
        self.stmt = job.statement
        self.storage_url = storage_url
        self.storage_endpoint = storage_endpoint
        self.storage = deep_storage_from_url(storage_url, storage_endpoint)
        self.publisher = publisher
        self.progress = progress
        self.cancel_event = cancel_event
        token = new_run_token(job.job_id)
        self.group = f"strata-ingest-{token}"
        self.prefix = f"{ingest_root(self.stmt.datasource)}{token}/"
        self.views: list[str] = [f"strata_src_{uuid.uuid4().hex[:8]}_{i}" for i in range(len(self.stmt.sources))]
        self.work_dir = tempfile.mkdtemp(prefix="strata-ingest-")
        self.started = time.monotonic()
        self.phase_started = self.started
        self.phases: dict[str, float] = {}
        self.current: str | None = None
        self.reads: list = []
        self.listings: dict[str, list] = {}  # source -> its input files, when discovery listed them
        self.decisions: list[dict] = []
        self.cached: list = []
        self.stats = {"rows_read": 0, "rows_written": 0, "rows_filtered": None, "parse_exceptions": 0}
        self.samples: list[ParseExceptionSample] = []
        self.segments: tuple[SegmentReport, ...] = ()
        self.uploading = False
        self.published = False  # the publish returned: from here on nothing may remove the uploads
        self.text_frame = None  # the cached text_scan output, when the run reads through it
        self.text_keys: dict = {}  # its sampled keys by chunk start
        self.slices: list = []  # the driver's counting pass's ScanSlices (scan_build.py)

    # ---- bookkeeping --------------------------------------------------------------------------------

    def phase(self, name: str, **details) -> None:
        now = time.monotonic()
        self._close_phase(now)
        self.current = name
        self.phase_started = now
        if not self.published:
            # Once published the segments are in: a cancel now must not undo them (run_ingestion
            # would remove their files under rows the coordinator already serves).
            self.check_cancelled()
        if self.progress is not None:
            self.progress(name, details)

    def _close_phase(self, now: float) -> None:
        if self.current is not None:
            self.phases[self.current] = now - self.phase_started

    def check_cancelled(self) -> None:
        if self.cancel_event is not None and self.cancel_event.is_set():
            raise IngestionCancelled(f"ingestion {self.job.job_id} was cancelled")

    def report(self, status: str, error: str | None = None) -> IngestionReport:
        self._close_phase(time.monotonic())
        try:
            job_ids = self.api.job_ids(self.group)
        except Exception:  # noqa: BLE001 - a report must not fail because the tracker did
            job_ids = ()
        return IngestionReport(
            job_id=self.job.job_id, datasource=self.stmt.datasource, mode=self.stmt.mode, status=status,
            rows_read=self.stats["rows_read"], rows_written=self.stats["rows_written"],
            rows_filtered=self.stats["rows_filtered"], parse_exceptions=self.stats["parse_exceptions"],
            parse_exception_samples=tuple(self.samples), segments=self.segments if status == "SUCCESS" else (),
            duration_s=time.monotonic() - self.started, spark_job_ids=job_ids, error=error,
            phases={k: v for k, v in self.phases.items()}, schema_decisions=tuple(self.decisions))

    # ---- the pipeline -------------------------------------------------------------------------------

    def run(self) -> IngestionReport:
        job, stmt = self.job, self.stmt
        granularity = job.granularity
        rows_per_segment = job.rows_per_segment
        if any(source.discover for source in stmt.sources.values()):
            self.phase("discovering")
            stmt = self.discover()
        self.phase("reading")
        listing = self.start_text_listing()
        try:
            text = self.plan_text()
        except BaseException:
            if listing is not None:
                listing.join()  # nothing of this run keeps writing in its work directory
            raise
        key_columns = key_columns_for(stmt.clustered_by)
        if text is not None:
            counts = self.read_text(text, granularity, key_columns, rows_per_segment, listing)
        else:
            if listing is not None and listing.files() is not None:
                self.listings[next(iter(self.stmt.sources))] = listing.files()
            self.read_sources()
        self.phase("planning")
        df = self.selected()
        chunk = chunk_column(granularity)
        scan = self.arrow_scan(df) if text is None else None
        if text is not None:
            counts = self.checked_counts(counts)
        elif scan is not None:
            counts = self.count_scan(scan, granularity)
        else:
            df = self.repeatable(df)
            counts = self.count_chunks(df, chunk)
        self.stats["rows_filtered"] = self.rows_filtered()
        self.check_replace_bounds(counts, granularity)
        if text is not None:
            samples = self.text_keys
        else:
            samples = self.sample_keys(df, chunk, counts, rows_per_segment, key_columns)
        plan = plan_partitions(counts, granularity, rows_per_segment, samples, key_columns)
        self.phase("allocating", chunks=len(plan.chunks))
        spec = self.allocate(plan)
        self.phase("building", segments=len(spec.segments))
        tasks = self.scan_build_tasks(scan, plan, rows_per_segment)
        if tasks is not None:
            descriptors = self.build_scanned(tasks, scan, granularity, plan, spec)
        elif text is not None:
            descriptors = self.build(text_scan.routed_blobs(self.text_frame, plan), spec)
        elif scan is not None:
            descriptors = self.build(scan_frame(self.spark, scan).mapInArrow(_scan_splitter(scan, granularity, plan),
                                                                             BLOB_DDL), spec)
        else:
            descriptors = self.build(df.withColumn(CHUNK_COLUMN, chunk).mapInArrow(_splitter(plan), BLOB_DDL), spec)
        self.phase("publishing", segments=len(descriptors))
        self.publisher.publish(descriptors, stmt.replace_intervals)
        self.published = True
        self.segments = tuple(SegmentReport(d.id, d.num_rows, d.size, d.location) for d in descriptors)
        self.phase("done")
        return self.report("SUCCESS")

    def discover(self) -> IngestionStatement:
        """The schema commit point: resolve every discovering source's signature (and ``*``) once,
        before any row is read for the SELECT; the statement from here on has only declared types."""
        import dataclasses
        import os

        from sqlglot import exp

        from common.ingest.discovered_schema import dynamic_columns, expand_star
        from services.ingestion.schema_discovery import check_sealed, resolve_source
        from common.ingest.input_files import list_input

        sources = {}
        for view, (name, source) in zip(self.views, self.stmt.sources.items()):
            if not source.discover:
                sources[name] = source
                continue
            files = list_input(source, os.path.join(self.work_dir, view), self.job.settings)
            self.listings[name] = files
            resolved, decisions = resolve_source(self.spark, source, files, datasource=self.stmt.datasource,
                                                 settings=self.job.settings, declared=self.job.declared_types)
            sources[name] = resolved
            self.decisions.extend({"task": self.job.job_id, "datasource": self.stmt.datasource, **d.to_json()}
                                  for d in decisions)
            self.check_cancelled()
        select = expand_star(self.stmt.select, sources)
        self.stmt = dataclasses.replace(self.stmt, sources=sources, select=select)
        if self.job.sealed_columns is not None and isinstance(select, exp.Select):
            output = [e.alias_or_name for e in select.expressions if e.alias_or_name != "__dynamic"]
            check_sealed(self.stmt.datasource, output + list(dynamic_columns(select)), set(self.job.sealed_columns))
        return self.stmt

    def read_sources(self) -> None:
        from services.ingestion.source_reader import read_source

        for view, (name, source) in zip(self.views, self.stmt.sources.items()):
            read = read_source(self.spark, source, view, self.work_dir, self.job.settings, self.listings.get(name))
            self.reads.append(read)
            self.stats["rows_read"] += read.rows_read
            self.stats["parse_exceptions"] += read.parse_exceptions
            self.samples.extend(read.samples)
            self.check_cancelled()
        self.check_parse_exceptions()

    def check_parse_exceptions(self) -> None:
        limit = self.job.max_parse_exceptions
        total = self.stats["parse_exceptions"]
        if limit >= 0 and total > limit:
            first = "; ".join(s.describe() for s in self.samples[:3])
            raise TooManyParseExceptions(
                f"{total} input row(s) could not be parsed, more than maxParseExceptions={limit}. First: {first}. "
                "Fix the input or the declared column types, or allow them with SET maxParseExceptions = N; "
                "(-1: no limit)")

    def plan_text(self) -> text_scan.TextScan | None:
        """A TextScan when the SELECT only picks columns of one text source (text_scan.py): planned
        by Spark over an empty view of the source's columns first, so any doubt takes the general
        path, which reads the source into that view again."""
        from pyspark.errors import PySparkException

        from services.ingestion.source_reader import view_ddl

        # SET textScan = false keeps such a statement on the general path (to compare the two).
        if len(self.stmt.sources) != 1 or str(self.job.settings.get("textScan", "true")).lower() == "false":
            return None
        [(name, source)] = self.stmt.sources.items()
        if source.format_type not in text_scan.TEXT_FORMATS or source.discover:
            return None
        if text_scan.picked_columns(self.stmt.select, name, source.signature) is None:
            return None
        self.spark.createDataFrame([], view_ddl(source.signature)).createOrReplaceTempView(self.views[0])
        try:
            df = self.selected()
        except (StrataError, PySparkException):
            return None  # the general path reports it where it always did
        return text_scan.plan_text_scan(self.stmt.select, name, source, df.schema)

    def start_text_listing(self) -> TextListing | None:
        """List the one text source and cut its big files into line-aligned ranges (the driver's
        serial byte scan of every file, ~0.5 s per 570 MB) in a thread, while plan_text waits for
        Spark to plan the SELECT; None when the statement cannot take the text scan."""
        # Not for Spark Connect: its default parallelism is a Spark job, which must run on the
        # thread that carries the run's tag (cancellation).
        if (len(self.stmt.sources) != 1 or self.api.connect
                or str(self.job.settings.get("textScan", "true")).lower() == "false"):
            return None
        [(name, source)] = self.stmt.sources.items()
        if source.format_type not in text_scan.TEXT_FORMATS or source.discover or name in self.listings:
            return None
        if text_scan.picked_columns(self.stmt.select, name, source.signature) is None:
            return None
        return TextListing(self.api, source, self.work_dir, self.views[0], self.job.settings)

    def read_text(self, scan: text_scan.TextScan, granularity: Granularity, key_columns: tuple[str, ...],
                  rows_per_segment: int, listing: TextListing | None = None) -> dict:
        """Read the one text source with ``scan``; its rows per chunk (None: null __time). The
        keys for range partitioning are sampled in the same pass (self.text_keys)."""
        import os

        from common.ingest.input_files import list_input

        [(name, source)] = self.stmt.sources.items()
        rows = None
        if listing is not None:
            files, rows = listing.result()
        else:
            files = self.listings.get(name)
            if files is None:
                files = list_input(source, os.path.join(self.work_dir, self.views[0]), self.job.settings)
        frame, totals, self.text_keys = text_scan.read_text(self.spark, scan, source, files, granularity, key_columns,
                                                            rows_per_segment, rows)
        self.cached.append(frame)
        self.text_frame = frame
        self.stats["rows_read"] += totals.rows_read
        self.stats["parse_exceptions"] += totals.parse_exceptions
        self.samples.extend(totals.samples)
        self.check_cancelled()
        self.check_parse_exceptions()
        return totals.counts

    def json_inputs(self) -> frozenset[str]:
        """Input columns declared COMPLEX<json> (Spark holds them as JSON text)."""
        return frozenset(n for src in self.stmt.sources.values() for n, t in src.signature if t.complex_name == "json")

    def selected(self):
        from pyspark.errors import AnalysisException, ParseException

        from services.ingestion import json_udfs

        json_udfs.register(self.spark)
        sql = to_spark_sql(self.stmt.select, {name: view for name, view in zip(self.stmt.sources, self.views)},
                           self.json_inputs())
        try:
            df = self.spark.sql(sql)
        except (AnalysisException, ParseException) as exc:
            raise ValidationError(f"the SELECT cannot be run: {_spark_message(exc)} (as Spark SQL: {sql})") from None
        check_time_column(df.schema)
        df = expand_dynamic(df)
        names = df.columns
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValidationError(f"the SELECT returns column(s) {', '.join(dupes)} more than once; alias them apart")
        for col in self.stmt.clustered_by:
            if col not in names:
                raise ValidationError(f"CLUSTERED BY column '{col}' is not returned by the SELECT "
                                      f"(it returns {', '.join(names)})")
        return _storable(df, self.stmt.clustered_by)

    def repeatable(self, df):
        """``df``, cached when running it once more would cost much or could give other rows."""
        from pyspark import StorageLevel

        if not _needs_cache(df):
            return df
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.cached.append(df)
        return df

    def arrow_scan(self, df) -> ArrowScan | None:
        if len(self.reads) != 1:
            return None
        [(name, source)] = self.stmt.sources.items()
        read = self.reads[0]
        return plan_scan(self.stmt.select, name, source, read.native, read.parsed_files, df.schema,
                         self.api.default_parallelism)

    def count_scan(self, scan: ArrowScan, granularity: Granularity) -> dict[int, int]:
        # Spark Connect's client may not see the files its server's executors read.
        if not self.api.connect and arrow_scan.scan_rows(scan) <= arrow_scan.DRIVER_COUNT_ROWS:
            return self.checked_counts(arrow_scan.count_on_driver(scan, granularity, self.slices))
        rows = scan_frame(self.spark, scan).mapInArrow(_scan_counter(scan, granularity), COUNT_DDL).collect()
        counts: dict = {}
        for r in rows:
            counts[r["chunk"]] = counts.get(r["chunk"], 0) + int(r["n"])
        return self.checked_counts(counts)

    def count_chunks(self, df, chunk) -> dict[int, int]:
        rows = df.select(chunk.alias(CHUNK_COLUMN)).groupBy(CHUNK_COLUMN).count().collect()
        return self.checked_counts({r[CHUNK_COLUMN]: int(r["count"]) for r in rows})

    def checked_counts(self, counts: dict) -> dict[int, int]:
        nulls = counts.pop(None, 0)
        if nulls:
            raise ValidationError(
                f"{nulls} row(s) have a null {TIME_COLUMN} after the SELECT (e.g. TIME_PARSE could not read the "
                f"value); fix the input, or drop them with WHERE <time expression> IS NOT NULL")
        self.stats["rows_written"] = sum(counts.values())
        return counts

    def rows_filtered(self) -> int | None:
        """Rows the top-level WHERE dropped, when the SELECT reads one source directly."""
        from sqlglot import exp

        select = self.stmt.select
        if not isinstance(select, exp.Select) or select.args.get("where") is None or len(self.reads) != 1:
            return None
        source = select.args.get("from_") or select.args.get("from")
        if source is None or select.args.get("joins") or not isinstance(source.this, exp.Table):
            return None
        if source.this.name not in self.stmt.sources:
            return None
        counting = exp.select("COUNT(*)").from_(source.this.copy()).where(select.args["where"].this.copy())
        sql = to_spark_sql(counting, {name: view for name, view in zip(self.stmt.sources, self.views)},
                           self.json_inputs())
        passed = self.spark.sql(sql).collect()[0][0]
        parsed = self.reads[0].rows_read - self.reads[0].parse_exceptions
        return int(parsed - passed)

    def check_replace_bounds(self, counts: dict[int, int], granularity: Granularity) -> None:
        intervals = self.stmt.replace_intervals
        if self.stmt.overwrite in (None, "ALL"):
            return
        for start in counts:
            chunk = chunk_interval(start, granularity)
            if not any(iv.contains(chunk) for iv in intervals):
                raise ValidationError(
                    f"the SELECT returns rows in {chunk}, outside OVERWRITE WHERE "
                    f"({', '.join(str(iv) for iv in intervals)}); add the same __time condition to the SELECT's WHERE")

    def sample_keys(self, df, chunk, counts: dict[int, int], rows_per_segment: int,
                    key_columns: tuple[str, ...]) -> dict[int, list[tuple]]:
        fraction = sample_fraction(counts, rows_per_segment)
        if fraction <= 0:
            return {}
        from pyspark.sql import functions as F

        split = [start for start, n in counts.items() if partitions_for(n, rows_per_segment) > 1]
        sample = (df.select(chunk.alias(CHUNK_COLUMN), *[F.col(_quoted(c)) for c in key_columns])
                  .where(F.col(CHUNK_COLUMN).isin(split)))
        if fraction < 1.0:
            sample = sample.sample(fraction=fraction, seed=17)
        table = sample.toArrow()
        keys = row_keys([table.column(c) for c in key_columns])
        out: dict[int, list[tuple]] = {}
        for start, key in zip(table.column(CHUNK_COLUMN).to_pylist(), keys):
            out.setdefault(start, []).append(key)
        return out

    def allocate(self, plan: PartitionPlan) -> BuildSpec:
        stmt = self.stmt
        intervals = [c.interval for c in plan.chunks.values()]
        parts = {c.interval: c.parts for c in plan.chunks.values()}
        allocations = self.publisher.allocate(stmt.datasource, intervals, stmt.mode.lower(), parts) if intervals else {}
        segments: dict[int, PlannedSegment] = {}
        for chunk in plan.chunks.values():
            alloc = allocations.get(chunk.interval)
            if alloc is None:
                raise StrataError(f"the coordinator allocated nothing for {chunk.interval}; nothing was built")
            core = alloc.core_partitions or chunk.parts  # appended segments keep the chunk's core count
            for i in range(chunk.parts):
                sid = SegmentId(stmt.datasource, chunk.interval, alloc.version, alloc.first_partition + i)
                segments[chunk.first_index + i] = PlannedSegment(sid, core)
        sort = tuple(c for c in stmt.clustered_by if c != TIME_COLUMN)
        json_columns = tuple(dict.fromkeys((*stmt.json_columns(), *(c for c, o in self.job.column_options.items()
                                                                     if MULTI_VALUE_PROPERTY not in o))))
        return BuildSpec(segments, self.prefix, sort, tuple(self.job.projections), json_columns,
                         dict(self.job.column_options), rollup_metrics(stmt.select), dict(self.job.kept_metrics))

    def scan_build_tasks(self, scan: ArrowScan | None, plan: PartitionPlan, rows_per_segment: int) -> tuple | None:
        """Tasks that read and build their segments without a shuffle (scan_build.py), or None.
        SET scanBuild = false keeps the shuffle (to compare the two)."""
        if scan is None or not self.slices or str(self.job.settings.get("scanBuild", "true")).lower() == "false":
            return None
        return scan_build.plan_tasks(self.slices, plan, self.api.default_parallelism,
                                     scan_build.held_rows_bound(rows_per_segment))

    def build_scanned(self, tasks: tuple, scan: ArrowScan, granularity: Granularity, plan: PartitionPlan,
                      spec: BuildSpec) -> list[SegmentDescriptor]:
        storage_url, endpoint = self.storage_url, self.storage_endpoint

        def build(batches):
            yield from scan_build.build_tasks(batches, tasks, scan, granularity, plan, spec,
                                              deep_storage_from_url(storage_url, endpoint))

        self.uploading = True
        descriptors = self.descriptors(scan_build.tasks_frame(self.spark, len(tasks)).mapInArrow(
            build, DESCRIPTOR_DDL).collect(), spec)
        built = sum(d.num_rows for d in descriptors)
        if built != self.stats["rows_written"]:
            raise StrataError(f"the segments hold {built} rows, the count said {self.stats['rows_written']}: the "
                              "input changed between passes (was a file rewritten?). Nothing was published")
        return descriptors

    def build(self, blobs, spec: BuildSpec) -> list[SegmentDescriptor]:
        """``blobs``: BLOB_DDL rows, one segment's rows per blob."""
        from pyspark.sql import functions as F

        if not spec.segments:
            return []
        # Partition index i goes to Spark partition i: one builder task per segment, none idle.
        parted = blobs.repartitionById(len(spec.segments), F.col("part"))
        self.uploading = True
        return self.descriptors(parted.mapInArrow(_builder(spec, self.storage_url, self.storage_endpoint),
                                                  DESCRIPTOR_DDL).collect(), spec)

    def descriptors(self, rows: list, spec: BuildSpec) -> list[SegmentDescriptor]:
        """The builders' DESCRIPTOR_DDL rows as descriptors, one per planned segment, in plan order."""
        by_part: dict[int, SegmentDescriptor] = {}
        for r in rows:
            if r["part"] in by_part:
                raise StrataError(f"segment {spec.segments[r['part']].segment_id} was built twice; nothing was published")
            by_part[r["part"]] = descriptor_of(r.asDict(), spec)
        missing = sorted(set(spec.segments) - set(by_part))
        if missing:
            ids = ", ".join(str(spec.segments[m].segment_id) for m in missing[:3])
            raise StrataError(f"{len(missing)} planned segment(s) got no rows ({ids}); the SELECT returned different "
                              "rows on a second pass (is it deterministic?). Nothing was published")
        return [by_part[i] for i in sorted(by_part)]

    # ---- teardown -----------------------------------------------------------------------------------

    def cleanup_uploads(self) -> None:
        """Stop this run's Spark jobs, wait for their tasks to end, then delete every upload."""
        try:
            self.api.cancel_jobs(self.group)
        except Exception:  # noqa: BLE001 - the context may be gone; deleting still matters
            pass
        deadline = time.monotonic() + _DRAIN_TIMEOUT_S
        try:
            drained = self.api.wait_jobs_ended(self.group, deadline)
        except Exception:  # noqa: BLE001 - as above
            drained = False
        self.storage.delete_prefix(self.prefix)
        if not drained and self.uploading:
            self.delete_until_quiet(deadline)

    def delete_until_quiet(self, deadline: float) -> None:
        """When Spark cannot say the tasks ended (a Connect client sees no tasks): keep deleting
        until the run's folder stayed empty for longer than a killed Python task may run on."""
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < _QUIET_S:
            time.sleep(0.2)
            if self.storage.list(self.prefix, partial=True):
                self.storage.delete_prefix(self.prefix)
                quiet_since = time.monotonic()

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()
        for read in self.reads:
            read.release()
        for view in self.views:
            self.spark.catalog.dropTempView(view)
        shutil.rmtree(self.work_dir, ignore_errors=True)


def _spark_message(exc) -> str:
    text = str(exc).strip()
    return text.split("\n")[0][:500]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _needs_cache(df) -> bool:
    """Whether running ``df`` once more would cost much or could give other rows (spark_api)."""
    return spark_api(df.sparkSession).needs_cache(df)


def chunk_column(granularity: Granularity):
    """Each row's chunk start (epoch millis, null for a null __time) as a Spark column: native
    arithmetic for UTC granularities of fixed length, else partitioning.chunk_starts in an Arrow
    UDF. Native and Python agree: Arrow truncates microseconds to millis toward zero as ``div``
    does, and ``pmod`` is Python's floor modulo."""
    from pyspark.sql import functions as F

    time = F.col(TIME_COLUMN)
    ms = F.expr(f"unix_micros({TIME_COLUMN}) div 1000")
    if granularity.is_all:
        return F.when(time.isNotNull(), F.lit(MIN_MS))
    if granularity.is_none:
        return ms
    p = granularity.period
    if granularity.time_zone is None and not p.has_calendar_part and not p.weeks:
        origin = granularity.origin or 0
        return ms - F.pmod(ms - F.lit(origin), F.lit(p.fixed_millis))
    from pyspark.sql.functions import arrow_udf

    def starts(times: pa.Array) -> pa.Array:
        return chunk_starts(times, granularity)

    return arrow_udf(starts, "long")(time)


def _storable(df, clustered_by):
    """Cast the SELECT's columns to what segments store: __time as TIMESTAMP, other times as epoch
    millis (LONG, as Druid stores them), booleans as 1/0; refuse types segments cannot hold."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    cols = []
    for f in df.schema.fields:
        c = F.col(f"`{f.name}`")
        t = f.dataType
        if f.name == TIME_COLUMN:
            if not isinstance(t, T.TimestampType):
                c = c.cast(T.TimestampType())
        elif isinstance(t, (T.TimestampType, T.TimestampNTZType)):
            c = F.unix_millis(c.cast(T.TimestampType()))
        elif isinstance(t, T.DateType):
            c = F.unix_millis(c.cast(T.TimestampType()))
        elif isinstance(t, T.BooleanType):
            c = c.cast(T.LongType())
        elif isinstance(t, T.DecimalType):
            c = c.cast(T.DoubleType())
        elif isinstance(t, (T.StructType, T.MapType, T.BinaryType)) or (
                isinstance(t, T.ArrayType) and isinstance(t.elementType, (T.StructType, T.MapType, T.ArrayType))):
            raise ValidationError(f"column '{f.name}' is {t.simpleString()}, which segments cannot store; convert it "
                                  "(e.g. TO_JSON(col) for text) in the SELECT")
        elif isinstance(t, T.ArrayType) and f.name in clustered_by:
            raise ValidationError(f"CLUSTERED BY column '{f.name}' is an array; cluster by scalar columns")
        cols.append(c.alias(f.name))
    return df.select(*cols)


def _splitter(plan: PartitionPlan):
    def split(batches):
        yield from split_into_blobs(batches, plan.assign, drop=(CHUNK_COLUMN,))
    return split


def _scan_counter(scan: ArrowScan, granularity: Granularity):
    def count(batches):
        yield from count_scan_chunks(batches, scan, granularity)
    return count


def _scan_splitter(scan: ArrowScan, granularity: Granularity, plan: PartitionPlan):
    def split(batches):
        yield from split_into_blobs(with_chunks(batches, scan, granularity), plan.assign, drop=(CHUNK_COLUMN,))
    return split


def _builder(spec: BuildSpec, storage_url: str, storage_endpoint: str):
    def build(batches):
        storage = deep_storage_from_url(storage_url, storage_endpoint)
        yield from build_blobs(batches, spec, storage)
    return build


def run_ingestion(spark, job: IngestionJob, storage_url: str, storage_endpoint: str = "", publisher=None,
                  progress: ProgressCallback | None = None,
                  cancel_event: threading.Event | None = None) -> IngestionReport:
    """Run ``job`` to completion and publish its segments once; raises IngestionFailed (or
    IngestionCancelled, TooManyParseExceptions), with ``.report``, after removing every upload."""
    if publisher is None:
        raise ValidationError("run_ingestion needs a publisher (the coordinator's allocate/publish)")
    run = _Run(spark, job, storage_url, storage_endpoint, publisher, progress, cancel_event)
    stop = threading.Event()
    watcher = None
    if cancel_event is not None:
        def watch() -> None:
            while not stop.is_set():
                if cancel_event.wait(0.2):
                    run.api.cancel_jobs(run.group)
                    return
        watcher = threading.Thread(target=watch, name=f"cancel-{run.group}", daemon=True)
        watcher.start()
    run.api.start_jobs(run.group, f"strata {job.statement.mode} INTO {job.statement.datasource}")
    try:
        return run.run()
    except BaseException as exc:
        if run.published:
            # Only the bookkeeping after the publish failed (a progress report, say): the rows
            # are in, so their files stay, and the job succeeded.
            if not isinstance(exc, Exception):
                raise
            log.warning("ingestion %s: published, then %s", job.job_id, failure_message(exc))
            return run.report("SUCCESS")
        cancelled = cancel_event is not None and cancel_event.is_set()
        try:
            run.cleanup_uploads()
        finally:
            status = "CANCELLED" if cancelled else "FAILED"
            message = f"ingestion {job.job_id} was cancelled" if cancelled else failure_message(exc)
            report = run.report(status, message)
            if cancelled:
                raise IngestionCancelled(message + "; nothing was published", report) from None
            if isinstance(exc, IngestionFailed):
                raise type(exc)(str(exc), report) from None
            if isinstance(exc, (StrataError, ValueError)):
                raise IngestionFailed(message, report) from exc
            if isinstance(exc, Exception):
                raise IngestionFailed(message + "; nothing was published", report) from exc
        raise
    finally:
        stop.set()
        if watcher is not None:
            watcher.join(timeout=5)
        run.api.end_jobs(run.group)
        run.release()


__all__ = ["IngestionJob", "SegmentPublisher", "run_ingestion"]
