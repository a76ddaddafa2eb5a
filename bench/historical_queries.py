"""A historical's own handling of the projection benchmark's SQL queries, without the wire: the
native query the broker sends for each (planned here from the SQL of
``bench/projections_cluster.py``) given to ``HistoricalServicer.RunQuery`` as a request for all
7 day segments (the broker asks one historical for every segment of a query over projection
rows; ``--half`` asks for the 4 one of two historicals would hold, as this bench did before),
with a stand-in node and call context; the partial is read to its last Arrow chunk.

    .venv/bin/python bench/historical_queries.py [--rows 1000000] [--runs 500] [--half] [--markdown]

Printed per query: CPU milliseconds of the calling thread per request (the fastest and the median
run; CPU time, so the neighbours' load on a shared machine counts less than in wall time), and
the same for strata's in-process ``execute`` of the native form over every segment (the
benchmark's in-process column). Projection rows do not grow with ``--rows`` past 1M (one row
per hour and channel), so the default size answers for the 10M benchmark.

With ``--base`` (``noProjections``) base segments run on thread pools, which this clock does not
see: only the in-process column is printed, as wall milliseconds of ``execute`` on a one-thread
pool (fastest and median run), to check that base rows did not get slower.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.engine import print_rows  # noqa: E402
from bench.projections import build  # noqa: E402
from bench.projections_cluster import NATIVE, QUERIES  # noqa: E402
from common.demo import table as demo_table  # noqa: E402
from common.query import execute  # noqa: E402
from common.query.engine import union_schema  # noqa: E402
from common.sql import plan_sql  # noqa: E402
from common.sql.catalog import SegmentsOnlyCatalog  # noqa: E402
from services.historical.server import HistoricalServicer  # noqa: E402
from services.metrics import Metrics  # noqa: E402
from services.rpc.convert import schema_to_proto, segment_id_to_proto  # noqa: E402
from services.rpc.gen.strata.v1 import historical_pb2  # noqa: E402


class _Catalog(SegmentsOnlyCatalog):
    def __init__(self, schemas: dict) -> None:
        self.schemas = schemas

    def datasource_names(self) -> list[str]:
        return list(self.schemas)

    def datasource_schema(self, name: str):
        return self.schemas.get(name)


class _Node:
    """The node as RunQuery sees it: which segments it serves."""

    server_id = "bench"

    def __init__(self, segments) -> None:
        self._segments = {s.id: s for s in segments}

    def segment(self, sid):
        return self._segments.get(sid)

    def segments(self, sids):
        found = [self._segments.get(sid) for sid in sids]
        return [s for s in found if s is not None], [sid for sid, s in zip(sids, found) if s is None]

    def report_corrupt(self, error) -> None:
        raise error


class _Context:
    """A call that is always wanted and never times out."""

    def time_remaining(self):
        return 60.0

    def is_active(self) -> bool:
        return True

    def abort(self, code, message):
        raise RuntimeError(f"{code}: {message}")


def cpu_ms(fn, runs: int) -> tuple[float, float]:
    fn()
    samples = []
    for _ in range(runs):
        start = time.thread_time()
        fn()
        samples.append((time.thread_time() - start) * 1000)
    return min(samples), statistics.median(samples)


def wall_ms(fn, runs: int) -> tuple[float, float]:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return min(samples), statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--base", action="store_true", help="SET noProjections = true on every query")
    ap.add_argument("--half", action="store_true", help="the 4 segments one of two historicals holds, not all 7")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="strata-bench-historical-")
    segments = []
    try:
        data = demo_table(args.rows).select(["__time", "channel", "user", "added"])
        data = data.set_column(3, "added", data.column("added").fill_null(0))
        segments, _, _ = build(data, work)
        schema = union_schema(segments)
        catalog = _Catalog({"wiki": schema})
        mine = segments[0::2] if args.half else segments  # what one of two historicals holds, or all
        servicer = HistoricalServicer(_Node(segments), Metrics("historical"), 2)
        pool = ThreadPoolExecutor(max_workers=1)
        lines = []
        for (name, text, _, _), native in zip(QUERIES, NATIVE):
            if args.base:
                text = "SET noProjections = true; " + text
                native = {**native, "context": {"noProjections": True}}
            pushed = plan_sql(text, catalog).stage.pushed_queries()
            if len(pushed) != 1:
                raise SystemExit(f"{name}: expected one native query, got {len(pushed)}")
            request = historical_pb2.RunQueryRequest(
                query_json=pushed[0].json_text(), query_id="bench",
                segments=[segment_id_to_proto(s.id) for s in mine], schema=schema_to_proto(schema))
            if args.base:
                e_min, e_med = wall_ms(lambda: execute(native, segments, pool), args.runs)
                lines.append((name, f"{e_min:.1f}", f"{e_med:.1f}"))
                continue
            h_min, h_med = cpu_ms(lambda: list(servicer.RunQuery(request, _Context())), args.runs)
            e_min, e_med = cpu_ms(lambda: execute(native, segments), args.runs)
            lines.append((name, f"{h_min:.3f}", f"{h_med:.3f}", f"{e_min:.3f}", f"{e_med:.3f}"))
        print(f"rows {args.rows:,}; {len(mine)} of {len(segments)} day segments on the historical; "
              f"{args.runs} runs; load average {os.getloadavg()[0]:.1f}; "
              f"{'noProjections' if args.base else 'projections on'}")
        header = ("query", "in-process base wall ms (min)", "(median)") if args.base else \
            ("query", "historical CPU ms (min)", "(median)", "in-process CPU ms (min)", "(median)")
        print_rows(header, lines, args.markdown)
    finally:
        for segment in segments:
            segment.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
