"""CPU per line of one text-scan reading task (``text_scan.scan_listing``: read the JSON lines, time
them, cut and zstd-encode the blobs) on bench/nested.py's documents, in one process, with the
compiled JSON-lines reader and with row_parser (``STRATA_JSON_READER=python``), interleaved.

    .venv/bin/python bench/text_scan_task.py [--lines 100000] [--runs 3]

The statement is bench/nested.py's ingest: ``SELECT MILLIS_TO_TIMESTAMP(ts) AS __time, doc``
over ``{"ts": .., "doc": {..}}`` lines, the doc a COMPLEX<json> column. Also prints the reader alone
(no blobs) so the reader's share and the blob encoding's share can be told apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyarrow as pa  # noqa: E402


def _write(path: str, lines: int) -> None:
    from bench.nested import SEGMENT_ROWS, documents

    with open(path, "w", encoding="utf-8") as f:
        done = 0
        while done < lines:
            part, _ = documents(min(SEGMENT_ROWS, lines - done), 100 + done // SEGMENT_ROWS)
            for t, d in zip(part.column("__time").to_pylist(), part.column("doc").to_pylist()):
                f.write(f'{{"ts":{t},"doc":{d}}}\n')
            done += part.num_rows


def bench_scan(path: str, lines: int):
    """Writes ``lines`` bench documents to ``path``; returns the INSERT statement reading them into
    a COMPLEX<json> column, its source, the text scan it takes and the one-file listing."""
    from common.ingest.statement import parse_ingestion
    from services.ingestion.text_scan import MILLIS, PICK, TextScan

    _write(path, lines)
    stmt = parse_ingestion(
        f"INSERT INTO events SELECT MILLIS_TO_TIMESTAMP(ts) AS __time, doc FROM TABLE(localfiles(files => "
        f"ARRAY['{path}'], format => 'json')) EXTEND (ts BIGINT, doc TYPE('COMPLEX<json>')) PARTITIONED BY DAY")
    [source] = stmt.sources.values()
    scan = TextScan(source.input_format, source.signature, (
        ("__time", "ts", MILLIS, pa.timestamp("us", tz="UTC")), ("doc", "doc", PICK, pa.string())))
    listing = [pa.RecordBatch.from_pylist([{"name": path, "path": path, "data": None, "spark_file": None,
                                            "start": None, "end": None, "first_line": 1}])]
    return stmt, source, scan, listing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from services.ingestion import json_lines_reader
    from services.ingestion.text_scan import scan_listing

    pa.set_cpu_count(1)
    work = tempfile.mkdtemp(prefix="strata-scan-task-")
    path = os.path.join(work, "events.json")
    stmt, source, scan, listing = bench_scan(path, args.lines)
    if not json_lines_reader.available():
        print("the compiled reader is not built (pip install -e .): both rows below are row_parser")

    def reader_only() -> int:
        with open(path, "rb") as stream:
            return sum(b.num_rows for b in json_lines_reader.parse_text(path, stream, source.input_format,
                                                                          source.signature))

    def task() -> int:
        return sum(1 for _ in scan_listing(listing, scan, stmt.partitioned_by, ("__time",), 0.000256))

    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.runs):
        for mode in ("compiled reader", "row_parser"):
            json_lines_reader.ENABLED = mode == "compiled reader"
            for what, run in (("reader", reader_only), ("reading task", task)):
                started = time.process_time()
                run()
                times.setdefault((mode, what), []).append(time.process_time() - started)
    json_lines_reader.ENABLED = True
    print(f"| {args.lines:,} bench lines, 1 process | best CPU s | median CPU s | us/line |")
    print("|---|---|---|---|")
    for (mode, what), got in times.items():
        best = min(got)
        print(f"| {what}, {mode} | {best:.3f} | {statistics.median(got):.3f} | {best / args.lines * 1e6:.2f} |")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
