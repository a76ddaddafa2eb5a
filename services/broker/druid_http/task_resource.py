"""SQL ingestion over Druid's HTTP API: ``POST /druid/v2/sql/task`` (and INSERT/REPLACE sent to
``/druid/v2/sql``) submits the statement as strata's Spark task, through the front door like any
statement (validated and authorized before a task exists), and answers ``{"taskId", "state"}``.
The task is then followed with the Overlord's API Druid tools poll:
``GET /druid/indexer/v1/task/{id}/status``, ``.../reports`` and ``GET /druid/indexer/v1/tasks``
(``?state=`` running/pending/complete, ``?datasource=``), read from the coordinator and shown
only to users who may READ the task's datasource.

``POST /druid/indexer/v1/task`` takes Druid's ``kill`` task (``{"type": "kill", "dataSource",
"interval", "versions", "batchSize", "limit"}``): the coordinator validates it, runs it in its own
process and deletes only unused segments (rows, then files); it is followed like any task. It takes
Druid's ``compact`` task too (``{"type": "compact", "dataSource", "ioConfig": {"type": "compact",
"inputSpec": {"type": "interval", "interval"}}}``, or a top-level ``interval``; none: all of the
datasource): strata's compaction rewrites the interval's segments with the catalog's current
definition (its projections), so the keys Druid's compaction reads its layout from
(``dimensionsSpec``, ``granularitySpec``, ...) are refused with where to set them instead.
A completed task's report carries Druid's ``rowStats`` and ``unparseableEvents`` (the parse
exception samples, with file and line) beside strata's own report. The task's log
(``.../task/{id}/log``) is the leading coordinator's (services/coordinator/task_log_http.py).
``POST /druid/indexer/v1/task/{id}/shutdown`` cancels a task. Both need WRITE on the datasource.
"""

from __future__ import annotations

import json

import orjson

from common.sql.statement_kind import classify
from common.errors import StrataError
from common.types.interval import Interval, format_instant
from services import query_errors as qe
from services.broker.druid_http.druid_errors import druid_error
from services.broker.core.call_origin import CallOrigin
from services.broker.front_door import QueryRequest
from services.http_endpoint import REMOTE_HEADER, USER_HEADER

JSON = "application/json"
# strata's task states -> Druid's (statusCode, runnerStatusCode)
_STATES = {"PENDING": ("RUNNING", "PENDING"), "RUNNING": ("RUNNING", "RUNNING"), "SUCCESS": ("SUCCESS", "NONE"),
           "FAILED": ("FAILED", "NONE"), "CANCELED": ("FAILED", "NONE")}
_DRUID_TYPES = frozenset({"kill", "compact"})  # task types strata runs as Druid defines them
_KILL_EXAMPLE = '{"type": "kill", "dataSource": "wikipedia", "interval": "2015-09-12/2015-09-13"}'
_COMPACT_EXAMPLE = ('{"type": "compact", "dataSource": "wikipedia", "ioConfig": {"type": "compact", '
                    '"inputSpec": {"type": "interval", "interval": "2015-09-12/2015-09-13"}}}')
_COMPACT_KEYS = frozenset({"type", "id", "dataSource", "ioConfig", "interval", "context"})
_STATE_FILTERS = {"running": ("RUNNING",), "pending": ("PENDING",), "waiting": ("PENDING",),
                  "complete": ("SUCCESS", "FAILED", "CANCELED")}


def is_ingestion(sql: str) -> bool:
    try:
        return classify(sql).is_ingestion
    except Exception:  # noqa: BLE001 - a statement that does not parse fails where it runs, with its message
        return False


def task_status(task) -> dict:
    """A task as Druid's TaskStatusPlus."""
    status, runner = _STATES.get(task.state, ("RUNNING", task.state))
    duration = task.finished_ms - task.started_ms if task.finished_ms and task.started_ms else -1
    error = task.error or None
    if task.state == "CANCELED" and not error:
        error = "canceled by a user"
    kind = task.type if task.type in _DRUID_TYPES else f"strata_{task.type}"
    return {"id": task.id, "groupId": task.id, "type": kind,
            "createdTime": format_instant(task.created_ms),
            "queueInsertionTime": format_instant(task.created_ms), "statusCode": status, "status": status,
            "runnerStatusCode": runner, "duration": duration, "location": {"host": None, "port": -1, "tlsPort": -1},
            "dataSource": task.datasource, "errorMsg": error}


class DruidTaskResource:
    def __init__(self, front_door, coordinator, authorizer, host: str | None = None) -> None:
        self.front_door = front_door
        self.coordinator = coordinator  # () -> CoordinatorClient or None
        self.authorizer = authorizer
        self.host = host

    def _error(self, kind: str, message: str):
        status, body = druid_error(qe.ClientError(kind, message), self.host)
        return status, JSON, body

    def submit(self, query, headers: dict):
        """``query``: a parsed SqlQuery (sql_resource)."""
        if not is_ingestion(query.query):
            return self._error(qe.INVALID, "/druid/v2/sql/task runs INSERT and REPLACE statements; send a "
                                           "SELECT to /druid/v2/sql")
        user = headers.get(USER_HEADER)
        request = QueryRequest(user, sql=query.query, context=dict(query.context or {}),
                               origin=CallOrigin("http", headers.get(REMOTE_HEADER), user))
        try:
            table = self.front_door.run(request).table
        except qe.QueryFailed as exc:
            status, body = druid_error(exc.error, self.host)
            return status, JSON, body
        task_id = table.column("task_id")[0].as_py()
        return 200, JSON, orjson.dumps({"taskId": task_id, "state": "RUNNING"})

    def _client(self):
        client = self.coordinator() if callable(self.coordinator) else self.coordinator
        if client is None:
            raise qe.QueryFailed(qe.ClientError(qe.UNSUPPORTED, "no coordinator is reachable to read tasks from; "
                                                               "is one running?"))
        return client

    def find_task(self, task_id: str, user):
        try:
            task = self._client().task(task_id)
        except qe.QueryFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the coordinator's NOT_FOUND, or it being away
            if "NOT_FOUND" in str(exc):
                raise qe.QueryFailed(qe.ClientError(qe.NOT_FOUND, f"no task '{task_id}'")) from None
            raise qe.QueryFailed(qe.client_error(exc)) from None
        if not self.authorizer.can(user, "READ", "DATASOURCE", task.datasource):
            raise qe.QueryFailed(qe.ClientError(qe.NOT_FOUND, f"no task '{task_id}'"))  # as if it did not exist
        return task

    def handle(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        parts = [p for p in path.split("/") if p]  # druid, indexer, v1, ...
        rest = parts[3:]
        user = headers.get(USER_HEADER)
        try:
            if method == "GET" and len(rest) == 3 and rest[0] == "task" and rest[2] in ("status", "reports"):
                task = self.find_task(rest[1], user)
                if rest[2] == "status":
                    return 200, JSON, orjson.dumps({"task": task.id, "status": task_status(task)})
                return 200, JSON, orjson.dumps(_reports(task))
            if method == "GET" and len(rest) == 3 and rest[0] == "task" and rest[2] == "log":
                return self._error(qe.NOT_FOUND, "a task's log is served by the leading coordinator: GET "
                                                 f"{path} on its HTTP port, or through the router")
            if method == "GET" and rest == ["tasks"]:
                return 200, JSON, orjson.dumps(self._tasks(query, user))
            if method == "POST" and rest == ["task"]:
                return 200, JSON, orjson.dumps({"task": self._submit_task(body, headers)})
            if method == "POST" and len(rest) == 3 and rest[0] == "task" and rest[2] == "shutdown":
                return 200, JSON, orjson.dumps({"task": self._shutdown(rest[1], user)})
        except qe.QueryFailed as exc:
            status, out = druid_error(exc.error, self.host)
            return status, JSON, out
        return self._error(qe.NOT_FOUND, f"no Druid API at {method} {path}")

    def _submit_task(self, body: bytes, headers: dict) -> str:
        user = headers.get(USER_HEADER)  # a task goes to the coordinator: no query here, no query log
        try:
            payload = orjson.loads(body) if body.strip() else None
        except orjson.JSONDecodeError as exc:
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, f"the task is not valid JSON ({exc}); send e.g. "
                                                            f"{_KILL_EXAMPLE}")) from None
        if not isinstance(payload, dict):
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, f"a task is a JSON object, e.g. {_KILL_EXAMPLE}"))
        kind = payload.get("type")
        if kind not in ("kill", "compact"):
            raise qe.QueryFailed(qe.ClientError(qe.UNSUPPORTED, (
                f"task type {kind!r} is not run here: POST /druid/indexer/v1/task takes \"kill\" and \"compact\" "
                "tasks; ingest with INSERT or REPLACE through POST /druid/v2/sql/task")))
        example = _KILL_EXAMPLE if kind == "kill" else _COMPACT_EXAMPLE
        datasource = payload.get("dataSource")
        if not isinstance(datasource, str) or not datasource:
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, f"{kind} task: 'dataSource' is required, e.g. {example}"))
        if not self.authorizer.can(user, "WRITE", "DATASOURCE", datasource):
            raise qe.QueryFailed(qe.ClientError(qe.DENIED, f"user '{user}' may not WRITE datasource "
                                                           f"'{datasource}'; a {kind} needs WRITE"))
        if kind == "kill":
            statement, spec = f"KILL {datasource} {payload.get('interval', '')}".strip(), payload
        else:
            interval = compact_interval(payload)
            statement = f"COMPACT {datasource} {interval or ''}".strip()
            spec = {"interval": interval} if interval else {}
        try:
            task = self._client().submit_task(datasource, kind, statement, spec)
        except qe.QueryFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the coordinator's validation (INVALID), or it being away
            raise qe.QueryFailed(qe.client_error(exc)) from None
        return task.id

    def _shutdown(self, task_id: str, user) -> str:
        task = self.find_task(task_id, user)
        if not self.authorizer.can(user, "WRITE", "DATASOURCE", task.datasource):
            raise qe.QueryFailed(qe.ClientError(qe.DENIED, f"user '{user}' may not WRITE datasource "
                                                           f"'{task.datasource}'; shutting a task down needs WRITE"))
        try:
            self._client().cancel_task(task_id)
        except Exception as exc:  # noqa: BLE001
            raise qe.QueryFailed(qe.client_error(exc)) from None
        return task_id

    def _tasks(self, query: dict, user) -> list:
        state = (query.get("state") or [""])[0].lower()
        datasource = (query.get("datasource") or [""])[0]
        if state and state not in _STATE_FILTERS:
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, f"state {state!r} is not one of "
                                                            f"{', '.join(_STATE_FILTERS)}"))
        try:
            tasks = self._client().tasks(datasource)
        except qe.QueryFailed:
            raise
        except Exception as exc:  # noqa: BLE001
            raise qe.QueryFailed(qe.client_error(exc)) from None
        wanted = _STATE_FILTERS.get(state)
        return [task_status(t) for t in tasks if (wanted is None or t.state in wanted)
                and self.authorizer.can(user, "READ", "DATASOURCE", t.datasource)]


def compact_interval(payload: dict) -> str | None:
    """The interval a Druid compact task names (ioConfig.inputSpec.interval, or the legacy top-level
    ``interval``) in strata's spelling, or None for all of the datasource."""
    extra = sorted(set(payload) - _COMPACT_KEYS)
    if extra:
        raise qe.QueryFailed(qe.ClientError(qe.UNSUPPORTED, (
            f"compact task: {', '.join(repr(k) for k in extra)} not supported: strata's compaction rewrites segments "
            "with the catalog's definition of the datasource (its projections, granularity and cluster keys); "
            "change that (PUT /druid/coordinator/v1/catalog/tables/druid/<datasource>) and compact again")))
    io = payload.get("ioConfig")
    text = payload.get("interval")
    if io is not None:
        spec = io.get("inputSpec") if isinstance(io, dict) else None
        if not isinstance(spec, dict) or spec.get("type", "interval") != "interval" or "interval" not in spec:
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, (
                "compact task: ioConfig must be {\"type\": \"compact\", \"inputSpec\": {\"type\": \"interval\", "
                f"\"interval\": \"<start>/<end>\"}}}}; strata compacts by interval only, e.g. {_COMPACT_EXAMPLE}")))
        if text is not None and text != spec["interval"]:
            raise qe.QueryFailed(qe.ClientError(qe.INVALID, "compact task: 'interval' and "
                                                            "ioConfig.inputSpec.interval differ; give one"))
        text = spec["interval"]
    if text is None:
        return None
    try:
        return str(Interval.parse(text))
    except (StrataError, ValueError, TypeError) as exc:
        raise qe.QueryFailed(qe.ClientError(qe.INVALID, f"compact task: interval {text!r} is not an ISO-8601 "
                                                        f"interval ({exc}), e.g. 2015-09-12/2015-09-13")) from None


def _reports(task) -> dict:
    try:
        report = json.loads(task.report_json or "{}")
    except ValueError:
        report = {}
    if task.type == "kill":  # Druid's KillTaskReport
        return {"killUnusedSegments": {"type": "killUnusedSegments", "taskId": task.id,
                                       "payload": report if isinstance(report, dict) else {}}}
    state = {"SUCCESS": "COMPLETED", "FAILED": "COMPLETED", "CANCELED": "COMPLETED"}.get(task.state, task.state)
    report = report if isinstance(report, dict) else {}
    payload = {"ingestionState": state, "errorMsg": task.error or None, "report": report}
    if "rowsRead" in report:  # the final report (a running task's is its progress)
        payload.update(druid_row_stats(report, task.finished_ms or None))
    return {"ingestionStatsAndErrors": {"type": "ingestionStatsAndErrors", "taskId": task.id, "payload": payload}}


def druid_row_stats(report: dict, at_ms: int | None) -> dict:
    """Druid's ``rowStats`` and ``unparseableEvents`` (its ParseExceptionReport: input, errorType,
    details, timeOfExceptionMillis) of strata's ingestion report. strata builds segments in one
    phase, Druid's ``buildSegments``; the samples are the first rows that did not parse (the count
    is ``unparseable``), each naming its file and line."""
    def count(key):
        value = report.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    unparseable, filtered = count("parseExceptions"), count("rowsFiltered")
    events = []
    for sample in report.get("parseExceptionSamples") or []:
        if isinstance(sample, dict):
            events.append({"input": sample.get("raw"), "errorType": "unparseable", "timeOfExceptionMillis": at_ms,
                           "details": [f"{sample.get('source')}, line {sample.get('line')}: {sample.get('reason')}"]})
    return {"rowStats": {"buildSegments": {"processed": max(count("rowsRead") - unparseable - filtered, 0),
                                           "processedWithError": 0, "thrownAway": filtered,
                                           "unparseable": unparseable}},
            "unparseableEvents": {"buildSegments": events}}


__all__ = ["DruidTaskResource", "compact_interval", "druid_row_stats", "is_ingestion", "task_status"]
