"""One Kafka micro-batch's messages -> segments, in the Spark task that read them (pure: no Spark).

A stream task's micro-batch is ONE Spark job, ``frame.mapInArrow(outputs_of(plan), OUTPUT_DDL)``
over the ``strata_kafka`` source's rows. Each Spark task (one Kafka partition's range; for a
rollup, every partition in one task, so a micro-batch rolls up across partitions as the INSERT it
replaced did) runs:

    rules    StreamRowRules.decide: parse, timestamp, transforms, filter, late/early rejection
    typing   the INSERT path's: the micro-batch statement (stream_insert.micro_batch_sql) says
             which columns are declared; discovered ones are resolved over the kept rows
             (schema_discovery.resolve_source, the catalog's declared types winning); the rows are
             read into Arrow by the JSON lines reader with that signature (the messages' own
             bytes when no transform changed them, so no row is encoded again)
    select   __time, the dimensions, each metric (its field as the SQL casts it); a rollup
             groups by __time and the dimensions
    build    per time chunk: segments built and pushed (build.build_one) under the allocation
             the driver made before the job, when it made one for that chunk (an append into a
             chunk the task published to before); rows of any other chunk go back to the driver
             as an Arrow IPC blob, to be allocated and built there

and yields small rows: one per segment (its descriptor), one per unallocated chunk (the blob),
and one ``stats`` row (messages, thrownAway, parse exceptions with partition, offset and reason,
the output columns). The driver publishes the descriptors with the micro-batch's offsets; rows
never travel through it unless their chunk was new to the task.

Partition numbers: the driver allocates each chunk with ``stride`` numbers per Spark task, and the
task with slot ``s`` numbers its segments ``first + s * stride + j``, so the tasks of one job never
collide and the coordinator's ledger has reserved every number they use.
"""

from __future__ import annotations

import io
import math
import shutil
import tempfile
from collections import namedtuple
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from common.ingest.discovered_schema import DYNAMIC_COLUMN, expand_star
from common.ingest.rollup_metrics import rollup_metrics
from common.ingest.row_parser import META_ERROR, META_LINE, arrow_type
from common.ingest.statement import parse_ingestion
from common.ingest.stream_insert import micro_batch_sql
from common.ingest.stream_rows import TIME, StreamRowRules, StreamRows
from common.ingest.supervisor_spec import METRIC_TYPES, SupervisorSpec
from common.segment.segment_id import SegmentId
from common.types.column_type import TIMESTAMP, ColumnType
from common.types.interval import Interval
from common.types.type_discovery import SchemaDiscovery
from services.deep_storage import deep_storage_from_url
from services.ingestion.build import BuildSpec, PlannedSegment, build_one, decode_blob, encode_blob
from services.ingestion.json_lines_reader import parse_text
from services.ingestion.partitioning import chunk_starts
from services.ingestion.schema_discovery import resolve_source

OUTPUT_DDL = "kind STRING, info STRING, blob BINARY"
OUTPUT_SCHEMA = pa.schema([("kind", pa.string()), ("info", pa.string()), ("blob", pa.binary())])
# The statement's placeholder input: the micro-batch's rows never are a file.
_SOURCE = "kafka"
_Message = namedtuple("_Message", "partition offset value")


@dataclass(frozen=True)
class ChunkAllocation:
    """An appended allocation the driver made for a chunk before the job."""

    start: int
    end: int
    version: str
    first_partition: int
    core_partitions: int


@dataclass(frozen=True)
class MicroBatchPlan:
    """What every Spark task of a micro-batch needs (pickled into the job)."""

    spec: SupervisorSpec
    task_start_ms: int  # late/early rejection bounds
    storage_url: str
    storage_endpoint: str
    key_prefix: str  # deep storage folder of this micro-batch's uploads, ending in '/'
    allocations: Mapping[int, ChunkAllocation] = field(default_factory=dict)  # chunk start ->
    slots: Mapping[int, int] = field(default_factory=dict)  # Kafka partition -> its task's slot
    stride: int = 1  # partition numbers per slot and chunk
    # The catalog's definition of the datasource, as for an INSERT (stream_insert.catalog_job_options).
    projections: tuple[dict, ...] = ()
    column_options: Mapping[str, dict] = field(default_factory=dict)
    declared_types: Mapping[str, ColumnType] = field(default_factory=dict)

    @property
    def rows_per_segment(self) -> int:
        return self.spec.max_rows_per_segment


def _row(kind: str, info: dict, blob: pa.Array | None = None) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([kind]), pa.array([orjson.dumps(info).decode()]),
                                       blob if blob is not None else pa.nulls(1, pa.binary())], schema=OUTPUT_SCHEMA)


def outputs_of(plan: MicroBatchPlan):
    """The mapInArrow function of a micro-batch."""
    def run(batches):
        yield from micro_batch_outputs(batches, plan)
    return run


def micro_batch_outputs(batches: Iterable[pa.RecordBatch], plan: MicroBatchPlan,
                        work_dir: str | None = None) -> Iterator[pa.RecordBatch]:
    """OUTPUT_SCHEMA rows for the messages (kafka_stream_source.SCHEMA batches) of one task, in
    the order read (each partition's in offset order)."""
    batches = [b for b in batches if b.num_rows]
    table = pa.Table.from_batches(batches) if batches else None
    if table is None:
        yield _row("stats", {"messages": 0, "thrownAway": 0, "rows": 0, "columns": [], "parseExceptions": []})
        return
    partitions = table.column("partition").to_pylist()
    messages = list(map(_Message, partitions, table.column("offset").to_pylist(), table.column("value").to_pylist()))
    decided = StreamRowRules(plan.spec, plan.task_start_ms).decide(messages)
    exceptions = [[e.partition, e.offset, e.reason] for e in decided.parse_exceptions]
    stats = {"messages": len(messages), "thrownAway": decided.thrown_away, "rows": 0, "columns": [],
             "parseExceptions": exceptions}
    if decided.rows:
        typed = _typed(decided, messages, plan)
        if typed.errors:  # in read order, with the rules' own
            position = {(m.partition, m.offset): i for i, m in enumerate(messages)}
            exceptions.extend(typed.errors)
            exceptions.sort(key=lambda e: position[(e[0], e[1])])
        stats["columns"] = list(typed.table.column_names)
        stats["rows"] = typed.table.num_rows
        if typed.table.num_rows:
            own = work_dir is None
            work_dir = work_dir or tempfile.mkdtemp(prefix="strata-stream-build-")
            try:
                yield from _segments(typed, plan, plan.slots.get(partitions[0], 0), work_dir)
            finally:
                if own:
                    shutil.rmtree(work_dir, ignore_errors=True)
    yield _row("stats", stats)


@dataclass
class _Typed:
    table: pa.Table  # __time (timestamp us UTC), dimensions, metrics: what the INSERT's SELECT returned
    errors: list  # [partition, offset, reason] of rows the typed read refused
    granularity: object  # the segment granularity
    json_columns: tuple[str, ...]
    metrics: dict  # metric -> aggregator kind (a rollup's), for the manifests


def _typed(decided: StreamRows, messages: list, plan: MicroBatchPlan) -> _Typed:
    spec = plan.spec
    stmt = parse_ingestion(micro_batch_sql(spec, _SOURCE))
    [(name, source)] = stmt.sources.items()
    rows, origins = decided.rows, decided.origins
    select = stmt.select
    if source.discover:
        found = SchemaDiscovery()
        where = f"topic {spec.topic} partition {messages[origins[0]].partition}"
        for row, pos in zip(rows, origins):
            found.add_row(row, where, messages[pos].offset)
        found.columns.pop(TIME, None)
        source, _ = resolve_source(None, source, [], datasource=spec.datasource, settings={},
                                   declared=plan.declared_types, found=found)
        select = expand_star(select, {name: source})
    signature = [(n, t) for n, t in source.signature if n != TIME]
    # Without transforms a kept row is its message's JSON object (plus __time, a column of its
    # own here): the reader takes the message's bytes. A value spanning lines cannot be a line.
    raw = spec.input_format.type == "json" and not spec.transforms
    data = b"\n".join([messages[pos].value for pos in origins]) if raw else b""
    if not raw or data.count(b"\n") != len(rows) - 1 or b"\r" in data:
        data = b"\n".join([messages[pos].value if raw and b"\n" not in messages[pos].value
                           and b"\r" not in messages[pos].value
                           else orjson.dumps({k: v for k, v in row.items() if k != TIME})
                           for row, pos in zip(rows, origins)])
    times = np.fromiter((r[TIME] for r in rows), dtype=np.int64, count=len(rows))
    read = [b for b in parse_text(_SOURCE, io.BytesIO(data + b"\n"), dict(source.input_format), signature)]
    table = pa.Table.from_batches(read) if read else pa.table({META_LINE: pa.array([], pa.int64()),
                                                                META_ERROR: pa.array([], pa.string())})
    line = table.column(META_LINE).to_numpy(zero_copy_only=False).astype(np.int64) - 1
    failed = table.column(META_ERROR).is_valid().to_numpy(zero_copy_only=False)
    errors = []
    for i, reason in zip(line[failed], table.column(META_ERROR).filter(pa.array(failed)).to_pylist()):
        m = messages[origins[i]]
        errors.append([m.partition, m.offset, reason])
    keep = ~failed
    table = table.filter(pa.array(keep))
    at = line[keep]
    columns: dict[str, pa.Array] = {TIME: pa.array(times[at] * 1000, arrow_type(TIMESTAMP))}
    for dim in _dimensions(select):
        columns[dim] = table.column(dim).combine_chunks() if dim in table.column_names else pa.nulls(len(at))
    metrics = []
    for m in spec.metrics:
        function, kind = METRIC_TYPES[m.type]
        if function == "COUNT":
            columns[m.name] = pa.array(np.ones(len(at), dtype=np.int64))
        else:
            target = pa.int64() if kind == "BIGINT" else pa.float64()
            value = table.column(m.field_name).combine_chunks() if m.field_name in table.column_names \
                else pa.nulls(len(at), target)
            columns[m.name] = pc.cast(value, target, safe=False)
        metrics.append((m.name, function))
    if spec.rollup:
        columns = _rollup(columns, [c for c in columns if c not in {m for m, _ in metrics}], metrics)
    json_types = {n for n, t in signature if t.complex_name == "json"}
    return _Typed(pa.table(columns), errors, stmt.partitioned_by,
                  tuple(c for c in columns if c in json_types), rollup_metrics(select))


def _dimensions(select: exp.Expression) -> list[str]:
    """The SELECT's dimension columns, in order: plain columns and a rollup's ``__dynamic`` ones."""
    out = []
    for e in select.expressions:
        name = e.alias_or_name
        inner = e.unalias() if isinstance(e, exp.Alias) else e
        if name == TIME:
            continue
        if name == DYNAMIC_COLUMN and isinstance(inner, exp.Anonymous):
            out.extend(a.name for a in inner.expressions if isinstance(a, exp.Column))
        elif isinstance(inner, exp.Column):
            out.append(name)
    return out


def _rollup(columns: dict[str, pa.Array], keys: list[str], metrics: list[tuple[str, str]]) -> dict[str, pa.Array]:
    """GROUP BY ``keys`` with each metric aggregated by its function (SUM, MIN, MAX skip nulls
    and are null for a group of nulls only, as in SQL; COUNT counts rows)."""
    codes = []
    for k in keys:
        col = columns[k]
        if pa.types.is_nested(col.type):  # lists group by their whole value
            col = pa.array([None if v is None else orjson.dumps(v).decode() for v in col.to_pylist()], pa.string())
        codes.append(pc.dictionary_encode(col).indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64))
    n = len(next(iter(columns.values())))
    stacked = np.stack(codes, axis=1) if codes else np.zeros((n, 1), dtype=np.int64)
    _, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    out = {k: columns[k].take(pa.array(first)) for k in keys}
    summed = [(name, function.lower()) for name, function in metrics if function != "COUNT"]
    grouped = None
    if summed:
        grouped = pa.table({"__group": inverse, **{name: columns[name] for name, _ in summed}}).group_by(
            "__group").aggregate([(name, fn) for name, fn in summed]).sort_by("__group")
    for name, function in metrics:
        if function == "COUNT":
            out[name] = pa.array(np.bincount(inverse, minlength=len(first)).astype(np.int64))
        else:
            out[name] = grouped.column(f"{name}_{function.lower()}").combine_chunks()
    return out


def _build_spec(plan: MicroBatchPlan, json_columns, metrics) -> BuildSpec:
    return BuildSpec({}, plan.key_prefix, (), tuple(plan.projections), tuple(json_columns),
                     dict(plan.column_options), dict(metrics))


def _segment_info(sid: SegmentId, core: int, described: pa.RecordBatch) -> dict:
    d = described.to_pylist()[0]
    return {"start": sid.interval.start, "end": sid.interval.end, "version": sid.version, "partition": sid.partition,
            "core": core, "size": d["size"], "rows": d["rows"], "location": d["location"], "manifest": d["manifest"]}


def _segments(typed: _Typed, plan: MicroBatchPlan, slot: int, work_dir: str) -> Iterator[pa.RecordBatch]:
    table = typed.table
    spec = _build_spec(plan, typed.json_columns, typed.metrics)
    starts = chunk_starts(table.column(TIME), typed.granularity).to_numpy(zero_copy_only=False)
    order = np.argsort(starts, kind="stable")
    storage = None
    for start in np.unique(starts):
        idx = order[starts[order] == start]
        rows = table.take(pa.array(idx))
        alloc = plan.allocations.get(int(start))
        if alloc is None:
            yield _row("rows", {"start": int(start), "rows": rows.num_rows, "json": list(typed.json_columns),
                                "metrics": typed.metrics},
                       encode_blob(rows.combine_chunks().to_batches()))
            continue
        if storage is None:
            storage = deep_storage_from_url(plan.storage_url, plan.storage_endpoint)
        interval = Interval(alloc.start, alloc.end)
        pieces = min(plan.stride, max(1, math.ceil(rows.num_rows / plan.rows_per_segment)))
        step = math.ceil(rows.num_rows / pieces)
        for j in range(pieces):
            sid = SegmentId(plan.spec.datasource, interval, alloc.version, alloc.first_partition + slot * plan.stride + j)
            described = build_one(rows.slice(j * step, step).to_batches(), j, PlannedSegment(sid, alloc.core_partitions),
                                  spec, storage, work_dir)
            yield _row("segment", _segment_info(sid, alloc.core_partitions, described))


def build_rows(blobs: list[tuple[dict, pa.Buffer]], allocation, plan: MicroBatchPlan, datasource: str,
               work_dir: str) -> Iterator[dict]:
    """On the driver: segments of the rows the tasks sent back for one chunk (one blob per task,
    each task's rows typed on their own), numbered from ``allocation``'s first partition; a new
    chunk's set has as many core partitions as segments are built here."""
    tables = [(info, decode_blob(blob)) for info, blob in blobs]
    parts = [max(1, math.ceil(t.num_rows / plan.rows_per_segment)) for _, t in tables]
    core = allocation.core_partitions or sum(parts)
    storage = deep_storage_from_url(plan.storage_url, plan.storage_endpoint)
    number = allocation.first_partition
    for (info, table), pieces in zip(tables, parts):
        spec = _build_spec(plan, info["json"], info["metrics"])
        step = math.ceil(table.num_rows / pieces)
        for j in range(pieces):
            sid = SegmentId(datasource, allocation.interval, allocation.version, number)
            described = build_one(table.slice(j * step, step).to_batches(), j, PlannedSegment(sid, core), spec,
                                  storage, work_dir)
            number += 1
            yield _segment_info(sid, core, described)


def partitions_needed(blobs: list[tuple[dict, pa.Buffer]], rows_per_segment: int) -> int:
    """How many segments ``build_rows`` builds of these blobs (what the allocation reserves)."""
    return sum(max(1, math.ceil(info["rows"] / rows_per_segment)) for info, _ in blobs)


__all__ = ["ChunkAllocation", "MicroBatchPlan", "OUTPUT_DDL", "OUTPUT_SCHEMA", "build_rows",
           "micro_batch_outputs", "outputs_of", "partitions_needed"]
