"""Projections never change an answer that reads ``__time`` (issue 23).

A projection whose time column is ``timestamp_floor(__time, G)`` keeps only G buckets of time. It
serves ``__time`` only as a floor G maps onto or as bounds on G's edges; anything else that reads
``__time`` (expressions of it, bounds inside a bucket, under OR or NOT too, grouping on it) is
answered by a projection grouped on ``__time`` itself or by base rows. Each SQL case runs with
projections, with ``noProjections`` and in DuckDB over the same rows: all three agree, and the
table that served it is the expected one.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import source_for, union_schema
from common.query.model import query_from_json
from common.query.projection import ProjectionSpec, projection_rows
from common.query.projection_match import RefusalReason, maps_onto, match_projection
from common.segment.builder import build_segment
from common.segment.manifest import ProjectionManifest
from common.segment.scan_spec import ScanSpec
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql, plan_sql
from common.types.granularity import Granularity
from common.types.interval import Interval, parse_instant
from tests.conftest import day_interval, duck_connect, make_events_table
from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows
from tests.unit.sql.fake_catalog import FakeCatalog

HOURLY = {
    "type": "aggregate", "name": "hourly",
    "virtualColumns": [{"type": "expression", "name": "h", "expression": "timestamp_floor(__time, 'PT1H')"}],
    "groupingColumns": [{"name": "h"}, {"name": "channel"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
}
# Grouped on raw __time: it may serve anything that reads __time (and is larger than the base rows
# here, so it is tried only after the hourly one refuses).
RAW = {
    "type": "aggregate", "name": "raw_time",
    "groupingColumns": [{"name": "__time"}, {"name": "channel"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
}
DAILY = {
    "type": "aggregate", "name": "daily",
    "virtualColumns": [{"type": "expression", "name": "d", "expression": "timestamp_floor(__time, 'P1D')"}],
    "groupingColumns": [{"name": "d"}, {"name": "channel"}],
    "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
}
HALF_DAY = 43_200_000


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("time-rule"))
    table = make_events_table(rows_per_day=700, days=3, seed=23)
    times = table.column("__time").cast(pa.int64()).to_numpy()
    segments = []
    pieces = [(day_interval(0), (HOURLY, RAW)), (day_interval(1), (HOURLY, RAW))]
    # Day 2 in two half-day segments with a daily projection: its buckets start before the second
    # segment does, so a bound on that segment's start cuts them.
    d2 = day_interval(2)
    pieces += [(Interval(d2.start, d2.start + HALF_DAY), (DAILY,)), (Interval(d2.start + HALF_DAY, d2.end), (DAILY,))]
    for i, (iv, specs) in enumerate(pieces):
        part = table.filter(pa.array((times >= iv.start) & (times < iv.end)))
        path = os.path.join(directory, f"s{i}.sseg")
        build_segment(part, path, SegmentId("events", iv, "v1", 0),
                      projections=[projection_rows(ProjectionSpec.from_json(s), part) for s in specs])
        segments.append(Segment.open(path, verify=True))
    catalog = FakeCatalog({"events": union_schema(segments)})
    duck = duck_connect()
    duck.register("events_arrow", table)
    duck.execute("CREATE TABLE events AS SELECT * FROM events_arrow")
    duck.unregister("events_arrow")
    yield segments, catalog, duck
    duck.close()
    for s in segments:
        s.close()


def _sql(env, sql: str, **context) -> pa.Table:
    segments, catalog, _ = env
    return execute_sql(sql, catalog, lambda q: execute(q, segments).table, (), context)


def _served(env, sql: str, segment: int) -> set[str]:
    """The tables (projection names, or 'base') that serve the query on one segment."""
    segments, catalog, _ = env
    return {source_for(query_from_json(native), segments[segment]).projection or "base"
            for native in plan_sql(sql, catalog, (), {}).native_queries()}


T0 = "2020-01-01"
CASES = [
    # (strata SQL, DuckDB SQL or None when the same, the table that serves it on the first segment
    # (on the last, for the cases about it), or the tables that may)
    ("SELECT COUNT(*) FROM events WHERE TIME_EXTRACT(__time, 'MINUTE') < 30",
     "SELECT COUNT(*) FROM events WHERE minute(__time) < 30", {"raw_time", "base"}),
    ("SELECT COUNT(*) FROM events WHERE TIMESTAMP_TO_MILLIS(__time) >= 1577838600000",
     "SELECT COUNT(*) FROM events WHERE epoch_ms(__time) >= 1577838600000", {"raw_time", "base"}),
    ("SELECT COUNT(*) FROM events WHERE CAST(__time AS BIGINT) >= 1577838600000",
     "SELECT COUNT(*) FROM events WHERE epoch_ms(__time) >= 1577838600000", {"raw_time", "base"}),
    (f"SELECT COUNT(*) FROM events WHERE __time NOT BETWEEN TIMESTAMP '{T0} 00:30:00' AND TIMESTAMP '{T0} 05:30:00'",
     None, {"raw_time", "base"}),
    (f"SELECT COUNT(*) FROM events WHERE NOT (__time >= TIMESTAMP '{T0} 00:30:00')", None, {"raw_time", "base"}),
    (f"SELECT COUNT(*) FROM events WHERE __time >= TIMESTAMP '{T0} 00:30:00' OR channel = '#en.wikipedia'",
     None, {"raw_time", "base"}),
    (f"SELECT SUM(added) FROM events WHERE NOT (__time < TIMESTAMP '{T0} 07:00:00.001' AND channel = '#fr.wikipedia')",
     None, {"raw_time", "base"}),
    ("SELECT __time, channel, COUNT(*) AS n FROM events GROUP BY 1, 2", None, {"raw_time", "base"}),
    ("SELECT __time, CONCAT(channel, 'x') AS c FROM events GROUP BY 1, 2",
     "SELECT __time, channel || 'x' AS c FROM events GROUP BY 1, 2", {"raw_time"}),
    # Bounds on the projection's bucket edges, anywhere in the filter: the hourly projection serves.
    (f"SELECT COUNT(*) FROM events WHERE __time >= TIMESTAMP '{T0} 01:00:00' OR channel = '#en.wikipedia'",
     None, {"hourly", "base"}),
    (f"SELECT COUNT(*), SUM(added) FROM events WHERE NOT (__time >= TIMESTAMP '{T0} 05:00:00' "
     f"AND __time < TIMESTAMP '2020-01-02 07:00:00')", None, {"hourly", "base"}),
    (f"SELECT COUNT(*) FROM events WHERE __time NOT BETWEEN TIMESTAMP '{T0} 03:00:00' "
     f"AND TIMESTAMP '{T0} 05:59:59.999'",
     None, {"hourly", "base"}),
    # Floors the projection's hours map onto, in UTC and in whole-hour-offset zones.
    ("SELECT TIME_FLOOR(__time, 'PT6H') AS t, COUNT(*) AS n FROM events GROUP BY 1",
     "SELECT time_bucket(INTERVAL 6 HOUR, __time) AS t, COUNT(*) FROM events GROUP BY 1", {"hourly", "daily", "base"}),
    ("SELECT TIME_FLOOR(__time, 'P1D', NULL, 'America/New_York') AS t, SUM(added) AS a FROM events GROUP BY 1",
     "SELECT timezone('America/New_York', date_trunc('day', timezone('America/New_York', __time))) AS t, "
     "SUM(added) FROM events GROUP BY 1", {"hourly", "base"}),
    # Asia/Kolkata (+05:30) days start at half past a UTC hour: base rows.
    ("SELECT TIME_FLOOR(__time, 'P1D', NULL, 'Asia/Kolkata') AS t, SUM(added) AS a FROM events GROUP BY 1",
     "SELECT timezone('Asia/Kolkata', date_trunc('day', timezone('Asia/Kolkata', __time))) AS t, "
     "SUM(added) FROM events GROUP BY 1", {"raw_time", "base"}),
    # A minute floor needs finer time than the hourly projection keeps.
    ("SELECT TIME_FLOOR(__time, 'PT30M') AS t, COUNT(*) AS n FROM events GROUP BY 1",
     "SELECT time_bucket(INTERVAL 30 MINUTE, __time) AS t, COUNT(*) FROM events GROUP BY 1", {"raw_time", "base"}),
    # A bound on the second half-day segment's start cuts the daily projection's bucket there.
    ("SELECT channel, COUNT(*) AS n FROM events WHERE __time >= TIMESTAMP '2020-01-03 12:00:00' GROUP BY 1",
     None, {"last": "base"}),
    ("SELECT channel, COUNT(*) AS n FROM events WHERE __time >= TIMESTAMP '2020-01-03 00:00:00' GROUP BY 1",
     None, {"last": "daily"}),
]


@pytest.mark.parametrize("sql, duck_sql, served", CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_projections_answer_what_base_rows_and_duckdb_answer(env, sql, duck_sql, served):
    got = engine_rows(_sql(env, sql))
    base = engine_rows(_sql(env, sql, noProjections=True))
    assert_rows_equal(got, base, ordered=False)
    assert_rows_equal(got, duck_rows(env[2], duck_sql or sql), ordered=False)
    if isinstance(served, dict):
        assert _served(env, sql, len(env[0]) - 1) == {served["last"]}, sql
    else:
        assert _served(env, sql, 0) <= served, sql


def test_the_issue_example_counts_half_the_rows(env):
    """With projections the hourly buckets all start at minute 0: the count must not be all rows."""
    total = _sql(env, "SELECT COUNT(*) AS n FROM events").column(0)[0].as_py()
    half = _sql(env, "SELECT COUNT(*) AS n FROM events WHERE TIME_EXTRACT(__time, 'MINUTE') < 30").column(0)[0].as_py()
    assert 0.4 * total < half < 0.6 * total


# ---- the rule, on manifests alone -----------------------------------------------------------------
def _manifest(spec: dict) -> ProjectionManifest:
    p = ProjectionSpec.from_json(spec)
    return ProjectionManifest(p.name, spec, (), (), 10, (), (), p.time_column, True)


SEG = day_interval(0)


@pytest.mark.parametrize("fine, coarse, start, ok", [
    ("hour", {"type": "period", "period": "P1D", "timeZone": "America/New_York"}, "2020-03-08", True),  # DST day
    ("hour", {"type": "period", "period": "P1D", "timeZone": "Asia/Kolkata"}, "2020-01-01", False),
    ("hour", {"type": "period", "period": "PT1H", "timeZone": "Asia/Tokyo"}, "2020-01-01", True),
    ("PT15M", {"type": "period", "period": "P1D", "timeZone": "Asia/Kolkata"}, "2020-01-01", True),
    ("PT30M", {"type": "period", "period": "P1D", "timeZone": "Asia/Kathmandu"}, "2020-01-01", False),  # +05:45
    # New York kept local mean time (-04:56:02) until 1883: its days did not start on UTC hours.
    ("hour", {"type": "period", "period": "P1D", "timeZone": "America/New_York"}, "1850-06-01", False),
    ({"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"}, "day", "2020-01-01", False),
    ("day", {"type": "period", "period": "P1D", "timeZone": "Europe/London"}, "2020-01-01", True),  # +00:00 in winter
    ("day", {"type": "period", "period": "P1D", "timeZone": "Europe/London"}, "2020-07-01", False),  # +01:00 in summer
])
def test_time_zones_map_onto_utc_buckets_only_where_their_edges_are_utc_edges(fine, coarse, start, ok):
    s = parse_instant(start)
    iv = Interval(s, s + 86_400_000)
    assert maps_onto(Granularity.parse(fine), Granularity.parse(coarse), iv) is ok


def _spec(granularity=None, grouping=(), filter_=None, intervals=None, vcs=()) -> ScanSpec:
    from common.query.filters import filter_from_json
    from common.query.virtual_column import VirtualColumn

    return ScanSpec(grouping_columns=tuple(grouping), granularity=Granularity.parse(granularity or "all"),
                    filter=filter_from_json(filter_), intervals=intervals,
                    virtual_columns=tuple(VirtualColumn.from_json(v) for v in vcs))


H = 3_600_000


@pytest.mark.parametrize("spec, reason", [
    (_spec(grouping=["__time"]), RefusalReason.RAW_TIME),
    (_spec(filter_={"type": "expression", "expression": "timestamp_extract(__time, 'MINUTE', 'UTC') < 30"}),
     RefusalReason.RAW_TIME),
    (_spec(filter_={"type": "range", "column": "__time", "matchValueType": "LONG", "lower": SEG.start + H // 2}),
     RefusalReason.RAW_TIME),
    (_spec(filter_={"type": "not", "field": {"type": "range", "column": "__time", "matchValueType": "LONG",
                                              "lower": SEG.start + H, "upper": SEG.start + 2 * H}}),
     RefusalReason.RAW_TIME),  # the closed upper bound admits the first millisecond of the third hour
    (_spec(filter_={"type": "equals", "column": "__time", "matchValue": SEG.start + H, "matchValueType": "LONG"}),
     RefusalReason.RAW_TIME),
    (_spec(grouping=["v0"], vcs=[{"type": "expression", "name": "v0",
                                  "expression": "timestamp_floor(__time, 'PT1M')"}]),
     RefusalReason.GRANULARITY),
    (_spec(grouping=["v0"], vcs=[{"type": "expression", "name": "v0",
                                  "expression": "timestamp_floor(__time, 'P1D', null, 'Asia/Kolkata')"}]),
     RefusalReason.TIME_FLOOR),
    (_spec(grouping=["v0"], vcs=[{"type": "expression", "name": "v0", "expression": "__time + 1"}]),
     RefusalReason.RAW_TIME),
    (_spec("PT1M"), RefusalReason.GRANULARITY),
    (_spec(grouping=["page"]), RefusalReason.MISSING_COLUMN),
])
def test_what_reads_raw_time_is_refused_with_a_typed_reason(spec, reason):
    got = match_projection(_manifest(HOURLY), spec, SEG)
    assert getattr(got, "reason", None) is reason, got
    # A projection grouped on __time itself serves all of them but the missing column.
    raw = match_projection(_manifest(RAW), spec, SEG)
    assert (getattr(raw, "reason", None) is RefusalReason.MISSING_COLUMN) is (reason is RefusalReason.MISSING_COLUMN)


@pytest.mark.parametrize("flt", [
    {"type": "range", "column": "__time", "matchValueType": "LONG", "lower": SEG.start + H},
    {"type": "range", "column": "__time", "matchValueType": "LONG", "lower": SEG.start + H - 1, "lowerOpen": True},
    {"type": "range", "column": "__time", "matchValueType": "LONG", "upper": SEG.start + 2 * H - 1},
    {"type": "range", "column": "__time", "matchValueType": "LONG", "upper": SEG.start + 2 * H, "upperOpen": True},
    {"type": "or", "fields": [{"type": "not", "field": {"type": "range", "column": "__time", "matchValueType": "LONG",
                                                        "lower": SEG.start + 5 * H}},
                              {"type": "equals", "column": "channel", "matchValue": "#en.wikipedia"}]},
    # Bounds outside the segment's buckets split nothing.
    {"type": "range", "column": "__time", "matchValueType": "LONG", "lower": SEG.start - 7, "upper": SEG.end + 3},
])
def test_bounds_on_bucket_edges_are_served_under_any_connective(flt):
    got = match_projection(_manifest(HOURLY), _spec(filter_=flt), SEG)
    assert not hasattr(got, "reason"), got


def test_manifest_names_the_time_column_and_old_manifests_still_read(env):
    segments = env[0]
    proj = segments[0].manifest.projection("hourly")
    assert proj.time_column == "h" and proj.time_column_known
    assert segments[0].manifest.projection("raw_time").time_column == "__time"
    obj = proj.to_json()
    assert obj["timeColumn"] == "h"
    del obj["timeColumn"]  # as written before the manifest named it
    old = ProjectionManifest.from_json(obj)
    assert not old.time_column_known
    spec = _spec(grouping=["__time"])
    assert match_projection(old, spec, segments[0].interval).reason is RefusalReason.RAW_TIME


# ---- generated: filters and buckets on and off the projection's edges ---------------------------
ZONES = [None, "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe", "Europe/London",
         "Pacific/Chatham"]


def _random_query(rng: np.random.Generator) -> dict:
    start = day_interval(0).start
    span = 3 * 86_400_000

    def instant() -> int:
        edge = start + int(rng.integers(-2, 75)) * 3_600_000
        return edge + int(rng.choice([0, 0, 0, -1, 1, 1_800_000, int(rng.integers(1, 3_600_000))]))

    def leaf() -> dict:
        kind = rng.integers(0, 5)
        if kind == 0:
            lo, hi = sorted((instant(), instant()))
            out = {"type": "range", "column": "__time", "matchValueType": "LONG"}
            if rng.random() < 0.8:
                out.update(lower=lo, lowerOpen=bool(rng.random() < 0.3))
            if rng.random() < 0.8:
                out.update(upper=hi, upperOpen=bool(rng.random() < 0.5))
            return out
        if kind == 1:
            return {"type": "equals", "column": "channel", "matchValue": str(rng.choice(["#en.wikipedia",
                                                                                       "#fr.wikipedia"]))}
        if kind == 2:
            return {"type": "expression", "expression": f"timestamp_extract(__time, 'MINUTE', 'UTC') < "
                                                        f"{int(rng.integers(1, 60))}"}
        if kind == 3:
            return {"type": "range", "column": "v_day", "matchValueType": "LONG", "lower": instant()}
        return {"type": "null", "column": "added"}

    def tree(depth: int) -> dict:
        if depth == 0 or rng.random() < 0.35:
            return leaf()
        kind = rng.integers(0, 3)
        if kind == 0:
            return {"type": "not", "field": tree(depth - 1)}
        children = [tree(depth - 1) for _ in range(int(rng.integers(2, 4)))]
        return {"type": "and" if kind == 1 else "or", "fields": children}

    zone = ZONES[int(rng.integers(0, len(ZONES)))]
    period = str(rng.choice(["PT1H", "PT6H", "P1D", "PT30M", "PT15M"]))
    gran = {"type": "period", "period": period, **({"timeZone": zone} if zone else {})}
    lo = start + int(rng.integers(-1, 50)) * 1_800_000
    hi = lo + int(rng.integers(1, 150)) * 1_800_000 + int(rng.choice([0, 0, 1, 600_000]))
    day_zone = ZONES[int(rng.integers(0, len(ZONES)))]
    day_expr = f"timestamp_floor(__time, 'P1D', null, '{day_zone}')" if day_zone else "timestamp_floor(__time, 'P1D')"
    q = {"dataSource": "events", "intervals": [f"{_iso(lo)}/{_iso(min(hi, start + span + 3_600_000))}"],
         "granularity": gran if rng.random() < 0.6 else "all",
         "virtualColumns": [{"type": "expression", "name": "v_day", "expression": day_expr, "outputType": "LONG"}],
         "aggregations": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "a", "fieldName": "added"},
                          {"type": "filtered", "name": "fa", "filter": tree(1),
                           "aggregator": {"type": "longSum", "name": "fa", "fieldName": "added"}}]}
    if rng.random() < 0.8:
        q["filter"] = tree(3)
    if rng.random() < 0.5:
        q.update(queryType="groupBy", dimensions=["channel"] if rng.random() < 0.5 else ["v_day"])
    else:
        q["queryType"] = "timeseries"
    return q


def _iso(ms: int) -> str:
    from common.types.interval import format_instant

    return format_instant(ms)


@pytest.mark.parametrize("seed", range(8))
def test_generated_queries_answer_the_same_with_projections(env, seed):
    segments = env[0]
    rng = np.random.default_rng(1000 + seed)
    tables = []
    for _ in range(20):
        q = _random_query(rng)
        got = execute(q, segments).table
        base = execute({**q, "context": {"noProjections": True}}, segments).table
        assert_rows_equal(engine_rows(got), engine_rows(base), ordered=False)
        tables += [source_for(query_from_json(q), seg).projection for seg in segments]
    # The generator reaches both sides of the rule: projections serve some segments, refuse others.
    assert sum(t is not None for t in tables) >= 10 and sum(t is None for t in tables) >= 10, tables
