"""Whether one projection of one segment can answer a query, and how (or why not).

A projection matches when (Druid's rules, plus a filter):
- its time is at least as fine as the query's granularity (an hourly projection answers daily
  buckets), and the query's intervals cut the segment only at the projection's bucket edges;
- every grouping column the query needs is a projection grouping column, or a query virtual
  column equivalent (by expression, not name) to one, or one computable from them;
- every query aggregator has a projection aggregator with the same intermediate (a stored count
  is summed, min of mins, HLL sketches merge);
- the query's filter implies the projection's filter (equal terms, IN subsets, range
  containment), and what else it filters is on grouping columns, so it runs on projection rows.
Each rule that fails returns its reason as text, which ``EXPLAIN`` and errors show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.query.aggregators import Aggregator
from common.query.filters import And, Equals, Filter, In, Range
from common.query.projection import ProjectionSpec, spec_of, time_floor_of
from common.query.sketch_aggregators import HllSketch
from common.query.virtual_column import VirtualColumn
from common.segment.manifest import ProjectionManifest
from common.segment.scan_spec import ProjectionMatch, ScanSpec
from common.types.column_type import TIME_COLUMN
from common.types.granularity import Granularity
from common.types.interval import Interval, format_instant


def match_projection(proj: ProjectionManifest, spec: ScanSpec, interval: Interval) -> ProjectionMatch | str:
    p = spec_of(proj.spec)
    grouped = set(p.grouping_columns)
    available = {p.stored_name(c) for c in p.grouping_columns}
    query_vcs = {vc.name: vc for vc in spec.virtual_columns}
    pg = p.granularity

    why = _time_rule(p, pg, spec, interval)
    if why:
        return why

    aliases: dict[str, str] = {}
    usable: set[str] = set(available)

    def column_ok(name: str) -> str | None:
        if name in usable:
            return None
        vc = query_vcs.get(name)
        if vc is None:
            if name == TIME_COLUMN:
                return "the query reads __time itself, which the projection keeps only bucketed"
            return f"column '{name}' is not a grouping column of the projection"
        twin = _equivalent(vc, p)
        if twin is not None and twin in grouped:
            aliases[name] = p.stored_name(twin)
            usable.add(name)
            return None
        floor = time_floor_of(vc)
        if floor is not None:
            if pg is not None and finer_or_equal(pg, floor[1]):
                usable.add(name)
                return None
            return f"virtual column '{name}' floors time to {floor[1].to_json()}, finer than the projection keeps"
        for col in vc.columns():
            if col == TIME_COLUMN or (col not in usable and column_ok(col) is not None):
                return f"virtual column '{name}' ({vc.expression}) is not in the projection"
        usable.add(name)
        return None

    for col in spec.grouping_columns or ():
        why = column_ok(col)
        if why:
            return f"grouping: {why}"

    residual, why = _filter_rule(p, spec.filter, column_ok)
    if why:
        return f"filter: {why}"

    aggregator_columns: dict[str, str] = {}
    for agg in spec.aggregators:
        stored = next((pa for pa in p.aggregators if same_intermediate(agg, pa)), None)
        if stored is None:
            return f"aggregator: no projection aggregator gives the intermediate of '{agg.name}' ({_describe(agg)})"
        aggregator_columns[agg.name] = stored.name
    return ProjectionMatch(aggregator_columns, aliases, residual, residual is not spec.filter)


# ---- time ----------------------------------------------------------------------------------------
def _time_rule(p: ProjectionSpec, pg: Granularity | None, spec: ScanSpec, interval: Interval) -> str | None:
    qg = spec.granularity if spec.granularity is not None else Granularity.parse("all")
    if not qg.is_all:
        if pg is None:
            return f"the projection keeps no time, and the query buckets by {qg.to_json()}"
        if not finer_or_equal(pg, qg):
            return f"the projection keeps time by {pg.to_json()}, coarser than the query's {qg.to_json()}"
    for iv in spec.intervals or ():
        for edge in (iv.start, iv.end):
            if interval.start < edge < interval.end:
                if pg is None:
                    return "the query's intervals cut the segment, and the projection keeps no time"
                if int(pg.bucket_start(np.array([edge], dtype=np.int64))[0]) != edge:
                    return (f"the query's interval edge {format_instant(edge)} is not on a "
                            f"{pg.to_json()} bucket edge of the projection")
    return None


def finer_or_equal(fine: Granularity, coarse: Granularity) -> bool:
    """Whether every ``coarse`` bucket is a union of ``fine`` buckets."""
    if coarse.is_all or fine.is_none:
        return True
    if coarse.is_none or fine.is_all:
        return False
    if fine.time_zone != coarse.time_zone:
        return False
    f, c = fine.period, coarse.period
    if fine.origin is not None or coarse.origin is not None:
        return (fine.origin == coarse.origin and not f.has_calendar_part and not c.has_calendar_part
                and c.fixed_millis % f.fixed_millis == 0)
    f_months, c_months = f.years * 12 + f.months, c.years * 12 + c.months
    if f_months:
        return bool(c_months) and c_months % f_months == 0
    if f.weeks and not f.days and not f.millis:
        return not c_months and bool(c.weeks) and not c.days and not c.millis and c.weeks % f.weeks == 0
    day = 86_400_000
    if c_months or (c.weeks and not c.days and not c.millis):
        return day % f.fixed_millis == 0  # months and weeks start at (local) midnight
    return c.fixed_millis % f.fixed_millis == 0


# ---- virtual columns -----------------------------------------------------------------------------
def _equivalent(vc: VirtualColumn, p: ProjectionSpec) -> str | None:
    for pvc in p.virtual_columns:
        if pvc.parsed == vc.parsed and (vc.declared_type is None or vc.declared_type == pvc.declared_type):
            return pvc.name
    return None


# ---- filters -------------------------------------------------------------------------------------
def _conjuncts(f: Filter | None) -> list[Filter]:
    if f is None:
        return []
    if isinstance(f, And):
        out = []
        for child in f.fields:
            out.extend(_conjuncts(child))
        return out
    return [f]


def _filter_rule(p: ProjectionSpec, query_filter: Filter | None, column_ok) -> tuple[Filter | None, str | None]:
    """(the filter to run on projection rows, or a reason). Query terms equal to a term of the
    projection's filter were applied when the projection was built and are dropped."""
    query_terms = _conjuncts(query_filter)
    if p.filter is not None:
        for needed in _conjuncts(p.filter):
            if not any(implies(q, needed) for q in query_terms):
                return None, f"the query's filter does not imply the projection's filter term {needed!r}"
    applied = set(_conjuncts(p.filter))
    residual = [q for q in query_terms if q not in applied]
    for term in residual:
        for col in sorted(term.columns()):
            why = column_ok(col)
            if why:
                return None, why
    if len(residual) == len(query_terms):
        return query_filter, None
    if not residual:
        return None, None
    return (residual[0] if len(residual) == 1 else And(tuple(residual))), None


def implies(q: Filter, p: Filter) -> bool:
    """Whether every row passing ``q`` passes ``p`` (for the forms we can prove; False otherwise)."""
    if q == p:
        return True
    if isinstance(p, And):
        return all(implies(q, child) for child in p.fields)
    if isinstance(q, And):
        return any(implies(child, p) for child in q.fields)
    cols_q, cols_p = q.columns(), p.columns()
    if len(cols_q) != 1 or cols_q != cols_p:
        return False
    values = _values_of(q)
    if values is None:
        if isinstance(q, Range) and isinstance(p, Range):
            return _range_within(q, p)
        return False
    if isinstance(p, In):
        return all(v in p.values for v in values)
    if isinstance(p, Equals):
        return all(_same_value(v, p.value) for v in values)
    if isinstance(p, Range):
        return all(_in_range(v, p) for v in values)
    return False


def _values_of(f: Filter) -> tuple | None:
    if isinstance(f, Equals):
        return (f.value,)
    if isinstance(f, In) and None not in f.values:
        return tuple(f.values)
    return None


def _same_value(a, b) -> bool:
    return a == b and type(a) is type(b) or (_num(a) is not None and _num(a) == _num(b))


def _num(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return None


def _comparable(a, b) -> tuple | None:
    na, nb = _num(a), _num(b)
    if na is not None and nb is not None:
        return na, nb
    if isinstance(a, str) and isinstance(b, str):
        return a, b
    return None


def _in_range(v, r: Range) -> bool:
    if r.lower is not None:
        pair = _comparable(v, r.lower)
        if pair is None or pair[0] < pair[1] or (r.lower_open and pair[0] == pair[1]):
            return False
    if r.upper is not None:
        pair = _comparable(v, r.upper)
        if pair is None or pair[0] > pair[1] or (r.upper_open and pair[0] == pair[1]):
            return False
    return True


def _range_within(q: Range, p: Range) -> bool:
    if (q.value_type or "").upper() != (p.value_type or "").upper():
        return False
    if p.lower is not None:
        if q.lower is None:
            return False
        pair = _comparable(q.lower, p.lower)
        if pair is None or pair[0] < pair[1] or (pair[0] == pair[1] and p.lower_open and not q.lower_open):
            return False
    if p.upper is not None:
        if q.upper is None:
            return False
        pair = _comparable(q.upper, p.upper)
        if pair is None or pair[0] > pair[1] or (pair[0] == pair[1] and p.upper_open and not q.upper_open):
            return False
    return True


# ---- aggregators ---------------------------------------------------------------------------------
def same_intermediate(query: Aggregator, stored: Aggregator) -> bool:
    """Whether ``stored``'s intermediate can be combined into ``query``'s (names and finalize-only
    options such as HLL rounding do not matter; a finer HLL sketch serves a coarser one)."""
    if isinstance(query, HllSketch) and isinstance(stored, HllSketch):
        return (query.field_name, query.expression) == (stored.field_name, stored.expression) \
            and stored.lg_k >= query.lg_k
    if type(query) is not type(stored):
        return False
    a, b = query.to_json(), stored.to_json()
    a.pop("name", None)
    b.pop("name", None)
    return a == b


def _describe(agg: Aggregator) -> str:
    out = agg.to_json()
    out.pop("name", None)
    return ", ".join(f"{k}={v}" for k, v in out.items())


@dataclass(frozen=True)
class MatchReport:
    """Per segment: the projection used, or each candidate's reason (for EXPLAIN and metrics)."""

    projection: str | None
    rejected: tuple[tuple[str, str], ...]


__all__ = ["MatchReport", "finer_or_equal", "implies", "match_projection", "reason_kind", "same_intermediate"]


_REASON_KINDS = (("grouping", "missing_column"), ("filter", "filter"), ("aggregator", "aggregator"),
                 ("interval", "interval"), ("buckets by", "granularity"), ("coarser", "granularity"),
                 ("keeps no time", "granularity"), ("virtual column", "virtual_column"))


def reason_kind(reason: str) -> str:
    """A small, fixed set of miss reasons (a metric label must not carry free text)."""
    for marker, kind in _REASON_KINDS:
        if marker in reason:
            return kind
    return "other"
