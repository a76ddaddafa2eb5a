"""Array functions and UNNEST benchmark: ARRAY_CONTAINS / ARRAY_OVERLAP filters (with a constant and
with another column), per-row element functions, and UNNEST grouped, on ARRAY<VARCHAR> and
ARRAY<BIGINT> columns, beside DuckDB (``list_contains``, ``list_has_any``, ``unnest``) and ClickHouse
(chdb, in-process: ``has``, ``hasAny``, ``arrayJoin``).

    .venv/bin/python bench/arrays.py [--rows 1000000] [--runs 5] [--markdown]

Rows: ``tags`` holds 0-6 of 1,000 words (Zipf-like, so some are common), ``tags2`` 0-3 more,
``nums`` 0-8 numbers below 50, ``s`` one word per row. No null arrays or null elements: a
ClickHouse array cannot be null, and Druid's rule that a null element matches a null one (which
DuckDB's list functions do not follow) would make the peers' answers differ. Segments of at most
500,000 rows, SQL planned and run in-process (no broker hop), 2 cores. Times are "repeated / first
run" (``bench/first_run.py``); the last column says whether all three engines returned the same
rows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench import first_run  # noqa: E402
from bench.engine import print_rows  # noqa: E402

DAY_MS = 86_400_000
START_MS = 1_600_000_000_000 // DAY_MS * DAY_MS
SEGMENT_ROWS = 500_000
WORDS = np.array([f"t{i}" for i in range(1000)], dtype=object)

# (name, strata SQL, DuckDB SQL, ClickHouse SQL); every one over table t
QUERIES = [
    ("count where ARRAY_CONTAINS(tags, constant)",
     "SELECT COUNT(*) FROM t WHERE ARRAY_CONTAINS(tags, 't7')",
     "SELECT count(*) FROM t WHERE list_contains(tags, 't7')",
     "SELECT count() FROM b.t WHERE has(tags, 't7')"),
    ("count where ARRAY_OVERLAP(tags, 3 constants)",
     "SELECT COUNT(*) FROM t WHERE ARRAY_OVERLAP(tags, ARRAY['t3', 't30', 't300'])",
     "SELECT count(*) FROM t WHERE list_has_any(tags, ['t3', 't30', 't300'])",
     "SELECT count() FROM b.t WHERE hasAny(tags, ['t3', 't30', 't300'])"),
    ("count where ARRAY_OVERLAP(tags, tags2)",
     "SELECT COUNT(*) FROM t WHERE ARRAY_OVERLAP(tags, tags2)",
     "SELECT count(*) FROM t WHERE list_has_any(tags, tags2)",
     "SELECT count() FROM b.t WHERE hasAny(tags, tags2)"),
    ("count where ARRAY_CONTAINS(tags, s) (per-row element)",
     "SELECT COUNT(*) FROM t WHERE ARRAY_CONTAINS(tags, s)",
     "SELECT count(*) FROM t WHERE list_contains(tags, s)",
     "SELECT count() FROM b.t WHERE has(tags, s)"),
    ("sum of ARRAY_ORDINAL_OF(nums, 5)",
     "SELECT SUM(ARRAY_ORDINAL_OF(nums, 5)) FROM t",
     "SELECT sum(list_position(nums, 5)) FROM t",
     "SELECT sumIf(indexOf(nums, 5), indexOf(nums, 5) > 0) FROM b.t"),
    ("top 10 of ARRAY_TO_STRING(ARRAY_SLICE(tags, 0, 2))",
     "SELECT ARRAY_TO_STRING(ARRAY_SLICE(tags, 0, 2), ',') AS k, COUNT(*) AS c FROM t GROUP BY 1 "
     "ORDER BY c DESC, k LIMIT 10",
     "SELECT array_to_string(tags[1:2], ',') AS k, count(*) AS c FROM t GROUP BY 1 ORDER BY c DESC, k LIMIT 10",
     "SELECT arrayStringConcat(arraySlice(tags, 1, 2), ',') AS k, count() AS c FROM b.t GROUP BY k "
     "ORDER BY c DESC, k LIMIT 10"),
    ("UNNEST(tags) group by element, top 10",
     "SELECT x, COUNT(*) AS c FROM t CROSS JOIN UNNEST(tags) AS u(x) GROUP BY x ORDER BY c DESC, x LIMIT 10",
     "SELECT x, count(*) AS c FROM t, unnest(t.tags) AS u(x) GROUP BY x ORDER BY c DESC, x LIMIT 10",
     "SELECT arrayJoin(tags) AS x, count() AS c FROM b.t GROUP BY x ORDER BY c DESC, x LIMIT 10"),
    ("UNNEST(tags) where element = constant, count (unnestFilter)",
     "SELECT COUNT(*) FROM t CROSS JOIN UNNEST(tags) AS u(x) WHERE x = 't7'",
     "SELECT count(*) FROM t, unnest(t.tags) AS u(x) WHERE x = 't7'",
     "SELECT count() FROM b.t ARRAY JOIN tags AS x WHERE x = 't7'"),
]


def rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)

    def words(count: np.ndarray) -> pa.Array:
        picks = np.minimum(rng.zipf(1.3, int(count.sum())) - 1, len(WORDS) - 1)
        offsets = np.concatenate(([0], np.cumsum(count))).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(WORDS[picks], pa.string()))

    nums_count = rng.integers(0, 9, n)
    nums = pa.ListArray.from_arrays(pa.array(np.concatenate(([0], np.cumsum(nums_count))).astype(np.int32)),
                                    pa.array(rng.integers(0, 50, int(nums_count.sum())), pa.int64()))
    times = START_MS + seed * DAY_MS + np.arange(n) * (DAY_MS // SEGMENT_ROWS)
    return pa.table({
        "__time": pa.array(times, pa.int64()),
        "tags": words(rng.integers(0, 7, n)),
        "tags2": words(rng.integers(0, 4, n)),
        "nums": nums,
        "s": pa.array(WORDS[np.minimum(rng.zipf(1.3, n) - 1, len(WORDS) - 1)], pa.string()),
    })


def clickhouse(parquet: str):
    """A chdb session with the rows in a MergeTree table, or None without chdb."""
    try:
        from chdb import session as chs
    except ImportError:
        return None
    sess = chs.Session()
    sess.query("CREATE DATABASE IF NOT EXISTS b")
    sess.query("CREATE TABLE b.t (__time DateTime64(3, 'UTC'), tags Array(String), tags2 Array(String), "
               "nums Array(Int64), s String) ENGINE = MergeTree ORDER BY __time")
    sess.query(f"INSERT INTO b.t SELECT * FROM file('{parquet}', Parquet)")
    return sess


def _canonical(values: list) -> list:
    return [tuple(None if v is None else (int(v) if isinstance(v, (int, np.integer)) or
                                          (isinstance(v, float) and v.is_integer()) else str(v)) for v in row)
            for row in values]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    import duckdb

    from common.query import execute
    from common.query.engine import union_schema
    from common.segment.builder import build_segment
    from common.segment.segment import Segment
    from common.segment.segment_id import SegmentId
    from common.sql import execute_sql
    from common.sql.catalog import SegmentsOnlyCatalog
    from common.types.interval import Interval

    class Catalog(SegmentsOnlyCatalog):
        def __init__(self, schemas: dict) -> None:
            self.schemas = schemas

        def datasource_names(self) -> list[str]:
            return list(self.schemas)

        def datasource_schema(self, name: str):
            return self.schemas.get(name)

    work = tempfile.mkdtemp(prefix="strata-bench-arrays-")
    try:
        parquet = os.path.join(work, "t.parquet")
        writer, segments, done = None, [], 0
        while done < args.rows:
            n = min(SEGMENT_ROWS, args.rows - done)
            part = rows(n, done // SEGMENT_ROWS)
            day = START_MS + (done // SEGMENT_ROWS) * DAY_MS
            path = os.path.join(work, f"t-{day}.sseg")
            build_segment(part, path, SegmentId("t", Interval(day, day + DAY_MS), "v1", 0))
            segments.append(Segment.open(path))
            out = part.set_column(0, "__time", part.column("__time").cast(pa.timestamp("ms")))
            writer = writer or pq.ParquetWriter(parquet, out.schema)
            writer.write_table(out)
            done += n
        writer.close()
        catalog = Catalog({"t": union_schema(segments)})
        con = duckdb.connect()
        con.sql(f"CREATE TABLE t AS SELECT * FROM read_parquet('{parquet}')")
        ch = clickhouse(parquet)

        def strata(text: str) -> list:
            return [tuple(r.values()) for r in execute_sql(text, catalog, lambda q: execute(q, segments).table)
                    .to_pylist()]

        def chdb_rows(text: str) -> list:
            return [tuple(r.values()) for r in ch.query(text, "ArrowTable").to_pylist()]

        both = first_run.repeated_and_first
        nan2 = (float("nan"), float("nan"))

        def pair(a: tuple, fmt: str = "{:.1f}") -> str:
            return f"{fmt.format(a[0])} / {fmt.format(a[1])}"

        lines, vs_duck, vs_ch = [], [], []
        for name, sql, duck_sql, ch_sql in QUERIES:
            *s_ms, s_out = both(strata, first_run.sql_variant(sql), args.runs)
            *d_ms, d_out = both(lambda t: con.sql(t).fetchall(), first_run.sql_variant(duck_sql), args.runs)
            if ch is not None:
                *c_ms, c_out = both(chdb_rows, first_run.clickhouse_variant(ch_sql), args.runs)
            else:
                c_ms, c_out = nan2, None
            same = _canonical(s_out) == _canonical(d_out) and (c_out is None or _canonical(c_out) == _canonical(d_out))
            ratio_d = (s_ms[0] / d_ms[0], s_ms[1] / d_ms[1])
            ratio_c = (s_ms[0] / c_ms[0], s_ms[1] / c_ms[1])
            vs_duck.append(ratio_d)
            vs_ch.append(ratio_c)
            lines.append((name, pair(s_ms), pair(d_ms), pair(ratio_d, "{:.2f}"), pair(c_ms),
                          pair(ratio_c, "{:.2f}") if ch is not None else "n/a", "yes" if same else "NO"))
        print(f"rows {args.rows:,} in {len(segments)} segments; load average {os.getloadavg()[0]:.1f}")
        print(f"each time and ratio cell is 'repeated / first run' (median of {args.runs}, ms); "
              "ratios are strata / peer (below 1: strata faster)")
        print_rows(("query", "strata ms", "DuckDB ms", "strata/DuckDB", "ClickHouse ms", "strata/CH", "same rows"),
                   lines, args.markdown)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
