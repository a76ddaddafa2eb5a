"""The Prometheus alert rules (deploy/prometheus/rules/): promtool accepts them, their promtool
unit tests pass, every alert the operators rely on exists and is unit-tested, and the rules use
only metrics strata exports. promtool comes with the Debian package prometheus (scripts/test.sh
installs it). No sockets."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.deploy.test_dashboards import _metric_names

RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "rules"
RULE_FILE = RULES / "strata-alerts.rules.yml"
TEST_FILE = RULES / "strata-alerts.test.yml"
EXPECTED = {"StrataHistoricalDown", "StrataNoHistoricalAnnounced", "StrataSegmentsUnavailable",
            "StrataSegmentsUnderReplicated", "StrataQueryErrorRatioHigh", "StrataQueryLatencyP99High",
            "StrataIngestionTaskFailed", "StrataProjectionHitRatioDropAfterDeploy", "StrataSegmentsUnmatched",
            "StrataKafkaLagGrowing"}


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian package prometheus; scripts/test.sh installs it)")
    return path


def _rules() -> list[dict]:
    doc = yaml.safe_load(RULE_FILE.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_promtool_check_rules():
    out = subprocess.run([_promtool(), "check", "rules", str(RULE_FILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in out.stdout


def test_promtool_unit_tests_pass():
    out = subprocess.run([_promtool(), "test", "rules", TEST_FILE.name], cwd=RULES, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_unit_tests_would_catch_a_wrong_expectation(tmp_path):
    """Guard against a test file that asserts nothing: a changed expectation must fail."""
    shutil.copy(RULE_FILE, tmp_path / RULE_FILE.name)
    text = TEST_FILE.read_text(encoding="utf-8").replace('summary: "3 segments of wiki are unavailable"',
                                                         'summary: "4 segments of wiki are unavailable"')
    (tmp_path / TEST_FILE.name).write_text(text, encoding="utf-8")
    out = subprocess.run([_promtool(), "test", "rules", TEST_FILE.name], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr


def test_every_alert_exists_is_labelled_and_unit_tested():
    rules = _rules()
    names = [r["alert"] for r in rules if "alert" in r]
    assert set(names) == EXPECTED and len(names) == len(set(names))
    tests = yaml.safe_load(TEST_FILE.read_text(encoding="utf-8"))
    fired = {case["alertname"] for t in tests["tests"] for case in t.get("alert_rule_test", []) if case["exp_alerts"]}
    quiet = {case["alertname"] for t in tests["tests"] for case in t.get("alert_rule_test", [])
             if not case["exp_alerts"]}
    assert fired == EXPECTED, f"alerts no test sees firing: {EXPECTED - fired}"
    assert quiet == EXPECTED, f"alerts no test sees quiet: {EXPECTED - quiet}"
    for rule in rules:
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


def test_rules_use_only_exported_metrics():
    exported = _metric_names() | {"up"}
    for rule in _rules():
        used = set(re.findall(r"\b((?:strata|process)_[a-z_]+|up)\b(?=\s*[{\[)])", rule["expr"]))
        assert used and used <= exported, f"{rule['alert']}: {used - exported} is not exported by strata"
