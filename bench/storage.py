"""Storage benchmark: bytes per row by column type, strata segments beside Parquet and ClickHouse,
and what compression costs bench/engine.py's queries.

    .venv/bin/python bench/storage.py [--rows 1000000] [--json-rows 100000] [--runs 5] [--codec zstd|lz4_frame]
                                     [--code-block-rows 65536] [--markdown]

Generates the demo rows plus a DOUBLE column, builds DAY segments three ways: the format before
issue 16 uncompressed (every part mapped, a Roaring bitmap per string value, int codes, plain
doubles: the query-speed baseline), that format compressed (the previous default), and today's
default (compressed parts, no stored bitmaps, bit-packed or validity-free codes, value-dictionary
doubles); writes the same rows as Parquet (pyarrow, snappy and zstd) and into a ClickHouse
MergeTree table (chdb, ORDER BY __time, default LZ4), and prints stored bytes per row for each
column type. A nested JSON column is measured on its own, smaller
table (``--json-rows``) because encoding its fields is slow; Parquet and ClickHouse store it as
text. Then it runs the engine benchmark's queries over the segment sets: with a decoded-part
cache that holds the working set (repeated queries), and with the cache emptied before each run
(a query right after the segments load, or after its parts were evicted, decodes what it reads).
With ``--code-block-rows N`` a fourth set (today's default plus STRING codes in N-row blocks
with a per-block code range, column option ``codeBlockRows``) runs the needle query beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.engine import print_rows, queries  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from common.query import execute  # noqa: E402
from common.segment import Segment  # noqa: E402
from common.segment.part_cache import PROCESS_CACHE  # noqa: E402
from common.segment.part_codec import CODECS, DEFAULT_COMPRESSION  # noqa: E402
from common.segment.time_partitioner import build_segments  # noqa: E402
from common.types import ColumnType  # noqa: E402

GROUPS = {
    "timestamp (__time)": ["__time"],
    "string, low cardinality (11 columns)": ["channel", "namespace", "isRobot", "isAnonymous", "isMinor", "isNew",
                                             "isUnpatrolled", "cityName", "countryName", "countryIsoCode",
                                             "regionName"],
    "string, high cardinality (page, user, comment)": ["page", "user", "comment"],
    "long (4 columns)": ["added", "deleted", "delta", "metroCode"],
    "double (1 column)": ["ratio"],
}
JSON_COLUMN = "attrs"


def rows_table(n: int) -> pa.Table:
    data = demo_table(n)
    added = data.column("added").to_numpy(zero_copy_only=False).astype(np.float64)
    deleted = data.column("deleted").to_numpy(zero_copy_only=False).astype(np.float64)
    return data.append_column("ratio", pa.array(added / (added + deleted + 1.0)))


def json_table(n: int) -> pa.Table:
    """The demo rows' geography and edit facts as one nested JSON document per row."""
    data = demo_table(n)
    cols = {c: data.column(c).to_pylist() for c in ("cityName", "countryIsoCode", "added", "isMinor", "channel")}
    docs = [json.dumps({"geo": {"city": city, "country": iso}, "edit": {"added": added, "minor": minor == "true"},
                        "tags": [channel, f"t{i % 7}"]})
            for i, (city, iso, added, minor, channel) in enumerate(zip(*cols.values()))]
    return pa.table({"__time": data.column("__time"), JSON_COLUMN: pa.array(docs, pa.string())})


def legacy_options(table: pa.Table) -> dict:
    """Column options that write the encodings from before issue 16 (bitmaps, int codes, plain
    doubles, one part per column)."""
    out = {"__time": {"blockRows": 0}}
    for field in table.schema:
        if pa.types.is_string(field.type):
            out[field.name] = {"packCodes": False, "bitmaps": True, "codeBlockRows": 0}
        elif pa.types.is_floating(field.type):
            out[field.name] = {"valueDictionary": False, "blockRows": 0}
        elif pa.types.is_integer(field.type):
            out[field.name] = {"blockRows": 0}
    return out


def strata_bytes(table: pa.Table, out: str, compression, column_types=None,
                 legacy: bool = False, options: dict | None = None) -> tuple[dict, int, float, list]:
    """(stored bytes per column, file bytes, build seconds, paths)."""
    started = time.perf_counter()
    built = build_segments(table, "wiki", out, segment_granularity="day", compression=compression,
                           column_types=column_types, string_bitmaps=legacy,
                           column_options=legacy_options(table) if legacy else options)
    seconds = time.perf_counter() - started
    per = defaultdict(int)
    for _, manifest in built:
        for col in manifest.columns:
            per[col.name] += sum(manifest.files[p].length for p in col.parts.values())
    return dict(per), sum(os.path.getsize(p) for p, _ in built), seconds, [p for p, _ in built]


def parquet_bytes(table: pa.Table, path: str, codec: str) -> tuple[dict, int]:
    pq.write_table(table, path, compression=codec)
    meta = pq.ParquetFile(path).metadata
    per = defaultdict(int)
    for rg in range(meta.num_row_groups):
        for ci in range(meta.num_columns):
            chunk = meta.row_group(rg).column(ci)
            per[chunk.path_in_schema] += chunk.total_compressed_size
    return dict(per), os.path.getsize(path)


def clickhouse_bytes(parquet: str, work: str, name: str) -> tuple[dict, int] | None:
    try:
        from chdb import session as chs
    except ImportError:
        return None
    sess = chs.Session(os.path.join(work, f"chdb-{name}"))
    try:
        sess.query("CREATE DATABASE IF NOT EXISTS b")
        sess.query(f"CREATE TABLE b.{name} ENGINE = MergeTree ORDER BY __time "
                   f"SETTINGS allow_nullable_key = 1, min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0 AS "
                   f"SELECT * FROM file('{parquet}', Parquet)")
        sess.query(f"OPTIMIZE TABLE b.{name} FINAL")
        rows = sess.query(f"SELECT name, data_compressed_bytes FROM system.columns WHERE database = 'b' "
                          f"AND table = '{name}'", "CSV").bytes().decode().strip().splitlines()
        per = {r.split(",")[0].strip('"'): int(r.split(",")[1]) for r in rows}
        total = int(sess.query(f"SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'b' AND "
                               f"table = '{name}' AND active", "CSV").bytes().decode().strip())
        return per, total
    finally:
        sess.close()


def pick_user(table: pa.Table) -> str:
    counts = pc.value_counts(table.column("user").combine_chunks())
    values, n = counts.field("values").to_pylist(), counts.field("counts").to_pylist()
    return sorted(v for v, c in zip(values, n) if v is not None and 20 <= c <= 200)[0]


def alternating(a, b, runs: int) -> tuple[float, float, object, object, float, float]:
    """Median wall ms of ``a`` and ``b`` run in turns after a warm-up of each, so a busy machine's
    slow spells hit both sides alike; their last results; and their median process CPU ms (all
    threads: steadier than wall time when other work shares the cores)."""
    ra, rb = a(), b()
    sa, sb, ca, cb = [], [], [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        ra = a()
        sa.append((time.perf_counter() - start) * 1000)
        ca.append((time.process_time() - cpu) * 1000)
        start, cpu = time.perf_counter(), time.process_time()
        rb = b()
        sb.append((time.perf_counter() - start) * 1000)
        cb.append((time.process_time() - cpu) * 1000)
    return statistics.median(sa), statistics.median(sb), ra, rb, statistics.median(ca), statistics.median(cb)


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal results, NaN equal to NaN (Arrow's equals says NaN != NaN)."""
    return a.schema == b.schema and repr(a.to_pylist()) == repr(b.to_pylist())


def needle_with_code_blocks(data: pa.Table, work: str, compression, args, packed_segs: list, packed_file: int) -> None:
    """The needle query over today's default and over the same with STRING code blocks, warm and
    with the cache emptied, and what the blocks cost in bytes."""
    options = {f.name: {"codeBlockRows": args.code_block_rows} for f in data.schema if pa.types.is_string(f.type)}
    _, blocked_file, _, paths = strata_bytes(data, os.path.join(work, "blocked"), compression, options=options)
    blocked = [Segment.open(p) for p in paths]
    native = [q for q in queries(pick_user(data)) if q[1] == "needle"][0][2]
    saved_budget = PROCESS_CACHE.max_bytes
    lines = []
    try:
        PROCESS_CACHE.set_max_bytes(8 << 30)
        for label, cold in (("cache warm", False), ("cache emptied", True)):
            def run(segs, cold=cold):
                if cold:
                    PROCESS_CACHE.clear()
                return execute(native, segs)
            a_ms, b_ms, a, b, _, _ = alternating(lambda: run(packed_segs), lambda: run(blocked), args.runs)
            lines.append((label, f"{a_ms:.1f}", f"{b_ms:.1f}", f"{b_ms / a_ms:.2f}",
                          "yes" if _same(a.table, b.table) else "NO"))
    finally:
        PROCESS_CACHE.set_max_bytes(saved_budget)
    print()
    print(f"needle query with STRING code blocks of {args.code_block_rows:,} rows: bytes/row "
          f"{packed_file / args.rows:.2f} -> {blocked_file / args.rows:.2f}")
    print_rows(("needle query", "now ms", "now + code blocks ms", "ratio", "same result"), lines, args.markdown)


def fmt(x: float) -> str:
    return "n/a" if x != x else f"{x:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--json-rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--codec", default=DEFAULT_COMPRESSION.codec, choices=sorted(CODECS),
                    help="codec of the compressed segments (default: the writer's default)")
    ap.add_argument("--code-block-rows", type=int, default=0,
                    help="also measure the needle query over segments with STRING code blocks of this many rows")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = ap.parse_args()
    compression = replace(DEFAULT_COMPRESSION, codec=args.codec)

    work = tempfile.mkdtemp(prefix="strata-bench-storage-")
    try:
        data = rows_table(args.rows)
        jdata = json_table(args.json_rows)
        naive = data.set_column(0, "__time", data.column("__time").cast(pa.timestamp("ms")))
        jnaive = jdata.set_column(0, "__time", jdata.column("__time").cast(pa.timestamp("ms")))
        json_type = {JSON_COLUMN: ColumnType.parse("COMPLEX<json>")}

        plain, plain_file, plain_s, plain_paths = strata_bytes(data, os.path.join(work, "plain"), None, legacy=True)
        before, before_file, _, _ = strata_bytes(data, os.path.join(work, "before"), compression, legacy=True)
        packed, packed_file, packed_s, packed_paths = strata_bytes(data, os.path.join(work, "packed"), compression)
        jplain, _, _, _ = strata_bytes(jdata, os.path.join(work, "jplain"), None, json_type)
        jpacked, _, _, _ = strata_bytes(jdata, os.path.join(work, "jpacked"), compression, json_type)
        snappy, snappy_file = parquet_bytes(naive, os.path.join(work, "snappy.parquet"), "snappy")
        zstd, zstd_file = parquet_bytes(naive, os.path.join(work, "zstd.parquet"), "zstd")
        jsnappy, _ = parquet_bytes(jnaive, os.path.join(work, "jsnappy.parquet"), "snappy")
        jzstd, _ = parquet_bytes(jnaive, os.path.join(work, "jzstd.parquet"), "zstd")
        ch = clickhouse_bytes(os.path.join(work, "snappy.parquet"), work, "wiki")
        jch = clickhouse_bytes(os.path.join(work, "jsnappy.parquet"), work, "docs")

        def per_row(per: dict | None, cols: list[str], n: int) -> float:
            return float("nan") if per is None else sum(per.get(c, 0) for c in cols) / n

        header = ("column type", "strata before, uncompressed", f"strata before, {args.codec}",
                  f"strata now ({args.codec})", "Parquet snappy", "Parquet zstd", "ClickHouse (LZ4)",
                  "now / Parquet zstd", "now / ClickHouse")
        lines = []
        for label, cols in GROUPS.items():
            got = [per_row(plain, cols, args.rows), per_row(before, cols, args.rows), per_row(packed, cols, args.rows),
                   per_row(snappy, cols, args.rows), per_row(zstd, cols, args.rows),
                   per_row(ch[0] if ch else None, cols, args.rows)]
            lines.append((label, *map(fmt, got), fmt(got[2] / got[4]), fmt(got[2] / got[5])))
        jcols = [JSON_COLUMN]
        got = [per_row(jplain, jcols, args.json_rows), float("nan"), per_row(jpacked, jcols, args.json_rows),
               per_row(jsnappy, jcols, args.json_rows), per_row(jzstd, jcols, args.json_rows),
               per_row(jch[0] if jch else None, jcols, args.json_rows)]
        lines.append((f"nested JSON ({args.json_rows:,} rows; peers store text)", *map(fmt, got),
                      fmt(got[2] / got[4]), fmt(got[2] / got[5])))
        files = [plain_file / args.rows, before_file / args.rows, packed_file / args.rows, snappy_file / args.rows,
                 zstd_file / args.rows, (ch[1] / args.rows) if ch else float("nan")]
        lines.append(("whole table except JSON, files", *map(fmt, files), fmt(files[2] / files[4]),
                      fmt(files[2] / files[5])))
        print(f"rows {args.rows:,}; {len(packed_paths)} day segments; bytes per row; segment build "
              f"uncompressed {args.rows / plain_s / 1e6:.2f}M rows/s, compressed {args.rows / packed_s / 1e6:.2f}M rows/s")
        print_rows(header, lines, args.markdown)

        # Where the compressed bytes go: per column, by part role.
        roles = defaultdict(int)
        for path in packed_paths:
            seg = Segment.open(path)
            for name, entry in seg.manifest.files.items():
                role = name.rsplit("/", 1)[-1]
                roles["values (blocks)" if role.startswith("block") else role] += entry.length
            seg.close()
        print("compressed segment bytes per row by part role: " +
              ", ".join(f"{r} {b / args.rows:.2f}" for r, b in sorted(roles.items(), key=lambda x: -x[1])))

        plain_segs = [Segment.open(p) for p in plain_paths]
        packed_segs = [Segment.open(p) for p in packed_paths]
        saved_budget = PROCESS_CACHE.max_bytes
        qlines, warm_ratios, cold_ratios, warm_cpu, cold_cpu = [], [], [], [], []
        try:
            for name, _, native, _ in queries(pick_user(data)):
                def run_plain():
                    return execute(native, plain_segs)

                def run_packed():
                    return execute(native, packed_segs)

                def run_packed_cold():
                    PROCESS_CACHE.clear()  # as after loading: the query decodes every part it reads
                    return execute(native, packed_segs)

                PROCESS_CACHE.set_max_bytes(8 << 30)  # holds every decoded part: repeated queries
                u_ms, w_ms, u, w, u_cpu, w_cpu = alternating(run_plain, run_packed, args.runs)
                u2_ms, c_ms, _, c, u2_cpu, c_cpu = alternating(run_plain, run_packed_cold, args.runs)
                same = _same(u.table, w.table) and _same(u.table, c.table)
                warm_ratios.append(w_ms / u_ms)
                cold_ratios.append(c_ms / u2_ms)
                warm_cpu.append(w_cpu / u_cpu)
                cold_cpu.append(c_cpu / u2_cpu)
                qlines.append((name, f"{u_ms:.1f} / {u_cpu:.1f}", f"{w_ms:.1f} / {w_cpu:.1f}",
                               f"{w_ms / u_ms:.2f} / {w_cpu / u_cpu:.2f}", f"{u2_ms:.1f} / {u2_cpu:.1f}",
                               f"{c_ms:.1f} / {c_cpu:.1f}", f"{c_ms / u2_ms:.2f} / {c_cpu / u2_cpu:.2f}",
                               "yes" if same else "NO"))
        finally:
            PROCESS_CACHE.set_max_bytes(saved_budget)
        print()
        print("wall ms / process CPU ms, median of each:")
        print_rows(("query", "before, uncompressed", "now, cache warm", "ratio", "before, uncompressed (again)",
                    "now, cache emptied", "ratio", "same result"), qlines, args.markdown)
        if args.code_block_rows:
            needle_with_code_blocks(data, work, compression, args, packed_segs, packed_file)
        geo = lambda xs: float(np.exp(np.mean(np.log(xs))))  # noqa: E731
        print(f"geomean now/before-uncompressed (wall / CPU): cache warm {geo(warm_ratios):.2f} / "
              f"{geo(warm_cpu):.2f}, cache emptied before each query {geo(cold_ratios):.2f} / {geo(cold_cpu):.2f} "
              f"(goal <= 1.10); segments now are {packed_file / zstd_file:.2f}x Parquet zstd "
              f"(before: {before_file / zstd_file:.2f}x compressed, {plain_file / zstd_file:.2f}x uncompressed), "
              f"{packed_file / ch[1]:.2f}x ClickHouse (goal <= 1.0x Parquet zstd)" if ch else "")
        return 0 if all(line[-1] == "yes" for line in qlines) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
