"""The dashboards and alerts on a real Prometheus: it scrapes a local cluster of real processes
(``strata up``: coordinator, broker, two historicals) running a small mixed workload (native and
SQL queries on a published datasource, a Spark ingestion with unparseable rows into a table with a
projection, queries the projection serves and misses, failing queries; see
tests/harness/monitored_cluster.py); every panel's PromQL of the committed dashboards returns data
through Prometheus's HTTP API, and after a historical is killed the under-replication and
historical-down alerts fire (the committed rules, with `for:` cut to 2s). Every wait polls with a
deadline."""

from __future__ import annotations

import json
import math
import signal

import pytest

from tests.fixtures.prometheus_server import PrometheusProcess, require_prometheus_binary
from tests.harness.monitored_cluster import BAD_LINES, MonitoredCluster, edits_file, panel_targets

pytestmark = pytest.mark.integration

RATE_WINDOW = "15s"  # stands in for Grafana's $__rate_interval at a 1s scrape interval


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    require_prometheus_binary()
    base = tmp_path_factory.mktemp("dashboards")
    mc = MonitoredCluster(base)
    try:
        mc.start()
        mc.load_data()
        good = edits_file(base / "edits.json")
        task = mc.ingest(base / "edits.json", max_parse_exceptions=10)
        assert task.state == "SUCCESS", task.error
        report = json.loads(task.report_json)
        assert report["rowsWritten"] == good and report["parseExceptions"] == BAD_LINES
        mc.wait_edits(good)
        mc.start_workload()
        yield mc, report
    finally:
        mc.stop()


def _has_value(series: list[dict]) -> bool:
    return any(math.isfinite(float(s["value"][1])) for s in series)


def test_every_dashboard_panel_returns_data(setup):
    mc, report = setup
    prom = mc.prom
    targets = panel_targets(RATE_WINDOW)
    assert len(targets) >= 30
    missing = list(targets)

    def none_missing():
        nonlocal missing
        missing = [t for t in missing if not _has_value(prom.query(t["expr"]))]
        return not missing

    try:
        PrometheusProcess.wait_for(none_missing, "every panel has data", timeout_s=120, interval_s=1.0)
    except AssertionError:
        raise AssertionError("panels without data:\n" + "\n".join(
            f"{t['dashboard']} / {t['panel']['title']}: {t['expr']}" for t in missing)) from None
    assert not mc.workload.unexpected, mc.workload.unexpected[:3]
    assert mc.workload.rounds > 0

    # The numbers are the workload's, not just present.
    def value(expr: str) -> dict[str, float]:
        return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1]) for s in prom.query(expr)}

    edits = json.dumps({"datasource": "edits"})
    assert value("sum by (datasource) (strata_ingested_rows_total)") == {edits: report["rowsWritten"]}
    assert value("sum by (datasource) (strata_ingest_parse_exceptions_total)") == {edits: float(BAD_LINES)}
    served = value('sum by (projection) (strata_segments_queried_total{datasource="edits"})')
    assert served.get(json.dumps({"projection": "hourly"}), 0) > 0 and served.get(json.dumps({"projection": "base"}), 0) > 0
    misses = value('sum by (reason) (strata_projection_misses_total{datasource="edits"})')
    assert misses.get(json.dumps({"reason": "missing_column"}), 0) > 0
    saved = value('sum(strata_projection_base_rows_total{datasource="edits"}) - '
                  'sum(strata_rows_scanned_total{datasource="edits",projection="hourly"})')
    assert list(saved.values())[0] > 0, "the projection saved no rows"
    assert value("max(strata_segments_under_replicated)") == {"{}": 0.0}
    assert value("max by (node_role) (strata_servers)") == {json.dumps({"node_role": r}): n for r, n in
                                                            (("coordinator", 1.0), ("broker", 1.0), ("historical", 2.0))}
    assert value('sum by (role) (up{role=~"coordinator|broker|historical"})') == \
        {json.dumps({"role": r}): n for r, n in (("coordinator", 1.0), ("broker", 1.0), ("historical", 2.0))}
    assert value('max by (state) (strata_tasks{state="SUCCESS"})') == {json.dumps({"state": "SUCCESS"}): 1.0}
    firing = [a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"]
    assert "StrataSegmentsUnderReplicated" not in firing and "StrataHistoricalDown" not in firing, firing


def test_killing_a_historical_fires_the_under_replication_alert(setup):
    mc, _ = setup
    prom = mc.prom
    mc.cluster.kill("historical-2", signal.SIGKILL)

    def firing() -> set[str]:
        names = {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"}
        return names if {"StrataSegmentsUnderReplicated", "StrataHistoricalDown"} <= names else set()

    PrometheusProcess.wait_for(firing, "under-replication and historical-down alerts firing", timeout_s=90)
    alerts = {(a["labels"]["alertname"], a["labels"].get("datasource", a["labels"].get("instance")))
              for a in prom.alerts() if a["state"] == "firing"}
    down = f"127.0.0.1:{mc.cluster.node('historical-2')['http_port']}"
    assert ("StrataHistoricalDown", down) in alerts
    assert {("StrataSegmentsUnderReplicated", "wiki"), ("StrataSegmentsUnderReplicated", "edits")} <= alerts
    # The survivor still serves everything: nothing is unavailable.
    assert not [a for a in alerts if a[0] == "StrataSegmentsUnavailable"]
