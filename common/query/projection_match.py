"""Whether one projection of one segment can answer a query, and how (or why not).

A projection matches when (Druid's rules, plus a filter):
- time: a projection's time column is ``timestamp_floor(__time, G)`` (named as the projection
  names it, say ``h``; stored in the projection table where the base table keeps ``__time``),
  raw ``__time`` itself, or absent. A floor at G serves ``__time`` only as a time floor that G
  maps onto (the query's granularity, or a ``timestamp_floor`` virtual column: every one of its
  bucket edges inside the segment is a G edge, so a whole-hour-offset zone maps onto UTC hours
  and Asia/Kolkata does not) or as interval and range bounds on G's edges (anywhere in the
  filter, under OR and NOT too: such a bound is true or false for a whole G bucket at once).
  Anything else that reads ``__time`` (grouping on it, expressions of it, bounds inside a
  bucket) needs a projection grouped on ``__time`` itself, or the base rows;
- every grouping column the query needs is a projection grouping column, or a query virtual
  column equivalent (by expression, not name) to one, or one computable from them;
- every query aggregator has a projection aggregator with the same intermediate (a stored count
  is summed, min of mins, HLL sketches merge); a filtered aggregator's filter must run on the
  projection's rows;
- the query's filter implies the projection's filter (equal terms, IN subsets, range
  containment; virtual columns compared by expression), and what else it filters is on grouping
  columns, so it runs on projection rows.
Each rule that fails returns a ``Refusal``: a typed ``RefusalReason`` and the detail, which
``EXPLAIN``, errors and metrics show.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass

import numpy as np

from common.errors import ValidationError
from common.query.aggregators import Aggregator, Filtered
from common.expr import BinaryOp, Identifier, Literal, parse
from common.query.filters import And, Equals, ExpressionFilter, Filter, In, Not, Or, Range
from common.query.projection import ProjectionSpec, spec_of_text, time_floor_of
from common.query.sketch_aggregators import HllSketch
from common.query.virtual_column import VirtualColumn
from common.segment.manifest import ProjectionManifest
from common.segment.scan_spec import ProjectionMatch, ScanSpec
from common.types.column_type import TIME_COLUMN
from common.types.granularity import Granularity
from common.types.interval import Interval, format_instant


class RefusalReason(enum.Enum):
    """Why a projection cannot serve a query (a small fixed set: metrics label by it)."""

    NO_TIME = "no_time"  # the query needs time and the projection keeps none
    GRANULARITY = "granularity"  # the query buckets time finer than the projection keeps it
    INTERVAL = "interval"  # a query interval edge cuts a projection time bucket
    RAW_TIME = "raw_time"  # the query reads __time other than as a floor or bounds the projection keeps
    TIME_FLOOR = "time_floor"  # a floor as fine as the projection's but on other edges (zone, origin)
    MISSING_COLUMN = "missing_column"  # a column the query reads is not a grouping column
    VIRTUAL_COLUMN = "virtual_column"  # a query virtual column the projection cannot compute
    FILTER = "filter"  # the query's filter does not imply the projection's filter
    AGGREGATOR = "aggregator"  # no stored intermediate for a query aggregator


@dataclass(frozen=True)
class Refusal:
    reason: RefusalReason
    detail: str

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}"


class _Refused(Exception):
    def __init__(self, reason: RefusalReason, detail: str) -> None:
        super().__init__(detail)
        self.refusal = Refusal(reason, detail)


def match_projection(proj: ProjectionManifest, spec: ScanSpec, interval: Interval) -> ProjectionMatch | Refusal:
    try:
        return _Matcher(proj, spec, interval).match()
    except _Refused as refused:
        return refused.refusal


def projection_time_column(proj: ProjectionManifest, p: ProjectionSpec) -> str | None:
    """The projection's time column as the projection names it (``h`` for a floor, ``__time`` when
    it groups on raw time), None when it keeps no time. Segments written before the manifest
    named it say it only through the definition."""
    return proj.time_column if proj.time_column_known else p.time_column


def _granularity_of(p: ProjectionSpec, time_column: str | None) -> Granularity | None:
    """How finely the projection keeps time: 'none' for raw __time, None when it keeps none."""
    if time_column is None:
        return None
    if time_column == TIME_COLUMN:
        return Granularity.parse("none")
    if time_column == p.time_column:
        return p.granularity  # parsed once per definition
    floor = p.granularity_of(time_column)
    return None if floor is None else floor[1]


class _Matcher:
    def __init__(self, proj: ProjectionManifest, spec: ScanSpec, interval: Interval) -> None:
        self.p = p = spec_of_text(proj.spec_text)
        self.proj = proj
        self.spec = spec
        self.interval = interval
        self.time_column = projection_time_column(proj, p)
        self.raw_time = self.time_column == TIME_COLUMN
        self.pg = _granularity_of(p, self.time_column)
        self.grouped = set(p.grouping_columns)
        projection_vcs = {vc.name for vc in p.virtual_columns}
        # Base columns the projection groups on (a projection virtual column that happens to share
        # a base column's name holds other values, so only true base columns count).
        self.base_grouped = {c for c in p.grouping_columns if c not in projection_vcs and c != TIME_COLUMN}
        self.query_vcs = {vc.name: vc for vc in spec.virtual_columns}
        self.ok: set[str] = set()
        self.aliases: dict[str, str] = {}
        self._names: tuple[dict[str, str], dict[str, str]] | None = None
        self._stored_keys: list[dict] | None = None

    def match(self) -> ProjectionMatch:
        self.time_rule()
        for col in self.spec.grouping_columns or ():
            self.need(col, "grouping")
        residual = self.filter_rule(self.spec.filter)
        columns: dict[str, str] = {}
        filters: dict[str, Filter] = {}
        for agg in self.spec.aggregators:
            columns[agg.name], flt = self.aggregator(agg)
            if flt is not None:
                filters[agg.name] = flt
        return ProjectionMatch(columns, self.aliases, residual, residual is not self.spec.filter, filters)

    # ---- time ------------------------------------------------------------------------------------
    def time_rule(self) -> None:
        qg = self.spec.granularity if self.spec.granularity is not None else Granularity.parse("all")
        pg = self.pg
        if not qg.is_all:
            if pg is None:
                raise _Refused(RefusalReason.NO_TIME, f"the projection keeps no time, and the query buckets by "
                                                      f"{qg.to_json()}")
            if not maps_onto(pg, qg, self.interval):
                raise _Refused(_floor_reason(pg, qg), f"the projection keeps time by {pg.to_json()}, coarser "
                                                      f"than (or not aligned with) the query's {qg.to_json()}")
        for iv in self.spec.intervals or ():
            for edge in (iv.start, iv.end):
                if self.edge_ok(edge):
                    continue
                if pg is None:
                    raise _Refused(RefusalReason.INTERVAL, "the query's intervals cut the segment, and the "
                                                           "projection keeps no time")
                raise _Refused(RefusalReason.INTERVAL, f"the query's interval edge {format_instant(edge)} is not "
                                                       f"on a {pg.to_json()} bucket edge of the projection")

    def edge_ok(self, edge: int) -> bool:
        """Whether a time bound at ``edge`` splits the segment's rows as it splits the projection's
        (bucketed) times: it lies outside both, or on a bucket edge."""
        start, end = self.interval.start, self.interval.end
        pg = self.pg
        if pg is None:
            return not start < edge < end
        if pg.is_none or edge >= end:
            return True
        try:
            first = _bucket_start(pg, start)
            return not first < edge < end or _bucket_start(pg, edge) == edge
        except (ValidationError, OverflowError, ValueError):
            return False

    def time_bounds_ok(self, r: Range) -> bool:
        """A range on ``__time`` whose bounds are bucket edges: the same rows pass on bucket starts."""
        if self.raw_time:
            return True
        if self.pg is None or (r.value_type or "LONG").upper() not in ("LONG", "DOUBLE", "FLOAT"):
            return False
        for bound, open_, lower in ((r.lower, r.lower_open, True), (r.upper, r.upper_open, False)):
            if bound is None:
                continue
            if isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound != int(bound):
                return False
            # The first time that passes (lower) or the first that fails (upper).
            edge = int(bound) + (1 if open_ == lower else 0)
            if not self.edge_ok(edge):
                return False
        return True

    # ---- columns ---------------------------------------------------------------------------------
    def need(self, name: str, where: str) -> None:
        if name in self.ok:
            return
        vc = self.query_vcs.get(name)
        if vc is None:
            if name == TIME_COLUMN:
                if not self.raw_time:
                    raise _Refused(RefusalReason.RAW_TIME, f"{where}: the query reads __time itself; " +
                                   self._time_kept())
            elif name not in self.base_grouped:
                raise _Refused(RefusalReason.MISSING_COLUMN,
                               f"{where}: column '{name}' is not a grouping column of the projection")
            self.ok.add(name)
            return
        twin = self.equivalent(vc)
        if twin is not None and twin in self.grouped:
            if self.p.stored_name(twin) != name:
                self.aliases[name] = self.p.stored_name(twin)
            self.ok.add(name)
            return
        floor = time_floor_of(vc)
        if floor is not None:
            if self.pg is None:
                raise _Refused(RefusalReason.NO_TIME, f"{where}: virtual column '{name}' floors time, and the "
                                                      "projection keeps no time")
            if not maps_onto(self.pg, floor[1], self.interval):
                raise _Refused(_floor_reason(self.pg, floor[1]),
                               f"{where}: virtual column '{name}' floors time to {floor[1].to_json()}, which the "
                               f"projection's {self.pg.to_json()} does not map onto")
            self.ok.add(name)
            return
        for col in sorted(vc.columns()):
            try:
                self.need(col, where)
            except _Refused as refused:
                if refused.refusal.reason is RefusalReason.RAW_TIME:
                    raise _Refused(RefusalReason.RAW_TIME, f"{where}: virtual column '{name}' ({vc.expression}) "
                                                           "reads __time; " + self._time_kept()) from None
                raise _Refused(RefusalReason.VIRTUAL_COLUMN, f"{where}: virtual column '{name}' ({vc.expression}) "
                                                             "is not in the projection") from None
        self.ok.add(name)

    def _time_kept(self) -> str:
        if self.pg is None:
            return "the projection keeps no time"
        return (f"the projection keeps only its time column '{self.time_column}' "
                f"(__time floored to {self.pg.to_json()})")

    def equivalent(self, vc: VirtualColumn) -> str | None:
        """The projection virtual column computing the same as ``vc``, whatever either is named."""
        for pvc in self.p.virtual_columns:
            if pvc.parsed != vc.parsed:
                continue
            if vc.declared_type is None or pvc.declared_type == vc.declared_type:
                return pvc.name
            stored = self.proj.column(self.p.stored_name(pvc.name))
            if pvc.declared_type is None and stored is not None and stored.type == vc.declared_type:
                return pvc.name
        return None

    def _canonical(self) -> tuple[dict[str, str], dict[str, str]]:
        """Names under which query and projection filters compare: a virtual column by its
        projection twin's position (so names do not matter), base columns as they are."""
        if self._names is None:
            self._names = self._canonical_names()
        return self._names

    def _canonical_names(self) -> tuple[dict[str, str], dict[str, str]]:
        mine = {pvc.name: f"\0p{i}" for i, pvc in enumerate(self.p.virtual_columns)}
        theirs = {}
        for name, vc in self.query_vcs.items():
            twin = self.equivalent(vc)
            theirs[name] = mine[twin] if twin is not None else f"\0q{name}"
        return theirs, mine

    def _canonical_expressions(self, theirs: dict[str, str], mine: dict[str, str]) -> dict:
        """Canonical virtual column name -> its expression, to compare a filter on a virtual column
        with an expression filter on the same expression."""
        out = {mine[pvc.name]: pvc.parsed for pvc in self.p.virtual_columns}
        for name, vc in self.query_vcs.items():
            out.setdefault(theirs[name], vc.parsed)
        return out

    # ---- filters ---------------------------------------------------------------------------------
    def filter_rule(self, query_filter: Filter | None) -> Filter | None:
        """The filter to run on projection rows. Query terms equal to a term of the projection's
        filter were applied when the projection was built and are dropped."""
        query_terms = _conjuncts(query_filter)
        if self.p.filter is None:
            for term in query_terms:
                self.check_filter(term, "filter")
            return query_filter
        theirs, mine = self._canonical()
        exprs = self._canonical_expressions(theirs, mine)
        canon = [_renamed(q, theirs) for q in query_terms]
        terms = _conjuncts(self.p.filter)
        applied = [_renamed(t, mine) for t in terms]
        for term, needed in zip(terms, applied):
            if not any(implies(q, needed, exprs) for q in canon):
                raise _Refused(RefusalReason.FILTER, "the query's filter does not imply the projection's "
                                                     f"filter term {term!r}")
        # A term the projection applied already (the same, or the same rows however spelled) is dropped.
        residual = [q for q, c in zip(query_terms, canon)
                    if not any(implies(c, a, exprs) and implies(a, c, exprs) for a in applied)]
        for term in residual:
            self.check_filter(term, "filter")
        if len(residual) == len(query_terms):
            return query_filter
        if not residual:
            return None
        return residual[0] if len(residual) == 1 else And(tuple(residual))

    def check_filter(self, f: Filter, where: str) -> None:
        """Every column ``f`` reads is on the projection; ``__time`` only in bounds on bucket edges."""
        if isinstance(f, (And, Or)):
            for child in f.fields:
                self.check_filter(child, where)
            return
        if isinstance(f, Not):
            self.check_filter(f.field, where)
            return
        if isinstance(f, Range) and f.column == TIME_COLUMN and not self.raw_time:
            if not self.time_bounds_ok(f):
                raise _Refused(RefusalReason.RAW_TIME, f"{where}: a __time bound is not on a bucket edge of the "
                                                       "projection's time; " + self._time_kept())
            return
        for col in sorted(f.columns()):
            self.need(col, where)

    # ---- aggregators -----------------------------------------------------------------------------
    def aggregator(self, agg: Aggregator) -> tuple[str, Filter | None]:
        """(the stored column holding ``agg``'s intermediate, the filter to apply to projection rows
        before combining it: a filtered aggregator over a stored unfiltered one)."""
        theirs, mine = self._canonical()
        if self._stored_keys is None:
            self._stored_keys = [_key_under(stored, mine) for stored in self.p.aggregators]
        key = _key_under(agg, theirs)
        for stored, skey in zip(self.p.aggregators, self._stored_keys):
            if _same_key(agg, stored, key, skey):
                return stored.name, None
        filters: list[Filter] = []
        inner = agg
        while isinstance(inner, Filtered):
            filters.append(inner.filter)
            inner = inner.aggregator
        if filters:
            key = _key_under(inner, theirs)
            for stored, skey in zip(self.p.aggregators, self._stored_keys):
                if _same_key(inner, stored, key, skey):
                    for flt in filters:
                        self.check_filter(flt, f"aggregator '{agg.name}' filter")
                    return stored.name, filters[0] if len(filters) == 1 else And(tuple(filters))
        raise _Refused(RefusalReason.AGGREGATOR, f"no projection aggregator gives the intermediate of "
                                                 f"'{agg.name}' ({_describe(agg)})")


# ---- time granularities --------------------------------------------------------------------------
def maps_onto(fine: Granularity, coarse: Granularity, interval: Interval) -> bool:
    """Whether every ``coarse`` bucket edge among the segment's times is a ``fine`` bucket edge:
    always when ``finer_or_equal`` proves it; across time zones or origins, checked edge by edge
    over the segment (a zone's offset is whole hours in some years and not in others)."""
    if finer_or_equal(fine, coarse):
        return True
    if fine.kind != "period" or coarse.kind != "period":
        return False
    return _edges_align(fine, coarse, interval.start, interval.end)


def _floor_reason(kept: Granularity, wanted: Granularity) -> RefusalReason:
    """GRANULARITY when the projection keeps longer buckets than the query asks for, TIME_FLOOR
    when they are as fine but their edges fall elsewhere (another zone or origin)."""
    if wanted.is_none or (kept.period is not None and wanted.period is not None
                          and kept.period.nominal_millis > wanted.period.nominal_millis):
        return RefusalReason.GRANULARITY
    return RefusalReason.TIME_FLOOR


@functools.lru_cache(maxsize=8192)
def _bucket_start(granularity: Granularity, ms: int) -> int:
    # Segment starts and query interval edges repeat across candidates, segments and queries.
    return int(granularity.bucket_start(np.array([ms], np.int64))[0])


_MAX_EDGES = 20_000


@functools.lru_cache(maxsize=4096)
def _edges_align(fine: Granularity, coarse: Granularity, start: int, end: int) -> bool:
    try:
        first = int(fine.bucket_start(np.array([start], np.int64))[0])
        if (end - first) // max(1, coarse.period.nominal_millis) > _MAX_EDGES:
            return False  # too many edges to check (an all-time segment): use the base rows
        edges = np.array(coarse.buckets(first, end, limit=_MAX_EDGES), np.int64)
        inner = edges[(edges > first) & (edges < end)]
        return bool(np.all(fine.bucket_start(inner) == inner))
    except (ValidationError, OverflowError, ValueError):
        return False


def finer_or_equal(fine: Granularity, coarse: Granularity) -> bool:
    """Whether every ``coarse`` bucket is a union of ``fine`` buckets, from the periods alone
    (same zone and origin; ``maps_onto`` also checks across zones)."""
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


def _renamed(f: Filter, names: dict[str, str]) -> Filter:
    """``f`` with the columns in ``names`` renamed (to compare filters whose virtual columns have
    different names)."""
    if isinstance(f, (And, Or)):
        return dataclasses.replace(f, fields=tuple(_renamed(c, names) for c in f.fields))
    if isinstance(f, Not):
        return dataclasses.replace(f, field=_renamed(f.field, names))
    column = getattr(f, "column", None)
    if isinstance(column, str) and column in names and dataclasses.is_dataclass(f):
        return dataclasses.replace(f, column=names[column])
    return f


def implies(q: Filter, p: Filter, exprs: dict | None = None) -> bool:
    """Whether every row passing ``q`` passes ``p`` (for the forms we can prove; False otherwise).
    ``exprs`` gives virtual columns' expressions, so that ``v IN (..)`` on a virtual column and an
    expression filter ``x == a || x == b`` on its expression compare as value sets."""
    if q == p:
        return True
    if isinstance(p, And):
        return all(implies(q, child, exprs) for child in p.fields)
    if isinstance(q, And):
        return any(implies(child, p, exprs) for child in q.fields)
    sq, sp = _value_set(q, exprs or {}), _value_set(p, exprs or {})
    if sq is not None and sp is not None and sq[0] == sp[0]:
        return all(any(_same_value(v, w) for w in sp[1]) for v in sq[1])
    cols_q, cols_p = q.columns(), p.columns()
    if len(cols_q) != 1 or cols_q != cols_p:
        return False
    values = _values_of(q)
    if values is None:
        if isinstance(q, Range) and isinstance(p, Range):
            return _range_within(q, p)
        return False
    if isinstance(p, In):
        return all(any(_same_value(v, w) for w in p.values) for v in values)
    if isinstance(p, Equals):
        return all(_same_value(v, p.value) for v in values)
    if isinstance(p, Range):
        return all(_in_range(v, p) for v in values)
    return False


def _value_set(f: Filter, exprs: dict) -> tuple | None:
    """(the expression, the values it must equal) of ``col = v``, ``col IN (..)`` and expression
    filters ``x == a || x == b``; None for other forms."""
    if isinstance(f, (Equals, In)):
        values = _values_of(f)
        if values is None:
            return None
        return exprs.get(f.column, Identifier(f.column)), values
    if not isinstance(f, ExpressionFilter):
        return None
    try:
        tree = parse(f.expression)
    except ValidationError:
        return None
    found, values = None, []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, BinaryOp) and node.op == "||":
            stack += [node.right, node.left]
            continue
        if not (isinstance(node, BinaryOp) and node.op == "=="):
            return None
        side, lit = (node.left, node.right) if isinstance(node.right, Literal) else (node.right, node.left)
        if not isinstance(lit, Literal) or lit.value is None or isinstance(side, Literal):
            return None
        if found is not None and side != found:
            return None
        found = side
        values.append(lit.value)
    return found, tuple(values)


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
_REFERENCES = ("fieldName", "column", "dimension")


def _aggregator_key(agg: Aggregator, names: dict[str, str]) -> dict:
    """``agg``'s JSON without its names, with column references renamed by ``names``."""
    def walk(obj):
        if isinstance(obj, list):
            return [walk(x) for x in obj]
        if not isinstance(obj, dict):
            return obj
        out = {}
        for k, v in obj.items():
            if k == "name":
                continue
            if k in _REFERENCES and isinstance(v, str):
                out[k] = names.get(v, v)
            elif k == "fieldNames" and isinstance(v, list):
                out[k] = [names.get(x, x) if isinstance(x, str) else x for x in v]
            else:
                out[k] = walk(v)
        return out

    return walk(agg.to_json())


def _key_under(agg: Aggregator, names: dict[str, str]) -> dict:
    """``_aggregator_key`` with the renamed columns applied only when the aggregator reads one."""
    if names and not frozenset(agg.columns()).isdisjoint(names):
        return _aggregator_key(agg, names)
    return _aggregator_key(agg, {})


def _same_key(query: Aggregator, stored: Aggregator, qkey: dict, skey: dict) -> bool:
    if isinstance(query, HllSketch) and isinstance(stored, HllSketch):
        # Finalize-only options (rounding) do not matter; a finer sketch serves a coarser one.
        return ((qkey.get("fieldName"), qkey.get("expression")) == (skey.get("fieldName"), skey.get("expression"))
                and stored.lg_k >= query.lg_k)
    return type(query) is type(stored) and qkey == skey


def same_intermediate(query: Aggregator, stored: Aggregator) -> bool:
    """Whether ``stored``'s intermediate can be combined into ``query``'s (names and finalize-only
    options such as HLL rounding do not matter; a finer HLL sketch serves a coarser one)."""
    return _same_key(query, stored, _aggregator_key(query, {}), _aggregator_key(stored, {}))


def _describe(agg: Aggregator) -> str:
    out = agg.to_json()
    out.pop("name", None)
    return ", ".join(f"{k}={v}" for k, v in out.items())


@dataclass(frozen=True)
class MatchReport:
    """Per segment: the projection used, or each candidate's reason (for EXPLAIN and metrics)."""

    projection: str | None
    rejected: tuple[tuple[str, str], ...]


def reason_kind(reason) -> str:
    """The ``RefusalReason`` of a refusal or of its text (``str(Refusal)`` starts with it): a metric
    label must not carry free text."""
    if isinstance(reason, Refusal):
        return reason.reason.value
    head = str(reason).split(":", 1)[0].strip()
    try:
        return RefusalReason(head).value
    except ValueError:
        return "other"


__all__ = ["MatchReport", "Refusal", "RefusalReason", "finer_or_equal", "implies", "maps_onto", "match_projection",
           "projection_time_column", "reason_kind", "same_intermediate"]
