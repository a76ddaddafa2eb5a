"""The engine facade: validate a native query, run it per segment, merge partials, finalize.

``run(query, segment) -> Partial``, ``merge(query, partials) -> Partial`` and
``finalize(query, partial) -> pa.Table`` are the three steps the cluster splits between
historicals (run, and merge of their own segments) and the broker (merge, finalize).
``query_runner`` schedules them (``QueryRunner``) and ``query_runner.execute`` does all three
in-process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from common.errors import ValidationError, unknown_name_message
from common.query import grouped_engine, scan_engine
from common.query.memory_budget import UNLIMITED, MemoryBudget
from common.query.model import GroupByQuery, Query, ScanQuery, TimeseriesQuery, TopNQuery
from common.query.partial import Partial, RunStats
from common.query.prepared_query import PreparedQuery
from common.query.projection_match import match_projection
from common.query.row_source import RowSource, SegmentRowSource, TableRowSource
from common.query.unnest_datasource import UnnestDataSource
from common.query.unnest_row_source import UnnestRowSource, unnest_row_source
from common.segment.scan_spec import ScanSpec, SourceChoice
from common.segment.segment import Segment
from common.types.column_type import TIME_COLUMN, ColumnType


def union_schema(segments: Iterable[Segment]) -> dict[str, ColumnType]:
    """Columns across segments; when types differ the newest segment's type wins (by version)."""
    return newest_type_wins((s.id, s.schema) for s in segments)


def newest_type_wins(schemas: Iterable[tuple]) -> dict[str, ColumnType]:
    """Union of (SegmentId, schema) pairs: later versions (then later intervals) override types."""
    out: dict[str, ColumnType] = {}
    for _, schema in sorted(schemas, key=lambda p: (p[0].version, p[0].interval.end, p[0].partition)):
        out.update(schema)
    return out


def _engine(query: Query):
    if isinstance(query, ScanQuery):
        return scan_engine
    if isinstance(query, (TimeseriesQuery, TopNQuery, GroupByQuery)):
        return grouped_engine
    raise ValidationError(f"unsupported query type {type(query).__name__}")


def query_schema(query: Query, schema: dict[str, ColumnType]) -> dict[str, ColumnType]:
    """The columns ``query`` reads given its table's ``schema``: an unnest data source adds its
    unnested column."""
    if isinstance(query.datasource, UnnestDataSource):
        return query.datasource.schema_over(schema)
    return schema


def validate(query: Query, schema: dict[str, ColumnType]) -> None:
    """Fail early, naming the unknown column / bad type, before any segment is touched."""
    if isinstance(query.datasource, UnnestDataSource):
        query.datasource.validate(schema)
        schema = query.datasource.schema_over(schema)
    available = dict(schema)
    available.setdefault(TIME_COLUMN, ColumnType.parse("TIMESTAMP"))
    for vc in query.virtual_columns:
        for col in vc.columns():
            if col not in available:
                raise ValidationError(f"virtual column '{vc.name}': " + unknown_name_message("column", col, available))
        available[vc.name] = vc.output_type_for(available)

    def need(col: str, where: str) -> None:
        if col not in available:
            raise ValidationError(f"{where}: " + unknown_name_message("column", col, available))

    if query.filter is not None:
        for col in query.filter.columns():
            need(col, "filter")
    if isinstance(query, ScanQuery):
        for col in query.columns or ():
            need(col, "scan columns")
        return
    for agg in query.aggregations:
        for col in agg.columns():
            need(col, f"aggregator '{agg.name}'")
        agg.result_type(available)
    for dim in grouped_engine.dimensions_of(query):
        need(dim.dimension, "dimension")
    names = [d.output_name for d in grouped_engine.dimensions_of(query)] + [a.name for a in query.aggregations]
    if isinstance(query, TopNQuery) and query.metric.metric is not None:
        posts = [p.name for p in query.post_aggregations]
        if query.metric.metric not in names + posts:
            raise ValidationError("topN metric: " + unknown_name_message("output", query.metric.metric, names + posts))
    if isinstance(query, GroupByQuery):
        outputs = set(names) | {p.name for p in query.post_aggregations} | {TIME_COLUMN}
        for c in query.limit_spec.columns:
            if c.column not in outputs:
                raise ValidationError("limitSpec: " + unknown_name_message("output column", c.column, outputs))
        if query.having is not None:
            for col in query.having.columns():
                if col not in outputs:
                    raise ValidationError("having: " + unknown_name_message("output column", col, outputs))


def scan_spec_for(query: Query) -> ScanSpec:
    """What ``query`` needs from a segment (Druid's CursorBuildSpec). Built per segment run, so it
    only gathers references; what is derived from them (the columns read) is computed on demand.
    An unnest reads base rows: its spec is a scan's of every column, which no projection serves."""
    if isinstance(query.datasource, UnnestDataSource):
        return ScanSpec(intervals=tuple(query.intervals), context=query.context)
    if isinstance(query, ScanQuery):
        return ScanSpec(intervals=tuple(query.intervals), filter=query.filter,
                        virtual_columns=tuple(query.virtual_columns), context=query.context,
                        selected_columns=None if query.columns is None else tuple(query.columns),
                        preferred_ordering=(TIME_COLUMN,) if query.order != "none" else ())
    return ScanSpec(intervals=tuple(query.intervals), filter=query.filter, virtual_columns=tuple(query.virtual_columns),
                    context=query.context, grouping_columns=tuple(d.dimension for d in grouped_engine.dimensions_of(query)),
                    aggregators=tuple(query.aggregations), granularity=query.granularity)


def source_for(query: Query, segment: Segment) -> SegmentRowSource:
    """The segment's choice of table (base rows or a projection) for this query, as a row source.
    An unnest reads base rows (a projection holds no arrays to explode). A count its base rows
    answer from metadata (``counts_rows``) reads no projection either, unless the query asks for
    one or the copy holds no base rows."""
    if segment.loaded_projections is None and not isinstance(query, ScanQuery) \
            and not any(query.context.get(k) for k in ("useProjection", "forceProjections")):
        m = segment.manifest
        if grouped_engine.counts_span(query, m.num_rows, None if m.min_time is None else (m.min_time, m.max_time)):
            return SegmentRowSource.of(SourceChoice(segment.table()))
    choice = segment.source_for(scan_spec_for(query), match_projection)
    src = SegmentRowSource.of(choice)
    src.rejected = choice.rejected
    return src


def _coverage(source: RowSource, query: Query, prepared: PreparedQuery | None = None):
    if prepared is not None:
        return prepared.reuse("coverage", source, lambda: _coverage(source, query))
    if source.interval is not None:
        iv = source.interval
        spans = [(max(iv.start, q.start), min(iv.end, q.end)) for q in query.intervals if q.overlaps(iv)]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None
    return source.time_bounds()


def run(query: Query, source: Segment | RowSource, schema: dict[str, ColumnType] | None = None,
        budget: MemoryBudget = UNLIMITED, prepared: PreparedQuery | None = None) -> Partial:
    """One segment's (or row source's) partial. ``prepared``: the query's preparation, whose kept
    selections and coverage its sources reuse."""
    if isinstance(source, Segment):
        # A file changed on disk since it was opened fails the query (and is fetched again) even
        # when the parts it needs are already in memory.
        source.check_unchanged()
    src = source_for(query, source) if isinstance(source, Segment) else source
    if schema is None:
        schema = dict(src.schema)
    coverage = _coverage(src, query, prepared)
    if isinstance(query.datasource, UnnestDataSource):
        return _run_unnest(query, src, schema, coverage, budget, source)
    if isinstance(query, ScanQuery):
        partial = scan_engine.run(query, src, schema, coverage, budget)
    else:
        partial = _engine(query).run(query, src, schema, coverage, budget, prepared)
    if isinstance(source, Segment):
        source.check_unchanged()  # and a file changed while the query read it gives no rows either
    partial.projection = src.projection
    partial.rejected = tuple(src.rejected)
    return partial


def _run_unnest(query: Query, src: RowSource, schema: dict[str, ColumnType], coverage, budget: MemoryBudget,
                source) -> Partial:
    """One segment's partial of a query over an unnest data source: the segment's rows exploded
    (narrowed first by what the filters allow, see unnest_row_source), then the query's engine on
    them. The stats count the segment's rows, as for any query, and the exploded rows matched."""
    exploded = unnest_row_source(query.datasource, src, query.filter, list(query.intervals), query.virtual_columns,
                                 schema)
    full = query.datasource.schema_over(schema)
    if isinstance(query, ScanQuery):
        partial = scan_engine.run(query, exploded, full, coverage, budget)
    else:
        partial = _engine(query).run(query, exploded, full, coverage, budget, None)
    if isinstance(source, Segment):
        source.check_unchanged()
    s = partial.stats
    partial.stats = RunStats(1, src.num_rows, _base_rows(exploded), _base_rows(exploded), s.rows_matched,
                             _bytes(exploded) + s.bytes_read)
    return partial


def _base_rows(source: RowSource) -> int:
    """Rows the innermost base kept after its pre-filter (what the explosion read)."""
    return source.base_rows_read if not isinstance(source.base, UnnestRowSource) else _base_rows(source.base)


def _bytes(source: RowSource) -> int:
    inner = _bytes(source.base) if isinstance(source.base, UnnestRowSource) else 0
    return source.bytes_read + inner


def batches(query: Query, sources: Sequence[RowSource]) -> list[list[int]]:
    """Positions of ``sources`` in run order: the projection sources that ``run_together`` can
    answer in one pass (the same projection, stored the same way, combinable aggregators) share a
    batch; every other source is a batch of its own."""
    if isinstance(query, ScanQuery):
        return [[i] for i in range(len(sources))]
    out: list[list[int]] = []
    shared: dict[tuple, list[int]] = {}
    for i, src in enumerate(sources):
        if not src.pre_aggregated:
            out.append([i])
            continue
        key = src.batch_key
        if key is None:
            key = (src.projection, tuple(sorted(src.aggregator_columns.items())), tuple(sorted(src.aliases.items())))
        if key not in shared:
            shared[key] = []
            out.append(shared[key])
        shared[key].append(i)
    return out


def run_together(query: Query, sources: Sequence[RowSource], schema: dict[str, ColumnType],
                 budget: MemoryBudget = UNLIMITED, prepared: PreparedQuery | None = None) -> Partial | None:
    """The merged partial of one batch of projection sources (see ``batches``), or None when they
    must run one by one after all."""
    if isinstance(query, ScanQuery):
        return None
    spans = [c for c in (_coverage(src, query, prepared) for src in sources) if c is not None]
    coverage = (min(c[0] for c in spans), max(c[1] for c in spans)) if spans else None
    partial = grouped_engine.run_together(query, list(sources), schema, coverage, budget, prepared)
    if partial is not None:
        partial.projection = sources[0].projection
    return partial


def counts_rows(query: Query, source: RowSource) -> bool:
    """Whether ``source`` answers ``query`` with its row count, no column read (see ``row_counts``)."""
    return not isinstance(query, ScanQuery) and grouped_engine.counts_rows(query, source)


def row_counts(query: Query, sources: Sequence[RowSource], prepared: PreparedQuery | None = None) -> Partial:
    """The merged partial of sources that ``counts_rows``: from their metadata."""
    return grouped_engine.row_counts(query, list(sources), [_coverage(src, query, prepared) for src in sources])


def merge(query: Query, partials: Sequence[Partial], budget: MemoryBudget = UNLIMITED) -> Partial:
    return _engine(query).merge(query, list(partials), budget)


def finalize(query: Query, partial: Partial, schema: dict[str, ColumnType] | None = None) -> pa.Table:
    return _engine(query).finalize(query, partial, query_schema(query, schema or {}))


@dataclass
class Result:
    table: pa.Table
    stats: RunStats


def execute_on_table(query: Query, table: pa.Table, stats: RunStats | None = None) -> Result:
    """Run a query over an in-memory table (a subquery's result)."""
    source = TableRowSource(table, "subquery")
    validate(query, source.schema)
    partial = run(query, source, dict(source.schema))
    merged = merge(query, [partial])
    merged.stats = (stats or RunStats()) + merged.stats
    return Result(finalize(query, merged, source.schema), merged.stats)


__all__ = ["Result", "batches", "counts_rows", "execute_on_table", "finalize", "merge", "query_schema", "row_counts",
           "run", "run_together", "union_schema", "validate"]
