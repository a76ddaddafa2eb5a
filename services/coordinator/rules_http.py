"""Druid's retention-rules API on the coordinator's HTTP port, under ``/druid/coordinator/v1/rules``.

    GET  rules                                  -> {datasource: [rule, ...]} (``_default`` included)
    GET  rules/{ds}[?full]                      -> [rule, ...]; ``full`` appends the _default rules
    POST rules/{ds}                             body: the whole list; headers X-Druid-Author, X-Druid-Comment
    GET  rules/{ds}/history?count=n|interval=i  -> audit entries, newest first (default: the last week)
    GET  rules/history?count=n|interval=i       -> the same for every datasource

Reading a datasource's rules needs READ on it, setting them WRITE; the ``_default`` rules are
read by anyone and set by the admin only (they govern every datasource). A POST naming a tier no
historical belongs to is accepted, as in Druid (the tier may not be up yet), and answered with
``warnings`` saying so. Errors answer 400 with the rule and field at fault (see ``core/rules.py``).
"""

from __future__ import annotations

import json
import logging
from urllib.parse import unquote

from common.errors import ValidationError
from common.types.interval import Interval
from services.coordinator.core.rules import DEFAULT_DATASOURCE, check_tiers, rules_for, rules_from_json, rules_to_json
from services.coordinator.json_reply import ANSWERED_ERRORS, HttpError, error_reply, json_reply, request_header
from services.http_endpoint import REMOTE_HEADER, USER_HEADER
from services.security.authorizer import is_admin

log = logging.getLogger(__name__)

BASE = "/druid/coordinator/v1/rules"


def _param(query: dict, name: str) -> str | None:
    values = query.get(name)
    if values is None:
        return None
    return values[-1] if isinstance(values, list) else values


def _peer_ip(headers: dict) -> str:
    """The client's address as Druid's audit records it (no port), from the header the HTTP
    endpoint always sets to the peer (a client-sent one is replaced, so it cannot be forged)."""
    address = request_header(headers, REMOTE_HEADER)
    return address.rsplit(":", 1)[0] if ":" in address else address


class RulesHttp:
    """The route handler; ``tiers()`` names the tiers historicals belong to right now."""

    def __init__(self, rules, authorizer, tiers) -> None:
        self.rules = rules
        self.authorizer = authorizer
        self.tiers = tiers

    def __call__(self, method: str, path: str, query: dict, body: bytes, headers: dict) -> tuple[int, str, bytes]:
        try:
            user = request_header(headers or {}, USER_HEADER) or None
            return self._route(method, path, query or {}, body or b"", headers or {}, user)
        except ANSWERED_ERRORS as exc:
            return error_reply(exc)

    def _route(self, method: str, path: str, query: dict, body: bytes, headers: dict, user):
        rest = path[len(BASE):]
        if rest and not rest.startswith("/"):
            raise HttpError(404, f"no route for {method} {path}")
        parts = [unquote(p) for p in rest.strip("/").split("/")] if rest.strip("/") else []
        if not parts:
            self._allow(method, "GET")
            stored = self.rules.all()
            return json_reply(200, {ds: rules_to_json(r) for ds, r in sorted(stored.items())
                                    if self._may_read(user, ds)})
        if parts == ["history"]:
            self._allow(method, "GET")
            entries = self.rules.history(None, *self._window(query))
            return json_reply(200, [e.to_json() for e in entries if self._may_read(user, e.key)])
        datasource = parts[0]
        if len(parts) == 2 and parts[1] == "history":
            self._allow(method, "GET")
            self._require_read(user, datasource)
            return json_reply(200, [e.to_json() for e in self.rules.history(datasource, *self._window(query))])
        if len(parts) != 1:
            raise HttpError(404, f"no route for {method} {path}; routes: {BASE}, {BASE}/{{datasource}}[?full], "
                                 f"{BASE}/{{datasource}}/history, {BASE}/history")
        if method == "GET":
            self._require_read(user, datasource)
            stored = self.rules.all()
            if "full" in query:
                return json_reply(200, rules_to_json(rules_for(datasource, stored)))
            return json_reply(200, rules_to_json(stored.get(datasource, ())))
        if method == "POST":
            if datasource == DEFAULT_DATASOURCE:
                if not is_admin(self.authorizer, user):
                    raise PermissionError(f"user '{user}' may not set the cluster default rules; only the admin may")
            else:
                self.authorizer.require(user, "WRITE", "DATASOURCE", datasource)
            if not body.strip():
                raise ValidationError(f"POST {path} needs a JSON body: the whole list of rules, e.g. "
                                      '[{"type": "loadByPeriod", "period": "P30D"}, {"type": "dropForever"}]')
            try:
                value = json.loads(body)
            except ValueError as e:
                raise ValidationError(f"the rules are not valid JSON: {e}") from None
            rules = rules_from_json(value)
            self.rules.set(datasource, rules, author=request_header(headers, "x-druid-author"),
                                  comment=request_header(headers, "x-druid-comment"), ip=_peer_ip(headers))
            warnings = check_tiers(rules, self.tiers())
            for w in warnings:
                log.warning("rules of datasource '%s': %s", datasource, w)
            return json_reply(200, {"warnings": warnings} if warnings else {})
        raise HttpError(405, f"method {method} is not allowed on {path}; use GET or POST")

    @staticmethod
    def _allow(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise HttpError(405, f"method {method} is not allowed here; use {' or '.join(allowed)}")

    def _may_read(self, user, datasource: str) -> bool:
        return datasource == DEFAULT_DATASOURCE or self.authorizer.can(user, "READ", "DATASOURCE", datasource)

    def _require_read(self, user, datasource: str) -> None:
        if datasource != DEFAULT_DATASOURCE:
            self.authorizer.require(user, "READ", "DATASOURCE", datasource)

    @staticmethod
    def _window(query: dict) -> tuple[int | None, Interval | None]:
        count, interval = _param(query, "count"), _param(query, "interval")
        if count is not None and interval is not None:
            raise ValidationError("give either 'count' or 'interval', not both")
        if count is not None:
            try:
                n = int(count)
            except ValueError:
                raise ValidationError(f"parameter 'count' must be a positive integer, got {count!r}") from None
            return n, None
        if interval is not None:
            # Druid's clients send the interval with '_' for '/' inside a path-safe query value.
            return None, Interval.parse(interval.replace("_", "/"))
        return None, None


def register(endpoint, rules, authorizer, tiers) -> RulesHttp:
    handler = RulesHttp(rules, authorizer, tiers)
    endpoint.route(BASE, handler)
    return handler
