"""The supervisor REST API's handler over a real SupervisorStore (SQLite file), without sockets."""

from __future__ import annotations

import json

import pytest

from services.coordinator.store import SegmentStore
from services.coordinator.supervisor_http import BASE, SupervisorHttp
from services.coordinator.supervisor_store import SupervisorStore
from services.security.authorizer import ALLOW_ALL
from tests.unit.coordinator.only_wiki_authorizer import OnlyWiki

SPEC = {"type": "kafka", "spec": {
    "dataSchema": {"dataSource": "wiki"},
    "ioConfig": {"topic": "edits", "consumerProperties": {"bootstrap.servers": "127.0.0.1:9"}}}}


@pytest.fixture
def api(tmp_path):
    store = SegmentStore(f"sqlite:///{tmp_path / 'm.db'}")
    supervisors = SupervisorStore(store)

    def call(method, path="", body=None, query=None, user=None, authorizer=ALLOW_ALL):
        handler = SupervisorHttp(supervisors, authorizer, clock=lambda: 0)
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
    assert api("POST", "/secret/terminate", user="ann", authorizer=OnlyWiki())[0] == 403
