"""Druid's supervisor API on the coordinator's HTTP port, under ``/druid/indexer/v1/supervisor``.

    POST supervisor                     body: a Kafka supervisor spec; creates or updates -> {"id"}
    GET  supervisor[?full|?state=true]  -> ids; ``full`` with specs, ``state`` with states
    GET  supervisor/{id}                -> the spec
    GET  supervisor/{id}/status         -> Druid's status payload (state, health, offsets, lag, active
                                           tasks, recentErrors with parse exception samples)
    GET  supervisor/{id}/stats          -> rows processed and unparseable per active task (totals)
    GET  supervisor/{id}/health         -> 200 {"healthy": true}, or 503 {"healthy": false}
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
from services.coordinator.core.supervisor_status import (MAX_RECENT_ERRORS, StreamContact, TaskView, recent_errors,
                                                         supervisor_state, task_row_stats)
from services.coordinator.json_reply import ANSWERED_ERRORS, HttpError, error_reply, json_reply, request_header
from services.coordinator.supervisor_store import (RUNNING, SUSPENDED, TERMINATED, SupervisorNotFoundError,
                                                    SupervisorRecord)
from services.http_endpoint import USER_HEADER

BASE = "/druid/indexer/v1/supervisor"


# The supervisor's tasks the status looks back on for health and recentErrors.
_RECENT_TASKS = 10


def state_of(record: SupervisorRecord, tasks, lag=None) -> tuple[str, str, bool]:
    """(state, detailedState, healthy) as Druid names them, from the supervisor's tasks (its
    ``kafka`` task records, oldest first) and the leader's last contact with the broker (``lag``:
    a LagSnapshot or None)."""
    active = [t for t in tasks if not t.is_final]
    finished = [t.state for t in tasks if t.is_final][-_RECENT_TASKS:]
    return supervisor_state(record.state, len(active), finished, lag.contact if lag is not None else StreamContact())


class SupervisorHttp:
    """``tasks(supervisor_id)`` lists the supervisor's ``kafka`` task records, oldest first (final
    ones too); ``lag(supervisor_id)`` is the KafkaLagMonitor's LagSnapshot or None."""

    def __init__(self, supervisors, authorizer, tasks=None, clock=None, lag=None) -> None:
        self.supervisors = supervisors
        self.authorizer = authorizer
        self.tasks = tasks or (lambda supervisor_id: [])
        self.clock = clock
        self.lag = lag or (lambda supervisor_id: None)

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
        if action in ("status", "stats", "health"):
            self._allow(method, "GET")
            self.authorizer.require(user, "READ", "DATASOURCE", sid)
            record = self.supervisors.require(sid)
            if action == "status":
                return json_reply(200, self._status(record))
            if action == "stats":
                # Druid's shape: task group -> task id -> row stats.
                groups: dict[str, dict] = {}
                for t in self.tasks(sid):
                    if not t.is_final:
                        groups.setdefault(str(_group(t)), {})[t.id] = task_row_stats(t.report)
                return json_reply(200, dict(sorted(groups.items(), key=lambda g: int(g[0]))))
            healthy = self._state(record)["healthy"]
            return json_reply(200 if healthy else 503, {"healthy": healthy})
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
        raise HttpError(404, f"no route for {method} {path}; actions: status, stats, health, suspend, resume, "
                             "terminate, reset, resetOffsets")

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
        state, detailed, healthy = state_of(record, self.tasks(record.id), self.lag(record.id))
        return {"state": state, "detailedState": detailed, "healthy": healthy, "suspended": record.suspended}

    def _status(self, record: SupervisorRecord) -> dict:
        spec = record.spec
        committed = self.supervisors.offsets(spec.datasource)
        tasks = self.tasks(record.id)
        active = [t for t in tasks if not t.is_final]
        lag = self.lag(record.id)
        state, detailed, healthy = state_of(record, tasks, lag)
        now = self.clock() if self.clock else record.updated_ms
        latest = lag.latest if lag is not None and lag.topic == spec.topic else {}
        payload = {
            "dataSource": spec.datasource, "stream": spec.topic,
            "partitions": len(latest) or (len(committed.offsets) if committed else 0),
            "replicas": spec.replicas, "durationSeconds": spec.task_duration_ms // 1000,
            "activeTasks": [_task_report(t, spec, latest, now) for t in active],
            "publishingTasks": [],
            # strata's own field: the offsets published segments end at (Druid keeps them in its
            # metadata store but does not show them here).
            "committedOffsets": {str(p): o for p, o in sorted(committed.offsets.items())} if committed else {},
            "latestOffsets": _by_partition(latest) if latest else None,
            # Per partition, what is left after the committed offsets: replicas publish through
            # those, so the least lag over a partition's replica tasks (Druid's minimumLag) is
            # this once their publish lands.
            "minimumLag": _by_partition(lag.lag) if latest else None,
            "aggregateLag": lag.stats.aggregate if latest else None,
            # Lag in time, named as Druid's Kinesis status does: per partition the age of the
            # oldest unread message; aggregateLagMillis is the oldest of them (not a sum).
            "minimumLagMillis": _by_partition(lag.lag_ms) if latest else None,
            "aggregateLagMillis": max(lag.lag_ms.values(), default=0) if latest else None,
            "offsetsLastUpdated": format_instant(lag.fetched_ms) if latest and lag.fetched_ms else None,
            "suspended": record.suspended, "state": state, "detailedState": detailed, "healthy": healthy,
            "recentErrors": recent_errors(
                [TaskView(t.id, t.state, t.error, t.report, t.finished_ms) for t in tasks[-_RECENT_TASKS:]],
                lag.contact if lag is not None else StreamContact(), format_instant, MAX_RECENT_ERRORS),
        }
        return {"id": record.id, "generationTime": format_instant(now), "payload": payload}

    @staticmethod
    def _allow(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise HttpError(405, f"method {method} is not allowed here; use {' or '.join(allowed)}")


def _by_partition(offsets) -> dict:
    return {str(p): int(o) for p, o in sorted(offsets.items())}


def _task_report(task, spec, latest, now_ms: int) -> dict:
    """One active task as Druid's TaskReportData: where it started, where it is (its last
    progress report), and its lag behind the latest offsets."""
    # The offsets the task resolved (its report) over the committed ones it was given: a partition
    # never committed starts at the earliest or latest offset, which only the task knows.
    given = task.report.get("startOffsets") or task.spec.get("startOffsets") or {}
    starting = {int(p): int(o) for p, o in given.items()}
    current = {**starting, **{int(p): int(o) for p, o in (task.report.get("offsets") or {}).items()}}
    listed = task.spec.get("partitions")
    out = {"id": task.id, "startTime": format_instant(task.started_ms) if task.started_ms else None,
           "remainingSeconds": (max((task.started_ms + spec.task_duration_ms - now_ms) // 1000, 0)
                                if task.started_ms else None),
           "type": "ACTIVE", "taskGroup": _group(task),
           # strata's own field: the partitions its group reads (None: every partition of the topic)
           "partitions": [int(p) for p in listed] if listed is not None else None,
           "startingOffsets": _by_partition(starting), "currentOffsets": _by_partition(current), "lag": None}
    if latest:
        out["lag"] = {str(p): max(int(latest[p]) - current[p], 0) for p in sorted(current) if p in latest}
    return out


def _group(task) -> int:
    return int((task.spec or {}).get("taskGroup", 0))


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


def register(endpoint, supervisors, authorizer, tasks=None, clock=None, lag=None) -> SupervisorHttp:
    handler = SupervisorHttp(supervisors, authorizer, tasks, clock, lag)
    endpoint.route(BASE, handler)
    return handler
