"""Druid's datasource listings on the coordinator's HTTP port, for tools written against Druid's
Coordinator API (the web console, scripts, Superset's Druid discovery):

- ``GET /druid/coordinator/v1/datasources``: names of datasources with used segments;
  ``?simple`` gives each with its segment count, size and time range;
- ``GET /druid/coordinator/v1/datasources/{ds}``: ``{"tiers", "segments": {count, size, minTime, maxTime}}``,
  ``tiers`` naming each tier whose historicals serve some of its segments (``segmentCount``, ``size``,
  ``replicatedSize``);
- ``GET /druid/coordinator/v1/metadata/datasources``: the same names from the metadata store
  (``?includeUnused`` adds datasources whose segments are all unused; ``?full`` gives the segments);
- ``GET /druid/coordinator/v1/metadata/datasources/{ds}``: ``{"name", "properties", "segments"}``.

A user sees only the datasources they may READ; another one answers 404 as an unknown one does.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

from common.types.interval import format_instant
from services.http_endpoint import USER_HEADER

JSON = "application/json"
PREFIX = "/druid/coordinator/v1/"


def _segment(r) -> dict:
    return {"dataSource": r.id.datasource, "interval": str(r.id.interval), "version": r.id.version,
            "shardSpec": {"type": "numbered", "partitionNum": r.id.partition, "partitions": r.num_partitions},
            "size": r.size_bytes, "identifier": str(r.id), "numRows": r.num_rows}


def _tiers(records: list, replicas: dict) -> dict:
    """Druid's per-tier figures of the datasource's used segments that historicals serve:
    ``segmentCount`` and ``size`` count each segment once per tier, ``replicatedSize`` every copy.
    ``replicas``: SegmentId -> [tier of each historical serving it]."""
    out: dict = {}
    for r in records:
        tiers = replicas.get(r.id, ())
        for tier in set(tiers):
            t = out.setdefault(tier, {"segmentCount": 0, "size": 0, "replicatedSize": 0})
            t["segmentCount"] += 1
            t["size"] += r.size_bytes
            t["replicatedSize"] += r.size_bytes * tiers.count(tier)
    return dict(sorted(out.items()))


def _summary(records: list, replicas: dict) -> dict:
    if not records:
        return {"tiers": {}, "segments": {"count": 0, "size": 0, "minTime": None, "maxTime": None}}
    size = sum(r.size_bytes for r in records)
    return {"tiers": _tiers(records, replicas),
            "segments": {"count": len(records), "size": size,
                         "minTime": format_instant(min(r.id.interval.start for r in records)),
                         "maxTime": format_instant(max(r.id.interval.end for r in records))}}


class DruidDatasourcesApi:
    def __init__(self, store, authorizer, replicas=lambda: {}) -> None:
        self.store = store  # the segment metadata store (datasources(), list())
        self.authorizer = authorizer
        self.replicas = replicas  # () -> {SegmentId: [tier of each historical serving it]}

    def install(self, endpoint) -> None:
        endpoint.route(PREFIX + "datasources", self.handle)
        endpoint.route(PREFIX + "metadata/datasources", self.handle)

    def handle(self, method: str, path: str, query: dict, body: bytes, headers: dict):
        user = headers.get(USER_HEADER)
        parts = [unquote(p) for p in path[len(PREFIX):].split("/") if p]
        metadata = parts[:1] == ["metadata"]
        rest = parts[2:] if metadata else parts[1:]
        if method != "GET" or len(rest) > 1:
            return self._missing(f"no Druid coordinator API at {method} {path}")
        unused = metadata and "includeUnused" in query
        names = [n for n in self.store.datasources(include_unused=unused)
                 if self.authorizer.can(user, "READ", "DATASOURCE", n)]
        if not rest:
            if "full" in query:
                return self._json([self._full(n, unused) for n in names])
            if "simple" in query:
                replicas = self.replicas()
                return self._json([{"name": n, "properties": _summary(self.store.list(n), replicas)} for n in names])
            return self._json(names)
        name = rest[0]
        if name not in names:
            return self._missing(f"datasource '{name}' has no used segments (or is not yours to read)")
        if metadata:
            return self._json(self._full(name, unused))
        return self._json(_summary(self.store.list(name), self.replicas()))

    def _full(self, name: str, unused: bool) -> dict:
        return {"name": name, "properties": {},
                "segments": [_segment(r) for r in self.store.list(name, include_unused=unused)]}

    @staticmethod
    def _json(value):
        return 200, JSON, json.dumps(value).encode()

    @staticmethod
    def _missing(message: str):
        return 404, JSON, json.dumps({"error": message}).encode()


__all__ = ["DruidDatasourcesApi"]
