"""The aggregating engines: timeseries, topN and groupBy share one grouped pipeline.

run:      select rows -> key codes (time bucket, dimensions) -> group ids -> accumulate
merge:    concatenate partials -> regroup on key values -> combine intermediates
finalize: finalize aggregators -> post-aggregators -> per-type shaping (zero-filled buckets,
          topN threshold per bucket, groupBy having / order / offset / limit)

TopN partials keep every group, so merged topN results are exact (Druid's are approximate); the
broker asks historicals for only the groups that can matter (common/query/topn_threshold.py).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pyarrow as pa

import pyarrow.compute as pc

from common.bounded_cache import BoundedCache
from common.query.aggregators import Count, Sum
from common.query.grouping import (Groups, KeyCodes, canonical_floats, codes_from_array, codes_from_dictionary,
                                   codes_from_int64, group, group_values, int64_array)
from common.query.memory_budget import UNLIMITED, MemoryBudget, group_bytes
from common.query.multi_value_explode import explode, multi_value_dimensions
from common.query.model import GroupByQuery, TimeseriesQuery, TopNQuery, _Aggregating
from common.query.ordering import SortKey, sort_indices, sort_table
from common.query.partial import Partial, RunStats, decode_dictionaries, union_coverage
from common.query.prepared_query import PreparedQuery
from common.query.projection_batch import MAX_ROWS, BatchPlan
from common.query.row_source import ColumnSource, RowSource, _int64
from common.query.selection import evaluate_values, select, select_projection_rows
from common.types.column_type import TIME_COLUMN, TIMESTAMP, ColumnType, TypeKind

TIME_TYPE = TIMESTAMP.to_arrow()



def _charged_groups(keys: list, n: int, query, budget, over: str, groups: Groups | None = None):
    """The groups of ``n`` rows by ``keys`` (unless ``groups`` holds them already), charged to
    ``budget`` before any aggregator allocates for them (refused here, not in MemoryError);
    ``over`` says what rows, for the error."""
    if groups is None:
        groups = group(keys, n)
    if n == 0:
        groups.count = 0
        groups.keys = [k.values.slice(0, 0) for k in keys]
    budget.charge(group_bytes(groups.count, groups.keys, query.aggregations),
                  f"the {groups.count:,} groups of a {query.query_type} over {over}")
    return groups


def dimensions_of(query: _Aggregating):
    if isinstance(query, GroupByQuery):
        return query.dimensions
    if isinstance(query, TopNQuery):
        return (query.dimension,)
    return ()


def _has_time_key(query: _Aggregating) -> bool:
    return not query.granularity.is_all


def _dimension_codes(cols, name: str) -> KeyCodes:
    stored = cols.stored_codes(name)
    if stored is not None:
        return codes_from_dictionary(*stored)
    return codes_from_array(cols[name])


def _dimension_key(cols, name: str) -> KeyCodes | pa.Array:
    """A dimension's stored dictionary codes, or else its values (coded only if need be)."""
    stored = cols.stored_codes(name)
    if stored is not None:
        return codes_from_dictionary(*stored)
    values = cols[name]
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _select(query: _Aggregating, source: RowSource, schema: dict[str, ColumnType], prepared=None):
    flt = source.residual_filter if source.replaces_filter else query.filter
    if source.pre_aggregated:
        return select_projection_rows(source, flt, query.intervals, query.virtual_columns, schema, prepared)
    return select(source, flt, list(query.intervals), query.virtual_columns, schema)


def run(query: _Aggregating, source: RowSource, schema: dict[str, ColumnType], coverage=None,
        budget: MemoryBudget = UNLIMITED, prepared: PreparedQuery | None = None) -> Partial:
    sel = _select(query, source, schema, prepared)
    cols = sel.columns
    if not source.pre_aggregated and cols.num_rows:
        # A multi-value dimension groups each selected row once per value (multi_value_explode.py).
        exploding = multi_value_dimensions(cols, [d.dimension for d in dimensions_of(query)])
        if exploding:
            cols = explode(cols, exploding)
    n = cols.num_rows
    if n == 0 and not source.pre_aggregated:
        # No row selected (a filter no row of this segment passes): no group, so no keys to
        # compute and nothing to accumulate. A partial without columns adds nothing to a merge.
        stats = RunStats(1, source.num_rows, sel.rows_after_prefilter, sel.rows_after_prefilter, 0, cols.bytes_read)
        return Partial(pa.table({}), stats, coverage)
    dims = dimensions_of(query)
    timed = _has_time_key(query)
    buckets = query.granularity.bucket_start(cols.time()) if timed else None
    dim_keys = [_dimension_key(cols, dim.dimension) for dim in dims]
    names = ([TIME_COLUMN] if timed else []) + [dim.output_name for dim in dims]
    groups = keys = None
    if dims and not any(isinstance(k, KeyCodes) for k in dim_keys):
        # Numbers alone (no stored dictionary): grouped by their values in one sort.
        groups = group_values(([int64_array(buckets, TIME_TYPE)] if timed else []) + dim_keys, n)
    if groups is None:
        keys = (([codes_from_int64(buckets, TIME_TYPE)] if timed else [])
                + [k if isinstance(k, KeyCodes) else codes_from_array(k) for k in dim_keys])
    groups = _charged_groups(keys, n, query, budget, "one segment", groups)
    out = {}
    specs = [None] * (len(names) - len(dimensions_of(query))) + list(dimensions_of(query))
    for name, values, dim in zip(names, groups.keys, specs):
        if dim is not None and dim.output_type is not None:
            values = _cast_dimension(values, dim.output_type)
        out[name] = values
    for agg in query.aggregations:
        if source.pre_aggregated:
            # A projection's rows hold intermediates: combine them, do not aggregate them again.
            stored = cols[source.aggregator_columns[agg.name]]
            only = source.aggregator_filters.get(agg.name)
            if only is not None:  # a filtered aggregator: the intermediates of the rows it keeps
                mask = evaluate_values(only, cols)
                out[agg.name] = agg.combine(stored.filter(pa.array(mask)), groups.gid[mask], groups.count)
            else:
                keep = _stored_keep(cols, source, source.aggregator_columns[agg.name], agg)
                out[agg.name] = agg.combine_groups(stored, groups) if keep is None else \
                    agg.combine_parts([stored], [groups.gid], groups.count, [keep])
        else:
            out[agg.name] = agg.accumulate(cols, groups.gid, groups.count)
    stats = RunStats(1, source.num_rows, sel.rows_after_prefilter, sel.rows_after_prefilter, n, cols.bytes_read)
    return Partial(pa.table(out) if out else pa.table({}), stats, coverage)


def counts_rows(query, source: RowSource) -> bool:
    """Whether ``source``'s partial is its row count alone: a query of plain counts, no filter, no
    grouping but (at most) a time bucket that holds the whole source, over a source of base rows
    inside one of the query's intervals. Its answer then comes from the segment's metadata, no
    column read (Druid answers such a count from its segments the same way)."""
    return _counts_only(query) and not source.pre_aggregated and _spans(query, source.num_rows, source.time_bounds())


def counts_span(query, num_rows: int, bounds: tuple[int, int] | None) -> bool:
    """``counts_rows`` for base rows of ``num_rows`` rows between ``bounds`` (first, last time)."""
    return _counts_only(query) and _spans(query, num_rows, bounds)


def _counts_only(query) -> bool:
    if not isinstance(query, (TimeseriesQuery, GroupByQuery)) or dimensions_of(query) or query.filter is not None:
        return False
    if not isinstance(query.datasource, str):
        return False  # an unnest counts exploded rows, which no segment's metadata knows
    return bool(query.aggregations) and all(type(a) is Count for a in query.aggregations)


def _spans(query, num_rows: int, bounds: tuple[int, int] | None) -> bool:
    """Whether rows between ``bounds`` all lie inside one of the query's intervals and one bucket."""
    if num_rows == 0 or bounds is None:
        return False
    lo, hi = bounds
    if not any(iv.start <= lo and hi < iv.end for iv in query.intervals):
        return False
    if _has_time_key(query):
        first, last = query.granularity.bucket_start(np.array([lo, hi], np.int64))
        return first == last
    return True


def row_counts(query, sources: list[RowSource], coverages: list) -> Partial:
    """The merged partial of sources that ``counts_rows``: per time bucket, the sum of their rows."""
    counts = np.array([src.num_rows for src in sources], np.int64)
    out: dict[str, pa.Array] = {}
    if _has_time_key(query):
        starts = query.granularity.bucket_start(np.array([src.time_bounds()[0] for src in sources], np.int64))
        buckets, inverse = np.unique(starts, return_inverse=True)
        out[TIME_COLUMN] = pa.array(buckets, pa.int64()).cast(TIME_TYPE)
        totals = np.zeros(len(buckets), np.int64)
        np.add.at(totals, inverse, counts)
    else:
        totals = np.array([counts.sum()], np.int64)
    for agg in query.aggregations:
        out[agg.name] = pa.array(totals)
    rows = int(counts.sum())
    stats = RunStats(len(sources), rows, rows, 0, rows, 0)  # no row scanned, no byte read
    spans = [c for c in coverages if c is not None]
    coverage = (min(c[0] for c in spans), max(c[1] for c in spans)) if spans else None
    return Partial(pa.table(out), stats, coverage)


def run_together(query: _Aggregating, sources: list[RowSource], schema: dict[str, ColumnType], coverage=None,
                 budget: MemoryBudget = UNLIMITED, prepared: PreparedQuery | None = None) -> Partial | None:
    """The merged partial of several projection sources (pre-aggregated rows of one projection, a
    few thousand per segment) in one pass: each source's rows are selected and keyed as ``run``
    does, then all of them are grouped and combined once, instead of one group-and-combine per
    segment and a merge of the partials (whose fixed costs were most of the time of a query over
    projection rows). None when the sources' keys or intermediates do not line up (different
    stored types, array keys): the caller runs them one by one. The selection and keying is kept
    on the ``prepared`` query for its next runs (``projection_batch``); the first run that finds it
    prepares it for reading whole columns (``_kept``)."""
    if any(source.aggregator_filters for source in sources):
        return None  # filtered aggregators over stored intermediates run one source at a time
    batch = tuple(sources)
    plan = prepared.kept("batch", batch) if prepared is not None else None
    fresh = plan is None
    selected: list[ColumnSource] = []
    if fresh:
        made = _plan_together(query, sources, schema, prepared)
        if made is None:
            return None
        plan, selected = made
    elif not plan.kept:
        plan = _kept(plan, query, sources)  # a new object: runs holding the old one keep using it whole
        _keep(prepared, batch, plan)
    groups = plan.groups
    budget.charge(group_bytes(groups.count, groups.keys, query.aggregations),
                  f"the {groups.count:,} groups of a {query.query_type} over {len(sources)} segments' projection rows")
    agg_parts: list[list[pa.Array]] = [[] for _ in query.aggregations]
    agg_keeps: list[list] = [[] for _ in query.aggregations]  # per part: its source's ``derived``, or None
    direct = plan.kept and plan.direct
    if direct:
        # Intermediates read as stored (no declared type casts them): each source's whole column,
        # then one take of the selected rows of all of them; the bytes are the plan's.
        for source, rows in zip(sources, plan.rows):
            if not query.aggregations:
                source.check_unchanged()  # a part read does it otherwise: a damaged file fails the query
                continue
            stored = source.stored_values([source.aggregator_columns[agg.name] for agg in query.aggregations])
            for parts, keeps, agg, values in zip(agg_parts, agg_keeps, query.aggregations, stored):
                # Sketches combine per source (``combine_parts``): each source's own rows.
                if rows is not None and not agg.combines_concatenated:
                    values = values.take(pa.array(rows))
                parts.append(values)
                keeps.append(functools.partial(source.derived, source.aggregator_columns[agg.name])
                             if rows is None and not agg.combines_concatenated else None)
        nbytes = sum(plan.key_bytes)
    else:
        nbytes = 0
        read = []
        for i, (source, rows) in enumerate(zip(sources, plan.rows)):
            if not query.aggregations:
                source.check_unchanged()
            if fresh:
                cols = selected[i]  # the selection's own view: what it read is counted once
            else:
                cols = ColumnSource(source, rows, query.virtual_columns, schema)
                # Seeded with what the first run read (selection, keys, intermediates), so a run
                # counts the same bytes without asking the parts' sizes again.
                cols._touched.update(plan.touched[i])
                cols._bytes[0] = plan.key_bytes[i]
            for parts, keeps, agg in zip(agg_parts, agg_keeps, query.aggregations):
                stored = cols[source.aggregator_columns[agg.name]]
                parts.append(stored.combine_chunks() if isinstance(stored, pa.ChunkedArray) else stored)
                keeps.append(_stored_keep(cols, source, source.aggregator_columns[agg.name], agg))
            nbytes += cols.bytes_read
            if fresh:
                read.append((frozenset(cols._touched), cols.bytes_read))
        if any(not all(a.type == parts[0].type for a in parts[1:]) for parts in agg_parts):
            return None
        if fresh:
            plan.touched = tuple(t for t, _ in read)
            plan.key_bytes = tuple(b for _, b in read)
            plan.direct = _reads_as_stored(query, sources, schema, agg_parts)
    stats = RunStats(len(sources), plan.in_segments, plan.after_prefilter, plan.after_prefilter, plan.matched, nbytes)
    out = dict(zip(plan.names, groups.keys))
    for parts, keeps, agg in zip(agg_parts, agg_keeps, query.aggregations):
        if not agg.combines_concatenated:
            out[agg.name] = agg.combine_parts(parts, plan.gids, groups.count, keeps)
            continue
        values = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        if direct and plan.take is not None:
            values = values.take(plan.take)  # the selected rows, in the plan's row order
        elif not direct and plan.reorder is not None:
            values = values.take(plan.reorder)  # the rows read one source at a time, in group order
        out[agg.name] = agg.combine_groups(values, groups)
    if fresh and prepared is not None:
        _keep(prepared, batch, plan)
    return Partial(pa.table(out) if out else pa.table({}), stats, coverage)


def _stored_keep(cols: ColumnSource, source: RowSource, name: str, agg):
    """``source.derived`` for stored column ``name`` when ``agg`` keeps what it derives from a
    stored column (sketches: ``combine_parts``) and ``cols`` read every one of its rows as stored;
    else None."""
    if agg.combines_concatenated or cols.rows is not None or not cols.is_physical(name) or cols.overridden(name):
        return None
    return functools.partial(source.derived, name)


def _keep(prepared: PreparedQuery, batch: tuple, plan: BatchPlan) -> None:
    if plan.matched > MAX_ROWS:
        return  # past this the query's own work dwarfs the keying
    for arr in (plan.groups.gid, plan.groups.run_starts, *plan.rows):
        if arr is not None:
            arr.flags.writeable = False  # shared by every later run of the query
    prepared.keep("batch", batch, plan, plan.nbytes)


def _reads_as_stored(query: _Aggregating, sources: list[RowSource], schema: dict[str, ColumnType],
                     agg_parts: list[list[pa.Array]]) -> bool:
    """Whether every source's intermediate columns read as stored (present, not cast to another
    declared type, not a time column given a timestamp type, one Arrow type across sources): then
    a kept plan reads whole columns and takes the selected rows of all sources at once."""
    for source in sources:
        for agg in query.aggregations:
            col = source.aggregator_columns[agg.name]
            stored = source.schema.get(col)
            if stored is None or schema.get(col, stored) != stored or stored.kind is TypeKind.TIMESTAMP:
                return False
    return all(isinstance(p, pa.Array) and not pa.types.is_dictionary(p.type) for parts in agg_parts for p in parts)


def _plan_together(query: _Aggregating, sources: list[RowSource], schema: dict[str, ColumnType], prepared
                   ) -> tuple[BatchPlan, list[ColumnSource]] | None:
    """Each source's selected rows (and the view of them that read the keys) and the groups of all
    their keys (see ``run_together``)."""
    dims = dimensions_of(query)
    timed = _has_time_key(query)
    times: list[np.ndarray] = []
    dim_parts: list[list[KeyCodes]] = [[] for _ in dims]
    rows, selected, counts = [], [], []
    in_segments = after_prefilter = matched = 0
    for source in sources:
        sel = _select(query, source, schema, prepared)
        cols = sel.columns
        if timed:
            times.append(cols.time())  # bucketed once, below
        for parts, dim in zip(dim_parts, dims):
            codes = _dimension_codes(cols, dim.dimension)
            if dim.output_type is not None:  # cast before grouping, as the merge of cast partials groups
                codes = KeyCodes(codes.codes, _cast_dimension(codes.values, dim.output_type))
            parts.append(codes)
        rows.append(cols.rows)
        selected.append(cols)
        counts.append(cols.num_rows)
        in_segments += source.num_rows
        after_prefilter += sel.rows_after_prefilter
        matched += cols.num_rows
    keys: list[KeyCodes] = []
    names: list[str] = []
    if timed:
        keys.append(codes_from_int64(query.granularity.bucket_start(np.concatenate(times)), TIME_TYPE))
        names.append(TIME_COLUMN)
    for parts, dim in zip(dim_parts, dims):
        joined = _concat_codes(parts)
        if joined is None:
            return None
        keys.append(joined)
        names.append(dim.output_name)
    groups = group(keys, matched)
    if matched == 0:
        groups.count = 0
        groups.keys = [k.values.slice(0, 0) for k in keys]
    plan = BatchPlan(tuple(rows), (), (), names, groups, in_segments, after_prefilter, matched)
    ends = np.cumsum(counts)
    plan.gids = [groups.gid[end - count:end] for count, end in zip(counts, ends)]
    return plan, selected


def _kept(plan: BatchPlan, query: _Aggregating, sources: list[RowSource]) -> BatchPlan:
    """The plan prepared for the runs that find it (made on the second run, so a query run once
    pays nothing for it): the selected rows' positions in the sources' whole columns end to end
    and, for counts and integer sums over groups not in row order, the rows in group order."""
    rows, groups = plan.rows, plan.groups
    positions = None
    if any(r is not None for r in rows):
        starts = np.cumsum([0] + [source.num_rows for source in sources[:-1]])
        positions = np.concatenate([np.arange(at, at + source.num_rows) if r is None else r + at
                                    for r, at, source in zip(rows, starts, sources)]).astype(np.int64)
    reorder = None
    if (groups.run_starts is None and plan.matched and query.aggregations
            and all(_sums_exactly(a) for a in query.aggregations)):
        # Rows in group order (a stable sort: each group's rows keep their order), so counts and
        # integer sums reduce each group's run with one reduceat instead of a scatter per row
        # (ufunc.at). Integer sums are exact in any order.
        # (numpy sorts 16-bit keys by radix: a tenth of the time of a stable sort of int64 ids.)
        ids = groups.gid.astype(np.uint16) if groups.count <= 1 << 16 else groups.gid
        perm = np.argsort(ids, kind="stable")
        gid = groups.gid[perm]
        run_starts = np.flatnonzero(np.concatenate(([True], gid[1:] != gid[:-1])))
        groups = Groups(gid, groups.count, groups.keys, run_starts)
        positions = perm if positions is None else positions[perm]
        reorder = pa.array(perm)
    return dataclasses.replace(plan, groups=groups, take=None if positions is None else pa.array(positions),
                               reorder=reorder, kept=True)


def _sums_exactly(agg) -> bool:
    """Counts and integer sums: the same result whatever order their rows are reduced in."""
    return type(agg) is Count or (type(agg) is Sum and agg.kind == "long")


def _concat_codes(parts: list[KeyCodes]) -> KeyCodes | None:
    """One key's codes over several sources, whose values (dictionaries) differ: the values are
    concatenated and encoded once, as a merge of the sources' partials would key them."""
    if len(parts) == 1:
        return KeyCodes(parts[0].codes, parts[0].values)
    kind = parts[0].values.type
    if not all(p.values.type == kind for p in parts[1:]):
        return None
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_dictionary(kind):
        return None
    values = pa.concat_arrays([p.values for p in parts])
    if pa.types.is_floating(kind):
        values = canonical_floats(values)
    enc = pc.dictionary_encode(values, null_encoding="encode")
    remap = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.cumsum([0] + [len(p.values) for p in parts[:-1]])
    codes = np.concatenate([remap[p.codes + off] for p, off in zip(parts, offsets)])
    return KeyCodes(codes, enc.dictionary)


def _cast_dimension(values: pa.Array, ctype: ColumnType) -> pa.Array:
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    from common.query.row_source import _cast_lenient

    return _cast_lenient(values, ctype)




def merge(query: _Aggregating, partials: list[Partial], budget: MemoryBudget = UNLIMITED) -> Partial:
    stats = RunStats()
    for p in partials:
        stats = stats + p.stats
    tables = [decode_dictionaries(p.table) for p in partials if p.table.num_columns]
    coverage = union_coverage(partials)
    if not tables:
        return Partial(pa.table({}), stats, coverage)
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    if len(tables) == 1:
        return Partial(table, stats, coverage)
    key_names = ([TIME_COLUMN] if _has_time_key(query) else []) + [d.output_name for d in dimensions_of(query)]
    groups = group_values([table.column(k) for k in key_names], table.num_rows) if table.num_rows else None
    if groups is None:
        keys = [codes_from_array(table.column(k)) for k in key_names]
        groups = group(keys, table.num_rows)
    if table.num_rows == 0:
        groups.count = 0
        groups.keys = [k.values.slice(0, 0) for k in keys]
    budget.charge(group_bytes(groups.count, groups.keys, query.aggregations),
                  f"merging {len(tables)} partials into {groups.count:,} groups")
    out = dict(zip(key_names, groups.keys))
    for agg in query.aggregations:
        out[agg.name] = agg.combine_groups(table.column(agg.name).combine_chunks(), groups)
    return Partial(pa.table(out) if out else pa.table({}), stats, coverage)


def _empty_partial(query: _Aggregating, schema) -> pa.Table:
    """The partial of a query that read no segment: right columns, no rows."""
    out = {}
    if _has_time_key(query):
        out[TIME_COLUMN] = pa.array([], TIME_TYPE)
    for dim in dimensions_of(query):
        ctype = dim.output_type or schema.get(dim.dimension) or ColumnType.parse("STRING")
        out[dim.output_name] = pa.array([], ctype.to_arrow())
    out.update(_empty_groups(query, schema, 0))
    return pa.table(out)


def _finalize_values(query: _Aggregating, table: pa.Table) -> pa.Table:
    out = {}
    for name in table.column_names:
        column = table.column(name)
        out[name] = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    for agg in query.aggregations:
        out[agg.name] = agg.finalize(out[agg.name])
    result = pa.table(out) if out else pa.table({})
    for post in query.post_aggregations:
        result = result.append_column(post.name, post.compute(result))
    return result


def _empty_groups(query: _Aggregating, schema, count: int) -> dict[str, pa.Array]:
    return {agg.name: agg.accumulate_empty(schema, count) for agg in query.aggregations}


def finalize(query: _Aggregating, partial: Partial, schema: dict[str, ColumnType]) -> pa.Table:
    if partial.table.num_columns == 0:
        partial = Partial(_empty_partial(query, schema), partial.stats, partial.coverage)
    table = partial.table
    if isinstance(query, TimeseriesQuery):
        table = _timeseries_fill(query, partial, schema)
    if isinstance(query, GroupByQuery):
        kept = _limited_first(query, table)
        if kept is not None:
            return _finalize_values(query, kept)
    result = _finalize_values(query, table)
    if isinstance(query, TimeseriesQuery):
        if _has_time_key(query) and not _in_time_order(result, query.descending):
            result = sort_table(result, [SortKey(TIME_COLUMN, query.descending)])
        if query.limit is not None:
            result = result.slice(0, query.limit)
        return result
    if isinstance(query, TopNQuery):
        return _topn_shape(query, result)
    return _groupby_shape(query, result)


def _timeseries_fill(query: TimeseriesQuery, partial: Partial, schema) -> pa.Table:
    table = partial.table
    if query.granularity.is_all:
        start = min(iv.start for iv in query.intervals)
        if partial.coverage is not None:
            start = max(start, partial.coverage[0])
        if table.num_rows == 0 or table.num_columns == 0:
            table = pa.table(_empty_groups(query, schema, 1))
        time = pa.array([start], TIME_TYPE)  # from the int directly: a cast costs more than the query's merge
        return table.add_column(0, TIME_COLUMN, time) if table.num_columns else pa.table({TIME_COLUMN: time})
    skip = bool(query.context.get("skipEmptyBuckets", False))
    if skip or query.granularity.is_none or partial.coverage is None:
        return table
    wanted = _wanted_buckets(query, partial.coverage)
    if not len(wanted):
        return table
    if table.num_rows:
        column = table.column(TIME_COLUMN)
        if column.null_count == 0:
            present = _epoch_millis(column)
            if len(present) == len(wanted) and np.array_equal(present, wanted):
                return table  # every bucket has rows (the usual case), already in time order
            present = set(present.tolist())
        else:
            present = set(column.cast(pa.int64()).to_pylist())
        missing = sorted(set(wanted.tolist()) - present)
    else:
        missing = wanted.tolist()
    if not missing:
        return table
    fill = {TIME_COLUMN: pa.array(missing, pa.int64()).cast(TIME_TYPE), **_empty_groups(query, schema, len(missing))}
    filler = pa.table(fill)
    if table.num_rows == 0:
        return filler
    return pa.concat_tables([table, filler.select(table.column_names).cast(table.schema)])


# Bucket starts of zero-filled timeseries, by value: (granularity, intervals, coverage). A cached
# SQL plan runs the same query again and again over the same segments and asks the same starts.
_WANTED = BoundedCache(256, 16 << 20)


def _wanted_buckets(query: TimeseriesQuery, coverage: tuple[int, int]) -> np.ndarray:
    """The bucket starts a zero-filled timeseries shows: every bucket of its intervals within the
    segments' coverage, sorted, each once (shared, read-only)."""
    key = (query.granularity, query.intervals, coverage)
    wanted = _WANTED.get(key)
    if wanted is None:
        lo, hi = coverage
        starts: list[int] = []
        for iv in query.intervals:
            clip = (max(iv.start, lo), min(iv.end, hi))
            if clip[0] < clip[1]:
                starts.extend(query.granularity.buckets(clip[0], clip[1]))
        wanted = np.unique(np.array(starts, np.int64))
        wanted.flags.writeable = False  # shared by every run asking the same buckets
        _WANTED.put(key, wanted, wanted.nbytes)
    return wanted


def _epoch_millis(times: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A time column's values as int64 epoch millis (a view of a stored column's buffer)."""
    if isinstance(times, pa.ChunkedArray):
        times = times.chunk(0) if times.num_chunks == 1 else times.combine_chunks()
    return _int64(times)


def _in_time_order(table: pa.Table, descending: bool) -> bool:
    """Whether the rows already are in the order sorting by time would give (a stable sort then
    changes nothing): a merged partial usually is."""
    if table.num_rows <= 1:
        return True
    times = table.column(TIME_COLUMN)
    if times.null_count:
        return False
    t = _epoch_millis(times)
    return bool(np.all(t[1:] <= t[:-1])) if descending else bool(np.all(t[1:] >= t[:-1]))


def _topn_shape(query: TopNQuery, result: pa.Table) -> pa.Table:
    dim = query.dimension.output_name
    metric = query.metric
    keys = [SortKey(TIME_COLUMN)] if _has_time_key(query) else []
    if metric.metric is None:
        keys.append(SortKey(dim, metric.descending, numeric=metric.numeric_dimension or None))
    else:
        if metric.metric not in result.column_names:
            from common.errors import ValidationError, unknown_name_message

            raise ValidationError(unknown_name_message("topN metric", metric.metric, result.column_names))
        keys.append(SortKey(metric.metric, metric.descending, nulls_first=False))
        keys.append(SortKey(dim))  # ties break on the dimension, so results are deterministic
    if not _has_time_key(query):
        return result.take(sort_indices(result, keys).slice(0, query.threshold))  # only the kept rows moved
    result = sort_table(result, keys)
    times = result.column(TIME_COLUMN).cast(pa.int64()).to_numpy(zero_copy_only=False)
    if len(times) == 0:
        return result
    starts = np.flatnonzero(np.concatenate(([True], times[1:] != times[:-1])))
    rank = np.arange(len(times)) - np.repeat(starts, np.diff(np.append(starts, len(times))))
    return result.filter(pa.array(rank < query.threshold))


def _limited_first(query: GroupByQuery, table: pa.Table) -> pa.Table | None:
    """The rows of a limited groupBy's answer, in order, still unfinalized, when its order and
    limit apply before its post-aggregators: no having, an order by dimensions and aggregators
    alone, fewer rows kept than grouped. Only the order's aggregators are finalized over every
    group, the rest (and the post-aggregators) over the kept rows: computing them for a million
    groups of which ten are kept was most of such a query's finalize. None: shape it whole."""
    spec = query.limit_spec
    if query.having is not None or spec.limit is None or spec.offset + spec.limit >= table.num_rows:
        return None
    finals = {agg.name: agg for agg in query.aggregations}
    dims = [d.output_name for d in query.dimensions]
    if not all(c.column in finals or c.column in dims for c in spec.columns):
        return None  # a post-aggregator (or the time column) orders it
    if spec.columns:
        keys = [SortKey(c.column, c.descending, numeric=c.numeric) for c in spec.columns]
    else:
        keys = ([SortKey(TIME_COLUMN)] if _has_time_key(query) else []) + [SortKey(d) for d in dims]
    order = {}
    for k in keys:
        column = table.column(k.column)
        column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        order[k.column] = finals[k.column].finalize(column) if k.column in finals else column
    rows = sort_indices(pa.table(order), keys).slice(spec.offset, spec.limit)
    return table.take(rows)


def _groupby_shape(query: GroupByQuery, result: pa.Table) -> pa.Table:
    if query.having is not None and result.num_rows:
        from common.query.row_source import ColumnSource, TableRowSource

        cols = ColumnSource(TableRowSource(result, "having"), None)
        result = result.filter(pa.array(evaluate_values(query.having, cols)))
    spec = query.limit_spec
    if spec.columns:
        result = sort_table(result, [SortKey(c.column, c.descending, numeric=c.numeric) for c in spec.columns])
    elif result.num_rows > 1:
        # Druid orders groupBy results by their dimensions when no order is given.
        keys = ([SortKey(TIME_COLUMN)] if _has_time_key(query) else []) + [SortKey(d.output_name) for d in query.dimensions]
        result = sort_table(result, keys)
    if spec.offset or spec.limit is not None:
        end = None if spec.limit is None else spec.offset + spec.limit
        result = result.slice(spec.offset, None if end is None else max(0, end - spec.offset))
    return result


__all__ = ["finalize", "merge", "run", "run_together"]
