"""Nested JSON columns benchmark: filters, group-bys and point lookups on paths of a COMPLEX<json>
column, beside the same on flat columns, DuckDB (json_extract over the raw text, and a STRUCT
column) and ClickHouse's JSON type (chdb, in-process); the JSON column's size against the gzip'd
text; and the JSON ingest rate through Spark (local[2]).

    .venv/bin/python bench/nested.py [--rows 10000000] [--runs 5] [--ingest-rows 1000000] [--markdown]

Each document has 32 paths over 3 levels (objects in objects), an array of numbers, an array of
strings, and a path of mixed type (a number in some rows, text in others); three of its fields are
also stored as flat columns. Day segments of at most 1M rows, in-process engine (no broker hop),
2 cores. Query times are "repeated / first run" (``bench/first_run.py``: one query text again and
again, and a text not seen before on every run, same work). Goals (issue 10): nested <= 1.2x flat; >= 10x faster than DuckDB's json_extract; no
slower than ClickHouse's JSON type; JSON column bytes <= 1.5x the gzip'd JSON text; ingest
>= 150k documents/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench import first_run  # noqa: E402
from bench.engine import print_rows  # noqa: E402
from bench.process_cpu import jvm_threads, process_cpu  # noqa: E402

DAY_MS = 86_400_000
START_MS = 1_600_000_000_000 // DAY_MS * DAY_MS
SEGMENT_ROWS = 1_000_000
COUNTRIES = [f"C{i:02d}" for i in range(50)]
EVENT_TYPES = ["click", "view", "scroll", "buy", "share"] + [f"e{i}" for i in range(15)]
CITIES = [f"city{i}" for i in range(500)]
TIERS = ["free", "basic", "pro", "enterprise"]
APPS = [f"app{i}" for i in range(10)]
OSES = ["ios", "android", "linux", "windows", "mac"]
REFERRERS = [f"ref{i}" for i in range(30)]
DEVICES = ["phone", "tablet", "desktop", "tv", "watch"]
MODELS = [f"m{i}" for i in range(100)]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "CHF"]
TAGS = ["new", "sale", "promo", "vip", "beta"]


def _json_str(v: str) -> str:
    return '"' + v + '"'  # the generated strings need no escaping


def documents(n: int, seed: int) -> tuple[pa.Table, int]:
    """``n`` rows: __time, the JSON text ``doc`` and flat copies of three of its fields; and the
    number of paths a document has."""
    rng = np.random.default_rng(seed)
    user_id = rng.integers(0, 5_000_000, n)
    country = rng.integers(0, len(COUNTRIES), n)
    age = rng.integers(16, 90, n)
    tier = rng.integers(0, len(TIERS), n)
    lat = np.round(rng.uniform(-90, 90, n), 4)
    lon = np.round(rng.uniform(-180, 180, n), 4)
    city = rng.integers(0, len(CITIES), n)
    etype = np.minimum(rng.geometric(0.3, n) - 1, len(EVENT_TYPES) - 1)
    ets = rng.integers(0, 86_400_000, n)
    value = np.round(rng.exponential(20.0, n), 2)
    count = rng.integers(1, 20, n)
    ntags = rng.integers(0, 4, n)
    tag0, tag1, tag2 = (rng.integers(0, len(TAGS), n) for _ in range(3))
    fa, fb = rng.integers(0, 2, n), rng.integers(0, 2, n)
    app, osn = rng.integers(0, len(APPS), n), rng.integers(0, len(OSES), n)
    ver = rng.integers(0, 40, n)
    session = rng.integers(0, 1 << 40, n)
    duration, pages = rng.integers(0, 3600, n), rng.integers(1, 50, n)
    ref, bucket, variant = rng.integers(0, len(REFERRERS), n), rng.integers(0, 10, n), rng.integers(0, 2, n)
    dev, model = rng.integers(0, len(DEVICES), n), rng.integers(0, len(MODELS), n)
    w, h = rng.integers(320, 3840, n), rng.integers(240, 2160, n)
    m0, m1, m2 = rng.integers(0, 1000, n), rng.integers(0, 1000, n), rng.integers(0, 1000, n)
    mixed_num = rng.integers(0, 100, n)
    mixed_is_text = rng.random(n) < 0.3
    price = np.round(rng.uniform(0.5, 500, n), 2)
    cur = rng.integers(0, len(CURRENCIES), n)
    # Python lists: indexing numpy arrays value by value costs several times the formatting.
    cols = [user_id, country, age, tier, lat, lon, city, etype, ets, value, count, ntags, tag0, tag1, tag2, fa, fb,
            app, osn, ver, session, duration, pages, ref, bucket, variant, dev, model, w, h, m0, m1, m2, mixed_num,
            mixed_is_text, price, cur]
    texts = []
    for (uid, co, ag, ti, la, lo, ci, et, ts, va, cn, nt, t0, t1, t2, a, b, ap, os_, ve, se, du, pg, rf, bu, vr, dv, mo,
         wi, he, x0, x1, x2, mn, mt, pr, cu) in zip(*(c.tolist() for c in cols)):
        tags = ",".join(_json_str(TAGS[t]) for t in (t0, t1, t2)[:nt])
        mixed = _json_str(f"m{mn}") if mt else str(mn)
        texts.append(
            f'{{"user":{{"id":{uid},"name":"u{uid}","country":"{COUNTRIES[co]}","age":{ag},'
            f'"tier":"{TIERS[ti]}","geo":{{"lat":{la},"lon":{lo},"city":"{CITIES[ci]}"}}}},'
            f'"event":{{"type":"{EVENT_TYPES[et]}","ts":{ts},"value":{va},"count":{cn},'
            f'"tags":[{tags}],"flags":{{"a":{"true" if a else "false"},"b":{"true" if b else "false"}}},'
            f'"source":{{"app":"{APPS[ap]}","version":"1.{ve}","os":"{OSES[os_]}"}}}},'
            f'"session":{{"id":"s{se:010x}","duration":{du},"pages":{pg},'
            f'"referrer":"{REFERRERS[rf]}","ab":{{"bucket":{bu},"variant":"{"AB"[vr]}"}}}},'
            f'"device":{{"type":"{DEVICES[dv]}","model":"{MODELS[mo]}","screen":{{"w":{wi},"h":{he}}}}},'
            f'"metrics":[{x0},{x1},{x2}],"mixed":{mixed},"price":{pr},"currency":"{CURRENCIES[cu]}"}}')
    times = START_MS + seed * DAY_MS + np.arange(n) * (DAY_MS // SEGMENT_ROWS)  # seed: the day
    table = pa.table({
        "__time": pa.array(times, pa.int64()),
        "doc": pa.array(texts, pa.string()),
        "country": pa.array(np.array(COUNTRIES, dtype=object)[country], pa.string()),
        "etype": pa.array(np.array(EVENT_TYPES, dtype=object)[etype], pa.string()),
        "value": pa.array(value, pa.float64()),
    })
    paths = sum(1 for _ in _paths(json.loads(texts[0])))
    return table, paths


def _paths(doc, prefix="$"):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, f"{prefix}.{k}")
    else:
        yield prefix


def queries(session_id: str):
    """(name, strata nested, strata flat, DuckDB text, DuckDB struct, ClickHouse JSON)."""
    iv = ["2000-01-01/2100-01-01"]
    nested_vcs = [{"type": "nested-field", "columnName": "doc", "path": "$.user.country", "outputName": "c",
                   "expectedType": "STRING"},
                  {"type": "nested-field", "columnName": "doc", "path": "$.event.type", "outputName": "t",
                   "expectedType": "STRING"},
                  {"type": "nested-field", "columnName": "doc", "path": "$.event.value", "outputName": "v",
                   "expectedType": "DOUBLE"}]
    group = {"queryType": "groupBy", "dataSource": "events", "intervals": iv, "granularity": "all",
             "dimensions": ["c"], "filter": {"type": "selector", "dimension": "t", "value": "buy"},
             "aggregations": [{"type": "count", "name": "n"}, {"type": "doubleSum", "name": "s", "fieldName": "v"}],
             "virtualColumns": nested_vcs}
    flat = {**group, "dimensions": ["country"], "filter": {"type": "selector", "dimension": "etype", "value": "buy"},
            "aggregations": [{"type": "count", "name": "n"}, {"type": "doubleSum", "name": "s", "fieldName": "value"}],
            "virtualColumns": []}
    lookup = {"queryType": "timeseries", "dataSource": "events", "intervals": iv, "granularity": "all",
              "filter": {"type": "selector", "dimension": "sid", "value": session_id},
              "aggregations": [{"type": "count", "name": "n"}],
              "virtualColumns": [{"type": "nested-field", "columnName": "doc", "path": "$.session.id",
                                  "outputName": "sid", "expectedType": "STRING"}]}
    return [
        ("group by $.user.country where $.event.type = 'buy'", group, flat,
         "SELECT json_extract_string(doc, '$.user.country') AS c, count(*), sum(CAST(json_extract(doc, "
         "'$.event.value') AS DOUBLE)) FROM raw WHERE json_extract_string(doc, '$.event.type') = 'buy' GROUP BY 1",
         "SELECT doc.user.country AS c, count(*), sum(doc.event.value) FROM st WHERE doc.event.type = 'buy' "
         "GROUP BY 1",
         "SELECT doc.user.country::String AS c, count(), sum(doc.event.value::Float64) FROM b.events "
         "WHERE doc.event.type::String = 'buy' GROUP BY c"),
        ("count where $.session.id = one id (high cardinality)", lookup, None,
         f"SELECT count(*) FROM raw WHERE json_extract_string(doc, '$.session.id') = '{session_id}'",
         f"SELECT count(*) FROM st WHERE doc.session.id = '{session_id}'",
         f"SELECT count() FROM b.events WHERE doc.session.id::String = '{session_id}'"),
    ]


def clickhouse(parquet: str):
    """A chdb session with the documents in a MergeTree table with a JSON column, or None."""
    try:
        from chdb import session as chs
    except ImportError:
        return None
    sess = chs.Session()
    sess.query("CREATE DATABASE IF NOT EXISTS b")
    sess.query("CREATE TABLE b.events (__time DateTime64(3, 'UTC'), doc JSON) ENGINE = MergeTree ORDER BY __time")
    sess.query(f"INSERT INTO b.events SELECT __time, doc::JSON FROM file('{parquet}', Parquet)")
    return sess


def json_column_bytes(manifest, column: str) -> int:
    return sum(manifest.files[p].length for c in manifest.columns if c.name == column for p in c.parts.values())


def _process_cpu() -> dict[str, float]:
    """CPU seconds of the Spark JVM and the Python workers (bench/process_cpu.py), without this
    driver process's own."""
    return {k: v for k, v in process_cpu().items() if k != "driver"}


def ingest_files(directory: str, rows: int) -> list[str]:
    """The ingest's input: JSON lines ``{"ts": <millis>, "doc": {...}}``, one file per day of up to
    SEGMENT_ROWS documents, generated and written a day at a time (so memory holds one day). A
    file already in ``directory`` under its name (day and row count) is reused."""
    import pyarrow.compute as pc

    os.makedirs(directory, exist_ok=True)
    paths, done = [], 0
    while done < rows:
        n, day = min(SEGMENT_ROWS, rows - done), 100 + done // SEGMENT_ROWS
        path = os.path.join(directory, f"events-{day}-{n}.json")
        if not os.path.exists(path):
            part, _ = documents(n, day)
            lines = pc.binary_join_element_wise('{"ts":', part.column("__time").cast(pa.string()), ',"doc":',
                                                part.column("doc"), "}\n", "").combine_chunks()
            offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset:lines.offset + len(lines) + 1]
            with open(path + ".part", "wb") as f:
                f.write(memoryview(lines.buffers()[2])[offsets[0]:offsets[-1]])
            os.replace(path + ".part", path)
            del part, lines
        paths.append(path)
        done += n
    return paths


def ingest_rate(work: str, rows: int, rows_per_segment: int = 500_000, general_path: bool = False,
                spark_conf: dict | None = None, input_dir: str | None = None) -> tuple[float, float, int]:
    """Documents per second through a Spark (local[2]) INSERT of newline-delimited JSON into a
    COMPLEX<json> column, file -> published segments; (rate, seconds, rows written). The documents
    fill 1M rows per day, so ``rows_per_segment`` (context rowsPerSegment) below that gives each
    day several segments, which Spark builds in parallel (one segment is built by one task).
    ``general_path``: SET textScan = false (rows through Spark's cache and SQL, as before the text scan)."""
    from services.rpc.gen.strata.v1 import coordinator_pb2_grpc
    from services.grpc_server import channel
    from services.ingestion.coordinator_publisher import CoordinatorPublisher
    from services.ingestion.spark_job import IngestionJob, run_ingestion
    from services.ingestion.spark_session import get_or_create_session
    from common.ingest.statement import parse_ingestion
    from tests.harness.embedded_cluster import EmbeddedCluster

    paths = ingest_files(input_dir or work, rows)
    cluster = EmbeddedCluster(os.path.join(work, "cluster"), historicals=1, max_cache_bytes=8 << 30)
    try:
        spark = get_or_create_session("strata-nested-bench", master="local[2]", conf=spark_conf)
        spark.range(1).count()
        # Start-up (JVM, session, Python workers started and their imports) is left out of the
        # figures below; a task on a fresh driver pays it too.
        print("session start-up CPU s (not counted below): " +
              ", ".join(f"{k} {v:.1f}" for k, v in sorted(_process_cpu().items())))
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel(f"127.0.0.1:{cluster.coordinator.grpc.port}"))
        files = ", ".join(f"'{p}'" for p in paths)
        statement = parse_ingestion(
            f"INSERT INTO events SELECT MILLIS_TO_TIMESTAMP(ts) AS __time, doc FROM TABLE(localfiles(files => "
            f"ARRAY[{files}], format => 'json')) EXTEND (ts BIGINT, doc TYPE('COMPLEX<json>')) PARTITIONED BY DAY")
        cpu_before, threads_before = _process_cpu(), jvm_threads()
        marks: list[tuple[str, dict]] = []  # (phase, CPU seconds when it started)

        def progress(phase: str, _details: dict) -> None:
            marks.append((phase, _process_cpu()))

        started = time.perf_counter()
        context = {"rowsPerSegment": rows_per_segment, **({"textScan": False} if general_path else {})}
        job = IngestionJob("bench-nested", statement, context=context)
        report = run_ingestion(spark, job, cluster.deep_storage_url, "",
                               CoordinatorPublisher(stub, "bench-nested", "events"), progress=progress)
        seconds = time.perf_counter() - started
        phases = ", ".join(f"{k} {v:.1f}s" if isinstance(v, (int, float)) else f"{k} {v}"
                           for k, v in report.phases.items())
        print(f"ingest phases: {phases}")
        cpu, threads = _process_cpu(), jvm_threads()
        print("ingest CPU s: " + ", ".join(f"{k} {v - cpu_before.get(k, 0.0):.1f}" for k, v in sorted(cpu.items())))
        spent = {k: v - threads_before.get(k, 0.0) for k, v in sorted(threads.items())}
        spent["ended threads"] = cpu.get("jvm", 0.0) - cpu_before.get("jvm", 0.0) - sum(spent.values())
        print("  JVM CPU s by thread: " + ", ".join(f"{k} {v:.1f}" for k, v in spent.items()))
        for (phase, at), (_, end) in zip(marks, marks[1:]):
            spent = ", ".join(f"{k} {end.get(k, 0.0) - at.get(k, 0.0):.1f}" for k in sorted(end))
            print(f"  {phase} CPU s: {spent}")
        spark.stop()
    finally:
        cluster.stop()
    return report.rows_written / seconds, seconds, report.rows_written


def build_rate(rows: int, runs: int) -> None:
    """CPU time of the nested column build alone (``encode_nested``) on ``rows`` bench documents, one
    thread, with the compiled field split and with the pure Python one, interleaved."""
    import statistics

    from common.segment import nested_native_split
    from common.segment.nested_column import encode_nested
    from common.types.column_type import JSON

    pa.set_cpu_count(1)
    col = documents(rows, 0)[0].column("doc").combine_chunks()
    if not nested_native_split.available():
        print("the compiled split is not built (pip install -e .): both rows below are the Python split")
    times: dict[str, list[float]] = {"compiled split": [], "Python split": []}
    for _ in range(runs):
        for mode, got in times.items():
            nested_native_split.ENABLED = mode == "compiled split"
            started = time.process_time()
            encode_nested(col, JSON)
            got.append(time.process_time() - started)
    nested_native_split.ENABLED = True
    print(f"| encode_nested, {rows:,} documents, 1 thread | best CPU s | median CPU s | us/document | documents/s |")
    print("|---|---|---|---|---|")
    for mode, got in times.items():
        best = min(got)
        print(f"| {mode} | {best:.3f} | {statistics.median(got):.3f} | {best / rows * 1e6:.1f} | {rows / best:,.0f} |")
    print(f"load average {os.getloadavg()[0]:.1f}")


def _text_and_gzip_bytes(docs: pa.ChunkedArray, step: int = 100_000) -> tuple[int, int]:
    """Bytes of the documents as newline-separated text, and gzip'd (level 6), a slice at a time
    (one gzip stream, so the same size as compressing the whole text at once)."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    text = packed = 0
    for lo in range(0, len(docs), step):
        piece = ("\n" if lo else "") + "\n".join(docs.slice(lo, step).to_pylist())
        raw = piece.encode()
        text += len(raw)
        packed += len(z.compress(raw))
    return text, packed + len(z.flush())


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--spark-conf {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000, help="documents for the queries; 0: only the ingest")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ingest-rows", type=int, default=1_000_000, help="documents for the Spark ingest rate; 0: skip")
    ap.add_argument("--ingest-rows-per-segment", type=int, default=500_000,
                    help="context rowsPerSegment of the ingest (the documents fill 1M rows per day)")
    ap.add_argument("--general-path", action="store_true",
                    help="ingest through the general path (SET textScan = false) instead of the text scan")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the ingest's session (repeatable), e.g. to compare JVM options")
    ap.add_argument("--ingest-dir", help="keep the ingest's JSON lines files here (one per day) and reuse them "
                                         "on later runs, instead of generating them in a temporary directory")
    ap.add_argument("--duckdb-memory", default="4GB", help="DuckDB's memory_limit (its tables are on disk)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--build-rows", type=int, default=0,
                    help="only time the nested column build of this many documents (compiled vs Python split)")
    args = ap.parse_args()
    if args.build_rows:
        build_rate(args.build_rows, args.runs)
        return 0

    import duckdb

    from common.query import execute
    from common.segment.builder import build_segment
    from common.segment.segment import Segment
    from common.segment.segment_id import SegmentId
    from common.types.column_type import JSON
    from common.types.interval import Interval

    work = tempfile.mkdtemp(prefix="strata-bench-nested-")
    if args.rows == 0:  # the ingest rate alone
        try:
            rate, seconds, written = ingest_rate(work, args.ingest_rows, args.ingest_rows_per_segment,
                                                 args.general_path, _spark_conf(args.spark_conf), args.ingest_dir)
            print(f"Spark local[2] ingest {written:,} documents in {seconds:.1f}s = {rate:,.0f} docs/s (goal >= 150k)")
            return 0
        finally:
            shutil.rmtree(work, ignore_errors=True)
    try:
        parquet = os.path.join(work, "events.parquet")
        writer, segments = None, []
        json_bytes = gzip_bytes = text_bytes = 0
        gen_s = build_s = 0.0
        session_id, paths = None, 0
        done = 0
        while done < args.rows:
            n = min(SEGMENT_ROWS, args.rows - done)
            started = time.perf_counter()
            part, paths = documents(n, done // SEGMENT_ROWS)
            gen_s += time.perf_counter() - started
            session_id = session_id or json.loads(part.column("doc")[n // 2].as_py())["session"]["id"]
            t, g = _text_and_gzip_bytes(part.column("doc"))
            text_bytes += t
            gzip_bytes += g
            day = START_MS + (done // SEGMENT_ROWS) * DAY_MS
            path = os.path.join(work, f"events-{day}.sseg")
            started = time.perf_counter()
            manifest = build_segment(part, path, SegmentId("events", Interval(day, day + DAY_MS), "v1", 0),
                                     column_types={"doc": JSON})
            build_s += time.perf_counter() - started
            json_bytes += json_column_bytes(manifest, "doc")
            segments.append(Segment.open(path))
            out = part.set_column(0, "__time", part.column("__time").cast(pa.timestamp("ms")))
            if writer is None:
                writer = pq.ParquetWriter(parquet, out.schema)
            writer.write_table(out)
            done += n
            print(f"  {done:,} documents generated and built ({gen_s:.0f}s, {build_s:.0f}s)", flush=True)
        writer.close()

        # On disk, with a memory limit: 10M documents as text and as STRUCT do not fit in memory.
        con = duckdb.connect(os.path.join(work, "duck.db"))
        con.sql(f"SET memory_limit = '{args.duckdb_memory}'")
        con.sql(f"SET temp_directory = '{os.path.join(work, 'duck.tmp')}'")
        con.sql(f"CREATE TABLE raw AS SELECT __time, doc FROM read_parquet('{parquet}')")
        struct_type = con.sql(f"SELECT json_structure(doc) FROM read_parquet('{parquet}') LIMIT 1").fetchall()[0][0]
        con.sql(f"CREATE TABLE st AS SELECT __time, json_transform(doc, '{struct_type}') AS doc "
                f"FROM read_parquet('{parquet}')")
        ch = clickhouse(parquet)
        print("  DuckDB tables and ClickHouse table loaded", flush=True)

        lines, vs_flat, vs_duck, vs_ch = [], [], [], []
        both = first_run.repeated_and_first
        nan2 = (float("nan"), float("nan"))

        def pair(a: tuple, fmt: str = "{:.1f}") -> str:
            return f"{fmt.format(a[0])} / {fmt.format(a[1])}"

        for name, nested, flat, duck_text, duck_struct, ch_sql in queries(session_id):
            *n_ms, n_out = both(lambda q: execute(q, segments), first_run.native_variant(nested), args.runs)
            f_ms = both(lambda q: execute(q, segments), first_run.native_variant(flat), args.runs)[:2] \
                if flat is not None else nan2
            *dt_ms, dt_out = both(lambda t: con.sql(t).fetchall(), first_run.sql_variant(duck_text), args.runs)
            ds_ms = both(lambda t: con.sql(t).fetchall(), first_run.sql_variant(duck_struct), args.runs)[:2]
            c_ms = both(lambda t: ch.query(t, "Arrow"), first_run.clickhouse_variant(ch_sql), args.runs)[:2] \
                if ch is not None else nan2
            same = n_out.table.num_rows == len(dt_out)
            if flat is not None:
                vs_flat.append((n_ms[0] / f_ms[0], n_ms[1] / f_ms[1]))
            vs_duck.append((dt_ms[0] / n_ms[0], dt_ms[1] / n_ms[1]))
            if ch is not None:
                vs_ch.append((n_ms[0] / c_ms[0], n_ms[1] / c_ms[1]))
            lines.append((name, pair(n_ms), pair(f_ms) if flat else "n/a",
                          pair((n_ms[0] / f_ms[0], n_ms[1] / f_ms[1]), "{:.2f}") if flat else "n/a", pair(dt_ms),
                          pair((dt_ms[0] / n_ms[0], dt_ms[1] / n_ms[1]), "{:.1f}x"), pair(ds_ms), pair(c_ms),
                          pair((n_ms[0] / c_ms[0], n_ms[1] / c_ms[1]), "{:.2f}") if ch is not None else "n/a",
                          "yes" if same else "NO"))
        print(f"rows {args.rows:,} in {len(segments)} segments; {paths} paths per document; generated in "
              f"{gen_s:.0f}s, segments built in {build_s:.0f}s ({args.rows / build_s:,.0f} docs/s, one process); "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"each time and ratio cell is 'repeated / first run' (median of {args.runs}): repeated = one query "
              "text again and again after a warm-up run of it; first run = a query text not seen before on every "
              "run, same work (bench/first_run.py)")
        print_rows(("query", "nested ms", "flat ms", "nested/flat", "DuckDB json_extract ms", "vs DuckDB",
                    "DuckDB struct ms", "ClickHouse JSON ms", "nested/CH", "same rows"), lines, args.markdown)
        print(f"JSON column bytes {json_bytes:,}; JSON text {text_bytes:,}, gzip'd {gzip_bytes:,}: "
              f"{json_bytes / gzip_bytes:.2f}x gzip (goal <= 1.5x)")
        def worst(values: list, at: int, pick=max) -> float:
            return pick(v[at] for v in values) if values else float("nan")

        summary = "; ".join(
            f"{label}: nested/flat {worst(vs_flat, at):.2f} (goal <= 1.2), vs DuckDB json_extract min "
            f"{worst(vs_duck, at, min):.1f}x (goal >= 10x), nested/ClickHouse JSON worst {worst(vs_ch, at):.2f} "
            "(goal <= 1)" for at, label in ((0, "repeated"), (1, "first run")))
        if args.ingest_rows:
            rate, seconds, written = ingest_rate(work, args.ingest_rows, args.ingest_rows_per_segment,
                                                 args.general_path, _spark_conf(args.spark_conf), args.ingest_dir)
            summary += (f"; Spark local[2] ingest {written:,} documents in {seconds:.1f}s = {rate:,.0f} docs/s "
                        "(goal >= 150k)")
        print(summary)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
