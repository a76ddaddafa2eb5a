"""Druid's segment life-cycle calls on the coordinator's HTTP port:

    POST   /druid/coordinator/v1/datasources/{ds}/markUnused   {"interval": i} | {"segmentIds": [...]}
    POST   /druid/coordinator/v1/datasources/{ds}/markUsed     {"interval": i} | {"segmentIds": [...]}
           -> {"numChangedSegments": n}
    DELETE /druid/coordinator/v1/datasources/{ds}   -> {"numChangedSegments": n}: every segment unused
    DELETE /druid/coordinator/v1/datasources/{ds}/intervals/{interval}   (``_`` for ``/`` in the interval)
           -> {"killed": n, "keptUsed": n, "fileErrors": [...]}: kill, deleting the unused segments
           wholly inside the interval from deep storage and the metadata store

Other paths and methods under ``/datasources`` are passed on (None) to the module that lists
datasources.
Marking needs WRITE on the datasource; a kill too (it deletes only what is already unused).
"""

from __future__ import annotations

import json
from urllib.parse import unquote

from common.errors import StrataError, ValidationError
from common.types.interval import ETERNITY, Interval
from services.coordinator.json_reply import ANSWERED_ERRORS, error_reply, json_reply
from services.http_endpoint import USER_HEADER

BASE = "/druid/coordinator/v1/datasources/"


class SegmentLifecycleHttp:
    def __init__(self, lifecycle, authorizer) -> None:
        self.lifecycle = lifecycle
        self.authorizer = authorizer

    def __call__(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        parts = [unquote(p) for p in path[len(BASE):].strip("/").split("/")]
        mark = len(parts) == 2 and parts[1] in ("markUnused", "markUsed")
        kill = len(parts) == 3 and parts[1] == "intervals"
        drop = len(parts) == 1 and method == "DELETE"
        if not (mark or kill or drop) or not parts[0]:
            return None
        user = next((v for k, v in (headers or {}).items() if k.lower() == USER_HEADER), None)
        datasource = parts[0]
        try:
            if mark and method != "POST" or kill and method != "DELETE":
                return json_reply(405, {"error": f"method {method} is not allowed on {path}; use "
                                                  f"{'POST' if mark else 'DELETE'}"})
            self.authorizer.require(user, "WRITE", "DATASOURCE", datasource)
            if drop:
                return json_reply(200, {"numChangedSegments": self.lifecycle.mark_unused(datasource, ETERNITY)})
            if kill:
                interval = Interval.parse(parts[2].replace("_", "/"))
                report = self.lifecycle.kill(datasource, interval)
                return json_reply(200, {"killed": len(report.killed), "keptUsed": report.skipped_used,
                                         "fileErrors": list(report.file_errors)})
            interval, ids = self._payload(body, parts[1])
            action = self.lifecycle.mark_unused if parts[1] == "markUnused" else self.lifecycle.mark_used
            return json_reply(200, {"numChangedSegments": action(datasource, interval, ids)})
        except ANSWERED_ERRORS as exc:
            return error_reply(exc)
        except StrataError as exc:  # deep storage or metadata trouble: say which, no traceback
            return json_reply(500, {"error": str(exc)})

    @staticmethod
    def _payload(body: bytes, action: str) -> tuple[Interval | None, list[str] | None]:
        example = '{"interval": "2015-09-12/2015-09-13"} or {"segmentIds": ["..."]}'
        try:
            value = json.loads(body) if body.strip() else None
        except ValueError as e:
            raise ValidationError(f"{action}: the body is not valid JSON ({e}); send {example}") from None
        if not isinstance(value, dict):
            raise ValidationError(f"{action} needs a JSON object body: {example}")
        extra = sorted(set(value) - {"interval", "segmentIds"})
        if extra:
            raise ValidationError(f"{action}: unknown field '{extra[0]}'; send {example}")
        if ("interval" in value) == ("segmentIds" in value):
            raise ValidationError(f"{action}: give exactly one of 'interval' and 'segmentIds': {example}")
        if "interval" in value:
            if not isinstance(value["interval"], str):
                raise ValidationError(f"{action}: 'interval' must be an ISO-8601 interval string")
            return Interval.parse(value["interval"]), None
        ids = value["segmentIds"]
        if not isinstance(ids, list) or not ids or not all(isinstance(s, str) for s in ids):
            raise ValidationError(f"{action}: 'segmentIds' must be a non-empty list of segment id strings")
        return None, ids


def register(endpoint, lifecycle, authorizer) -> SegmentLifecycleHttp:
    handler = SegmentLifecycleHttp(lifecycle, authorizer)
    endpoint.route(BASE, handler)
    return handler
