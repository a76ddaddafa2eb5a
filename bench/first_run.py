"""First-run timing: each run of a query with a query text not seen before, doing the same work.

Timing one query text again and again flatters strata: it keeps per query text what a run worked
out (the parsed query, each segment's projection choice, row selections, batch plans) and the
next run of that exact text reuses it, while DuckDB and ClickHouse plan and compute again. A
dashboard that moves its time range, or a user who changes a literal, pays the first-run cost.
So the benchmarks print both: "repeated" (one text, timed after a warm-up run) and "first run"
(every run, the warm-up included, gets a fresh variant of the text), for strata and the peers.

The variants change the text, not the work:

- a native query's output names get a per-run suffix (the JSON text strata keys on changes, the
  rows read and the aggregation do not); a scan, which names no outputs, gets its interval's start
  moved some hours earlier, before the data's first day (no segment lies there);
- a SQL query gets a lower time bound on a whole hour some hours before the data's first day
  (strata's planner turns it into the query's interval, so the native query the historicals see
  changes too; every segment stays whole inside it, and an hour-aligned bound keeps an hourly
  projection eligible). ClickHouse gets the bound on ``toStartOfHour(__time)``, which its
  projection can answer (a bound on raw ``__time`` would turn its projection off).

Each variant uses a new number from one counter per process, so no two runs share a text.
What a new text still reuses is keyed by the stored data, not the query (the decoded-part cache,
a projection's HLL sketch column decoded, with its whole-column union, kept with its segment's file by
``hll_union``): the warm-up run fills those for both timings.
"""

from __future__ import annotations

import copy
import itertools
import re
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

# Every time bound lies before this instant (the demo data starts on 2015-09-12).
_BEFORE_DATA = datetime(2015, 9, 11, 23, 0, tzinfo=timezone.utc)
_counter = itertools.count(1)


def fresh() -> int:
    """A number no earlier variant in this process used."""
    return next(_counter)


def native(query: dict, k: int) -> dict:
    """``query`` with every aggregator and post-aggregator output renamed ``<name>_r<k>`` (and the
    topN metric or post-aggregator references that name them); a query with no such outputs (a
    scan) with its first interval starting ``k`` hours before the data's first day."""
    out = copy.deepcopy(query)
    names = {a["name"]: f"{a['name']}_r{k}" for a in out.get("aggregations", []) + out.get("postAggregations", [])}
    for agg in out.get("aggregations", []) + out.get("postAggregations", []):
        agg["name"] = names[agg["name"]]
        for field in agg.get("fields", []):
            if field.get("fieldName") in names:
                field["fieldName"] = names[field["fieldName"]]
    if not names:
        start, end = out["intervals"][0].split("/")
        first = datetime.fromisoformat(start.replace("Z", "+00:00"))
        if first.tzinfo is None:
            first = first.replace(tzinfo=timezone.utc)
        if first > _BEFORE_DATA + timedelta(hours=1):
            raise ValueError(f"interval {out['intervals'][0]} starts after the data's first day: "
                             "moving its start would add rows")
        moved = min(first, _BEFORE_DATA) - timedelta(hours=k)
        out["intervals"] = [f"{moved.strftime('%Y-%m-%dT%H:%M:%SZ')}/{end}"] + out["intervals"][1:]
        return out
    metric = out.get("metric")
    if isinstance(metric, str) and metric in names:
        out["metric"] = names[metric]
    elif isinstance(metric, dict) and metric.get("metric") in names:
        out["metric"] = {**metric, "metric": names[metric["metric"]]}
    return out


def bound(k: int) -> str:
    """'YYYY-MM-DD HH:00:00', ``k`` hours before the data's first day."""
    return (_BEFORE_DATA - timedelta(hours=k)).strftime("%Y-%m-%d %H:%M:%S")


def _add_condition(sql: str, condition: str) -> str:
    where = re.search(r"\bWHERE\b", sql, re.IGNORECASE)
    if where:
        return f"{sql[:where.end()]} {condition} AND{sql[where.end():]}"
    tail = re.search(r"\b(GROUP BY|ORDER BY|LIMIT|QUALIFY)\b", sql, re.IGNORECASE)
    at = tail.start() if tail else len(sql)
    return f"{sql[:at].rstrip()} WHERE {condition} {sql[at:]}".rstrip()


def sql(text: str, k: int) -> str:
    """``text`` with ``__time >= TIMESTAMP '<bound(k)>'`` added to its WHERE (strata, DuckDB)."""
    return _add_condition(text, f"__time >= TIMESTAMP '{bound(k)}'")


def clickhouse_sql(text: str, k: int) -> str:
    """``text`` with the bound on ``toStartOfHour(__time)``, which a ClickHouse projection grouped
    by the hour can answer."""
    return _add_condition(text, f"toStartOfHour(__time) >= toDateTime64('{bound(k)}', 3, 'UTC')")


def timed_first_runs(make: Callable[[int], Callable[[], object]], runs: int,
                     best: bool = False) -> tuple[float, object]:
    """Milliseconds of ``make(k)()`` with a fresh ``k`` for every run, after one warm-up run (also on
    a fresh text: it warms the pages and columns the repeated timing's warm-up warms, not the
    query's kept state): the median, or with ``best`` the fastest."""
    make(fresh())()
    samples, out = [], None
    for _ in range(runs):
        fn = make(fresh())
        start = time.perf_counter()
        out = fn()
        samples.append((time.perf_counter() - start) * 1000)
    return (min(samples) if best else statistics.median(samples)), out


def repeated_and_first(fn: Callable[[object], object], variant: Callable[[int], object], runs: int,
                       best: bool = False) -> tuple[float, float, object]:
    """(repeated ms, first-run ms, the repeated runs' result) of ``fn(variant(k))``: repeated runs
    ``variant(0)`` (the benchmark's own text) after a warm-up run of it; first run takes a fresh
    ``k`` on every run."""
    text = variant(0)
    fn(text)
    samples, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn(text)
        samples.append((time.perf_counter() - start) * 1000)
    first_ms, _ = timed_first_runs(lambda k: (lambda t=variant(k): fn(t)), runs, best)
    return (min(samples) if best else statistics.median(samples)), first_ms, out


def native_variant(query: dict) -> Callable[[int], dict]:
    return lambda k: query if k == 0 else native(query, k)


def sql_variant(text: str) -> Callable[[int], str]:
    return lambda k: text if k == 0 else sql(text, k)


def clickhouse_variant(text: str) -> Callable[[int], str]:
    return lambda k: text if k == 0 else clickhouse_sql(text, k)


def one_minute(text: str, k: int) -> str:
    """``text``, a query over the minute ending at 00:01:00 (``< TIMESTAMP '... 00:01:00'``), with
    that upper bound moved ``k`` milliseconds (and whole seconds past 1,000) earlier: a lower
    bound before the data would not change the interval such a query plans to."""
    if "00:01:00'" not in text:
        raise ValueError("one_minute varies a query whose upper time bound is 00:01:00")
    return text.replace("00:01:00'", f"00:00:{59 - k // 1000 % 50:02d}.{999 - k % 1000:03d}'")
