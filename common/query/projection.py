"""Projections: pre-aggregated tables inside segments (Druid's aggregate projections, plus a filter).

``ProjectionSpec`` is the definition (Druid's JSON: ``type``, ``name``, ``virtualColumns``,
``groupingColumns``, ``aggregators``, and our ``filter``). ``projection_rows`` computes a
projection's rows from base rows with the engine's own ``accumulate``, so what is stored is
exactly the intermediate a query would have built. The matcher (``match_projection``) decides
per segment whether a projection can answer a ``ScanSpec``; its rules live in
``projection_match.py``.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass

import pyarrow as pa

from common.errors import ValidationError, unknown_name_message
from common.expr import Call, Identifier, Literal
from common.query.aggregators import Aggregator, aggregator_from_json
from common.query.filters import Filter, filter_from_json, filter_to_json
from common.query.grouping import codes_from_array, group
from common.query.row_source import ColumnSource, TableRowSource
from common.query.selection import select
from common.query.virtual_column import VirtualColumn
from common.segment.builder import ProjectionTable
from common.types.column_type import COMPLEX_INTERMEDIATES, TIME_COLUMN, TIMESTAMP, ColumnType
from common.types.granularity import Granularity, Period


@dataclass(frozen=True)
class ProjectionSpec:
    name: str
    grouping_columns: tuple[str, ...]
    aggregators: tuple[Aggregator, ...] = ()
    virtual_columns: tuple[VirtualColumn, ...] = ()
    filter: Filter | None = None

    # ---- JSON ---------------------------------------------------------------------------------------
    @staticmethod
    def from_json(obj: dict) -> ProjectionSpec:
        if not isinstance(obj, dict):
            raise ValidationError(f"a projection must be an object, got {obj!r}")
        kind = obj.get("type", "aggregate")
        if kind != "aggregate":
            raise ValidationError(f"projection type must be 'aggregate', got '{kind}'")
        name = obj.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"a projection needs a 'name': {json.dumps(obj)[:200]}")
        grouping = obj.get("groupingColumns", [])
        if not isinstance(grouping, list):
            raise ValidationError(f"projection '{name}': 'groupingColumns' must be a list")
        columns = []
        for g in grouping:
            col = g.get("name") if isinstance(g, dict) else g
            if not isinstance(col, str) or not col:
                raise ValidationError(f"projection '{name}': a grouping column needs a 'name', got {g!r}")
            columns.append(col)
        aggs = obj.get("aggregators", [])
        vcs = obj.get("virtualColumns", [])
        if not isinstance(aggs, list) or not isinstance(vcs, list):
            raise ValidationError(f"projection '{name}': 'aggregators' and 'virtualColumns' must be lists")
        try:
            return ProjectionSpec(name, tuple(columns), tuple(aggregator_from_json(a) for a in aggs),
                                  tuple(VirtualColumn.from_json(v) for v in vcs), filter_from_json(obj.get("filter")))
        except ValidationError as exc:
            raise ValidationError(f"projection '{name}': {exc}") from None

    def to_json(self) -> dict:
        out = {"type": "aggregate", "name": self.name,
               "groupingColumns": [{"type": "auto", "name": c} for c in self.grouping_columns],
               "aggregators": [a.to_json() for a in self.aggregators]}
        if self.virtual_columns:
            out["virtualColumns"] = [v.to_json() for v in self.virtual_columns]
        if self.filter is not None:
            out["filter"] = filter_to_json(self.filter)
        return out

    # ---- what it stores ----------------------------------------------------------------------------
    def virtual(self, name: str) -> VirtualColumn | None:
        for vc in self.virtual_columns:
            if vc.name == name:
                return vc
        return None

    # time_column and granularity are cached on the (immutable) spec: projection matching asks
    # for them several times per candidate, segment and query, and each answer parses the
    # virtual columns' expressions again.
    @functools.cached_property
    def time_column(self) -> str | None:
        """The projection's time column, as it names it: ``__time`` when it groups on raw time, else
        its finest ``timestamp_floor(__time, ...)`` grouping column, whose values are stored where
        the base table keeps ``__time`` (but are not ``__time``: see projection_match)."""
        best = None
        for col in self.grouping_columns:
            if col == TIME_COLUMN:
                return col
            gran = self.granularity_of(col)
            if gran is not None and (best is None or gran[1].period.nominal_millis < best[1].period.nominal_millis):
                best = (col, gran[1])
        return None if best is None else best[0]

    def granularity_of(self, column: str) -> tuple[str, Granularity] | None:
        vc = self.virtual(column)
        return None if vc is None else time_floor_of(vc)

    @functools.cached_property
    def granularity(self) -> Granularity | None:
        """How finely the projection keeps time; None when it keeps no time at all."""
        col = self.time_column
        if col is None:
            return None
        if col == TIME_COLUMN:
            return Granularity.parse("none")
        return self.granularity_of(col)[1]

    def stored_name(self, column: str) -> str:
        return TIME_COLUMN if column == self.time_column else column

    # ---- checks ------------------------------------------------------------------------------------
    def validate(self, schema: dict[str, ColumnType]) -> None:
        """Unknown columns, duplicate names and aggregators that cannot be combined fail here."""
        where = f"projection '{self.name}'"
        available = copy.copy(schema)  # keeps a permissive schema's class (see catalog validation)
        available.setdefault(TIME_COLUMN, TIMESTAMP)
        outputs = list(self.grouping_columns) + [a.name for a in self.aggregators]
        dupes = sorted({n for n in outputs if outputs.count(n) > 1})
        if dupes:
            raise ValidationError(f"{where}: duplicate names {dupes}")
        for vc in self.virtual_columns:
            for col in vc.columns():
                if col not in available:
                    raise ValidationError(f"{where}: virtual column '{vc.name}': " +
                                          unknown_name_message("column", col, available))
            available[vc.name] = vc.output_type_for(available)
        for col in self.grouping_columns:
            if col not in available:
                raise ValidationError(f"{where}: grouping column: " + unknown_name_message("column", col, available))
        if self.filter is not None:
            for col in self.filter.columns():
                if col not in available:
                    raise ValidationError(f"{where}: filter: " + unknown_name_message("column", col, available))
        for agg in self.aggregators:
            if type(agg).combine is Aggregator.combine:
                raise ValidationError(f"{where}: aggregator '{agg.name}' ({agg.to_json()['type']}) cannot be "
                                      "combined across rows, so it cannot be pre-aggregated")
            for col in agg.columns():
                if col not in available:
                    raise ValidationError(f"{where}: aggregator '{agg.name}': " +
                                          unknown_name_message("column", col, available))
            agg.result_type(available)
        if not self.grouping_columns and not self.aggregators:
            raise ValidationError(f"{where}: needs grouping columns or aggregators")


def time_floor_of(vc: VirtualColumn) -> tuple[str, Granularity] | None:
    """(vc name, granularity) when the virtual column is ``timestamp_floor(__time, 'P..'[, origin, tz])``
    with constant arguments; None otherwise."""
    expr = vc.parsed
    if not (isinstance(expr, Call) and expr.name.lower() == "timestamp_floor" and 2 <= len(expr.args) <= 4):
        return None
    if expr.args[0] != Identifier(TIME_COLUMN) or not all(isinstance(a, Literal) for a in expr.args[1:]):
        return None
    period = expr.args[1].value
    origin = expr.args[2].value if len(expr.args) > 2 else None
    tz = expr.args[3].value if len(expr.args) > 3 else None
    if not isinstance(period, str) or (origin is not None and not isinstance(origin, (int, str))):
        return None
    granularity = _floor_granularity(period, origin, tz)
    return None if granularity is None else (vc.name, granularity)


@functools.lru_cache(maxsize=256)
def _floor_granularity(period: str, origin, tz) -> Granularity | None:
    # Projection matching asks this for every candidate of every segment of every query; the
    # arguments are a few constants, so parse each combination once.
    try:
        if isinstance(origin, str):
            from common.types.interval import parse_instant

            origin = parse_instant(origin)
        return Granularity.of_period(Period.parse(period), tz, origin)
    except ValidationError:
        return None


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str) -> ProjectionSpec:
    return ProjectionSpec.from_json(json.loads(text))


def spec_of(obj: dict) -> ProjectionSpec:
    """A projection spec given as its JSON object, parsed once per distinct definition."""
    return _parse_cached(json.dumps(obj, sort_keys=True))


def spec_of_text(text: str) -> ProjectionSpec:
    """A stored projection spec by its canonical text (``ProjectionManifest.spec_text``, made
    with the manifest), parsed once per distinct definition: writing the spec out as JSON per
    query took longer than matching it against the query."""
    return _parse_cached(text)


def projection_rows(spec: ProjectionSpec, rows: pa.Table, schema: dict[str, ColumnType] | None = None) -> ProjectionTable:
    """The projection's rows over ``rows`` (the base rows of one segment): grouping columns, with the
    finest time floor stored as ``__time``, and one intermediate column per aggregator."""
    source = TableRowSource(rows, f"projection {spec.name}")
    types = dict(schema or source.schema)
    sel = select(source, spec.filter, None, spec.virtual_columns, types)
    cols: ColumnSource = sel.columns
    keys = [codes_from_array(cols[c]) for c in spec.grouping_columns]
    groups = group(keys, cols.num_rows)
    if cols.num_rows == 0:
        groups.count = 0
        groups.keys = [k.values.slice(0, 0) for k in keys]
    out: dict[str, pa.Array] = {}
    column_types: dict[str, ColumnType] = {}
    for name, values in zip(spec.grouping_columns, groups.keys):
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        stored = spec.stored_name(name)
        if stored == TIME_COLUMN:
            values = values.cast(pa.int64()) if not pa.types.is_timestamp(values.type) else values
        out[stored] = values
    for agg in spec.aggregators:
        out[agg.name] = agg.accumulate(cols, groups.gid, groups.count)
        column_types[agg.name] = intermediate_type(agg, out[agg.name])
    table = pa.table(out) if out else pa.table({})
    grouping = tuple(spec.stored_name(c) for c in spec.grouping_columns)
    return ProjectionTable(spec.name, spec.to_json(), grouping, tuple(a.to_json() for a in spec.aggregators), table,
                           column_types, spec.time_column, True)


def intermediate_type(agg: Aggregator, values: pa.Array) -> ColumnType:
    """The stored type of an aggregator's intermediate column (Druid's complex names for sketches
    and earliest/latest pairs)."""
    if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
        return ColumnType.parse("COMPLEX<HLLSketch>")
    if pa.types.is_struct(values.type):
        for name, arrow_type in COMPLEX_INTERMEDIATES.items():
            if arrow_type == values.type:
                return ColumnType.parse(f"COMPLEX<{name}>")
        raise ValidationError(f"aggregator '{agg.name}': its intermediate {values.type} cannot be stored")
    return ColumnType.from_arrow(values.type, agg.name)


def row_count_estimate(spec: ProjectionSpec, rows: pa.Table) -> int:
    """Rows the projection would have over ``rows`` (exact: the number of distinct groups)."""
    if not spec.grouping_columns:
        return 1 if rows.num_rows else 0
    return projection_rows(ProjectionSpec(spec.name, spec.grouping_columns, (), spec.virtual_columns, spec.filter),
                           rows).rows.num_rows


__all__ = ["ProjectionSpec", "intermediate_type", "projection_rows", "row_count_estimate", "spec_of",
           "time_floor_of"]
