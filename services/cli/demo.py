"""The demo the quickstart runs: generate Wikipedia-like data, build day segments, query them."""

from __future__ import annotations

import glob
import os
import time

from common.demo import write
from common.query import execute
from common.segment import Segment
from common.segment.time_partitioner import build_segments
from services.cli.table_printer import print_table
from services.ingestion.local_input import read_inputs

DATASOURCE = "wikipedia"

EXAMPLES = [
    ("Edits and bytes added per day", {
        "queryType": "timeseries", "dataSource": DATASOURCE, "intervals": ["2015-09-12/2015-09-19"],
        "granularity": "day",
        "aggregations": [{"type": "count", "name": "edits"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
    }),
    ("Top 5 pages by bytes added on 2015-09-12", {
        "queryType": "topN", "dataSource": DATASOURCE, "intervals": ["2015-09-12/2015-09-13"], "granularity": "all",
        "dimension": "page", "metric": "added", "threshold": 5,
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
    }),
    ("Robot vs human edits on English and German Wikipedia", {
        "queryType": "groupBy", "dataSource": DATASOURCE, "intervals": ["2015-09-12/2015-09-19"], "granularity": "all",
        "dimensions": ["channel", "isRobot"],
        "filter": {"type": "in", "dimension": "channel", "values": ["#en.wikipedia", "#de.wikipedia"]},
        "aggregations": [{"type": "count", "name": "edits"},
                         {"type": "HLLSketchBuild", "name": "users", "fieldName": "user", "round": True}],
        "limitSpec": {"columns": [{"dimension": "edits", "direction": "descending"}]},
    }),
]


def run_demo(directory: str, rows: int) -> int:
    os.makedirs(directory, exist_ok=True)
    data = os.path.join(directory, "wikipedia.parquet")
    seg_dir = os.path.join(directory, "segments")
    started = time.perf_counter()
    if not os.path.exists(data):
        write(data, rows, fmt="parquet")
        print(f"generated {rows:,} demo rows in {data} ({time.perf_counter() - started:.1f}s)")
    if not glob.glob(os.path.join(seg_dir, "*.sseg")):
        started = time.perf_counter()
        table = read_inputs([data], "parquet")
        built = build_segments(table, DATASOURCE, seg_dir, segment_granularity="day", sort_columns=["channel"])
        print(f"built {len(built)} day segments in {seg_dir} ({time.perf_counter() - started:.1f}s)")
    segments = [Segment.open(p) for p in sorted(glob.glob(os.path.join(seg_dir, "*.sseg")))]
    for title, query in EXAMPLES:
        started = time.perf_counter()
        result = execute(query, segments)
        print_table(result.table, title=f"{title}  ({(time.perf_counter() - started) * 1000:.1f} ms)")
    return 0

