"""HttpEndpoint: the small HTTP side of every role: health, Prometheus metrics, and extra routes
(the coordinator's catalog REST API plugs in here).

Probes: ``GET /status/ready`` is strata's readiness (200 or 503 with a JSON body: ``healthy``,
``role``, the ``pid``...; what ``strata up``, docker-compose and Kubernetes wait on);
``/status/live`` is liveness (the process answers); ``/status/health`` answers a bare ``true``, as
every Druid process does, for Druid tools that poll it.

Authentication: given an ``authorizer`` that is enabled, every request except ``GET
/status/ready``, ``/status/health``, ``/status/live`` and ``/metrics`` (probes and Prometheus scrapes stay open)
must carry ``Authorization: Basic ...`` or a bearer token the authorizer issued; otherwise the
answer is 401 with ``WWW-Authenticate: Basic realm="strata"``, before any route (or 404) is
looked at. Route handlers keep the signature ``handler(method, path, query, body, headers)``
(returning None passes the request on to the next route whose prefix matches; longer prefixes
are asked first)
and find the authenticated user in ``headers["x-strata-user"]``: the endpoint always removes a
client-sent ``X-Strata-User`` (any spelling) and, with authentication on, sets it to the user it
authenticated, so handlers may trust it; likewise ``X-Strata-Remote-Address`` is always the
peer's address. Handlers authorize themselves
(``authorizer.require(user, ...)``); a PermissionError they raise becomes 403 and an
Unauthenticated 401, each with ``{"error": message}``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from services.query_errors import http_error
from services.security.authorizer import ALLOW_ALL, Authorizer

log = logging.getLogger("strata.http")

USER_HEADER = "x-strata-user"
# Bodies are catalog specs and small JSON documents: a larger one is refused (413) before it is
# read, so a client cannot make a node buffer an unbounded upload. A connection that sends nothing
# for IDLE_TIMEOUT_S is closed, so slow or abandoned clients do not hold a thread each forever.
MAX_BODY_BYTES = 8 << 20
IDLE_TIMEOUT_S = 60.0
REMOTE_HEADER = "x-strata-remote-address"
# (method, path, query, body, headers) -> (status, content type, body bytes); headers carry the
# authenticated user under USER_HEADER (absent when authentication is off: use headers.get).
# A handler may add a fourth element, response headers (a dict), and answer with an iterator of
# byte strings instead of bytes: the body is then sent chunked as the iterator yields it, and an
# exception from the iterator ends the connection without the last chunk, so the client sees a
# truncated body rather than a complete one.
Handler = Callable[[str, str, dict, bytes, dict], tuple]


class HttpEndpoint:
    """``tls_context``: an ssl server context to serve https (TransportSecurity.http_server_context)."""

    def __init__(self, host: str, port: int, metrics, health: Callable[[], dict],
                 authorizer: Authorizer | None = None, tls_context=None) -> None:
        self.authorizer = authorizer if authorizer is not None else ALLOW_ALL
        self._metrics = metrics
        self._health = health
        self._routes: list[tuple[str, Handler]] = []
        endpoint = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = IDLE_TIMEOUT_S

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes: without TCP_NODELAY a small answer
                # waits for the client's delayed ACK (Nagle's algorithm), some 40 ms a request.
                try:
                    self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass

            def _serve(self) -> None:
                url = urlparse(self.path)
                length, refusal = _content_length(self.headers.get("Content-Length"))
                if refusal is not None:
                    status, ctype, out = refusal
                    self.close_connection = True  # the unread body must not be taken for a request
                    extra = {}
                else:
                    body = self.rfile.read(length) if length else b""
                    headers = {k: v for k, v in dict(self.headers).items() if k.lower() != REMOTE_HEADER}
                    headers[REMOTE_HEADER] = f"{self.client_address[0]}:{self.client_address[1]}"
                    # Blank values kept: Druid's APIs take bare flags (?simple, ?full, ?pretty).
                    query = parse_qs(url.query, keep_blank_values=True)
                    status, ctype, out, *rest = endpoint.dispatch(self.command, url.path, query, body, headers)
                    extra = rest[0] if rest else {}
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                for name, value in extra.items():
                    if value is not None:  # None: the handler asks that this header not be sent
                        self.send_header(name, value)
                if status == 401 and "WWW-Authenticate" not in extra:
                    self.send_header("WWW-Authenticate", 'Basic realm="strata", charset="UTF-8"')
                if isinstance(out, (bytes, bytearray)):
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                else:
                    self._send_chunked(out)

            def _send_chunked(self, chunks) -> None:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for chunk in chunks:
                        if chunk:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                except Exception:  # noqa: BLE001 - the body is cut short: no last chunk, the connection ends
                    log.debug("HTTP response to %s cut short", self.client_address, exc_info=True)
                    self.close_connection = True
                    return
                finally:
                    close = getattr(chunks, "close", None)
                    if close is not None:
                        close()  # a generator's cleanup (the query it streams) runs now, not at GC
                self.wfile.write(b"0\r\n\r\n")

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args) -> None:  # access logs would drown the service logs
                pass

        self._server = _Server((host, port), _Handler)
        self._server.daemon_threads = True
        if tls_context is not None:  # https: each accepted connection does the TLS handshake
            self._server.socket = tls_context.wrap_socket(self._server.socket, server_side=True,
                                                          do_handshake_on_connect=False)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="strata-http", daemon=True)

    def route(self, prefix: str, handler) -> None:
        # Longest prefix first, whatever the order modules register in: a module serving
        # /datasources/{ds}/markUnused sees its requests before the one listing /datasources.
        self._routes.append((prefix, handler))
        self._routes.sort(key=lambda route: -len(route[0]))

    def dispatch(self, method: str, path: str, query: dict, body: bytes, headers: dict) -> tuple[int, str, bytes]:
        if path == "/status/live" and method == "GET":
            # Liveness is the process answering; health (readiness) may fail while etcd is down.
            return 200, "application/json", b'{"live":true}'
        if path == "/status/health" and method == "GET":
            # Druid's answer (every Druid process serves it): the process is up. Readiness with
            # strata's details is /status/ready.
            return 200, "application/json", b"true"
        if path == "/status/ready" and method == "GET":
            # The pid tells a launcher (strata up) it reached its own process, not another
            # cluster's node answering on a port this one failed to bind.
            health = {**self._health(), "pid": os.getpid()}
            return (200 if health.get("healthy") else 503), "application/json", json.dumps(health).encode()
        if path == "/metrics" and method == "GET":
            return 200, "text/plain; version=0.0.4", self._metrics.exposition()
        headers = {k: v for k, v in headers.items() if k.lower() != USER_HEADER}
        try:
            if self.authorizer.enabled:
                headers[USER_HEADER] = self.authorizer.user_from_headers(headers)
            for prefix, handler in self._routes:
                if path.startswith(prefix):
                    # A handler answers None for a path under its prefix it does not serve, so
                    # two modules can share a prefix (/druid/coordinator/v1/datasources).
                    answer = handler(method, path, query, body, headers)
                    if answer is not None:
                        return answer
        except Exception as exc:  # noqa: BLE001 - every failure answers with its kind's status (common/errors.py)
            status, reply = http_error(exc, "http")  # a handler bug answers with an id the log has
            return status, "application/json", json.dumps(reply).encode()
        return 404, "application/json", json.dumps({"error": f"no route for {method} {path}"}).encode()

    def start(self) -> HttpEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # A client that fails the TLS handshake (plain http, an untrusted certificate) or hangs up
        # is its own problem: a debug line, not a traceback on stderr.
        log.debug("HTTP connection from %s failed", client_address, exc_info=True)


def _content_length(value: str | None) -> tuple[int, tuple[int, str, bytes] | None]:
    """The body's length, or the answer refusing it (a Content-Length that is not a count, or over
    MAX_BODY_BYTES)."""
    if value is None or value.strip() == "":
        return 0, None
    try:
        length = int(value.strip())
    except ValueError:
        length = -1
    if length < 0:
        return 0, _error(400, ValueError(f"Content-Length must be a byte count, got {value[:40]!r}"))
    if length > MAX_BODY_BYTES:
        return 0, _error(413, ValueError(f"the body is {length} bytes; this endpoint takes at most "
                                         f"{MAX_BODY_BYTES} bytes ({MAX_BODY_BYTES >> 20} MiB) per request"))
    return length, None


def _error(status: int, exc: Exception) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps({"error": str(exc)}).encode()
