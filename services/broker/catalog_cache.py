"""CatalogCache: the broker's copy of the coordinator's table catalog, kept current.

The coordinator bumps ``/strata/catalog/version`` in discovery on every catalog change; the
cache watches that key (etcd or the embedded store) and reloads the definitions over the
coordinator's REST sync endpoints, so a change reaches planning well within a second. A slow
periodic reload covers a missed event; ``flush()`` forces one now.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import urllib.error
import urllib.request

from services.discovery.keys import CATALOG_VERSION_KEY

log = logging.getLogger("strata.broker.catalog")

BASE = "/druid/coordinator/v1/catalog"


class CatalogCache:
    def __init__(self, discovery, coordinator_http, credentials: tuple[str, str] | None = None,
                 refresh_s: float = 10.0, tls_context=None) -> None:
        self.discovery = discovery
        self.tls_context = tls_context  # verifies the coordinator's https certificate
        self.coordinator_http = coordinator_http  # () -> "http://host:port" or None
        self.credentials = credentials
        self.refresh_s = refresh_s
        self._tables: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._watch = None
        self._thread = threading.Thread(target=self._loop, name="strata-catalog-sync", daemon=True)
        self.loads = 0
        self.watch_events = 0  # version bumps seen; tests tell the push path from the timer by it

    def start(self) -> CatalogCache:
        self._watch = self.discovery.watch_prefix(CATALOG_VERSION_KEY, self._on_version_bump)
        self._thread.start()
        self._wake.set()
        return self

    def _on_version_bump(self, _event) -> None:
        self.watch_events += 1
        self._wake.set()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def flush(self) -> None:
        self.reload()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.refresh_s)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.reload()
            except Exception as exc:  # keep serving the last good copy
                log.warning("catalog reload failed: %s", exc)

    def reload(self) -> None:
        base = self.coordinator_http()
        if base is None:
            return
        tables = {}
        for schema in ("druid", "ext"):
            for meta in self._get(f"{base}{BASE}/schemas/{schema}/tables") or []:
                ident = meta.get("id") or {}
                tables[(ident.get("schema", schema), ident.get("name"))] = meta.get("spec") or {}
        with self._lock:
            self._tables = tables
            self.loads += 1

    def _get(self, url: str):
        request = urllib.request.Request(url)
        if self.credentials:
            token = base64.b64encode(f"{self.credentials[0]}:{self.credentials[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=5, context=self.tls_context) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise

    # ---- reads -------------------------------------------------------------------------------
    def spec(self, schema: str, name: str) -> dict | None:
        with self._lock:
            return self._tables.get((schema, name))

    def names(self, schema: str) -> list[str]:
        with self._lock:
            return sorted(n for s, n in self._tables if s == schema)
