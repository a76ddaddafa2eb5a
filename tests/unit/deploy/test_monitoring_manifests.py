"""Monitoring deployment files, checked offline: Prometheus loads the alert rules and Grafana is
provisioned with the generated dashboards, under docker compose and on Kubernetes (rendered as
kustomize would, with the helpers of test_manifests.py), and the copies kustomize needs inside k8s/
equal the originals under deploy/. No sockets, no Docker, no cluster."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.unit.deploy.test_manifests import (  # noqa: F401 - compose and rendered are fixtures
    DEPLOY,
    K8S,
    ROOT,
    _bind_mounts,
    _by_kind,
    _env_dict,
    _service_ports,
    compose,
    rendered,
)

GRAFANA = DEPLOY / "grafana"
RULES = DEPLOY / "prometheus" / "rules"
DASHBOARD_FILES = {"strata-cluster.json", "strata-queries.json", "strata-projections.json", "strata-ingestion.json"}


def _rule_files_matched(rule_globs: list[str], mounted_dir: str, files: list[Path]) -> set[str]:
    """Names among ``files`` (mounted at ``mounted_dir``) that the config's rule_files globs load."""
    names = set()
    for pattern in rule_globs:
        directory, _, glob = pattern.rpartition("/")
        assert directory == mounted_dir, f"rule_files {pattern} is not in the mounted rules directory {mounted_dir}"
        names |= {f.name for f in files if fnmatch.fnmatch(f.name, glob)}
    return names


def test_compose_prometheus_loads_the_alert_rules(compose):
    mounts = _bind_mounts(compose["services"]["prometheus"])
    [(target, source)] = [(t, s) for t, s in mounts.items() if (ROOT / s).resolve() == RULES.resolve()]
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text(encoding="utf-8"))
    loaded = _rule_files_matched(config["rule_files"], target, list(RULES.iterdir()))
    # Every rule file, and not the promtool unit tests beside them.
    assert loaded == {p.name for p in RULES.glob("*.rules.yml")} and loaded
    assert not any(name.endswith(".test.yml") for name in loaded)


def _provider_path() -> str:
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards.yml").read_text(encoding="utf-8"))
    [entry] = provider["providers"]
    assert entry["type"] == "file"
    return entry["options"]["path"]


def _datasource_url() -> str:
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasource.yml").read_text(encoding="utf-8"))
    [ds] = datasources["datasources"]
    assert ds["type"] == "prometheus" and ds["isDefault"] is True
    return ds["url"]


def test_compose_grafana_is_provisioned_with_the_dashboards(compose):
    service = compose["services"]["grafana"]
    assert service["depends_on"]["prometheus"]["condition"] == "service_healthy"
    mounts = {t: (ROOT / s).resolve() for t, s in _bind_mounts(service).items()}
    datasources = [t for t in mounts if t.startswith("/etc/grafana/provisioning/datasources/")]
    providers = [t for t in mounts if t.startswith("/etc/grafana/provisioning/dashboards/")]
    assert [mounts[t] for t in datasources] == [(GRAFANA / "provisioning" / "datasource.yml").resolve()]
    assert [mounts[t] for t in providers] == [(GRAFANA / "provisioning" / "dashboards.yml").resolve()]
    assert mounts[_provider_path()] == (GRAFANA / "dashboards").resolve()
    assert {p.name for p in (GRAFANA / "dashboards").glob("*.json")} == DASHBOARD_FILES
    url = urlsplit(_datasource_url())
    assert url.hostname in compose["services"] and url.port == 9090
    env = _env_dict(service)
    assert env["GF_SECURITY_ADMIN_PASSWORD"], "Grafana needs a (development) admin password"
    assert env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"].startswith(_provider_path() + "/")


def test_k8s_copies_of_rules_and_dashboards_equal_deploy():
    """kustomize loads only files inside k8s/, so it holds copies: they must not drift."""
    copies = {K8S / "config" / "strata-alerts.rules.yml": RULES / "strata-alerts.rules.yml",
              K8S / "config" / "grafana" / "datasource.yml": GRAFANA / "provisioning" / "datasource.yml",
              K8S / "config" / "grafana" / "dashboards.yml": GRAFANA / "provisioning" / "dashboards.yml"}
    copies |= {K8S / "config" / "grafana" / name: GRAFANA / "dashboards" / name for name in DASHBOARD_FILES}
    assert {p.name for p in (K8S / "config" / "grafana").glob("*.json")} == DASHBOARD_FILES
    for copy, original in copies.items():
        assert copy.read_bytes() == original.read_bytes(), \
            f"{copy.relative_to(ROOT)} differs from {original.relative_to(ROOT)}: copy it over (dashboards: " \
            "python deploy/grafana/dashboards.py)"


def _volume_for_configmap(spec: dict, configmap: str) -> str:
    [volume] = [v["name"] for v in spec["volumes"] if v.get("configMap", {}).get("name") == configmap]
    return volume


def _mount_path(container: dict, volume: str) -> str:
    [path] = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume]
    return path


def test_k8s_prometheus_loads_the_alert_rules(rendered):
    configmaps = _by_kind(rendered, "ConfigMap")
    rules = configmaps["prometheus-rules"]["data"]
    assert set(rules) == {p.name for p in RULES.glob("*.rules.yml")}
    spec = _by_kind(rendered, "Deployment")["prometheus"]["spec"]["template"]["spec"]
    [container] = spec["containers"]
    mounted = _mount_path(container, _volume_for_configmap(spec, "prometheus-rules"))
    config = yaml.safe_load(configmaps["prometheus-config"]["data"]["prometheus.yml"])
    files = [K8S / "config" / name for name in rules]
    assert _rule_files_matched(config["rule_files"], mounted, files) == set(rules)
    config_dir = _mount_path(container, _volume_for_configmap(spec, "prometheus-config"))
    assert not mounted.startswith(config_dir + "/"), "a mount inside a read-only ConfigMap volume fails"


def test_k8s_grafana_is_provisioned_with_the_dashboards(rendered):
    configmaps = _by_kind(rendered, "ConfigMap")
    assert set(configmaps["grafana-dashboards"]["data"]) == DASHBOARD_FILES
    for name, text in configmaps["grafana-dashboards"]["data"].items():
        assert json.loads(text)["uid"] == name.removesuffix(".json")
    spec = _by_kind(rendered, "Deployment")["grafana"]["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert _mount_path(container, _volume_for_configmap(spec, "grafana-dashboards")) == _provider_path()
    assert _mount_path(container, _volume_for_configmap(spec, "grafana-datasources")) == \
        "/etc/grafana/provisioning/datasources"
    assert _mount_path(container, _volume_for_configmap(spec, "grafana-dashboard-provider")) == \
        "/etc/grafana/provisioning/dashboards"
    url = urlsplit(yaml.safe_load(configmaps["grafana-datasources"]["data"]["strata.yml"])["datasources"][0]["url"])
    assert url.port in _service_ports(rendered).get(url.hostname, set()), f"no Service {url.hostname}:{url.port}"
    template_labels = _by_kind(rendered, "Deployment")["grafana"]["spec"]["template"]["metadata"]["labels"]
    assert _by_kind(rendered, "Service")["grafana"]["spec"]["selector"].items() <= template_labels.items()
    env = {e["name"]: e for e in container["env"]}
    assert env["GF_SECURITY_ADMIN_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "strata-credentials"


def test_promtool_accepts_the_compose_prometheus_config(compose, tmp_path):
    """The compose scrape config and the rules it loads, as Prometheus itself parses them (the rule
    path pointed at the repository's copy). Debian's promtool has no Kubernetes service discovery,
    so the k8s config is only checked structurally above."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus; scripts/test.sh installs it)")
    mounts = _bind_mounts(compose["services"]["prometheus"])
    [target] = [t for t, s in mounts.items() if (ROOT / s).resolve() == RULES.resolve()]
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text(encoding="utf-8"))
    config["rule_files"] = [str(RULES) + p[len(target):] for p in config["rule_files"]]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 1 rule files found" in out.stdout + out.stderr
