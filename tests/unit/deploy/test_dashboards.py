"""The Grafana dashboards: the committed JSON is what deploy/grafana/dashboards.py builds, every
panel queries metrics strata really exports, and every PromQL expression parses (promtool, when
installed, as CI installs it). No sockets."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from services.metrics import Metrics

ROOT = Path(__file__).resolve().parents[3]
GRAFANA = ROOT / "deploy" / "grafana"


def load_generator():
    """deploy/grafana/dashboards.py is a script, not a package module: load it by path."""
    name = "strata_grafana_dashboards"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, GRAFANA / "dashboards.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator():
    return load_generator()


def _committed() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted((GRAFANA / "dashboards").glob("*.json"))}


def test_committed_json_is_what_the_generator_builds(generator):
    wanted = generator.render()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in (GRAFANA / "dashboards").glob("*.json")}
    assert set(on_disk) == set(wanted), "run python deploy/grafana/dashboards.py"
    for name, text in wanted.items():
        assert on_disk[name] == text, f"{name} is stale: run python deploy/grafana/dashboards.py"
    assert generator.main(["--check"]) == 0


def test_four_dashboards_with_the_panels_operators_need(generator):
    dashboards = _committed()
    assert set(dashboards) == {"strata-cluster.json", "strata-queries.json", "strata-projections.json",
                               "strata-ingestion.json"}
    titles = {d["uid"]: {p["title"] for p in d["panels"] if p["type"] != "row"} for d in dashboards.values()}
    assert {"Nodes up (scraped) by role", "Under-replicated segments", "Segment cache bytes per historical"} \
        <= titles["strata-cluster"]
    assert {"Queries per second by datasource and type", "Query latency p50", "Query latency p99",
            "Failed queries per second by status"} <= titles["strata-queries"]
    assert {"Hit ratio by projection", "Rows scanned with vs without projections",
            "Projection misses per second by reason"} <= titles["strata-projections"]
    assert {"Tasks by state", "Rows ingested per second by datasource", "Parse exceptions in the last hour by datasource",
            "Task duration p50 and p90 (last hour)", "Kafka lag by supervisor",
            "Kafka lag by partition", "Kafka lag in time by supervisor"} <= titles["strata-ingestion"]
    for d in dashboards.values():
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)) and all(ids), f"{d['uid']}: panel ids must be unique"
        assert [v["name"] for v in d["templating"]["list"]] == ["datasource"]
        for p in d["panels"]:
            if p["type"] == "row":
                continue
            assert p["targets"], f"{d['uid']}/{p['title']}: no query"
            for t in p["targets"]:
                assert t["expr"] and t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def _metric_names() -> set[str]:
    """Every sample name the services export (counters with _total, histograms with their parts)."""
    names = set()
    for family in Metrics("test").registry.collect():
        if family.type == "counter":
            names |= {family.name + "_total"}
        elif family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def test_panels_query_only_metrics_strata_exports(generator):
    exported = _metric_names() | {"up"}
    for uid, title, expr in generator.panel_queries():
        used = set(re.findall(r"\b((?:strata|process)_[a-z_]+|up)\b(?=\s*[{\[)])", expr))
        assert used, f"{uid}/{title}: no metric in {expr}"
        assert used <= exported, f"{uid}/{title}: {used - exported} is not exported by strata"


def test_every_panel_expression_parses(generator, tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus; scripts/test.sh installs it)")
    rules = [{"record": f"strata:panel_{i}", "expr": expr.replace("$__rate_interval", "5m")}
             for i, (_, _, expr) in enumerate(generator.panel_queries())]
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}), encoding="utf-8")
    out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_metric_label_collides_with_a_target_label():
    """Prometheus renames a scraped label that a target label already uses (to exported_<name>),
    so a metric labelled `role`, `instance` or `job` would silently lose it in every panel."""
    target_labels = {"job", "instance", "role", "namespace", "pod", "app", "cluster"}
    registry = Metrics("test").registry
    for collector in set(registry._collector_to_names):  # the registered collectors
        labels = set(getattr(collector, "_labelnames", ()))
        assert not labels & target_labels, f"{registry._collector_to_names[collector]}: {labels & target_labels}"
