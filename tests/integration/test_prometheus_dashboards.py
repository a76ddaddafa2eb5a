"""The dashboards and alerts on a real Prometheus: it scrapes a local cluster of real processes
(``strata up``: coordinator, broker, two historicals) running a small mixed workload (native and
SQL queries on a published datasource, a Spark ingestion into a table with a projection, queries
the projection serves and misses, failing queries); every panel's PromQL of the committed
dashboards returns data through Prometheus's HTTP API, and after a historical is killed the
under-replication and historical-down alerts fire (the rules as committed, with `for:` shortened).
Every wait polls with a deadline."""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time

import pytest
import yaml

from common.demo import table as demo_table
from services.cli.cluster_client import ClusterClient
from services.cli.local_cluster import LocalCluster
from services.historical.storage import deep_storage_from_url
from tests.fixtures.prometheus_server import PrometheusProcess, require_prometheus_binary
from tests.unit.deploy.test_dashboards import GRAFANA

pytestmark = pytest.mark.integration

ROOT = GRAFANA.parents[1]
RULES = ROOT / "deploy" / "prometheus" / "rules" / "strata-alerts.rules.yml"
RATE_WINDOW = "15s"  # stands in for Grafana's $__rate_interval at a 1s scrape interval
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


def panel_targets() -> list[tuple[str, str, str]]:
    """(dashboard, panel, PromQL) of every target in the committed dashboard JSON."""
    out = []
    for path in sorted((GRAFANA / "dashboards").glob("*.json")):
        dash = json.loads(path.read_text(encoding="utf-8"))
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                out.append((dash["uid"], panel["title"], target["expr"].replace("$__rate_interval", RATE_WINDOW)))
    return out


def _rules_with_short_for(path) -> None:
    """The committed rules, with every `for:` cut to 2s so alerts fire within a test."""
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "2s"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")


def _edits_file(path, rows: int = 4000) -> int:
    """JSON lines for the ingestion, with 3 rows that do not parse; returns the good rows."""
    data = demo_table(rows, start="2016-06-27", days=2).select(["__time", "channel", "page", "added"]).to_pylist()
    with open(path, "w", encoding="utf-8") as f:
        for i, row in enumerate(data):
            if i in (10, 500, 2000):
                f.write('{"time": "2016-06-27T01:00:00Z", "channel": \n')
            f.write(json.dumps({"time": row["__time"].isoformat().replace("+00:00", "Z"), "channel": row["channel"],
                                "page": row["page"], "added": row["added"]}) + "\n")
    return len(data)


class Workload:
    """Queries in a loop on a thread until stopped; failures of the good queries are kept."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.stop_event = threading.Event()
        self.unexpected: list[Exception] = []
        self.rounds = 0
        self.thread = threading.Thread(target=self._loop, name="workload", daemon=True)

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            for query in NATIVE:
                self._run(lambda q=query: self.client.native(q, timeout_s=30))
            for sql in SQL:
                self._run(lambda s=sql: self.client.sql(s, timeout_s=30))
            try:
                self.client.native(BAD, timeout_s=30)
                self.unexpected.append(AssertionError("a query on a missing datasource succeeded"))
            except Exception:  # noqa: BLE001 - the failure is the point: it feeds the error panels
                pass
            self.rounds += 1
            self.stop_event.wait(0.05)

    def _run(self, fn) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - collected, asserted by the tests
            if not self.stop_event.is_set():
                self.unexpected.append(exc)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=60)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    require_prometheus_binary()
    base = tmp_path_factory.mktemp("dashboards")
    cluster = LocalCluster(str(base / "cluster"))
    # replication = 2 with two historicals: killing one leaves every segment under-replicated.
    cluster.up(historicals=2, lease_ttl_s=2, duty_period_ms=200, replication=2)
    client = None
    prom = None
    workload = None
    try:
        endpoints = cluster.endpoints()
        client = ClusterClient(endpoints["coordinator"], endpoints["broker"])
        targets: dict[str, list[str]] = {}
        for node in cluster.running()["nodes"]:
            targets.setdefault(node["role"], []).append(f"127.0.0.1:{node['http_port']}")
        rules = base / "strata-alerts.rules.yml"
        _rules_with_short_for(rules)
        prom = PrometheusProcess(str(base / "prometheus"), targets, [str(rules)]).start()

        storage = deep_storage_from_url(os.path.join(cluster.dir, "deep-storage"))
        wiki = client.build_and_publish(demo_table(20_000), "wiki", storage)
        client.wait_loaded("wiki", len(wiki), 60, replicas=2)
        client.sql("CREATE TABLE edits (channel VARCHAR, page VARCHAR, added BIGINT) PARTITIONED BY DAY")
        client.sql("ALTER TABLE edits ADD PROJECTION hourly AS SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, "
                   "COUNT(*) AS n, SUM(added) AS added FROM edits GROUP BY 1, 2")
        path = base / "edits.json"
        good = _edits_file(path)
        task = _ingest(client, path)
        assert task.state == "SUCCESS", task.error
        report = json.loads(task.report_json)
        assert report["rowsWritten"] == good and report["parseExceptions"] == 3
        PrometheusProcess.wait_for(lambda: (lambda segs: bool(segs) and all(len(s.servers) >= 2 for s in segs))(
            client.load_status("edits")), "edits loaded on both historicals", 60)
        PrometheusProcess.wait_for(lambda: _count(client, "edits") == good, "edits queryable on the broker", 60)
        workload = Workload(client)
        workload.thread.start()
        yield cluster, client, prom, workload, report
    finally:
        if workload is not None:
            workload.stop()
        if prom is not None:
            prom.stop()
        if client is not None:
            client.close()
        cluster.down()


def _ingest(client: ClusterClient, path) -> object:
    """INSERT with parse exceptions allowed, waited for with a deadline."""
    table, _ = client.sql(f"""INSERT INTO edits
        SELECT TIME_PARSE("time") AS __time, channel, page, added
        FROM TABLE(localfiles(files => ARRAY['{path}'], format => 'json'))
             EXTEND ("time" VARCHAR, channel VARCHAR, page VARCHAR, added BIGINT)
        PARTITIONED BY DAY""", context={"maxParseExceptions": 10})
    task_id = table.column("task_id")[0].as_py()
    deadline = time.monotonic() + 300
    while True:
        task = client.task(task_id)
        if task.state in ("SUCCESS", "FAILED", "CANCELED"):
            return task
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} still {task.state} after 300s")
        time.sleep(0.2)


def _count(client: ClusterClient, datasource: str) -> int | None:
    try:
        return client.sql(f"SELECT COUNT(*) AS c FROM {datasource}", timeout_s=30)[0].to_pylist()[0]["c"]
    except Exception:  # noqa: BLE001 - not served yet; the caller polls with a deadline
        return None


def _has_value(series: list[dict]) -> bool:
    return any(math.isfinite(float(s["value"][1])) for s in series)


def test_every_dashboard_panel_returns_data(setup):
    _, _, prom, workload, report = setup
    targets = panel_targets()
    assert len(targets) >= 30
    missing = list(targets)

    def still_missing():
        nonlocal missing
        missing = [t for t in missing if not _has_value(prom.query(t[2]))]
        return not missing

    try:
        PrometheusProcess.wait_for(still_missing, "every panel has data", timeout_s=120, interval_s=1.0)
    except AssertionError:
        raise AssertionError("panels without data:\n" + "\n".join(f"{d} / {p}: {e}" for d, p, e in missing)) from None
    assert not workload.unexpected, workload.unexpected[:3]
    assert workload.rounds > 0

    # The numbers are the workload's, not just present.
    def value(expr: str) -> dict[str, float]:
        return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1]) for s in prom.query(expr)}

    rows = value("sum by (datasource) (strata_ingested_rows_total)")
    assert rows == {json.dumps({"datasource": "edits"}): report["rowsWritten"]}
    assert value("sum by (datasource) (strata_ingest_parse_exceptions_total)") == \
        {json.dumps({"datasource": "edits"}): 3.0}
    served = value('sum by (projection) (strata_segments_queried_total{datasource="edits"})')
    assert served.get(json.dumps({"projection": "hourly"}), 0) > 0 and served.get(json.dumps({"projection": "base"}), 0) > 0
    misses = value('sum by (reason) (strata_projection_misses_total{datasource="edits"})')
    assert misses.get(json.dumps({"reason": "missing_column"}), 0) > 0
    saved = value('sum(strata_projection_base_rows_total{datasource="edits"}) - '
                  'sum(strata_rows_scanned_total{datasource="edits",projection="hourly"})')
    assert list(saved.values())[0] > 0, "the projection saved no rows"
    assert value("max(strata_segments_under_replicated)") == {"{}": 0.0}
    assert value('max by (state) (strata_tasks{state="SUCCESS"})') == {json.dumps({"state": "SUCCESS"}): 1.0}
    firing = [a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"]
    assert "StrataSegmentsUnderReplicated" not in firing and "StrataHistoricalDown" not in firing, firing


def test_killing_a_historical_fires_the_under_replication_alert(setup):
    cluster, _, prom, _, _ = setup
    cluster.kill("historical-2", signal.SIGKILL)

    def firing() -> set[str]:
        names = {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"}
        return names if {"StrataSegmentsUnderReplicated", "StrataHistoricalDown"} <= names else set()

    PrometheusProcess.wait_for(firing, "under-replication and historical-down alerts firing", timeout_s=90)
    alerts = {(a["labels"]["alertname"], a["labels"].get("datasource", a["labels"].get("instance")))
              for a in prom.alerts() if a["state"] == "firing"}
    down = f"127.0.0.1:{cluster.node('historical-2')['http_port']}"
    assert ("StrataHistoricalDown", down) in alerts
    assert {("StrataSegmentsUnderReplicated", "wiki"), ("StrataSegmentsUnderReplicated", "edits")} <= alerts
    # The survivor still serves everything: nothing is unavailable.
    assert not [a for a in alerts if a[0] == "StrataSegmentsUnavailable"]
