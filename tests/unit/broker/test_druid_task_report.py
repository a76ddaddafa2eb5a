"""Druid's shape of a task's report (services/broker/druid_http/task_resource.py): rowStats and
unparseableEvents from strata's ingestion report, and the compact task's interval."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from services import query_errors as qe
from services.broker.druid_http.task_resource import _reports, compact_interval
from services.ingestion.ingestion_report import IngestionReport, ParseExceptionSample


def task(state: str, report: dict, error: str = "") -> SimpleNamespace:
    return SimpleNamespace(id="t1", type="insert", state=state, error=error, report_json=json.dumps(report),
                           finished_ms=1_700_000_000_000)


def test_a_finished_reports_parse_exceptions_as_druids_unparseable_events():
    report = IngestionReport("j", "wiki", "insert", "SUCCESS", rows_read=10, rows_written=6, rows_filtered=2,
                             parse_exceptions=2, parse_exception_samples=(
                                 ParseExceptionSample("s3://b/a.json", 3, "{bad", "not JSON: unexpected end"),
                                 ParseExceptionSample("s3://b/a.json", 7, '{"ts": "x"}', "timestamp 'x' unparseable")))
    payload = _reports(task("SUCCESS", report.to_json()))["ingestionStatsAndErrors"]["payload"]
    assert payload["ingestionState"] == "COMPLETED" and payload["report"]["rowsWritten"] == 6
    assert payload["rowStats"] == {"buildSegments": {"processed": 6, "processedWithError": 0, "thrownAway": 2,
                                                     "unparseable": 2}}
    assert payload["unparseableEvents"] == {"buildSegments": [
        {"input": "{bad", "errorType": "unparseable", "timeOfExceptionMillis": 1_700_000_000_000,
         "details": ["s3://b/a.json, line 3: not JSON: unexpected end"]},
        {"input": '{"ts": "x"}', "errorType": "unparseable", "timeOfExceptionMillis": 1_700_000_000_000,
         "details": ["s3://b/a.json, line 7: timestamp 'x' unparseable"]}]}


def test_a_running_tasks_progress_has_no_row_stats():
    payload = _reports(task("RUNNING", {"phase": "building", "segments": 3}))["ingestionStatsAndErrors"]["payload"]
    assert payload == {"ingestionState": "RUNNING", "errorMsg": None, "report": {"phase": "building", "segments": 3}}


@pytest.mark.parametrize("payload, interval", [
    ({"ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2020-01-01/2020-01-02"}}},
     "2020-01-01T00:00:00.000Z/2020-01-02T00:00:00.000Z"),
    ({"interval": "2020-01-01/P1D"}, "2020-01-01T00:00:00.000Z/2020-01-02T00:00:00.000Z"),
    ({}, None),
])
def test_compact_interval(payload, interval):
    assert compact_interval({"type": "compact", "dataSource": "d", **payload}) == interval


@pytest.mark.parametrize("payload, message", [
    ({"tuningConfig": {}}, "'tuningConfig' not supported"),
    ({"interval": "2020-01-02/2020-01-01"}, "interval '2020-01-02/2020-01-01'"),
    ({"interval": "2020-01-01/2020-01-02", "ioConfig": {"inputSpec": {"interval": "2020-01-01/2020-01-03"}}},
     "differ"),
])
def test_compact_interval_refusals(payload, message):
    with pytest.raises(qe.QueryFailed) as info:
        compact_interval({"type": "compact", "dataSource": "d", **payload})
    assert message in info.value.error.message
