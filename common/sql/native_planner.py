"""NativePlanner: the optimized logical plan to stages, choosing native query types.

A *block* is the longest stack of nodes one native query can compute: Project? over Sort? over
Project? over Filter(HAVING)? over Aggregate? over Filter(WHERE)? over a source. When the source
is a datasource the query is pushed to the cluster; any other source (a subquery, join, union,
system table) is planned first and the block's query runs on the broker over its result.

Query types, as Druid SQL picks them:
- no aggregation: scan (ORDER BY __time and LIMIT/OFFSET pushed; other orderings sort on the broker);
- aggregation without GROUP BY, or grouped by one time bucket of __time only: timeseries;
- one grouping key ordered by an aggregate (or the key) with a LIMIT and no HAVING/OFFSET: topN
  (strata's topN is exact, so this never changes results);
- anything else: groupBy, with HAVING and a limitSpec for ORDER BY/LIMIT/OFFSET.
Names follow Druid: virtual columns v0.., dimensions d0.., aggregators a0.., post-aggregators p0...
"""

from __future__ import annotations

from dataclasses import dataclass

from common.errors import UnsupportedError
from common.query.aggregators import (AnyValue, ArrayAgg, ArrayConcat, Count, EarliestLatest, Filtered, Max, Min,
                                      StringMinMax, Sum)
from common.query.filters import And, FalseFilter, Filter, Not, NullFilter
from common.query.model import (DimensionSpec, GroupByQuery, LimitSpec, OrderByColumn, ScanQuery, TimeseriesQuery,
                                TopNMetric, TopNQuery)
from common.query.post_aggregators import ExpressionPost
from common.query.sketch_aggregators import HllSketch
from common.expr.node import Call as ECall
from common.expr.node import Identifier
from common.expr.node import Literal as ELiteral
from common.query.nested_field import NestedFieldColumn
from common.query.unnest_datasource import UnnestDataSource
from common.query.unnest_row_source import split_and
from common.query.virtual_column import VirtualColumn
from common.sql.broker_ops import unique_names
from common.sql.druid_expression import druid_text
from common.sql.logical_plan import (AggCall, Aggregate, Field, Join, Project, RelNode, Sort, TableScan, Union, Unnest,
                                     UnnestScan, Values)
from common.sql.logical_plan import Filter as FilterNode
from common.sql.native_filter import to_filter
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.scalar import Call, Literal, Ref, Scalar
from common.sql.sql_types import VARCHAR
from common.sql.stages import (BROKER_INPUT, JoinStage, NativeStage, SelectStage, SortStage, Stage, TableStage,
                               UnionStage, UnnestStage, ValuesStage)
from common.sql.time_intervals import split_time_condition
from common.types.column_type import TIME_COLUMN, ColumnType
from common.types.granularity import ALL, NONE, Granularity, Period
from common.types.interval import ETERNITY

# Context keys that steer SQL planning only; the rest of the context travels with native queries.
SQL_ONLY_CONTEXT = frozenset({"sqlTimeZone", "sqlCurrentTimestamp", "maxJoinRows",
                              "useApproximateCountDistinct", "useApproximateTopN"})
_AGG_KIND = {"BIGINT": "long", "TIMESTAMP": "long", "BOOLEAN": "long", "DOUBLE": "double", "FLOAT": "float",
             "VARCHAR": "string"}
_NON_NULL_CALLS = ("COUNT", "APPROX_COUNT_DISTINCT")


@dataclass(frozen=True)
class Planned(RelNode):
    """A subtree already planned into a stage, standing in the logical tree as a leaf."""

    stage: Stage

    @property
    def fields(self):
        return self.stage.fields


@dataclass
class Block:
    source: RelNode
    where: FilterNode | None = None
    aggregate: Aggregate | None = None
    having: FilterNode | None = None
    post: Project | None = None
    sort: Sort | None = None
    top: Project | None = None


def peel(node: RelNode) -> Block:
    top = sort = post = having = agg = where = None
    if isinstance(node, Project) and isinstance(node.input, Sort):
        top, node = node, node.input
    if isinstance(node, Sort):
        sort, node = node, node.input
    if isinstance(node, Project):
        post, node = node, node.input
    if isinstance(node, FilterNode) and isinstance(node.input, Aggregate):
        having, node = node, node.input
    if isinstance(node, Aggregate):
        agg, node = node, node.input
    if isinstance(node, FilterNode):
        where, node = node, node.input
    return Block(node, where, agg, having, post, sort, top)


class _VirtualColumns:
    """Input columns by position, and expressions as deduplicated virtual columns."""

    def __init__(self, columns: tuple[str, ...] | list[str], deadline: PlanningDeadline = NO_DEADLINE) -> None:
        self.columns = tuple(columns)
        self.deadline = deadline
        self.list: list[VirtualColumn] = []
        self._by_key: dict[tuple[str, str], str] = {}

    def column_for(self, e: Scalar) -> str:
        if isinstance(e, Ref):
            return self.columns[e.index]
        text = druid_text(e, self.columns, self.deadline)
        out_type = e.type.native_output_name if e.type.column_type is not None else "STRING"
        key = (text, out_type)
        if key not in self._by_key:
            self._by_key[key] = fresh_name("v", len(self.list), self.columns)
            self.list.append(_virtual_column(self._by_key[key], text, ColumnType.parse(out_type)))
        return self._by_key[key]


def _virtual_column(name: str, text: str, out_type: ColumnType):
    """An expression virtual column, except that ``json_value(column, path, type)`` becomes a
    nested-field column, which reads the path's field of a nested column instead of the documents."""
    vc = VirtualColumn(name, text, out_type)
    e = vc.parsed
    if isinstance(e, ECall) and e.name == "json_value" and len(e.args) == 3 and isinstance(e.args[0], Identifier) \
            and all(isinstance(a, ELiteral) for a in e.args[1:]):
        return NestedFieldColumn(name, e.args[0].name, str(e.args[1].value), out_type)
    return vc


def fresh_name(prefix: str, n: int, taken) -> str:
    name = f"{prefix}{n}"
    while name in taken:
        name = "_" + name
    return name


def _fields(exprs, names) -> tuple[Field, ...]:
    return tuple(Field(n, e.type) for n, e in zip(names, exprs))


def time_granularity(e: Scalar, time_index: int | None) -> Granularity | None:
    """The granularity a grouping key buckets __time by, when it is one (or __time itself)."""
    if time_index is None:
        return None
    if isinstance(e, Ref):
        return NONE if e.index == time_index else None
    if isinstance(e, Call) and e.op == "TIME_FLOOR" and isinstance(e.args[0], Ref) and e.args[0].index == time_index \
            and all(isinstance(a, Literal) for a in e.args[1:]):
        period, origin, tz = (a.value for a in e.args[1:])
        if not isinstance(period, str):
            return None
        return Granularity.of_period(Period.parse(period), None if tz in (None, "UTC") else tz, origin)
    return None


class NativePlanner:
    def __init__(self, context: dict | None = None, deadline: PlanningDeadline = NO_DEADLINE) -> None:
        self.deadline = deadline  # the statement's planning deadline, checked per native expression node
        self.native_context = {k: v for k, v in (context or {}).items() if k not in SQL_ONLY_CONTEXT}

    def plan(self, node: RelNode) -> Stage:
        if isinstance(node, Planned):
            return node.stage
        fields = node.fields
        columns = unique_names([f.name for f in fields])
        if isinstance(node, TableScan) and node.table.kind != "datasource":
            return TableStage(node.table, fields, columns)
        if isinstance(node, Values):
            return ValuesStage(tuple(tuple(v.value for v in row) for row in node.rows), fields, columns)
        if isinstance(node, Union):
            return UnionStage(tuple(self.plan(i) for i in node.union_inputs), fields, columns)
        if isinstance(node, Join):
            return self._join(node, fields, columns)
        if isinstance(node, Unnest):
            # The array is computed beside the input's columns, then exploded on the broker.
            n = len(node.input.fields)
            refs = tuple(Ref(i, f.type) for i, f in enumerate(node.input.fields))
            names = tuple(f.name for f in node.input.fields)
            taken = set(names)
            inner = Project(node.input, refs + (node.expr,), names + (fresh_name("unnest", 0, taken),))
            return UnnestStage(self.plan(inner), n, fields, columns)
        return self._block(node)

    def _join(self, node: Join, fields, columns) -> Stage:
        if node.condition is not None:
            raise UnsupportedError(f"{node.description}: only equalities between the two sides (and conditions on "
                                   "the right side) are supported in a LEFT JOIN's ON clause")
        if not node.left_keys:
            raise UnsupportedError(f"{node.description}: joins need an equality between the two sides "
                                   "(cross joins are not supported)")
        return JoinStage(self.plan(node.left), self.plan(node.right), node.kind, node.left_keys, node.right_keys,
                         node.description, fields, columns)

    # ---- blocks ------------------------------------------------------------------------------------
    def _block(self, node: RelNode) -> Stage:
        b = peel(node)
        src = b.source
        if isinstance(src, TableScan) and src.table.kind == "datasource":
            input_stage = None
            in_cols = tuple(f.name for f in src.fields)
            datasource = src.table.name
            time_index = next((i for i, f in enumerate(src.fields) if f.name == TIME_COLUMN), None)
        elif isinstance(src, UnnestScan):
            input_stage = None
            datasource, in_cols = self._unnest_datasource(src)
            time_index = next((i for i, f in enumerate(src.fields) if f.name == TIME_COLUMN), None)
        else:
            input_stage = self.plan(src)
            in_cols = input_stage.columns
            datasource = BROKER_INPUT
            time_index = None
            if b.aggregate is None and b.where is None and (b.post is None or all(isinstance(e, Ref)
                                                                                  for e in b.post.exprs)):
                stage = input_stage
                if b.post is not None:
                    stage = SelectStage(input_stage, tuple(e.index for e in b.post.exprs), b.post.fields,
                                        unique_names(b.post.names))
                return self._finish(stage, b.sort, b.top)
        if b.aggregate is not None:
            return self._aggregate(b, datasource, in_cols, input_stage, time_index)
        return self._scan(b, datasource, in_cols, input_stage, time_index)

    def _unnest_datasource(self, node: UnnestScan) -> tuple[UnnestDataSource, tuple[str, ...]]:
        """The ``unnest`` data source of an UnnestScan (nested ones over their inner one) and the
        column name of each of its fields; the element is named as Druid's planner names it."""
        if isinstance(node.input, UnnestScan):
            base, base_cols = self._unnest_datasource(node.input)
        else:
            base, base_cols = node.input.table.name, tuple(f.name for f in node.input.fields)
        depth, inner = 0, node.input
        while isinstance(inner, UnnestScan):
            depth, inner = depth + 1, inner.input
        name = f"j{depth}.unnest"
        while name in base_cols:
            name = "_" + name
        text = druid_text(node.expr, base_cols, self.deadline)
        out_type = ColumnType.parse(node.expr.type.native_output_name)
        return UnnestDataSource(base, VirtualColumn(name, text, out_type)), base_cols + (name,)

    @staticmethod
    def _unnest_filter(datasource, filt: Filter | None):
        """Filters on the unnested value alone move into the unnest data source's unnestFilter,
        as Druid plans them (the historicals then narrow base rows by them, through the array's
        per-element index); the rest stays the query's filter."""
        if not isinstance(datasource, UnnestDataSource) or filt is None:
            return datasource, filt
        mine, rest = [], []
        for part in split_and(filt):
            (mine if part.columns() == {datasource.output} else rest).append(part)
        if not mine:
            return datasource, filt
        unnest_filter = mine[0] if len(mine) == 1 else And(tuple(mine))
        left = None if not rest else rest[0] if len(rest) == 1 else And(tuple(rest))
        return UnnestDataSource(datasource.base, datasource.virtual_column, unnest_filter), left

    def _finish(self, stage: Stage, sort: Sort | None, top: Project | None) -> Stage:
        """Broker-side ORDER BY/LIMIT/OFFSET and the final projection over a planned stage."""
        if sort is not None:
            keys = tuple((stage.columns[k.index], k.descending,
                          (not k.descending) if k.nulls_first is None else k.nulls_first) for k in sort.keys)
            stage = SortStage(stage, keys, sort.limit, sort.offset)
        if top is not None:
            if all(isinstance(e, Ref) for e in top.exprs):
                return SelectStage(stage, tuple(e.index for e in top.exprs), top.fields, unique_names(top.names))
            return self._block(Project(Planned(stage), top.exprs, top.names))
        return stage

    def _where(self, where: FilterNode | None, in_cols, time_index, vcs=None) -> tuple[tuple, Filter | None]:
        if where is None:
            return (ETERNITY,), None
        intervals, rest = split_time_condition(where.condition, time_index)
        if not intervals:
            return (ETERNITY,), FalseFilter()
        return tuple(intervals), None if rest is None else to_filter(rest, in_cols, vcs, self.deadline)

    def _scan(self, b: Block, datasource, in_cols, input_stage, time_index) -> Stage:
        src_fields = b.source.fields
        if b.post is not None:
            exprs, names = b.post.exprs, b.post.names
        else:
            exprs = tuple(Ref(i, f.type) for i, f in enumerate(src_fields))
            names = tuple(f.name for f in src_fields)
        vcs = _VirtualColumns(in_cols, self.deadline)
        sources = [vcs.column_for(e) for e in exprs]
        intervals, filt = self._where(b.where, in_cols, time_index, vcs)
        datasource, filt = self._unnest_filter(datasource, filt)
        limit, offset, order = None, 0, "none"
        sort = b.sort
        if sort is not None:
            keys = sort.keys
            time_key = len(keys) == 1 and input_stage is None and time_index is not None and \
                exprs[keys[0].index] == Ref(time_index, src_fields[time_index].type) and keys[0].default_nulls
            if not keys or time_key:
                limit, offset = sort.limit, sort.offset
                if time_key:
                    order = "descending" if keys[0].descending else "ascending"
                sort = None
        columns = tuple(dict.fromkeys(sources))
        query = ScanQuery(datasource, intervals, filt, tuple(vcs.list), dict(self.native_context), columns=columns,
                          limit=limit, offset=offset, order=order)
        stage = NativeStage(query, tuple(sources), _fields(exprs, names), unique_names(names), input_stage)
        return self._finish(stage, sort, b.top)

    # ---- aggregation -------------------------------------------------------------------------------
    def _aggregate(self, b: Block, datasource, in_cols, input_stage, time_index) -> Stage:
        agg = b.aggregate
        k = len(agg.group)
        if k == 0 and b.having is not None:
            # A grand total is one row even over no input, which a groupBy's HAVING cannot express:
            # compute the row, then filter it on the broker.
            stage = self._aggregate(Block(b.source, b.where, agg), datasource, in_cols, input_stage, time_index)
            node: RelNode = FilterNode(Planned(stage), b.having.condition)
            for wrapper in (b.post, b.sort, b.top):
                if wrapper is not None:
                    node = wrapper.with_inputs((node,))
            return self._block(node)
        vcs = _VirtualColumns(in_cols, self.deadline)
        intervals, filt = self._where(b.where, in_cols, time_index, vcs)
        datasource, filt = self._unnest_filter(datasource, filt)
        agg_fields = agg.fields
        post_exprs = b.post.exprs if b.post is not None else tuple(Ref(i, f.type) for i, f in enumerate(agg_fields))
        post_names = b.post.names if b.post is not None else agg.names
        post_fields = _fields(post_exprs, post_names)
        sort = b.sort

        granularity = time_granularity(agg.group[0], time_index) if k == 1 and input_stage is None else None
        timeseries_order = self._timeseries_order(sort, post_exprs, k) if (k == 0 or granularity) else None
        if k == 0 or (granularity is not None and b.having is None and timeseries_order is not None):
            qtype = "timeseries"
            dims: list[DimensionSpec] = []
            key_cols = [TIME_COLUMN] if k else []
        else:
            qtype = "groupBy"
            dims = []
            for i, g in enumerate(agg.group):
                out_type = g.type.native_output_name if g.type.column_type is not None else "STRING"
                dims.append(DimensionSpec(vcs.column_for(g), f"d{i}", ColumnType.parse(out_type)))
            key_cols = [d.output_name for d in dims]
        aggregators = [self._aggregator(f"a{j}", c, vcs, in_cols) for j, c in enumerate(agg.calls)]
        agg_cols = key_cols + [a.name for a in aggregators]
        posts: list[ExpressionPost] = []
        sources = []
        for e in post_exprs:
            if isinstance(e, Ref):
                sources.append(agg_cols[e.index])
                continue
            text = druid_text(e, agg_cols, self.deadline)
            existing = next((p.name for p in posts if p.expression == text), None)
            if existing is None:
                existing = fresh_name("p", len(posts), agg_cols)
                posts.append(ExpressionPost(existing, text))
            sources.append(existing)
        common = dict(datasource=datasource, intervals=intervals, filter=filt, virtual_columns=tuple(vcs.list),
                      aggregations=tuple(aggregators), post_aggregations=tuple(posts))
        context = dict(self.native_context)
        remaining_sort = sort
        if qtype == "timeseries":
            granularity_value = ALL if k == 0 else granularity
            if k:
                context["skipEmptyBuckets"] = True
            descending, limit = timeseries_order if timeseries_order is not None else (False, None)
            if timeseries_order is not None:
                remaining_sort = None
            query = TimeseriesQuery(**common, context=context, granularity=granularity_value, descending=descending,
                                    limit=limit)
        else:
            metric = self._topn_metric(b, post_exprs, post_fields, agg, sources) if k == 1 else None
            if metric is not None:
                query = TopNQuery(**common, context=context, granularity=ALL, dimension=dims[0], metric=metric,
                                  threshold=sort.limit)
                remaining_sort = None
            else:
                limit_spec = LimitSpec()
                if sort is not None and all(key.default_nulls for key in sort.keys):
                    columns = tuple(OrderByColumn(sources[key.index], key.descending,
                                                  False if post_fields[key.index].type == VARCHAR else True)
                                    for key in sort.keys)
                    limit_spec = LimitSpec(columns, sort.limit, sort.offset)
                    remaining_sort = None
                having = to_filter(b.having.condition, agg_cols, None, self.deadline) if b.having is not None else None
                query = GroupByQuery(**common, context=context, granularity=ALL, dimensions=tuple(dims),
                                     having=having, limit_spec=limit_spec)
        stage = NativeStage(query, tuple(sources), post_fields, unique_names(post_names), input_stage)
        return self._finish(stage, remaining_sort, b.top)

    @staticmethod
    def _timeseries_order(sort: Sort | None, post_exprs, k: int):
        """(descending, limit) when a timeseries can produce the requested order, else None."""
        if sort is None:
            return False, None
        if sort.offset:
            return None
        if not sort.keys or k == 0:
            return False, sort.limit
        if len(sort.keys) == 1 and isinstance(post_exprs[sort.keys[0].index], Ref) \
                and post_exprs[sort.keys[0].index].index == 0:
            return sort.keys[0].descending, sort.limit
        return None

    @staticmethod
    def _topn_metric(b: Block, post_exprs, post_fields, agg: Aggregate, sources) -> TopNMetric | None:
        sort = b.sort
        if sort is None or b.having is not None or len(sort.keys) != 1 or not sort.limit or sort.offset:
            return None
        key = sort.keys[0]
        if not key.default_nulls:
            return None
        e = post_exprs[key.index]
        if isinstance(e, Ref) and e.index == 0:
            return TopNMetric(None, key.descending, agg.group[0].type.is_numeric)
        if not post_fields[key.index].type.is_numeric:
            return None
        # The engine puts NULL metrics last in both directions; SQL puts them first ascending.
        non_null = isinstance(e, Ref) and e.index >= 1 and agg.calls[e.index - 1].func in _NON_NULL_CALLS
        if not key.descending and not non_null:
            return None
        return TopNMetric(sources[key.index], key.descending)

    @staticmethod
    def _aggregator(name: str, call: AggCall, vcs: _VirtualColumns, in_cols):
        field = vcs.column_for(call.args[0]) if call.args else None
        func = call.func
        if func == "COUNT":
            out = Count(name) if field is None else Filtered(name, Not(NullFilter(field)), Count(name))
        elif func in ("MIN", "MAX") and call.type == VARCHAR:
            out = StringMinMax(name, field, func == "MAX")
        elif func in ("SUM", "MIN", "MAX"):
            cls = {"SUM": Sum, "MIN": Min, "MAX": Max}[func]
            out = cls(name, field, None, _AGG_KIND.get(call.type.name, "double"))
        elif func == "APPROX_COUNT_DISTINCT":
            out = HllSketch(name, field, None, 12, True)
        elif func == "ANY_VALUE":
            array = call.type.column_type is not None and call.type.column_type.is_array
            out = AnyValue(name, field, "array" if array else _AGG_KIND.get(call.type.name, "string"))
        elif func in ("ARRAY_AGG", "ARRAY_AGG_DISTINCT"):
            out = ArrayAgg(name, field, func.endswith("_DISTINCT"))
        elif func in ("ARRAY_CONCAT_AGG", "ARRAY_CONCAT_AGG_DISTINCT"):
            out = ArrayConcat(name, field, func.endswith("_DISTINCT"))
        elif func in ("EARLIEST", "LATEST"):
            kind = "array" if call.type.column_type is not None and call.type.column_type.is_array \
                else _AGG_KIND.get(call.type.name, "string")
            # a second argument (EARLIEST_BY / LATEST_BY) is the time that orders the rows
            by = vcs.column_for(call.args[1]) if len(call.args) > 1 else "__time"
            out = EarliestLatest(name, field, kind, func == "LATEST", by)
        else:
            raise UnsupportedError(f"aggregate function {func} cannot run natively")
        if call.filter is not None:
            out = Filtered(name, to_filter(call.filter, in_cols, None, vcs.deadline), out)
        return out


def plan_stages(plan: RelNode, context: dict | None = None, deadline: PlanningDeadline = NO_DEADLINE) -> Stage:
    return NativePlanner(context, deadline).plan(plan)


__all__ = ["NativePlanner", "Planned", "plan_stages", "peel", "time_granularity", "Block"]
