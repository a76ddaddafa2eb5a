"""HttpProxy: the router's forwarding of one request to a broker or the leading coordinator.

The upstream answer's body is streamed to the client as it arrives (a long SQL result never sits
whole in the router). Authorization passes through untouched: the upstream authenticates the user
and applies their grants, so the console sees exactly what the user may see anywhere else.
"""

from __future__ import annotations

import http.client
import json
import logging
from urllib.parse import urlencode

from services.router.core.query_affinity import query_affinity
from services.router.core.route_table import (
    BROKER, cross_site_refusal, forwarded_headers, returned_headers, route_for,
)
from services.router.upstreams import NoUpstream, Upstreams

log = logging.getLogger("strata.router")

CHUNK_BYTES = 64 << 10
# A query may run for its whole timeout before its first byte; the broker ends it by then.
UPSTREAM_TIMEOUT_S = 600.0


def _json_error(status: int, message: str) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps({"error": message}).encode()


class HttpProxy:
    def __init__(self, upstreams: Upstreams, tls_context=None) -> None:
        self._upstreams = upstreams
        self._tls = tls_context  # the client side of the cluster's TLS (None: plain http)

    def handle(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        route = route_for(path)
        if route is None:
            return None
        refusal = cross_site_refusal(method, headers)
        if refusal is not None:
            return _json_error(403, refusal)
        key = None
        if route.role == BROKER:  # a query's requests all go to the broker that holds it
            key, body = query_affinity(method, route.path, body, headers)
        try:
            host, port = self._upstreams.address(route.role, key)
        except NoUpstream as exc:
            return _json_error(503, str(exc))
        target = route.path + _query_text(query)
        if self._tls is not None:
            conn = http.client.HTTPSConnection(host, port, timeout=UPSTREAM_TIMEOUT_S, context=self._tls)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT_S)
        try:
            conn.request(method, target, body=body or None, headers=forwarded_headers(headers))
            answer = conn.getresponse()
        except OSError as exc:
            conn.close()
            log.info("%s %s: %s at %s:%d unreachable: %s", method, path, route.role, host, port, exc)
            return _json_error(502, f"the {route.role} at {host}:{port} did not answer ({exc}); try again")
        ctype = answer.getheader("Content-Type", "application/octet-stream")
        extra = returned_headers(answer.getheaders(), headers)
        return answer.status, ctype, _stream(conn, answer), extra


def _stream(conn, answer):
    try:
        while True:
            chunk = answer.read1(CHUNK_BYTES)
            if not chunk:
                return
            yield chunk
    finally:
        conn.close()  # the client went away or the body ended: the upstream's query ends with it


def _query_text(query: dict) -> str:
    # HttpEndpoint parsed the query string (blank values kept); put it back as it came.
    if not query:
        return ""
    return "?" + urlencode([(k, v) for k, values in query.items() for v in values])
