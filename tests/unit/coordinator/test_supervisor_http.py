"""The supervisor REST API's handler over a real SupervisorStore (SQLite file), without sockets."""

from __future__ import annotations

import json

import pytest

from services.coordinator.store import SegmentStore
from services.coordinator.supervisor_http import BASE, SupervisorHttp
from services.coordinator.core.supervisor_status import LagStats, StreamContact
from services.coordinator.kafka_lag_monitor import LagSnapshot
from services.coordinator.supervisor_store import SupervisorStore
from services.coordinator.task_store import TaskRecord
from services.security.authorizer import ALLOW_ALL
from tests.unit.coordinator.only_wiki_authorizer import OnlyWiki

SPEC = {"type": "kafka", "spec": {
    "dataSchema": {"dataSource": "wiki"},
    "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "127.0.0.1:9"}}}}


@pytest.fixture
def api(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'm.db'}")
    supervisors = SupervisorStore(store)

    def call(method, path="", body=None, query=None, user=None, authorizer=ALLOW_ALL, tasks=None, lag=None,
             now=0):
        handler = SupervisorHttp(supervisors, authorizer, tasks and (lambda sid: tasks), clock=lambda: now,
                                 lag=lag and (lambda sid: lag))
        raw = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b""
        status, _, out = handler(method, BASE + path, query or {}, raw, {"X-Strata-User": user} if user else {})
        return status, json.loads(out)

    call.supervisors = supervisors
    yield call
    store.close()


def test_create_list_status_suspend_resume_terminate(api):
    assert api("POST", body=SPEC) == (200, {"id": "wiki"})
    assert api("GET") == (200, ["wiki"])
    assert api("GET", "/wiki") == (200, SPEC)
    status, listed = api("GET", query={"state": ["true"]})
    assert listed == [{"id": "wiki", "state": "PENDING", "detailedState": "PENDING", "healthy": True,
                       "suspended": False}]
    status, full = api("GET", query={"full": [""]})
    assert full[0]["spec"] == SPEC
    status, body = api("GET", "/wiki/status")
    assert status == 200 and body["id"] == "wiki"
    payload = body["payload"]
    assert (payload["dataSource"], payload["stream"], payload["state"], payload["suspended"]) == (
        "wiki", "edits", "PENDING", False)
    assert payload["activeTasks"] == [] and payload["committedOffsets"] == {}
    assert api("POST", "/wiki/suspend") == (200, SPEC)
    assert api("GET", "/wiki/status")[1]["payload"]["state"] == "SUSPENDED"
    assert api("POST", "/wiki/resume")[0] == 200
    assert api("GET", "/wiki/status")[1]["payload"]["suspended"] is False
    assert api("POST", "/wiki/terminate") == (200, {"id": "wiki"})
    assert api("GET") == (200, [])
    status, body = api("POST", "/wiki/resume")
    assert status == 404 and "terminated" in body["error"]


def test_reset_and_reset_offsets(api):
    api("POST", body=SPEC)
    body = {"type": "kafka", "partitions": {"type": "end", "stream": "edits", "partitionOffsetMap": {"0": 7, "2": 1}}}
    assert api("POST", "/wiki/resetOffsets", body) == (200, {"id": "wiki"})
    assert api("GET", "/wiki/status")[1]["payload"]["committedOffsets"] == {"0": 7, "2": 1}
    assert api.supervisors.offsets("wiki").offsets == {0: 7, 2: 1}
    status, err = api("POST", "/wiki/resetOffsets", {**body, "partitions": {**body["partitions"], "stream": "x"}})
    assert status == 400 and "reads 'edits'" in err["error"]
    status, err = api("POST", "/wiki/resetOffsets", {"type": "kafka"})
    assert status == 400 and "partitionOffsetMap" in err["error"]
    assert api("POST", "/wiki/reset") == (200, {"id": "wiki"})
    assert api.supervisors.offsets("wiki") is None


def test_errors(api):
    status, err = api("POST", body={**SPEC, "spec": {**SPEC["spec"], "ioConfig": {"topik": "x"}}})
    assert status == 400 and "unknown key 'topik' in spec.ioConfig" in err["error"]
    status, err = api("POST", body=b"{nope")
    assert status == 400 and "not valid JSON" in err["error"]
    status, err = api("POST", body=b"")
    assert status == 400 and "needs a JSON body" in err["error"]
    assert api("GET", "/nope")[0] == 404
    assert api("GET", "/nope/status")[0] == 404
    assert api("POST", "/nope/suspend")[0] == 404
    assert api("DELETE")[0] == 405
    api("POST", body=SPEC)
    assert api("POST", "/wiki/explode")[0] == 404
    assert api("GET", "/wiki/suspend")[0] == 405


def test_permissions(api):
    other = {**SPEC, "spec": {**SPEC["spec"], "dataSchema": {"dataSource": "secret"}}}
    assert api("POST", body=other, user="ann", authorizer=OnlyWiki())[0] == 403
    assert api("POST", body=other, user="admin", authorizer=OnlyWiki())[0] == 200
    assert api("POST", body=SPEC, user="ann", authorizer=OnlyWiki())[0] == 200
    assert api("GET", user="ann", authorizer=OnlyWiki()) == (200, ["wiki"])
    assert api("GET", "/secret/status", user="ann", authorizer=OnlyWiki())[0] == 403
    assert api("GET", "/secret/stats", user="ann", authorizer=OnlyWiki())[0] == 403
    assert api("GET", "/secret/health", user="ann", authorizer=OnlyWiki())[0] == 403
    assert api("POST", "/secret/terminate", user="ann", authorizer=OnlyWiki())[0] == 403


def kafka_task(task_id: str, state: str, report: dict | None = None, error: str = "", start: dict | None = None,
               started_ms: int = 0, finished_ms: int = 0, **spec) -> TaskRecord:
    return TaskRecord(task_id, "wiki", "kafka", state, "", {"startOffsets": start or {}, **spec}, report or {}, error,
                      started_ms, started_ms, finished_ms)


def test_status_shows_lag_per_partition_and_per_task(api):
    io = {**SPEC["spec"]["ioConfig"], "taskDuration": "PT1H"}
    api("POST", body={**SPEC, "spec": {**SPEC["spec"], "ioConfig": io}})
    api.supervisors.reset_offsets("wiki", {0: 40, 1: 50}, topic="edits")
    lag = LagSnapshot("edits", {0: 100, 1: 50}, {0: 60, 1: 0}, LagStats(60, 60, 30.0), 1_700_000_000_000,
                      lag_ms={0: 2_500, 1: 0})
    running = kafka_task("t2", "RUNNING", {"offsets": {"0": 70, "1": 50}, "rowsWritten": 30, "parseExceptions": 1,
                                           "microBatches": 2}, start={"0": 40, "1": 50}, started_ms=1_700_000_000_000)
    status, body = api("GET", "/wiki/status", tasks=[kafka_task("t1", "SUCCESS", finished_ms=5), running], lag=lag,
                       now=1_700_000_600_000)
    payload = body["payload"]
    assert (payload["latestOffsets"], payload["minimumLag"], payload["aggregateLag"]) == (
        {"0": 100, "1": 50}, {"0": 60, "1": 0}, 60)
    assert payload["offsetsLastUpdated"] == "2023-11-14T22:13:20.000Z" and payload["partitions"] == 2
    assert (payload["minimumLagMillis"], payload["aggregateLagMillis"]) == ({"0": 2_500, "1": 0}, 2_500)
    assert (payload["state"], payload["healthy"]) == ("RUNNING", True)
    [task] = payload["activeTasks"]
    assert task == {"id": "t2", "startTime": "2023-11-14T22:13:20.000Z", "remainingSeconds": 3000, "type": "ACTIVE",
                    "taskGroup": 0, "partitions": None, "startingOffsets": {"0": 40, "1": 50}, "currentOffsets": {"0": 70, "1": 50},
                    "lag": {"0": 30, "1": 0}}
    # Before the first answer from the broker, lag is unknown (null), not 0.
    payload = api("GET", "/wiki/status")[1]["payload"]
    lags = ("latestOffsets", "minimumLag", "aggregateLag", "minimumLagMillis", "aggregateLagMillis")
    assert [payload[k] for k in lags] == [None] * 5
    # Druid's /stats: per task group, per active task.
    assert api("GET", "/wiki/stats", tasks=[kafka_task("t1", "SUCCESS"), running]) == (200, {"0": {"t2": {
        "totals": {"buildSegments": {"processed": 30, "processedWithError": 0, "thrownAway": 0, "unparseable": 1}},
        "microBatches": 2}}})
    assert api("GET", "/wiki/stats") == (200, {})


def test_status_and_stats_show_every_replica_of_every_task_group(api):
    io = {**SPEC["spec"]["ioConfig"], "taskCount": 2, "replicas": 2}
    api("POST", body={**SPEC, "spec": {**SPEC["spec"], "ioConfig": io}})
    lag = LagSnapshot("edits", {0: 100, 1: 50, 2: 10}, {0: 0, 1: 0, 2: 0}, LagStats(0, 0, 0.0), 1)
    # Replicas of group 0 (partitions 0 and 2) at different offsets; group 1's task has not reported
    # yet (its starting offsets are the committed ones it was given); a superseded replica is over.
    tasks = [kafka_task("a", "RUNNING", {"offsets": {"0": 90, "2": 10}, "startOffsets": {"0": 80, "2": 4},
                                         "rowsWritten": 16}, start={"0": 80}, taskGroup=0, partitions=[0, 2]),
             kafka_task("b", "RUNNING", {"offsets": {"0": 100, "2": 10}, "startOffsets": {"0": 80, "2": 4},
                                         "rowsWritten": 26}, start={"0": 80}, taskGroup=0, partitions=[0, 2]),
             kafka_task("c", "PENDING", start={"1": 50}, taskGroup=1, partitions=[1]),
             kafka_task("d", "SUCCESS", {"superseded": "offsets moved"}, taskGroup=1, partitions=[1], finished_ms=3)]
    payload = api("GET", "/wiki/status", tasks=tasks, lag=lag)[1]["payload"]
    got = [(t["id"], t["taskGroup"], t["partitions"], t["startingOffsets"], t["currentOffsets"], t["lag"])
           for t in payload["activeTasks"]]
    assert got == [("a", 0, [0, 2], {"0": 80, "2": 4}, {"0": 90, "2": 10}, {"0": 10, "2": 0}),
                   ("b", 0, [0, 2], {"0": 80, "2": 4}, {"0": 100, "2": 10}, {"0": 0, "2": 0}),
                   ("c", 1, [1], {"1": 50}, {"1": 50}, {"1": 0})]
    assert payload["replicas"] == 2 and payload["partitions"] == 3
    stats = api("GET", "/wiki/stats", tasks=tasks)[1]
    assert {g: {t: s["totals"]["buildSegments"]["processed"] for t, s in v.items()} for g, v in stats.items()} == {
        "0": {"a": 16, "b": 26}, "1": {"c": 0}}


def test_health_and_recent_errors_from_failed_tasks_and_the_broker(api):
    api("POST", body=SPEC)
    assert api("GET", "/wiki/health") == (200, {"healthy": True})
    samples = [{"partition": 1, "offset": 7, "reason": "not JSON: unexpected character", "seenMs": 10}]
    error = "supervisor 'wiki': 1 unparseable messages exceed tuningConfig.maxParseExceptions (0)"
    failed = [kafka_task(f"t{i}", "FAILED", {"parseExceptionSamples": samples}, error, finished_ms=20 + i)
              for i in range(3)]
    status, body = api("GET", "/wiki/health", tasks=failed)
    assert (status, body) == (503, {"healthy": False})
    payload = api("GET", "/wiki/status", tasks=failed)[1]["payload"]
    assert (payload["state"], payload["detailedState"], payload["healthy"]) == ("UNHEALTHY_TASKS", "UNHEALTHY_TASKS",
                                                                                False)
    parse = [e for e in payload["recentErrors"] if e["exceptionClass"] == "ParseException"]
    assert [(e["partition"], e["offset"], e["reason"]) for e in parse] == [(1, 7, "not JSON: unexpected character")] * 3
    assert [e["message"] for e in payload["recentErrors"] if e["exceptionClass"] == "TaskFailure"] == [error] * 3
    listed = api("GET", query={"state": ["true"]}, tasks=failed)[1]
    assert listed[0]["healthy"] is False and listed[0]["state"] == "UNHEALTHY_TASKS"
    # The broker not answering: unhealthy with Druid's detailed state, the error among recentErrors.
    lost = LagSnapshot("edits", contact=StreamContact(3, False, "cannot read the offsets of topic 'edits'", 99))
    payload = api("GET", "/wiki/status", lag=lost)[1]["payload"]
    assert (payload["state"], payload["detailedState"]) == ("UNHEALTHY_SUPERVISOR", "UNABLE_TO_CONNECT_TO_STREAM")
    assert payload["recentErrors"][-1]["streamException"] is True
    assert api("GET", "/wiki/health", lag=lost)[0] == 503
    # Suspended: healthy whatever happened before.
    api("POST", "/wiki/suspend")
    assert api("GET", "/wiki/health", tasks=failed, lag=lost) == (200, {"healthy": True})
    assert api("POST", "/wiki/health")[0] == 405
    assert api("GET", "/nope/health")[0] == 404
