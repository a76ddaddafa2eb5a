"""HttpEndpoint: the small HTTP side of every role: health, Prometheus metrics, and extra routes
(the coordinator's catalog REST API plugs in here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# (method, path, query, body) -> (status, content type, body bytes)
Handler = Callable[[str, str, dict, bytes], tuple[int, str, bytes]]


class HttpEndpoint:
    def __init__(self, host: str, port: int, metrics, health: Callable[[], dict]) -> None:
        self._metrics = metrics
        self._health = health
        self._routes: list[tuple[str, Handler]] = []
        endpoint = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, ctype, out = endpoint.dispatch(self.command, url.path, parse_qs(url.query), body,
                                                       dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args) -> None:  # access logs would drown the service logs
                pass

        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="strata-http", daemon=True)

    def route(self, prefix: str, handler) -> None:
        self._routes.append((prefix, handler))

    def dispatch(self, method: str, path: str, query: dict, body: bytes, headers: dict) -> tuple[int, str, bytes]:
        if path == "/status/live" and method == "GET":
            # Liveness is the process answering; health (readiness) may fail while etcd is down.
            return 200, "application/json", b'{"live":true}'
        if path == "/status/health" and method == "GET":
            health = self._health()
            return (200 if health.get("healthy") else 503), "application/json", json.dumps(health).encode()
        if path == "/metrics" and method == "GET":
            return 200, "text/plain; version=0.0.4", self._metrics.exposition()
        for prefix, handler in self._routes:
            if path.startswith(prefix):
                return handler(method, path, query, body, headers)
        return 404, "application/json", json.dumps({"error": f"no route for {method} {path}"}).encode()

    def start(self) -> HttpEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
