"""Druid's task log on the coordinator's HTTP port: ``GET /druid/indexer/v1/task/{id}/log``.

The log is the file the task runner gave the task's process (``<log_dir>/<task>.log``: its Python
logging and its Spark JVM's output), so it lives on the coordinator that ran the task; the router
sends this path to the leading coordinator. ``?offset=n`` as Druid's: from byte n, or with a
negative n the last -n bytes. Whoever may READ the task's datasource may read its log; a task
another user may not see answers 404 as an unknown one. Plain text, as Druid answers it.
"""

from __future__ import annotations

import os
from urllib.parse import unquote

from services.coordinator.json_reply import ANSWERED_ERRORS, HttpError, error_reply, json_reply, request_header
from services.coordinator.task_store import TaskNotFoundError
from services.http_endpoint import USER_HEADER

PREFIX = "/druid/indexer/v1/task/"
# A log larger than this answers its last MAX_BYTES (with a first line saying so) unless an
# offset asks for another part: a browser is not handed a multi-gigabyte Spark log whole.
MAX_BYTES = 4 << 20


class TaskLogHttp:
    """``log_path(task_id)`` is the task runner's path of the task's log file."""

    def __init__(self, tasks, log_path, authorizer) -> None:
        self.tasks = tasks
        self.log_path = log_path
        self.authorizer = authorizer

    def __call__(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        parts = path[len(PREFIX):].split("/")
        if len(parts) != 2 or parts[1] != "log" or not parts[0]:
            return None  # not this handler's path (the broker serves the rest of the task API)
        task_id = unquote(parts[0])
        if method != "GET":
            return json_reply(405, {"error": f"{method} {path}: the task log is read with GET"})
        try:
            user = request_header(headers or {}, USER_HEADER) or None
            try:
                task = self.tasks.get(task_id)
            except TaskNotFoundError:
                task = None
            if task is None or not self.authorizer.can(user, "READ", "DATASOURCE", task.datasource):
                return json_reply(404, {"error": f"no task '{task_id}'"})
            offset = _offset(query or {})
            return 200, "text/plain; charset=utf-8", self._read(task, offset)
        except ANSWERED_ERRORS as exc:
            return error_reply(exc)

    def _read(self, task, offset: int | None) -> bytes:
        path = self.log_path(task.id)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if offset is None and size > MAX_BYTES:
                    f.seek(size - MAX_BYTES)
                    return (f"[the first {size - MAX_BYTES} bytes of the log are left out; ?offset=0 reads "
                            f"from the start]\n").encode() + f.read(MAX_BYTES)
                if offset is not None:
                    f.seek(max(0, size + offset) if offset < 0 else min(offset, size))
                return f.read(MAX_BYTES)
        except FileNotFoundError:
            if task.state == "PENDING":
                return f"task {task.id} has not started yet: no log\n".encode()
            return (f"no log of task {task.id} on this coordinator: a {task.type} task runs in the coordinator's "
                    f"own process (its report says what it did), or another coordinator ran it\n").encode()


def _offset(query: dict) -> int | None:
    values = query.get("offset")
    if not values:
        return None
    text = values[0] if isinstance(values, list) else values
    try:
        return int(text)
    except ValueError:
        raise HttpError(400, f"offset {text!r} is not an integer: ?offset=n reads from byte n, "
                             "?offset=-n the last n bytes") from None


def register(endpoint, tasks, log_path, authorizer) -> TaskLogHttp:
    handler = TaskLogHttp(tasks, log_path, authorizer)
    endpoint.route(PREFIX, handler)
    return handler


__all__ = ["MAX_BYTES", "TaskLogHttp", "register"]
