"""The projection advisor (pure): from logged query shapes and segment facts, the projections worth
adding, ranked by the rows they would save per byte they would store.

1. Shapes (``core/query_log.query_shape``) of one datasource are grouped by the columns a projection
   must keep for them (grouping and filter columns) and their time granularity; each group is a
   candidate holding the union of its aggregators.
2. A candidate serves every logged shape whose columns it keeps, whose granularity is as coarse or
   coarser, and whose aggregators it stores (same intermediate) — the same rules the matcher uses.
3. Its row count per segment is the smaller of the segment's rows, the product of its columns'
   cardinalities (times the time buckets the segment spans) and, when given, the distinct count of
   the column combination per time chunk from an HLL sketch (``combos``); never by building it.
4. Rows the served queries scanned without it are what the log recorded; with it, those rows
   times the candidate's rows per base row (on the segments that read base rows).
5. Storage is its rows times a per-row size (codes and bitmaps per string column, 8 bytes per
   number, the sketch size for HLL aggregators).

The answer is ready-to-run ``ALTER TABLE .. ADD PROJECTION .. AS SELECT`` statements.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from common.errors import ValidationError
from common.query.projection_match import finer_or_equal
from common.types.column_type import TIME_COLUMN
from common.types.granularity import Granularity
from common.types.interval import ETERNITY, Interval
from services.broker.core.query_log import canonical_period

_PERIOD_MS = {"PT1S": 1_000, "PT1M": 60_000, "PT5M": 300_000, "PT15M": 900_000, "PT30M": 1_800_000,
              "PT1H": 3_600_000, "PT6H": 21_600_000, "P1D": 86_400_000, "P1W": 604_800_000,
              "P1M": 2_592_000_000, "P3M": 7_776_000_000, "P1Y": 31_536_000_000}
# Interval edges at or past these are open ends (eternity's), not cuts through the data.
MIN_EDGE, MAX_EDGE = ETERNITY.start, ETERNITY.end
MIN_FACTOR = 2.0  # a projection that does not at least halve the rows read is not worth its bytes


@dataclass(frozen=True)
class SegmentFacts:
    rows: int
    start: int
    end: int
    cardinality: dict[str, int]  # column -> distinct values in the segment (what the manifest says)
    types: dict[str, str] = field(default_factory=dict)  # column -> native type name


@dataclass
class Candidate:
    datasource: str
    columns: tuple[str, ...]
    granularity: str
    aggregators: dict[str, dict] = field(default_factory=dict)  # intermediate key -> aggregator JSON
    queries: int = 0
    rows_without: int = 0
    rows_with: float = 0.0
    estimated_rows: int = 0
    base_rows: int = 0
    storage_bytes: int = 0
    method: str = "cardinalities"

    @property
    def rows_saved(self) -> int:
        return max(0, int(self.rows_without - self.rows_with))

    @property
    def factor(self) -> float:
        return self.rows_without / max(self.rows_with, 1.0)


def aggregator_key(agg: dict) -> str:
    """What makes two aggregators store the same intermediate (names and HLL rounding do not)."""
    out = {k: v for k, v in agg.items() if k not in ("name", "round")}
    if out.get("type") == "HLLSketchBuild":
        out.pop("lgK", None)
    return json.dumps(out, sort_keys=True)


def aggregator_sql(agg: dict) -> tuple[str, str] | None:
    """(SQL expression, a name) that plans into ``agg``, or None when the advisor cannot write it."""
    kind, col = agg.get("type"), agg.get("fieldName")
    if agg.get("expression") is not None or agg.get("filter") is not None:
        return None
    if kind == "count":
        return "COUNT(*)", "cnt"
    if col is None:
        return None
    quoted = _quote(col)
    if kind in ("longSum", "doubleSum", "floatSum"):
        return f"SUM({quoted})", f"sum_{col}"
    if kind in ("longMin", "doubleMin", "floatMin"):
        return f"MIN({quoted})", f"min_{col}"
    if kind in ("longMax", "doubleMax", "floatMax"):
        return f"MAX({quoted})", f"max_{col}"
    if kind == "HLLSketchBuild" and int(agg.get("lgK", 12)) <= 12:
        return f"APPROX_COUNT_DISTINCT({quoted})", f"distinct_{col}"
    return None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def covers(coarse: str, fine: str) -> bool:
    """Whether a projection keeping time at ``fine`` serves a query bucketing by ``coarse`` (the
    matcher's own rule)."""
    coarse, fine = canonical_period(coarse), canonical_period(fine)
    if fine == "all" or coarse == "all":
        return coarse == "all" or fine != "all"
    try:
        return finer_or_equal(Granularity.parse(fine), Granularity.parse(coarse))
    except ValidationError:
        return coarse == fine


def time_need(shape: dict, segments: list[SegmentFacts] = ()) -> str:
    """How finely a projection must keep time to serve ``shape``, by the matcher's time rule
    (common/query/projection_match.py): the shape's granularity when every interval edge that cuts
    a segment lies on one of its bucket edges, else "none" (raw ``__time``); "none" too when the
    shape filters on ``__time`` itself (the filter compares raw timestamps). A floor projection
    proposed for such a shape would be refused for it."""
    if TIME_COLUMN in shape.get("filter_columns", ()):
        return "none"
    g = canonical_period(shape["granularity"])
    if g == "none":
        return g
    try:
        granularity = Granularity.parse(g) if g != "all" else None
        edges = {e for text in shape.get("intervals", ()) for iv in [Interval.of(text)] for e in (iv.start, iv.end)}
    except (ValidationError, ValueError, OverflowError):
        return "none"  # a time the advisor cannot read: only raw time is sure to serve it
    for edge in edges:
        if segments and not any(seg.start < edge < seg.end for seg in segments):
            continue  # cuts no segment: every row of each segment is in or out alike
        if not segments and (edge <= MIN_EDGE or edge >= MAX_EDGE):
            continue  # an open end (eternity's) cuts nothing
        if granularity is None:
            return "none"
        try:
            if int(granularity.bucket_start(np.array([edge], np.int64))[0]) != edge:
                return "none"
        except (ValidationError, OverflowError, ValueError):
            return "none"
    return g


def candidates(shapes: list[dict], segments: list[SegmentFacts] = ()) -> tuple[list[Candidate], list[str]]:
    """One candidate per (columns, granularity) of the advisable shapes, and why others were left out.
    A shape that reads raw ``__time`` (``time_need``) makes a raw-time candidate, never a floor one."""
    found: dict[tuple, Candidate] = {}
    skipped: list[str] = []
    for shape in shapes:
        if not shape.get("advisable", True):
            skipped.append(shape.get("why_not") or "not advisable")
            continue
        if any(aggregator_sql(a) is None for a in shape["aggregators"]):
            bad = [a.get("type") for a in shape["aggregators"] if aggregator_sql(a) is None]
            skipped.append(f"aggregators the advisor cannot write in SQL: {', '.join(map(str, bad))}")
            continue
        columns = tuple(sorted((set(shape["grouping"]) | set(shape["filter_columns"])) - {TIME_COLUMN}))
        key = (shape["datasource"], columns, time_need(shape, segments))
        cand = found.setdefault(key, Candidate(shape["datasource"], columns, key[2]))
        for agg in shape["aggregators"]:
            cand.aggregators.setdefault(aggregator_key(agg), agg)
    return list(found.values()), skipped


def serves(cand: Candidate, shape: dict, segments: list[SegmentFacts] = ()) -> bool:
    if not shape.get("advisable", True) or shape["datasource"] != cand.datasource:
        return False
    if not (set(shape["grouping"]) | set(shape["filter_columns"])) - {TIME_COLUMN} <= set(cand.columns):
        return False
    if not covers(time_need(shape, segments), cand.granularity):
        return False
    return all(aggregator_key(a) in cand.aggregators for a in shape["aggregators"])


def buckets(start: int, end: int, granularity: str) -> int:
    """Time buckets of ``granularity`` a segment spanning [start, end) holds at most."""
    g = canonical_period(granularity)
    if g == "all":
        return 1
    if g == "none":
        return max(1, end - start)
    period = _PERIOD_MS.get(g)
    return max(1, math.ceil((end - start) / period)) if period else max(1, end - start)


def segment_rows_cap(seg: SegmentFacts, columns: tuple[str, ...], granularity: str) -> int:
    product = buckets(seg.start, seg.end, granularity)
    for col in columns:
        product *= max(1, seg.cardinality.get(col, seg.rows))
        if product >= seg.rows:
            return seg.rows
    return min(seg.rows, product)


def bytes_per_row(cand: Candidate, segments: list[SegmentFacts], rows: int) -> float:
    size = 0.0 if cand.granularity == "all" else 8.0
    base = sum(s.rows for s in segments) or 1
    for col in cand.columns:
        card = max((s.cardinality.get(col, 1) for s in segments), default=1)
        kind = next((s.types.get(col) for s in segments if col in s.types), "STRING")
        if kind == "STRING":
            size += (1 if card < 128 else 2 if card < 32768 else 4) + 2.0  # codes, and bitmaps
        else:
            size += 8.0
    for agg in cand.aggregators.values():
        if agg.get("type") == "HLLSketchBuild":
            lg_k = int(agg.get("lgK", 12))
            col = agg.get("fieldName")
            card = max((s.cardinality.get(col, 1) for s in segments), default=1)
            per_group = min(card, max(1.0, base / max(rows, 1)))
            size += min((1 << lg_k) / 2 + 40, 8 + 4 * per_group)
        else:
            size += 8.0
    return size


def evaluate(cand: Candidate, shapes: list[dict], segments: list[SegmentFacts],
             combos: Callable[[tuple[str, ...], str], dict[int, int] | None] | None = None) -> Candidate:
    """Fill in the candidate's estimates. ``combos(columns, granularity)``: chunk start -> distinct
    (time bucket, columns) combinations in that time chunk, from an HLL sketch; None if unknown."""
    sketch = combos(cand.columns, cand.granularity) if combos is not None else None
    total = 0
    for seg in segments:
        rows = segment_rows_cap(seg, cand.columns, cand.granularity)
        if sketch is not None and seg.start in sketch:
            rows = min(rows, max(1, int(round(sketch[seg.start]))))
        total += rows
    cand.method = "hll" if sketch is not None else "cardinalities"
    cand.estimated_rows = total
    cand.base_rows = sum(s.rows for s in segments)
    ratio = total / max(cand.base_rows, 1)
    cand.queries, cand.rows_without, cand.rows_with = 0, 0, 0.0
    for shape in shapes:
        if not serves(cand, shape, segments):
            continue
        scanned = int(shape.get("rows_scanned", 0))
        segs = max(int(shape.get("segments", 0)), 1)
        on_base = min(int(shape.get("base_segments", segs)), segs) / segs
        cand.queries += 1
        cand.rows_without += scanned
        cand.rows_with += scanned * (1 - on_base) + scanned * on_base * ratio
    cand.storage_bytes = int(total * bytes_per_row(cand, segments, total))
    return cand


def projection_name(cand: Candidate, taken: set[str]) -> str:
    parts = [re.sub(r"[^A-Za-z0-9]+", "_", c).strip("_").lower() or "col" for c in cand.columns]
    base = "by_" + "_".join(parts) if parts else "totals"
    if cand.granularity != "all":
        base += "_" + cand.granularity.lower()
    base = base[:60]
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def statement(cand: Candidate, name: str) -> str:
    items, group = [], []
    if cand.granularity not in ("all", "none"):
        items.append(f"TIME_FLOOR(__time, '{cand.granularity}') AS \"time_bucket\"")
    elif cand.granularity == "none":
        items.append("__time")
    for col in cand.columns:
        items.append(_quote(col))
    group = [str(i + 1) for i in range(len(items))]
    used: set[str] = set()
    for agg in cand.aggregators.values():
        expr, alias = aggregator_sql(agg)
        alias = re.sub(r"[^A-Za-z0-9_]+", "_", alias)
        while alias in used or alias in cand.columns:
            alias += "_"
        used.add(alias)
        items.append(f"{expr} AS {_quote(alias)}")
    sql = f"ALTER TABLE {_quote(cand.datasource)} ADD PROJECTION {_quote(name)} AS SELECT {', '.join(items)} " \
          f"FROM {_quote(cand.datasource)}"
    return sql + (f" GROUP BY {', '.join(group)}" if group else "")


ADVICE_SCHEMA = pa.schema([
    ("datasource", pa.string()), ("rank", pa.int64()), ("projection", pa.string()), ("grouping_columns", pa.string()),
    ("granularity", pa.string()), ("aggregators", pa.string()), ("queries", pa.int64()),
    ("estimated_rows", pa.int64()), ("base_rows", pa.int64()), ("rows_scanned_without", pa.int64()),
    ("rows_scanned_with", pa.int64()), ("factor", pa.float64()), ("storage_bytes", pa.int64()),
    ("rows_saved_per_byte", pa.float64()), ("estimate", pa.string()), ("statement", pa.string())])


@dataclass(frozen=True)
class Existing:
    """A projection the catalog defines or a segment holds (it may not be compacted in yet)."""

    name: str
    columns: tuple[str, ...]
    granularity: str
    aggregator_keys: frozenset[str]

    def covers(self, cand: Candidate) -> bool:
        return (self.columns, self.granularity) == (cand.columns, cand.granularity) \
            and set(cand.aggregators) <= self.aggregator_keys


def advise(datasource: str, shapes: list[dict], segments: list[SegmentFacts], combos=None, top: int = 5,
           existing: list[Existing] = ()) -> list[dict]:
    """The best ``top`` candidates for ``datasource`` as sys.projection_advice rows, best first. A
    candidate an ``existing`` projection already stores is not proposed again (compacting is the
    remedy there), and proposals never take an existing projection's name."""
    shapes = [s for s in shapes if s.get("datasource") == datasource]
    found, _ = candidates(shapes, segments)
    scored = []
    for cand in found:
        if any(e.covers(cand) for e in existing):
            continue
        evaluate(cand, shapes, segments, combos)
        if cand.rows_saved <= 0 or cand.factor < MIN_FACTOR or cand.storage_bytes <= 0:
            continue
        scored.append(cand)
    scored.sort(key=lambda c: (-c.rows_saved / c.storage_bytes, c.columns))
    rows, taken = [], {e.name for e in existing}
    for rank, cand in enumerate(scored[:top], 1):
        name = projection_name(cand, taken)
        rows.append({
            "datasource": datasource, "rank": rank, "projection": name, "grouping_columns": ",".join(cand.columns),
            "granularity": cand.granularity,
            "aggregators": json.dumps(list(cand.aggregators.values()), sort_keys=True),
            "queries": cand.queries, "estimated_rows": cand.estimated_rows, "base_rows": cand.base_rows,
            "rows_scanned_without": cand.rows_without, "rows_scanned_with": int(round(cand.rows_with)),
            "factor": round(cand.factor, 3), "storage_bytes": cand.storage_bytes,
            "rows_saved_per_byte": cand.rows_saved / cand.storage_bytes, "estimate": cand.method,
            "statement": statement(cand, name)})
    return rows


__all__ = ["ADVICE_SCHEMA", "Candidate", "Existing", "SegmentFacts", "advise", "aggregator_key", "aggregator_sql", "candidates",
           "covers", "evaluate", "serves", "statement", "time_need"]
