"""Query intervals from WHERE conditions on ``__time``.

Top-level conjuncts that only compare ``__time`` with constant TIMESTAMPs (alone, or combined with
AND/OR/IN) become interval sets that are intersected; everything else stays in the filter. The
intervals are what lets historicals skip whole segments, so this runs before the filter is
translated. Comparisons are exact to the millisecond: ``__time > t`` starts at ``t + 1``.
"""

from __future__ import annotations

from common.sql.scalar import Call, Literal, Ref, Scalar, and_all, conjuncts
from common.sql.sql_types import TIMESTAMP
from common.types.interval import ETERNITY, MAX_MS, MIN_MS, Interval, condense

Spans = list[tuple[int, int]]  # half-open [start, end), sorted and disjoint
_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _normalize(spans: Spans) -> Spans:
    return [(iv.start, iv.end) for iv in condense([Interval(a, b) for a, b in spans if a < b])]


def _intersect(a: Spans, b: Spans) -> Spans:
    out = []
    for s1, e1 in a:
        for s2, e2 in b:
            lo, hi = max(s1, s2), min(e1, e2)
            if lo < hi:
                out.append((lo, hi))
    return _normalize(out)


def _comparison(op: str, t: int) -> Spans:
    t = max(MIN_MS, min(MAX_MS, t))
    if op == ">=":
        return [(t, MAX_MS)]
    if op == ">":
        return [(t + 1, MAX_MS)]
    if op == "<":
        return [(MIN_MS, t)]
    if op == "<=":
        return [(MIN_MS, t + 1)]
    if op == "=":
        return [(t, t + 1)]
    return _normalize([(MIN_MS, t), (t + 1, MAX_MS)])  # <>


def _time_literal(e: Scalar) -> int | None:
    if isinstance(e, Literal) and e.type == TIMESTAMP and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _spans(e: Scalar, time_index: int) -> Spans | None:
    """The spans ``e`` selects, or None when ``e`` is not purely a condition on the time column."""
    if not isinstance(e, Call):
        return None
    if e.op in _FLIP:
        a, b = e.args
        if isinstance(a, Ref) and a.index == time_index and _time_literal(b) is not None:
            return _comparison(e.op, _time_literal(b))
        if isinstance(b, Ref) and b.index == time_index and _time_literal(a) is not None:
            return _comparison(_FLIP[e.op], _time_literal(a))
        return None
    if e.op == "IN" and isinstance(e.args[0], Ref) and e.args[0].index == time_index:
        points = [_time_literal(v) for v in e.args[1:]]
        if any(p is None for p in points):
            return None
        return _normalize([(p, p + 1) for p in points])
    if e.op in ("AND", "OR"):
        parts = [_spans(a, time_index) for a in e.args]
        if any(p is None for p in parts):
            return None
        out = parts[0]
        for p in parts[1:]:
            out = _intersect(out, p) if e.op == "AND" else _normalize(out + p)
        return out
    return None


def split_time_condition(condition: Scalar | None, time_index: int | None) -> tuple[list[Interval], Scalar | None]:
    """(intervals, the rest of the condition). Intervals are [ETERNITY] when nothing restricts
    time, and empty when the conditions on time cannot all hold."""
    if condition is None or time_index is None:
        return [ETERNITY], condition
    spans: Spans = [(MIN_MS, MAX_MS)]
    rest = []
    for c in conjuncts(condition):
        s = _spans(c, time_index)
        if s is None:
            rest.append(c)
        else:
            spans = _intersect(spans, s)
    intervals = [Interval(a, b) for a, b in spans]
    if len(intervals) == 1 and intervals[0].start <= MIN_MS and intervals[0].end >= MAX_MS:
        intervals = [ETERNITY]
    return intervals, and_all(rest)
