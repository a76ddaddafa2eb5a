"""Shared fixtures: a tmp_path segment factory, DuckDB connections, and a small multi-day event
data set (as one Arrow table, as day segments, and as a DuckDB table) that the engine tests
compare against."""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa
import pytest

# The repo is not installed into the venv; make `common` importable however pytest is started.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from hypothesis import settings  # noqa: E402

# A commit gets the same verdict on every run: by default the property tests draw the same
# examples each time (derandomized), so CI cannot fail on a draw no one has seen locally.
# `HYPOTHESIS_PROFILE=explore bash scripts/test.sh tests/unit` draws fresh random examples to hunt
# for new failures; fix what it finds and add the example as a regression test.
settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

from common.segment import Segment, SegmentId, build_segment  # noqa: E402
from common.types import Interval, parse_instant  # noqa: E402

DAY_MS = 86_400_000
EVENTS_START = parse_instant("2020-01-01")
EVENTS_DAYS = 3
EVENTS_INTERVAL = "2020-01-01/2020-01-04"
# Channels deliberately include '' and non-ASCII text: both are easy to mangle in a dictionary.
CHANNELS = ["#en.wikipedia", "#fr.wikipedia", "#de.wikipedia", "#ja.wikipedia", "", "é漢字", None]
CHANNEL_P = [0.30, 0.20, 0.15, 0.10, 0.05, 0.05, 0.15]
# Pages carry LIKE metacharacters so escapes and '_' wildcards are exercised against real data.
PAGES = ["Main_Page", "Main Page", "MainXPage", "50%_off", "50% off", "50 off", "Talk:Main", "a_b", "axb", "ab", None]
CODES = ["1", "2", "10", "-3.5", "abc", "", None]
SCORES = [0.25, 0.5, 1.0, 1.5, 2.75, -0.5, None]  # exact binary fractions: float32 sums are exact


def make_events_table(rows_per_day: int = 1200, days: int = EVENTS_DAYS, seed: int = 7) -> pa.Table:
    """Deterministic events. Times are unique (so 'earliest'/'latest' and time ordering have one
    right answer) and rows are shuffled (so the builder has to sort)."""
    rng = np.random.default_rng(seed)
    n = rows_per_day * days
    offsets = np.concatenate([
        d * DAY_MS + rng.choice(DAY_MS, size=rows_per_day, replace=False) for d in range(days)
    ])
    perm = rng.permutation(n)
    times = EVENTS_START + offsets[perm]
    day = (times - EVENTS_START) // DAY_MS

    def pick(values, p=None):
        idx = rng.choice(len(values), size=n, p=p)
        return [values[i] for i in idx]

    def with_nulls(arr: np.ndarray, frac: float) -> pa.Array:
        return pa.array(arr, mask=rng.random(n) < frac)

    users = [None if u < 0 else f"user{u:05d}" for u in np.where(rng.random(n) < 0.05, -1, rng.integers(0, 10_000, n))]
    country = pick(["US", "FR", "DE", "JP", None])
    country = [None if d == 0 else c for c, d in zip(country, day)]  # day 0's segment lacks the column
    metro = with_nulls(rng.integers(500, 520, n), 0.2)
    metro = pa.array([None if d == days - 1 else m for m, d in zip(metro.to_pylist(), day)], pa.int64())
    return pa.table({
        "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "rid": pa.array(perm, pa.int64()),
        "channel": pick(CHANNELS, CHANNEL_P),
        "page": pick(PAGES),
        "user": pa.array(users, pa.string()),
        "code": pick(CODES),
        "added": with_nulls(rng.integers(0, 1000, n), 0.1),
        "delta": pa.array(rng.integers(-500, 500, n), pa.int64()),
        "price": with_nulls(np.round(rng.random(n) * 100, 2), 0.1),
        "score": pa.array(pick(SCORES), pa.float32()),
        "small": with_nulls(rng.integers(0, 5, n), 0.15),
        "country": pa.array(country, pa.string()),
        "metro": metro,
    })


def day_interval(day: int) -> Interval:
    return Interval(EVENTS_START + day * DAY_MS, EVENTS_START + (day + 1) * DAY_MS)


class EventsData:
    def __init__(self, table: pa.Table, segments: list[Segment], paths: list[str]) -> None:
        self.table = table
        self.segments = segments
        self.paths = paths


def build_events(directory: str, table: pa.Table) -> EventsData:
    times = table.column("__time").cast(pa.int64()).to_numpy()
    segments, paths = [], []
    for d in range(EVENTS_DAYS):
        iv = day_interval(d)
        mask = pa.array((times >= iv.start) & (times < iv.end))
        part = table.filter(mask)
        sort_columns: tuple[str, ...] = ()
        if d == 0:
            part = part.drop_columns(["country"])  # schema evolution: a column added later
            sort_columns = ("channel",)
        elif d == EVENTS_DAYS - 1:
            part = part.drop_columns(["metro"])  # ... and one dropped later
            sort_columns = ("channel", "user")
        path = os.path.join(directory, f"events_{d}.sseg")
        build_segment(part, path, SegmentId("events", iv, "v1", 0), sort_columns)
        segments.append(Segment.open(path))
        paths.append(path)
    # A segment of another datasource in the same list: execute() must ignore it.
    other = table.slice(0, 5).select(["__time", "rid"])
    opath = os.path.join(directory, "other.sseg")
    build_segment(other, opath, SegmentId("other", Interval.parse(EVENTS_INTERVAL), "v1", 0))
    segments.append(Segment.open(opath))
    return EventsData(table, segments, paths)


@pytest.fixture(scope="session")
def events(tmp_path_factory) -> EventsData:
    return build_events(str(tmp_path_factory.mktemp("events")), make_events_table())


def duck_connect():
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


@pytest.fixture(scope="session")
def events_duck(events):
    """DuckDB holding the same rows; `t` is __time as epoch millis for exact comparisons."""
    con = duck_connect()
    con.register("events_arrow", events.table)
    con.execute("CREATE TABLE events AS SELECT *, epoch_ms(__time) AS t FROM events_arrow")
    con.unregister("events_arrow")
    yield con
    con.close()


@pytest.fixture
def duck():
    con = duck_connect()
    yield con
    con.close()


@pytest.fixture
def make_segment(tmp_path):
    """make_segment(table, interval=..., ...) -> (Segment, path): builds into tmp_path and opens it."""
    counter = [0]

    def make(table: pa.Table, interval: str | Interval = "2020-01-01/2020-01-02", *, datasource: str = "ds",
             version: str = "v1", partition: int = 0, sort_columns=(), column_types=None,
             name: str | None = None, string_bitmaps: bool = False) -> tuple[Segment, str]:
        counter[0] += 1
        path = str(tmp_path / (name or f"seg{counter[0]}.sseg"))
        sid = SegmentId(datasource, Interval.of(interval), version, partition)
        build_segment(table, path, sid, sort_columns, column_types, string_bitmaps=string_bitmaps)
        return Segment.open(path), path

    return make
