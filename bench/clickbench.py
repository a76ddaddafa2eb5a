"""ClickBench's 43 queries on a generated ``hits``-shaped table (``bench/hits_generator.py``):
loaded into strata through Spark as a user would (``INSERT ... SELECT ... FROM TABLE(EXTERN(...))``
submitted to the broker of a local cluster, ``strata up``: coordinator, broker, two historicals,
each a process), every query run in Druid's text through Flight SQL (ADBC, a new cursor per
statement as DB-API code does), each answer checked against ClickHouse (chdb, in-process, a
MergeTree ordered as ClickBench orders it) on the same rows, and timed beside chdb and DuckDB (its
native table), two threads each.

    .venv/bin/python bench/clickbench.py [--rows 1000000] [--runs 3] [--markdown] [--only 1,5,30] [--publish]

``--publish`` builds the DAY segments in this process and publishes them instead of loading
through Spark: the same rows and types, minutes sooner, for iterating on queries.

Times are "repeated / first run" (``bench/first_run.py``): repeated runs one text after a warm-up;
first run gives every run a text not seen before: a lower time bound some hours before the data's
month, the same work, for every engine.

The query texts: ClickBench's ClickHouse/DuckDB text, and Druid's as ClickBench runs it (its
``run.sh`` rewrites ``EventTime`` to ``__time``, Druid's timestamp column; EventDate is a string
column in its ingestion spec; Q29's group reference is Java's ``$1``).
"""

from __future__ import annotations

# ClickBench's queries, ClickHouse's and DuckDB's text (one column name per engine is all that differs).
QUERIES = [
    'SELECT COUNT(*) FROM hits',
    'SELECT COUNT(*) FROM hits WHERE AdvEngineID <> 0',
    'SELECT SUM(AdvEngineID), COUNT(*), AVG(ResolutionWidth) FROM hits',
    'SELECT AVG(UserID) FROM hits',
    'SELECT COUNT(DISTINCT UserID) FROM hits',
    'SELECT COUNT(DISTINCT SearchPhrase) FROM hits',
    'SELECT MIN(EventDate), MAX(EventDate) FROM hits',
    'SELECT AdvEngineID, COUNT(*) FROM hits WHERE AdvEngineID <> 0 GROUP BY AdvEngineID ORDER BY COUNT(*) DESC',
    'SELECT RegionID, COUNT(DISTINCT UserID) AS u FROM hits GROUP BY RegionID ORDER BY u DESC LIMIT 10',
    'SELECT RegionID, SUM(AdvEngineID), COUNT(*) AS c, AVG(ResolutionWidth), COUNT(DISTINCT UserID) FROM hits GROUP BY RegionID ORDER BY c DESC LIMIT 10',
    "SELECT MobilePhoneModel, COUNT(DISTINCT UserID) AS u FROM hits WHERE MobilePhoneModel <> '' GROUP BY MobilePhoneModel ORDER BY u DESC LIMIT 10",
    "SELECT MobilePhone, MobilePhoneModel, COUNT(DISTINCT UserID) AS u FROM hits WHERE MobilePhoneModel <> '' GROUP BY MobilePhone, MobilePhoneModel ORDER BY u DESC LIMIT 10",
    "SELECT SearchPhrase, COUNT(*) AS c FROM hits WHERE SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY c DESC LIMIT 10",
    "SELECT SearchPhrase, COUNT(DISTINCT UserID) AS u FROM hits WHERE SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY u DESC LIMIT 10",
    "SELECT SearchEngineID, SearchPhrase, COUNT(*) AS c FROM hits WHERE SearchPhrase <> '' GROUP BY SearchEngineID, SearchPhrase ORDER BY c DESC LIMIT 10",
    'SELECT UserID, COUNT(*) FROM hits GROUP BY UserID ORDER BY COUNT(*) DESC LIMIT 10',
    'SELECT UserID, SearchPhrase, COUNT(*) FROM hits GROUP BY UserID, SearchPhrase ORDER BY COUNT(*) DESC LIMIT 10',
    'SELECT UserID, SearchPhrase, COUNT(*) FROM hits GROUP BY UserID, SearchPhrase LIMIT 10',
    'SELECT UserID, extract(minute FROM EventTime) AS m, SearchPhrase, COUNT(*) FROM hits GROUP BY UserID, m, SearchPhrase ORDER BY COUNT(*) DESC LIMIT 10',
    'SELECT UserID FROM hits WHERE UserID = 435090932899640449',
    "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'",
    "SELECT SearchPhrase, MIN(URL), COUNT(*) AS c FROM hits WHERE URL LIKE '%google%' AND SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY c DESC LIMIT 10",
    "SELECT SearchPhrase, MIN(URL), MIN(Title), COUNT(*) AS c, COUNT(DISTINCT UserID) FROM hits WHERE Title LIKE '%Google%' AND URL NOT LIKE '%.google.%' AND SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY c DESC LIMIT 10",
    "SELECT * FROM hits WHERE URL LIKE '%google%' ORDER BY EventTime LIMIT 10",
    "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY EventTime LIMIT 10",
    "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY SearchPhrase LIMIT 10",
    "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY EventTime, SearchPhrase LIMIT 10",
    "SELECT CounterID, AVG(length(URL)) AS l, COUNT(*) AS c FROM hits WHERE URL <> '' GROUP BY CounterID HAVING COUNT(*) > 100000 ORDER BY l DESC LIMIT 25",
    "SELECT REGEXP_REPLACE(Referer, '^https?://(?:www\\.)?([^/]+)/.*$', '\\1') AS k, AVG(length(Referer)) AS l, COUNT(*) AS c, MIN(Referer) FROM hits WHERE Referer <> '' GROUP BY k HAVING COUNT(*) > 100000 ORDER BY l DESC LIMIT 25",
    'SELECT SUM(ResolutionWidth), SUM(ResolutionWidth + 1), SUM(ResolutionWidth + 2), SUM(ResolutionWidth + 3), SUM(ResolutionWidth + 4), SUM(ResolutionWidth + 5), SUM(ResolutionWidth + 6), SUM(ResolutionWidth + 7), SUM(ResolutionWidth + 8), SUM(ResolutionWidth + 9), SUM(ResolutionWidth + 10), SUM(ResolutionWidth + 11), SUM(ResolutionWidth + 12), SUM(ResolutionWidth + 13), SUM(ResolutionWidth + 14), SUM(ResolutionWidth + 15), SUM(ResolutionWidth + 16), SUM(ResolutionWidth + 17), SUM(ResolutionWidth + 18), SUM(ResolutionWidth + 19), SUM(ResolutionWidth + 20), SUM(ResolutionWidth + 21), SUM(ResolutionWidth + 22), SUM(ResolutionWidth + 23), SUM(ResolutionWidth + 24), SUM(ResolutionWidth + 25), SUM(ResolutionWidth + 26), SUM(ResolutionWidth + 27), SUM(ResolutionWidth + 28), SUM(ResolutionWidth + 29), SUM(ResolutionWidth + 30), SUM(ResolutionWidth + 31), SUM(ResolutionWidth + 32), SUM(ResolutionWidth + 33), SUM(ResolutionWidth + 34), SUM(ResolutionWidth + 35), SUM(ResolutionWidth + 36), SUM(ResolutionWidth + 37), SUM(ResolutionWidth + 38), SUM(ResolutionWidth + 39), SUM(ResolutionWidth + 40), SUM(ResolutionWidth + 41), SUM(ResolutionWidth + 42), SUM(ResolutionWidth + 43), SUM(ResolutionWidth + 44), SUM(ResolutionWidth + 45), SUM(ResolutionWidth + 46), SUM(ResolutionWidth + 47), SUM(ResolutionWidth + 48), SUM(ResolutionWidth + 49), SUM(ResolutionWidth + 50), SUM(ResolutionWidth + 51), SUM(ResolutionWidth + 52), SUM(ResolutionWidth + 53), SUM(ResolutionWidth + 54), SUM(ResolutionWidth + 55), SUM(ResolutionWidth + 56), SUM(ResolutionWidth + 57), SUM(ResolutionWidth + 58), SUM(ResolutionWidth + 59), SUM(ResolutionWidth + 60), SUM(ResolutionWidth + 61), SUM(ResolutionWidth + 62), SUM(ResolutionWidth + 63), SUM(ResolutionWidth + 64), SUM(ResolutionWidth + 65), SUM(ResolutionWidth + 66), SUM(ResolutionWidth + 67), SUM(ResolutionWidth + 68), SUM(ResolutionWidth + 69), SUM(ResolutionWidth + 70), SUM(ResolutionWidth + 71), SUM(ResolutionWidth + 72), SUM(ResolutionWidth + 73), SUM(ResolutionWidth + 74), SUM(ResolutionWidth + 75), SUM(ResolutionWidth + 76), SUM(ResolutionWidth + 77), SUM(ResolutionWidth + 78), SUM(ResolutionWidth + 79), SUM(ResolutionWidth + 80), SUM(ResolutionWidth + 81), SUM(ResolutionWidth + 82), SUM(ResolutionWidth + 83), SUM(ResolutionWidth + 84), SUM(ResolutionWidth + 85), SUM(ResolutionWidth + 86), SUM(ResolutionWidth + 87), SUM(ResolutionWidth + 88), SUM(ResolutionWidth + 89) FROM hits',
    "SELECT SearchEngineID, ClientIP, COUNT(*) AS c, SUM(IsRefresh), AVG(ResolutionWidth) FROM hits WHERE SearchPhrase <> '' GROUP BY SearchEngineID, ClientIP ORDER BY c DESC LIMIT 10",
    "SELECT WatchID, ClientIP, COUNT(*) AS c, SUM(IsRefresh), AVG(ResolutionWidth) FROM hits WHERE SearchPhrase <> '' GROUP BY WatchID, ClientIP ORDER BY c DESC LIMIT 10",
    'SELECT WatchID, ClientIP, COUNT(*) AS c, SUM(IsRefresh), AVG(ResolutionWidth) FROM hits GROUP BY WatchID, ClientIP ORDER BY c DESC LIMIT 10',
    'SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC LIMIT 10',
    'SELECT 1, URL, COUNT(*) AS c FROM hits GROUP BY 1, URL ORDER BY c DESC LIMIT 10',
    'SELECT ClientIP, ClientIP - 1, ClientIP - 2, ClientIP - 3, COUNT(*) AS c FROM hits GROUP BY ClientIP, ClientIP - 1, ClientIP - 2, ClientIP - 3 ORDER BY c DESC LIMIT 10',
    "SELECT URL, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND DontCountHits = 0 AND IsRefresh = 0 AND URL <> '' GROUP BY URL ORDER BY PageViews DESC LIMIT 10",
    "SELECT Title, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND DontCountHits = 0 AND IsRefresh = 0 AND Title <> '' GROUP BY Title ORDER BY PageViews DESC LIMIT 10",
    "SELECT URL, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0 AND IsLink <> 0 AND IsDownload = 0 GROUP BY URL ORDER BY PageViews DESC LIMIT 10 OFFSET 1000",
    "SELECT TraficSourceID, SearchEngineID, AdvEngineID, CASE WHEN (SearchEngineID = 0 AND AdvEngineID = 0) THEN Referer ELSE '' END AS Src, URL AS Dst, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0 GROUP BY TraficSourceID, SearchEngineID, AdvEngineID, Src, Dst ORDER BY PageViews DESC LIMIT 10 OFFSET 1000",
    "SELECT URLHash, EventDate, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0 AND TraficSourceID IN (-1, 6) AND RefererHash = 3594120000172545465 GROUP BY URLHash, EventDate ORDER BY PageViews DESC LIMIT 10 OFFSET 100",
    "SELECT WindowClientWidth, WindowClientHeight, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0 AND DontCountHits = 0 AND URLHash = 2868770270353813622 GROUP BY WindowClientWidth, WindowClientHeight ORDER BY PageViews DESC LIMIT 10 OFFSET 10000",
    "SELECT DATE_TRUNC('minute', EventTime) AS M, COUNT(*) AS PageViews FROM hits WHERE CounterID = 62 AND EventDate >= '2013-07-14' AND EventDate <= '2013-07-15' AND IsRefresh = 0 AND DontCountHits = 0 GROUP BY DATE_TRUNC('minute', EventTime) ORDER BY DATE_TRUNC('minute', EventTime) LIMIT 10 OFFSET 1000",
]

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import decimal  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyarrow as pa  # noqa: E402

from bench import first_run  # noqa: E402
from bench.hits_generator import COLUMNS, MONTH_START  # noqa: E402

# ClickHouse types for ClickBench's portable DDL; the table sorted by ClickBench's primary key.
CH_TYPES = {"BIGINT": "Int64", "INTEGER": "Int32", "SMALLINT": "Int16", "TEXT": "String", "CHAR": "String",
            "TIMESTAMP": "DateTime", "DATE": "Date"}
CH_ORDER = "(CounterID, EventDate, UserID, EventTime, WatchID)"
# Druid's ingestion spec for ClickBench: every integer a long, EventDate and the other times strings,
# EventTime the __time column.
DRUID_TYPES = {"BIGINT": "long", "INTEGER": "long", "SMALLINT": "long", "TEXT": "string", "CHAR": "string",
               "TIMESTAMP": "string", "DATE": "string"}


def druid_text(q: str) -> str:
    return re.sub(r"\bEventTime\b", "__time", q).replace("'\\1'", "'$1'")


def clickhouse_text(q: str) -> str:
    # ClickHouse reads backslash escapes in string literals.
    return q.replace("FROM hits", "FROM b.hits").replace("\\", "\\\\")


def _add_condition(sql: str, condition: str) -> str:
    where = re.search(r"\bWHERE\b", sql)
    if where:
        return f"{sql[:where.end()]} {condition} AND{sql[where.end():]}"
    tail = re.search(r"\b(GROUP BY|ORDER BY|LIMIT)\b", sql)
    at = tail.start() if tail else len(sql)
    return f"{sql[:at].rstrip()} WHERE {condition} {sql[at:]}".rstrip()


def _bound(k: int) -> str:
    """A whole hour ``k`` hours before the data's month: a new text, no rows fewer."""
    return dt.datetime.fromtimestamp(MONTH_START - 3600 * k, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def variant(text: str, condition: Callable[[str], str]) -> Callable[[int], str]:
    return lambda k: text if k == 0 else _add_condition(text, condition(_bound(k)))


def strata_variant(q: str) -> Callable[[int], str]:
    return variant(druid_text(q), lambda b: f"__time >= TIMESTAMP '{b}'")


def duckdb_variant(q: str) -> Callable[[int], str]:
    return variant(q, lambda b: f"EventTime >= TIMESTAMP '{b}'")


def clickhouse_variant(q: str) -> Callable[[int], str]:
    v = variant(clickhouse_text(q), lambda b: f"EventTime >= toDateTime('{b}', 'UTC')")
    return lambda k: v(k) + " SETTINGS max_threads = 2"


def insert_sql(parquet: str, table: str = "hits") -> str:
    """The INSERT a user writes for ClickBench's Parquet file: Druid's types, EventTime as __time."""
    signature = [{"name": name, "type": "long" if name == "EventTime" else DRUID_TYPES[kind]}
                 for name, kind in COLUMNS]
    columns = ", ".join(f'"{name}"' for name, _ in COLUMNS if name != "EventTime")
    source = json.dumps({"type": "local", "files": [parquet]})
    return (f"INSERT INTO {table} SELECT MILLIS_TO_TIMESTAMP(\"EventTime\") AS __time, {columns} "
            f"FROM TABLE(EXTERN('{source}', '{{\"type\": \"parquet\"}}', '{json.dumps(signature)}')) "
            "PARTITIONED BY DAY")


def druid_rows(hits: pa.Table) -> pa.Table:
    """The generated rows as Druid's ClickBench spec ingests them (what the INSERT above makes)."""
    arrays, names = [hits.column("EventTime").cast(pa.timestamp("ms", tz="UTC"))], ["__time"]
    for name, kind in COLUMNS:
        if name == "EventTime":
            continue
        target = pa.int64() if DRUID_TYPES[kind] == "long" else pa.string()
        arrays.append(hits.column(name).cast(target))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def publish_into_strata(client, cluster_dir: str, parquet: str) -> float:
    """The same rows as ``druid_rows``, built into DAY segments here and published, not through
    Spark (``--publish``: quicker when iterating on queries); seconds until every one is served."""
    import pyarrow.parquet as pq

    from services.deep_storage import deep_storage_from_url

    started = time.perf_counter()
    storage = deep_storage_from_url(os.path.join(cluster_dir, "deep-storage"))
    descriptors = client.build_and_publish(druid_rows(pq.read_table(parquet)), "hits", storage)
    client.wait_loaded("hits", len(descriptors), 1200, replicas=1)
    # the broker sees the historicals' announcements a moment later
    return wait_queryable(client, sum(d.num_rows for d in descriptors), started, time.monotonic() + 60)


def wait_queryable(client, rows: int, started: float, deadline: float) -> float:
    """Seconds from ``started`` until ``hits`` answers a count of ``rows`` (by the monotonic
    ``deadline``)."""
    while True:
        try:
            got = client.sql("SELECT COUNT(*) AS c FROM hits")[0].column("c")[0].as_py()
        except Exception:  # noqa: BLE001 - not served yet
            got = None
        if got == rows:
            return time.perf_counter() - started
        if time.monotonic() > deadline:
            raise TimeoutError(f"{got} of {rows} rows of hits queryable by the deadline")
        time.sleep(0.2)


# ---- answers, made comparable across engines ------------------------------------------------
def _canon(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, decimal.Decimal):  # DuckDB sums integers into HUGEINT, a DECIMAL in Arrow
        v = int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return float(f"{v:.6g}")
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode()
    return v


def rows_of(table: pa.Table) -> list[tuple]:
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [tuple(_canon(c[r]) for c in cols) for r in range(table.num_rows)]


def _key(row: tuple) -> tuple:
    return tuple((x is None, str(type(x).__name__ in ("int", "float")), str(x)) for x in row)


def compare(got: pa.Table, want: pa.Table) -> tuple[bool, str]:
    """(agree, how) of strata's answer with a peer's: the same rows in the same order; else the same
    rows with ties in another order; else a top-N cut inside a run of ties: some numeric column (the
    order key) is the same sequence in both, and the rows before the last row's value of it agree."""
    # SELECT *: Druid's table has __time where the peer has EventTime, and puts it first.
    names = ["__time" if n == "EventTime" else n for n in want.column_names]
    if got.column_names != names and set(names) <= set(got.column_names):
        got = got.select(names)
    if got.num_columns != want.num_columns:
        return False, f"{got.num_columns} columns, the peer {want.num_columns}"
    g, w = rows_of(got), rows_of(want)
    if g == w:
        return True, "same"
    if len(g) != len(w):
        return False, f"{len(g)} rows, the peer {len(w)}"
    if sorted(g, key=_key) == sorted(w, key=_key):
        return True, "same rows, ties in another order"
    for i in range(len(w[0])):
        column = [r[i] for r in w]
        if all(isinstance(x, (int, float)) for x in column) and column == [r[i] for r in g]:
            cut = column[-1]
            if sorted((r for r in g if r[i] != cut), key=_key) == sorted((r for r in w if r[i] != cut), key=_key):
                return True, "same rows above a cut inside ties"
    bad = next(i for i in range(len(g)) if g[i] != w[i])
    return False, f"row {bad + 1}: strata {str(g[bad])[:120]} vs the peer {str(w[bad])[:120]}"


# ---- the engines ---------------------------------------------------------------------------
class ClickHouse:
    """chdb in-process: ClickBench's table as a MergeTree ordered by its primary key."""

    def __init__(self, path: str, parquet: str) -> None:
        from chdb import session as chs

        self.session = chs.Session(path)
        self.session.query("CREATE DATABASE IF NOT EXISTS b")
        columns = ", ".join(f"{name} {CH_TYPES[kind]}" for name, kind in COLUMNS)
        self.session.query(f"CREATE TABLE b.hits ({columns}) ENGINE = MergeTree ORDER BY {CH_ORDER}")
        self.session.query(f"INSERT INTO b.hits SELECT * FROM file('{parquet}', Parquet)")
        self.session.query("OPTIMIZE TABLE b.hits FINAL")

    def table(self, sql: str) -> pa.Table:
        """The answer, to compare: through Parquet, whose writer keeps DateTime a timestamp (chdb's
        Arrow output makes it a plain uint32)."""
        import io

        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(self.session.query(sql, "Parquet").bytes()))

    def run(self, sql: str) -> pa.Table:
        """The query, to time: chdb's own Arrow output."""
        return self.session.query(sql, "ArrowTable")

    def close(self) -> None:
        self.session.close()


def duckdb_table(parquet: str):
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute(f"CREATE TABLE hits AS SELECT * FROM read_parquet('{parquet}')")
    return con


def load_into_strata(client, parquet: str, rows: int, timeout_s: float = 1200.0) -> float:
    """Submit the INSERT through the broker, wait for its task and for every row to be queryable;
    seconds from submit to queryable."""
    started = time.perf_counter()
    table, _ = client.sql(insert_sql(parquet))
    task_id = table.column("task_id")[0].as_py()
    deadline = time.monotonic() + timeout_s
    while True:
        task = client.task(task_id)
        if task.state in ("SUCCESS", "FAILED", "CANCELED"):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"INSERT task {task_id} still {task.state} after {timeout_s:.0f}s")
        time.sleep(0.5)
    if task.state != "SUCCESS":
        raise RuntimeError(f"INSERT task {task_id} {task.state}: {task.error}")
    return wait_queryable(client, rows, started, deadline)


def flight_runner(uri: str) -> tuple[Callable[[str], pa.Table], Callable[[], None]]:
    """Run one statement the way DB-API code does: a new cursor per statement on one connection."""
    import adbc_driver_flightsql.dbapi as flight_sql

    conn = flight_sql.connect(uri, autocommit=True)

    def run(sql: str) -> pa.Table:
        cur = conn.cursor()
        try:
            cur.execute(sql)
            return cur.fetch_arrow_table()
        finally:
            cur.close()

    return run, conn.close


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    text = [t for t in text if t.strip()]
    return (text[0] if text else type(exc).__name__)[:200]


def timed(fn: Callable[[str], object], make: Callable[[int], str], runs: int, slow_s: float) -> tuple:
    """(repeated ms, first-run ms) of ``fn`` over ``make``'s texts; a query slower than ``slow_s``
    on its first (unseen) text is timed once: that run is its first-run time and its repeated one."""
    start = time.perf_counter()
    fn(make(first_run.fresh()))
    once = (time.perf_counter() - start) * 1000
    if once > slow_s * 1000:
        return once, once
    rep, first, _ = first_run.repeated_and_first(fn, make, runs)
    return rep, first


def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per query and engine, each way (median)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow-s", type=float, default=20.0, help="time a query slower than this once")
    ap.add_argument("--only", default="", help="comma-separated query numbers (1-43); all by default")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--publish", action="store_true",
                    help="build the segments here and publish them instead of the INSERT through Spark")
    args = ap.parse_args()
    os.environ["TZ"] = "UTC"  # chdb shows DateTime in the process's zone
    time.tzset()
    wanted = [int(x) for x in args.only.split(",") if x] or list(range(1, len(QUERIES) + 1))

    from bench.engine import print_rows
    from bench.hits_generator import write
    from services.cli.cluster_client import ClusterClient
    from services.cli.local_cluster import LocalCluster

    work = tempfile.mkdtemp(prefix="strata-clickbench-")
    cluster = LocalCluster(os.path.join(work, "cluster"))
    results, load_s, gen_s = [], 0.0, 0.0
    load_before = os.getloadavg()
    try:
        started = time.perf_counter()
        parquet = write(args.rows, os.path.join(work, "hits.parquet"), args.seed)
        gen_s = time.perf_counter() - started
        cluster.up(historicals=2, ports="auto", warm_task_drivers=0 if args.publish else 1)
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        load_s = publish_into_strata(client, cluster.dir, parquet) if args.publish else \
            load_into_strata(client, parquet, args.rows)

        segments = client.sql("SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = 'hits'")[0] \
            .column("c")[0].as_py()
        ch = ClickHouse(os.path.join(work, "chdb"), parquet)
        duck = duckdb_table(parquet)
        run, close = flight_runner(endpoints["flight"])
        print(f"loaded {args.rows:,} rows: generated in {gen_s:.1f}s; INSERT submit -> queryable {load_s:.1f}s "
              f"({segments} segments)", file=sys.stderr, flush=True)
        for n in wanted:
            q = QUERIES[n - 1]
            want = ch.table(clickhouse_variant(q)(0))
            try:
                got = run(druid_text(q))
                ok, how = compare(got, want)
            except Exception as exc:  # noqa: BLE001 - a failing query is a finding, reported
                results.append((n, None, None, None, False, f"fails: {_error(exc)}"))
                print(f"Q{n}: fails: {_error(exc)}", file=sys.stderr, flush=True)
                continue
            s = timed(run, strata_variant(q), args.runs, args.slow_s)
            h = timed(ch.run, clickhouse_variant(q), args.runs, args.slow_s)
            d = timed(lambda t: duck.sql(t).to_arrow_table(), duckdb_variant(q), args.runs, args.slow_s)
            results.append((n, s, h, d, ok, how))
            print(f"Q{n}: strata {s[0]:.0f}/{s[1]:.0f} ms, ClickHouse {h[0]:.0f}/{h[1]:.0f}, DuckDB "
                  f"{d[0]:.0f}/{d[1]:.0f}; {how}", file=sys.stderr, flush=True)
        close()
        ch.close()
        duck.close()
        client.close()
    finally:
        if cluster.state() is not None:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)

    def pair(a, fmt="{:.0f}"):
        return "-" if a is None else f"{fmt.format(a[0])} / {fmt.format(a[1])}"

    def ratio(a, b):
        return "-" if a is None else pair((a[0] / b[0], a[1] / b[1]), "{:.2f}")

    print(f"ClickBench's queries (Druid's text) on {args.rows:,} generated hits rows (seed {args.seed}); load "
          f"average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}; "
          f"{'segments built here and published' if args.publish else 'INSERT through the cluster'}, submit "
          f"-> queryable {load_s:.1f}s; cells 'repeated / first run', median of {args.runs}, ms")
    header = ("query", "strata ms", "ClickHouse ms", "DuckDB ms", "strata/ClickHouse", "strata/DuckDB",
              "agrees with ClickHouse")
    print_rows(header, [(f"Q{n}", pair(s), pair(h), pair(d), ratio(s, h), ratio(s, d), "yes" if ok else "NO")
                        for n, s, h, d, ok, _ in results], args.markdown)
    ran = [r for r in results if r[1] is not None]
    for at, label in ((0, "repeated"), (1, "first run")):
        ch_ratios = [r[1][at] / r[2][at] for r in ran]
        print(f"{label}: geomean strata/ClickHouse {geomean(ch_ratios):.2f} over {len(ran)} queries (goal <= 1.0; "
              f"max {max(ch_ratios, default=float('nan')):.1f}), strata/DuckDB "
              f"{geomean([r[1][at] / r[3][at] for r in ran]):.2f}")
    bad = [r for r in results if not r[4]]
    print(f"{len(results) - len(bad)} of {len(results)} queries run and agree with ClickHouse")
    for n, _, _, _, _, how in bad:
        print(f"- Q{n}: {how}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
