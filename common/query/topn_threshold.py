"""Exact topN with little data from each historical: the three-phase uniform threshold (TPUT,
Cao and Wang 2004) over per-historical partials.

Shipping every group of a high-cardinality dimension from every historical is what makes an
exact topN expensive. TPUT asks each of the m historicals for far less, in three rounds:

1. each sends its local top k (plus its lowest and any NaN row, so the broker can tell whether
   the bounds below hold). The k-th highest of the partial sums seen is tau1, a lower bound of
   the true k-th total;
2. each sends every group whose local value is >= T = tau1 / m. A group of the true top k has a
   total >= tau1, so on some historical its value is >= T: every top-k group is seen now. A
   group's total is at least the sum of the values seen (lower bound) and at most that plus T
   for each historical that did not send it (upper bound). tau2 is the k-th highest lower bound;
3. only groups whose upper bound reaches tau2 can be in the top k; each historical sends its
   values of those it has not sent yet. Their totals are then exact, and the topN of those
   candidates is the topN of all groups (ties included: a tied group's upper bound reaches tau2).

The bounds need each historical's per-group value to be >= 0, which holds for counts and for
sums of non-negative values. The broker checks what round 1 shows (every historical's lowest
value) and falls back to shipping every group when a value is negative or NaN, when fewer than
k groups have a positive value, or when the query is not a topN by a descending sum or count
over all time (``eligible``).

Rounds only pay when a historical holds many groups. With a few dozen (a dimension like a
channel, or a projection's pre-aggregated rows) three round trips cost far more than shipping
every group, so round 1's directive carries ``whole``: a historical whose merged partial has at
most that many groups sends all of them, marked as whole (``is_whole``). When every historical
sent everything the broker merges round 1 and is done; a historical that sent everything is not
asked again, its rounds 2 and 3 are answered on the broker from what it sent. The result is the
same either way: the rounds only choose which rows travel.

``prune`` is the historical's side (what each round returns); the rest is the broker's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.query.aggregators import Count, Sum
from common.query.model import TopNQuery
from common.query.partial import Partial, decode_dictionaries

# The query context key that carries the round to a historical. The broker sets it on its own
# calls only (and drops it from queries it receives); ``topNThreshold: false`` turns TPUT off.
PHASE_KEY = "strataTopNPhase"
SWITCH_KEY = "topNThreshold"
# Round 1 sends every group of a historical with at most this many: below it a round trip costs
# more than the rows (a few dozen bytes each).
ONE_ROUND_GROUPS = 1024
# Schema metadata of a round-1 answer that holds every group of its historical.
_WHOLE = b"strataTopNWhole"
# Doubles summed in another order may differ in the last bits: bounds are widened by this much.
_SLACK = 1e-9


def eligible(query) -> bool:
    """A topN over all time ordered by a sum or count, descending: TPUT may serve it."""
    if not isinstance(query, TopNQuery) or not isinstance(query.datasource, str):
        return False
    if not query.granularity.is_all or query.threshold <= 0:
        return False
    if query.context.get(SWITCH_KEY, True) in (False, "false", "False", 0):
        return False
    metric = query.metric
    if metric is None or metric.metric is None or not metric.descending:
        return False
    agg = next((a for a in query.aggregations if a.name == metric.metric), None)
    return isinstance(agg, (Sum, Count))


def _values(query: TopNQuery, table: pa.Table) -> np.ndarray:
    """The metric of each row as float64, nulls as 0 (a null adds nothing when partials merge)."""
    column = table.column(query.metric.metric)
    return np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False), dtype=np.float64)


def _keys(query: TopNQuery, table: pa.Table) -> list:
    return table.column(query.dimension.output_name).to_pylist()


def _scalar_keys(query: TopNQuery, tables: list[pa.Table]) -> bool:
    """Whether the dimension's values can be matched and sent back as JSON (strings, numbers,
    booleans); ARRAY or timestamp dimensions are served by shipping everything."""
    for table in tables:
        if table.num_columns == 0:
            continue
        kind = table.schema.field(query.dimension.output_name).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)
                or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
            return False
    return True


# ---- the historical's side ---------------------------------------------------------------------

def prune(query: TopNQuery, partial: Partial, directive: dict) -> Partial:
    """The rows of this historical's merged partial that round ``directive["phase"]`` asks for."""
    phase = directive.get("phase")
    if phase == 1 and partial.table.num_rows <= int(directive.get("whole", 0)):
        return Partial(_mark_whole(decode_dictionaries(partial.table)), partial.stats, partial.coverage)
    table = decode_dictionaries(partial.table)
    if table.num_rows == 0 or table.num_columns == 0:
        return partial
    values = _values(query, table)
    if phase == 1:
        k = int(directive["k"])
        order = np.argpartition(-values, k - 1)[:k] if k < len(values) else np.arange(len(values))
        # The lowest row and any NaN row tell the broker whether the bounds hold here.
        extra = [int(np.argmin(np.nan_to_num(values, nan=np.inf)))]
        nan = np.flatnonzero(np.isnan(values))
        if len(nan):
            extra.append(int(nan[0]))
        rows = np.unique(np.concatenate([order, np.array(extra, dtype=np.int64)]))
        return Partial(table.take(pa.array(rows)), partial.stats, partial.coverage)
    if phase == 2:
        keep = values >= float(directive["threshold"])
        return Partial(table.filter(pa.array(keep)), partial.stats, partial.coverage)
    if phase == 3:
        column = table.column(query.dimension.output_name)
        wanted = pa.array(directive["keys"]).cast(column.type)
        mask = pc.is_in(column, value_set=wanted, skip_nulls=False)
        return Partial(table.filter(mask), partial.stats, partial.coverage)
    raise ValueError(f"unknown topN threshold phase {phase!r}")


def _mark_whole(table: pa.Table) -> pa.Table:
    return table.replace_schema_metadata({**(table.schema.metadata or {}), _WHOLE: b"1"})


def is_whole(table: pa.Table) -> bool:
    """Whether a round-1 answer holds every group of its historical (no later rounds needed)."""
    metadata = table.schema.metadata
    return bool(metadata) and metadata.get(_WHOLE) == b"1"


def unmarked(table: pa.Table) -> pa.Table:
    """``table`` without the whole mark, so it merges with tables that never had one."""
    metadata = table.schema.metadata
    if not metadata or _WHOLE not in metadata:
        return table
    rest = {k: v for k, v in metadata.items() if k != _WHOLE}
    return table.replace_schema_metadata(rest or None)


def without_directive(query):
    """``query`` as the user sent it to the broker: no round directive in its context."""
    if PHASE_KEY not in query.context:
        return query
    import dataclasses

    return dataclasses.replace(query, context={k: v for k, v in query.context.items() if k != PHASE_KEY})


def with_directive(query_json: dict, directive: dict) -> str:
    out = dict(query_json)
    out["context"] = {**(query_json.get("context") or {}), PHASE_KEY: directive}
    return json.dumps(out)


# ---- the broker's side -------------------------------------------------------------------------

@dataclass
class Round2:
    threshold: float  # T: round 2 asks each historical for groups with a value >= T


def first_threshold(query: TopNQuery, tables: list[pa.Table]) -> Round2 | None:
    """From round 1's tables (one per historical), round 2's threshold; None: fall back to
    shipping everything (the bounds do not hold, too few positive groups to bound, or keys
    that cannot be matched)."""
    if not _scalar_keys(query, tables):
        return None
    sums: dict = {}
    for table in tables:
        if table.num_rows == 0 or table.num_columns == 0:
            continue
        values = _values(query, table)
        if np.isnan(values).any() or (values < 0).any():
            return None
        for key, value in zip(_keys(query, table), values.tolist()):
            sums[key] = sums.get(key, 0.0) + value
    k = query.threshold
    if len(sums) < k:
        return None
    tau1 = sorted(sums.values(), reverse=True)[k - 1]
    if not tau1 > 0:
        return None
    return Round2(tau1 / len(tables) * (1 - _SLACK))


def candidates(query: TopNQuery, tables: list[pa.Table], threshold: float) -> tuple[set, list[list]] | None:
    """From round 2's tables: the candidate keys, and per historical those it has not sent yet
    (round 3's question to it); None when a value breaks the bounds (fall back)."""
    m = len(tables)
    seen: dict = {}  # key -> [lower bound, how many historicals sent it]
    sent: list[set] = []
    for table in tables:
        keys = _keys(query, table) if table.num_rows and table.num_columns else []
        values = _values(query, table).tolist() if keys else []
        if any(math.isnan(v) or v < 0 for v in values):
            return None
        for key, value in zip(keys, values):
            entry = seen.setdefault(key, [0.0, 0])
            entry[0] += value
            entry[1] += 1
        sent.append(set(keys))
    k = query.threshold
    if len(seen) < k:
        return None
    tau2 = sorted((e[0] for e in seen.values()), reverse=True)[k - 1]
    floor = tau2 * (1 - _SLACK)
    wanted = [key for key, (low, count) in seen.items() if low + threshold * (m - count) >= floor]
    return set(wanted), [[key for key in wanted if key not in mine] for mine in sent]


def keep_candidates(query: TopNQuery, table: pa.Table, keys: set) -> pa.Table:
    """Round 2's rows of one historical that are candidates (the rest cannot be in the top k)."""
    if table.num_rows == 0 or table.num_columns == 0:
        return table
    mask = [key in keys for key in _keys(query, table)]
    return table.filter(pa.array(mask, pa.bool_()))


def exact_parts(query: TopNQuery, firsts: list[pa.Table], ask) -> list[pa.Table] | None:
    """Rounds 2 and 3 after round 1's answers ``firsts`` (one per historical, as received):
    per historical, its rows of the groups that can be in the top k, with every value of those
    groups (their merge is the exact topN); None: fall back to shipping everything. ``ask``
    takes [(historical's index, directive)] and returns their answers in order (one network
    round); a historical whose round-1 answer is whole is never asked."""
    whole = [is_whole(t) for t in firsts]
    firsts = [unmarked(t) for t in firsts]
    if all(whole):  # every group of every historical is here: no bounds needed
        return [t for t in firsts if t.num_columns]
    first = first_threshold(query, firsts)
    if first is None:
        return None
    directive = {"phase": 2, "threshold": first.threshold}
    asked = iter(ask([(i, directive) for i, done in enumerate(whole) if not done]))
    second = [prune(query, Partial(t), directive).table if done else next(asked) for t, done in zip(firsts, whole)]
    found = candidates(query, second, first.threshold)
    if found is None:
        return None
    wanted, missing = found
    third = iter(ask([(i, {"phase": 3, "keys": keys}) for i, (keys, done) in enumerate(zip(missing, whole))
                      if keys and not done]))
    out = []
    for table, keys, done, full in zip(second, missing, whole, firsts):
        if done:  # every row it has: its values of the candidates are all here
            parts = [keep_candidates(query, full, wanted)]
        else:
            parts = [keep_candidates(query, table, wanted)]
            if keys:
                parts.append(next(third))
        parts = [t for t in parts if t.num_columns]
        if parts:
            out.append(pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0])
    return out


__all__ = ["ONE_ROUND_GROUPS", "PHASE_KEY", "SWITCH_KEY", "Round2", "candidates", "eligible", "exact_parts", "first_threshold",
           "is_whole", "keep_candidates", "prune", "unmarked", "with_directive", "without_directive"]
