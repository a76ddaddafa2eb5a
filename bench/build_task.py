"""CPU of one text-scan building task (``build.build_blobs``: decode the blobs, build the segment
with its nested JSON column, write and compress its parts, push it to local deep storage) on
bench/nested.py's documents, in one process, by phase; and the reading task's blob encoding.

    .venv/bin/python bench/build_task.py [--lines 500000] [--runs 3] [--reversed] [--blob-codec zstd:1]

Each build prints its user and system CPU and page faults: a Spark worker builds its segment once,
on fresh memory, so compare first builds (``--runs 1``); later builds in one process reuse memory
the allocator kept.

The blobs are what the reading task (``text_scan.scan_listing``) sends for bench/nested.py's
ingest (``SELECT MILLIS_TO_TIMESTAMP(ts) AS __time, doc``, the doc a COMPLEX<json> column); one
segment is built of all of them, as a Spark building task does for one ``rowsPerSegment`` segment.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyarrow as pa  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=500_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="pa.set_cpu_count (0: leave pyarrow's default)")
    ap.add_argument("--reversed", action="store_true",
                    help="hand the blobs over last first (a Spark shuffle fetches them in no set order)")
    ap.add_argument("--blob-codec", default="", metavar="CODEC[:LEVEL]",
                    help="the blobs' IPC compression instead of build.py's (zstd, lz4, none; zstd:3)")
    ap.add_argument("--profile", default="", help="cProfile output path of the last build")
    args = ap.parse_args()

    if args.blob_codec:
        import services.ingestion.build as build

        codec, _, level = args.blob_codec.partition(":")
        build._IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression=None if codec == "none" else pa.Codec(
            codec, int(level) if level else None))
    if args.threads:
        pa.set_cpu_count(args.threads)
    work = tempfile.mkdtemp(prefix="strata-build-task-")
    try:
        return _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args, work: str) -> int:
    from bench.nested import DAY_MS, START_MS
    from bench.text_scan_task import bench_scan
    from common.segment.segment_id import SegmentId
    from common.types.interval import Interval
    from services.deep_storage.local import LocalDeepStorage
    from services.ingestion.build import BLOB_SCHEMA, BuildSpec, PlannedSegment, build_blobs
    from services.ingestion.text_scan import BLOB, scan_listing

    path = os.path.join(work, "events.json")
    stmt, _source, scan, listing = bench_scan(path, args.lines)
    started = time.process_time()
    rows = [b for b in scan_listing(listing, scan, stmt.partitioned_by, (), 0.0) if b.column(0)[0].as_py() == BLOB]
    read_cpu = time.process_time() - started
    blobs = [b.column(3)[0].as_buffer() for b in rows]
    blob_bytes = sum(b.size for b in blobs)
    if args.reversed:
        blobs = blobs[::-1]
    batches = [pa.RecordBatch.from_arrays([pa.array([0] * len(blobs), pa.int32()),
                                           pa.array([b.to_pybytes() for b in blobs], pa.binary())],
                                          schema=BLOB_SCHEMA)]
    day = START_MS + 100 * DAY_MS
    sid = SegmentId("events", Interval(day, day + DAY_MS), "v1")
    spec = BuildSpec({0: PlannedSegment(sid, 1)}, "events/", json_columns=("doc",))
    storage = LocalDeepStorage(os.path.join(work, "deep"))
    builds = []
    for run in range(args.runs):
        before, faults = os.times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        out = list(build_blobs(iter(batches), spec, storage))
        after, faults = os.times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        user, system = after.user - before.user, after.system - before.system
        builds.append(user + system)
        print(f"build {run + 1}: user {user:.3f} s, system {system:.3f} s, page faults {faults:,}")
    if args.profile:
        import cProfile
        cProfile.runctx("list(build_blobs(iter(batches), spec, storage))", globals(), locals(), args.profile)
    n = args.lines
    print(f"| {n:,} bench documents, 1 process (pa cpu count {pa.cpu_count()}"
          f"{', blobs reversed' if args.reversed else ''}) | CPU s | us/doc |")
    print("|---|---|---|")
    print(f"| reading task (scan_listing, blobs included) | {read_cpu:.3f} | {read_cpu / n * 1e6:.2f} |")
    print(f"| building task (build_blobs), best of {args.runs} | {min(builds):.3f} | {min(builds) / n * 1e6:.2f} |")
    print(f"| building task, median | {statistics.median(builds):.3f} | {statistics.median(builds) / n * 1e6:.2f} |")
    print(f"blobs: {len(blobs)}, {blob_bytes / n:.1f} bytes/doc; segment {out[0].column('size')[0].as_py() / n:.1f} "
          f"bytes/doc; load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
