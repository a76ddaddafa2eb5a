"""MonitoredCluster: a local cluster of real processes (``strata up``) scraped by a real
Prometheus, with the small mixed workload the dashboards are shown and tested on.

Used by tests/integration/test_prometheus_dashboards.py and by scripts/dashboard_pictures.py
(which draws docs/operations.md's pictures from the same kind of run). The workload: a published
datasource ``wiki`` queried natively (timeseries, topN, groupBy) and in SQL; a table ``edits`` with
a projection ``hourly`` filled by Spark ingestion tasks (with rows that do not parse), queried in
SQL both in a shape the projection serves and one it misses; and a query on a missing datasource,
for the error panels. Every wait polls with a deadline.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import yaml

from common.demo import table as demo_table
from services.cli.cluster_client import ClusterClient
from services.cli.local_cluster import LocalCluster
from services.deep_storage import deep_storage_from_url
from tests.fixtures.prometheus_server import PrometheusProcess

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "strata-alerts.rules.yml"
WIKI_IV = ["2015-09-12/2015-09-19"]
NATIVE = [
    {"queryType": "timeseries", "dataSource": "wiki", "intervals": WIKI_IV, "granularity": "day",
     "aggregations": [{"type": "count", "name": "c"}]},
    {"queryType": "topN", "dataSource": "wiki", "intervals": WIKI_IV, "granularity": "all", "dimension": "channel",
     "metric": "added", "threshold": 5, "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]},
    {"queryType": "groupBy", "dataSource": "wiki", "intervals": WIKI_IV, "granularity": "all",
     "dimensions": ["namespace"], "aggregations": [{"type": "count", "name": "c"}]},
]
SQL = [
    "SELECT channel, COUNT(*) AS n, SUM(added) AS a FROM edits GROUP BY 1",  # the projection serves it
    "SELECT page, COUNT(*) AS n FROM edits GROUP BY 1",  # page is not in the projection: base rows
    "SELECT COUNT(*) AS c FROM wiki WHERE channel = '#en.wikipedia'",
]
BAD = {"queryType": "timeseries", "dataSource": "no_such_datasource", "intervals": WIKI_IV, "granularity": "all",
       "aggregations": [{"type": "count", "name": "c"}]}
BAD_LINES = 3


def panel_targets(rate_window: str) -> list[dict]:
    """Every target of the committed dashboard JSON, ``$__rate_interval`` replaced by
    ``rate_window``: dicts with dashboard, panel (the panel's JSON), expr and legend."""
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dash = json.loads(path.read_text(encoding="utf-8"))
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                out.append({"dashboard": dash["uid"], "panel": panel, "legend": target.get("legendFormat", ""),
                            "expr": target["expr"].replace("$__rate_interval", rate_window)})
    return out


def rules_with_short_for(path: Path, for_: str = "2s") -> Path:
    """The committed rules with every ``for:`` cut to ``for_``, so alerts fire within a run."""
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = for_
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def edits_file(path: Path, rows: int = 4000, start: str = "2016-06-27") -> int:
    """JSON lines for an ingestion into ``edits``, with BAD_LINES rows that do not parse; returns
    the rows that do."""
    data = demo_table(rows, start=start, days=2).select(["__time", "channel", "page", "added"]).to_pylist()
    bad_at = {10, rows // 4, rows // 2}
    with open(path, "w", encoding="utf-8") as f:
        for i, row in enumerate(data):
            if i in bad_at:
                f.write('{"time": "2016-06-27T01:00:00Z", "channel": \n')
            f.write(json.dumps({"time": row["__time"].isoformat().replace("+00:00", "Z"), "channel": row["channel"],
                                "page": row["page"], "added": row["added"]}) + "\n")
    return len(data)


class Workload:
    """The queries in a loop on a thread until stopped; failures of the good queries are kept."""

    def __init__(self, client: ClusterClient, pause_s: float = 0.05) -> None:
        self.client = client
        self.pause_s = pause_s
        self.stop_event = threading.Event()
        self.unexpected: list[Exception] = []
        self.rounds = 0
        self.thread = threading.Thread(target=self._loop, name="workload", daemon=True)

    def start(self) -> Workload:
        self.thread.start()
        return self

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            for query in NATIVE:
                self._run(lambda q=query: self.client.native(q, timeout_s=120))
            for sql in SQL:
                self._run(lambda s=sql: self.client.sql(s, timeout_s=120))
            try:
                self.client.native(BAD, timeout_s=120)
                self.unexpected.append(AssertionError("a query on a missing datasource succeeded"))
            except Exception:  # noqa: BLE001 - the failure is the point: it feeds the error panels
                pass
            self.rounds += 1
            self.stop_event.wait(self.pause_s)

    def _run(self, fn) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - collected for the caller to assert on
            if not self.stop_event.is_set():
                self.unexpected.append(exc)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=60)


class MonitoredCluster:
    def __init__(self, directory: Path, historicals: int = 2, scrape_interval: str = "1s",
                 rule_for: str = "2s") -> None:
        self.dir = Path(directory)
        self.historicals = historicals
        self.scrape_interval = scrape_interval
        self.rule_for = rule_for
        self.cluster = LocalCluster(str(self.dir / "cluster"))
        self.client: ClusterClient | None = None
        self.prom: PrometheusProcess | None = None
        self.workload: Workload | None = None

    def start(self) -> MonitoredCluster:
        # replication = 2 with two historicals: killing one leaves every segment under-replicated.
        self.cluster.up(historicals=self.historicals, lease_ttl_s=2, duty_period_ms=200, replication=2, ports="auto")
        try:
            endpoints = self.cluster.endpoints()
            self.client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
            targets: dict[str, list[str]] = {}
            for node in self.cluster.running()["nodes"]:
                targets.setdefault(node["role"], []).append(f"127.0.0.1:{node['http_port']}")
            rules = rules_with_short_for(self.dir / "strata-alerts.rules.yml", self.rule_for)
            self.prom = PrometheusProcess(str(self.dir / "prometheus"), targets, [str(rules)],
                                          scrape_interval=self.scrape_interval,
                                          evaluation_interval=self.scrape_interval).start()
        except BaseException:
            self.stop()
            raise
        return self

    def load_data(self, wiki_rows: int = 20_000) -> None:
        """Publish ``wiki``, declare ``edits`` with its projection; both loaded on every historical."""
        storage = deep_storage_from_url(os.path.join(self.cluster.dir, "deep-storage"))
        wiki = self.client.build_and_publish(demo_table(wiki_rows), "wiki", storage)
        self.client.wait_loaded("wiki", len(wiki), 60, replicas=self.historicals)
        self.client.sql("CREATE TABLE edits (channel VARCHAR, page VARCHAR, added BIGINT) PARTITIONED BY DAY")
        self.client.sql("ALTER TABLE edits ADD PROJECTION hourly AS SELECT TIME_FLOOR(__time, 'PT1H') AS h, "
                        "channel, COUNT(*) AS n, SUM(added) AS added FROM edits GROUP BY 1, 2")

    def ingest(self, path: Path, max_parse_exceptions: int, timeout_s: float = 300.0):
        """INSERT ``path`` (JSON lines) into ``edits``; waits for the task's end; returns the task."""
        table, _ = self.client.sql(f"""INSERT INTO edits
            SELECT TIME_PARSE("time") AS __time, channel, page, added
            FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
                 EXTEND ("time" VARCHAR, channel VARCHAR, page VARCHAR, added BIGINT)
            PARTITIONED BY DAY""", context={"maxParseExceptions": max_parse_exceptions})
        task_id = table.column("task_id")[0].as_py()
        deadline = time.monotonic() + timeout_s
        while True:
            task = self.client.task(task_id)
            if task.state in ("SUCCESS", "FAILED", "CANCELED"):
                return task
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {task_id} still {task.state} after {timeout_s}s")
            time.sleep(0.2)

    def wait_edits(self, rows: int, timeout_s: float = 60.0) -> None:
        """Until every ``edits`` segment is on every historical and the broker counts ``rows``."""
        def loaded():
            segments = self.client.load_status("edits")
            return bool(segments) and all(len(s.servers) >= self.historicals for s in segments)

        PrometheusProcess.wait_for(loaded, "edits loaded on every historical", timeout_s)
        PrometheusProcess.wait_for(lambda: self.count("edits") == rows, f"edits has {rows} rows", timeout_s)

    def count(self, datasource: str) -> int | None:
        try:
            return self.client.sql(f"SELECT COUNT(*) AS c FROM {datasource}", timeout_s=30)[0].to_pylist()[0]["c"]
        except Exception:  # noqa: BLE001 - not served yet; callers poll with a deadline
            return None

    def start_workload(self) -> Workload:
        self.workload = Workload(self.client).start()
        return self.workload

    def stop(self) -> None:
        if self.workload is not None:
            self.workload.stop()
        if self.prom is not None:
            self.prom.stop()
        if self.client is not None:
            self.client.close()
        if self.cluster.state() is not None:
            self.cluster.down()
