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


def run_demo(directory: str, rows: int, cluster_dir: str | None = None) -> int:
    os.makedirs(directory, exist_ok=True)
    data = os.path.join(directory, "wikipedia.parquet")
    seg_dir = os.path.join(directory, "segments")
    if cluster_dir:
        return _on_cluster(directory, rows, cluster_dir)
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
    print("(in-process: no cluster; 'strata demo --cluster DIR' runs these through a broker)")
    for title, query in EXAMPLES:
        started = time.perf_counter()
        result = execute(query, segments)
        print_table(result.table, title=f"{title}  ({(time.perf_counter() - started) * 1000:.1f} ms)")
    return 0



INSERT_SQL = """INSERT INTO wikipedia
SELECT TIME_PARSE("time") AS __time, channel, page, "user", isRobot, isAnonymous, isMinor, isNew, isUnpatrolled,
       namespace, "comment", cityName, countryName, countryIsoCode, regionName, metroCode, added, deleted, delta
FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
     EXTEND ("time" VARCHAR, channel VARCHAR, page VARCHAR, "user" VARCHAR, isRobot VARCHAR, isAnonymous VARCHAR,
             isMinor VARCHAR, isNew VARCHAR, isUnpatrolled VARCHAR, namespace VARCHAR, "comment" VARCHAR,
             cityName VARCHAR, countryName VARCHAR, countryIsoCode VARCHAR, regionName VARCHAR, metroCode BIGINT,
             added BIGINT, deleted BIGINT, delta BIGINT)
PARTITIONED BY DAY
CLUSTERED BY channel"""


def _on_cluster(directory: str, rows: int, cluster_dir: str) -> int:
    """Ingest the demo data into a running cluster with SQL (a Spark task), once, then run the
    examples through its broker."""
    from services.cli.cluster_client import ClusterClient
    from services.cli.local_cluster import LocalCluster
    from services.cli.sql_command import wait_task

    data = os.path.abspath(os.path.join(directory, "wikipedia.json"))
    if not os.path.exists(data):
        started = time.perf_counter()
        write(data, rows, fmt="json")
        print(f"generated {rows:,} demo rows in {data} ({time.perf_counter() - started:.1f}s)")
    endpoints = LocalCluster(cluster_dir).endpoints()
    client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
    try:
        if not client.load_status(DATASOURCE):
            sql = INSERT_SQL.format(path=data)
            print("ingesting with SQL (a Spark job run by the coordinator):\n" + sql)
            table, _ = client.sql(sql)
            if wait_task(client, table.column("task_id")[0].as_py(), 900) != 0:
                return 1
            segments = len([t for t in client.list_segments(DATASOURCE) if t.used])
            client.wait_loaded(DATASOURCE, segments, 120)
        _wait_broker(client)
        for title, query in EXAMPLES:
            started = time.perf_counter()
            result, _ = client.native(query)
            print_table(result, title=f"{title}  ({(time.perf_counter() - started) * 1000:.1f} ms via the broker)")
        sql = ("SELECT channel, COUNT(*) AS edits, SUM(added) AS added FROM wikipedia "
               "WHERE __time >= TIMESTAMP '2015-09-12' AND __time < TIMESTAMP '2015-09-13' "
               "GROUP BY channel ORDER BY edits DESC LIMIT 5")
        started = time.perf_counter()
        result, _ = client.sql(sql)
        print(f"\n{sql}")
        print_table(result, title=f"SQL through the broker ({(time.perf_counter() - started) * 1000:.1f} ms)")
    finally:
        client.close()
    return 0


def _wait_broker(client, timeout_s: float = 30.0) -> None:
    """The broker learns of loaded segments from announcements, a moment after the coordinator."""
    deadline = time.monotonic() + timeout_s
    expected = sum(1 for _ in client.load_status(DATASOURCE))
    while True:
        _, stats = client.native(EXAMPLES[0][1])
        if stats.segments >= expected or time.monotonic() > deadline:
            return
        time.sleep(0.1)
