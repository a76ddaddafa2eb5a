"""QueryRequest: what a RunQueryRequest asks (the query, its segments, the broker's schema), taken
in once per distinct request and kept.

The broker sends the same request bytes for every run of a cached SQL plan over the same visible
segments, but for the query id (the last field it writes). Parsing the query's JSON, building its
Query object, the segment ids and the typed schema is a sizeable part of a small query's time on
a historical, so it is done once per content and found again by the request's bytes without its
query id: two requests with the same key bytes ask the same (the key is the request's own bytes).
Bounded in entries and in the bytes of their keys (a request over thousands of segments is parsed
every time rather than kept), least recently used first.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from common.query import topn_threshold
from common.query.model import Query, query_from_json
from services.rpc.convert import schema_from_proto, segment_id_from_proto
from services.rpc.gen.strata.v1 import historical_pb2


class QueryRequest:
    __slots__ = ("query_json", "query", "wanted", "schema", "_round_base")

    def __init__(self, query_json: str, query: Query, wanted: list, schema: dict) -> None:
        self.query_json = query_json
        self.query = query
        self.wanted = wanted  # SegmentIds, in the request's order
        self.schema = schema  # column -> ColumnType; empty: the segments' union
        self._round_base = None

    @staticmethod
    def parse(request: historical_pb2.RunQueryRequest) -> QueryRequest:
        """Raises on a bad query (the caller reports it as the user's error)."""
        query_json = request.query_json
        return QueryRequest(query_json, query_from_json(json.loads(query_json)),
                            [segment_id_from_proto(s) for s in request.segments], schema_from_proto(request.schema))

    def round_base(self) -> tuple:
        """The query without its topN round directive, and its segments: what the rounds of one
        exact topN share."""
        if self._round_base is None:
            self._round_base = (json.dumps(topn_threshold.without_directive(self.query).to_json(), sort_keys=True,
                                           default=str), tuple(str(s) for s in self.wanted))
        return self._round_base


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def query_id_field(query_id: str) -> bytes:
    """``query_id`` (field 4) as the protobuf wire format spells it; empty when it is empty (proto3
    writes no default value)."""
    if not query_id:
        return b""
    data = query_id.encode()
    return b"\x22" + _varint(len(data)) + data


def content_key(request: historical_pb2.RunQueryRequest, data: bytes | None = None) -> bytes:
    """Bytes that are equal for two requests exactly when they ask the same (all but the query
    id): ``data`` (the request as received) without its query id when that was written last, as
    the broker writes it; else the request written out again without it."""
    if data is not None:
        tail = query_id_field(request.query_id)
        if data.endswith(tail):
            return data[:len(data) - len(tail)] if tail else data
    copy = historical_pb2.RunQueryRequest()
    copy.CopyFrom(request)
    copy.ClearField("query_id")
    return copy.SerializeToString(deterministic=True)


class RequestCache:
    def __init__(self, max_entries: int = 256, max_key_bytes: int = 64 << 10, max_bytes: int = 8 << 20) -> None:
        self.max_entries = max_entries
        self.max_key_bytes = max_key_bytes  # a larger request is not kept
        self.max_bytes = max_bytes  # the keys' bytes in all
        self._entries: OrderedDict[bytes, QueryRequest] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, request: historical_pb2.RunQueryRequest, data: bytes | None = None) -> QueryRequest:
        """The request's QueryRequest: the kept one, else parsed (and kept). Raises on a bad query."""
        key = content_key(request, data)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        parsed = QueryRequest.parse(request)
        if len(key) > self.max_key_bytes:
            return parsed
        with self._lock:
            if key not in self._entries:
                self._entries[key] = parsed
                self._bytes += len(key)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                old, _ = self._entries.popitem(last=False)
                self._bytes -= len(old)
        return parsed

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["QueryRequest", "RequestCache", "content_key", "query_id_field"]
