"""Druid's supervisor API on the coordinator's HTTP port, under ``/druid/indexer/v1/supervisor``.

    POST supervisor                     body: a Kafka supervisor spec; creates or updates -> {"id"}
    GET  supervisor[?full|?state=true]  -> ids; ``full`` with specs, ``state`` with states
    GET  supervisor/{id}                -> the spec
    GET  supervisor/{id}/status         -> Druid's status payload (state, offsets, active tasks)
    POST supervisor/{id}/suspend|resume -> the spec;  POST supervisor/{id}/terminate -> {"id"}
    POST supervisor/{id}/reset          -> forgets the committed offsets (tasks start per useEarliestOffset)
    POST supervisor/{id}/resetOffsets   body: {"type": "kafka", "partitions": {"type": "end",
                                        "stream": topic, "partitionOffsetMap": {"0": offset}}}

Creating or changing a supervisor needs WRITE on its datasource, reading it READ. Errors answer
400 naming the key at fault (common/ingest/supervisor_spec.py), 404 for an unknown supervisor.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

from common.errors import ValidationError
from common.types.interval import format_instant
from common.ingest.supervisor_spec import parse_supervisor_spec
from services.coordinator.json_reply import ANSWERED_ERRORS, HttpError, error_reply, json_reply, request_header
from services.coordinator.supervisor_store import (RUNNING, SUSPENDED, TERMINATED, SupervisorNotFoundError,
                                                    SupervisorRecord)
from services.http_endpoint import USER_HEADER

BASE = "/druid/indexer/v1/supervisor"


def state_of(record: SupervisorRecord, active_tasks: int) -> tuple[str, str]:
    """(state, detailedState) as Druid names them."""
    if record.state == SUSPENDED:
        return "SUSPENDED", "SUSPENDED"
    if record.state == TERMINATED:
        return "STOPPING", "STOPPING"
    return ("RUNNING", "RUNNING") if active_tasks else ("PENDING", "PENDING")


class SupervisorHttp:
    """``tasks(datasource)`` lists the supervisor's task records that are not final."""

    def __init__(self, supervisors, authorizer, tasks=None, clock=None) -> None:
        self.supervisors = supervisors
        self.authorizer = authorizer
        self.tasks = tasks or (lambda datasource: [])
        self.clock = clock

    def __call__(self, method: str, path: str, query: dict, body: bytes, headers: dict) -> tuple[int, str, bytes]:
        try:
            user = request_header(headers or {}, USER_HEADER) or None
            return self._route(method, path, query or {}, body or b"", user)
        except SupervisorNotFoundError as exc:  # a ValidationError: before the 400s
            return json_reply(404, {"error": str(exc)})
        except ANSWERED_ERRORS as exc:
            return error_reply(exc)

    def _route(self, method: str, path: str, query: dict, body: bytes, user):
        rest = path[len(BASE):]
        if rest and not rest.startswith("/"):
            raise HttpError(404, f"no route for {method} {path}")
        parts = [unquote(p) for p in rest.strip("/").split("/")] if rest.strip("/") else []
        if not parts:
            if method == "POST":
                return self._create(body, user)
            self._allow(method, "GET")
            records = [r for r in self.supervisors.list() if self.authorizer.can(user, "READ", "DATASOURCE", r.id)]
            if "full" in query:
                return json_reply(200, [{"id": r.id, "spec": r.spec.to_json(), **self._state(r)} for r in records])
            if _truthy(query.get("state")):
                return json_reply(200, [{"id": r.id, **self._state(r)} for r in records])
            return json_reply(200, [r.id for r in records])
        sid = parts[0]
        if len(parts) == 1:
            self._allow(method, "GET")
            self.authorizer.require(user, "READ", "DATASOURCE", sid)
            return json_reply(200, self.supervisors.require(sid).spec.to_json())
        if len(parts) != 2:
            raise HttpError(404, f"no route for {method} {path}")
        action = parts[1]
        if action == "status":
            self._allow(method, "GET")
            self.authorizer.require(user, "READ", "DATASOURCE", sid)
            return json_reply(200, self._status(self.supervisors.require(sid)))
        self._allow(method, "POST")
        self.authorizer.require(user, "WRITE", "DATASOURCE", sid)
        if action == "suspend":
            return json_reply(200, self.supervisors.set_state(sid, SUSPENDED).spec.to_json())
        if action == "resume":
            return json_reply(200, self.supervisors.set_state(sid, RUNNING).spec.to_json())
        if action == "terminate":
            self.supervisors.set_state(sid, TERMINATED)
            return json_reply(200, {"id": sid})
        if action == "reset":
            self.supervisors.require(sid)
            self.supervisors.reset_offsets(sid)
            return json_reply(200, {"id": sid})
        if action == "resetOffsets":
            record = self.supervisors.require(sid)
            self.supervisors.reset_offsets(sid, _partition_offsets(body, record.spec.topic), topic=record.spec.topic)
            return json_reply(200, {"id": sid})
        raise HttpError(404, f"no route for {method} {path}; actions: status, suspend, resume, terminate, reset, "
                             "resetOffsets")

    def _create(self, body: bytes, user) -> tuple[int, str, bytes]:
        if not body.strip():
            raise ValidationError(f"POST {BASE} needs a JSON body: a Kafka supervisor spec")
        try:
            value = json.loads(body)
        except ValueError as e:
            raise ValidationError(f"the supervisor spec is not valid JSON: {e}") from None
        spec = parse_supervisor_spec(value)
        self.authorizer.require(user, "WRITE", "DATASOURCE", spec.datasource)
        self.supervisors.upsert(spec)
        return json_reply(200, {"id": spec.id})

    def _state(self, record: SupervisorRecord) -> dict:
        state, detailed = state_of(record, len(self.tasks(record.id)))
        return {"state": state, "detailedState": detailed, "healthy": True, "suspended": record.suspended}

    def _status(self, record: SupervisorRecord) -> dict:
        spec = record.spec
        committed = self.supervisors.offsets(spec.datasource)
        active = self.tasks(record.id)
        state = self._state(record)
        payload = {
            "dataSource": spec.datasource, "stream": spec.topic,
            "partitions": len(committed.offsets) if committed else 0,
            "replicas": spec.replicas, "durationSeconds": spec.task_duration_ms // 1000,
            "activeTasks": [{"id": t.id, "startTime": format_instant(t.started_ms) if t.started_ms else None}
                            for t in active],
            "publishingTasks": [],
            # strata's own field: the offsets published segments end at (Druid keeps them in its
            # metadata store but does not show them here).
            "committedOffsets": {str(p): o for p, o in sorted(committed.offsets.items())} if committed else {},
            "suspended": record.suspended, "state": state["state"], "detailedState": state["detailedState"],
            "healthy": state["healthy"], "recentErrors": [],
        }
        return {"id": record.id, "generationTime": format_instant(self.clock() if self.clock else record.updated_ms),
                "payload": payload}

    @staticmethod
    def _allow(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise HttpError(405, f"method {method} is not allowed here; use {' or '.join(allowed)}")


def _truthy(value) -> bool:
    if isinstance(value, list):
        value = value[-1] if value else None
    return value is not None and str(value).lower() in ("", "true", "1")


def _partition_offsets(body: bytes, topic: str) -> dict[int, int]:
    example = ('{"type": "kafka", "partitions": {"type": "end", "stream": "' + topic
               + '", "partitionOffsetMap": {"0": 100}}}')
    try:
        value = json.loads(body or b"null")
        partitions = value["partitions"]
        stream, mapping = partitions["stream"], partitions["partitionOffsetMap"]
    except (ValueError, KeyError, TypeError):
        raise ValidationError(f"resetOffsets needs a body like {example}") from None
    if stream != topic:
        raise ValidationError(f"resetOffsets names stream '{stream}' but the supervisor reads '{topic}'")
    out = {}
    for p, o in (mapping or {}).items():
        try:
            partition, offset = int(p), o
        except ValueError:
            raise ValidationError(f"partitionOffsetMap key '{p}' is not a partition number") from None
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationError(f"partitionOffsetMap[{p}] must be an offset >= 0, got {json.dumps(offset)}")
        out[partition] = offset
    if not out:
        raise ValidationError(f"resetOffsets names no partition; e.g. {example}")
    return out


def register(endpoint, supervisors, authorizer, tasks=None, clock=None) -> SupervisorHttp:
    handler = SupervisorHttp(supervisors, authorizer, tasks, clock)
    endpoint.route(BASE, handler)
    return handler
