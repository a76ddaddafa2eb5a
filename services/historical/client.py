"""HistoricalClient: a historical's HistoricalService as the broker calls it.

``ask`` starts RunQueryOnce and hands back a ``PartialCall``: the caller reads the partial with
``read()`` (one message; a partial too large for one is then fetched with RunQuery, streamed) and
may ``cancel()`` it when the query's deadline passes or another replica is chosen. The request is
written once per query, segments and schema (``request_bytes``) and the call is read as a
one-message stream.
``run_query`` starts the streaming RunQuery itself, for callers that use rows as they arrive
(``read_batches``) or read the partial with ``read_partial``. gRPC errors are left as they are:
which of them another replica may cure is the caller's decision (see
services/broker/query_executor.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

import pyarrow as pa

from common.bounded_cache import BoundedCache
from common.query.partial import Partial
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from services.grpc_server import CHANNEL_OPTIONS, SINGLE_THREADED_STREAMS, channel
from services.transport_security import NO_SECURITY, TransportSecurity
from services.rpc.arrow_stream import chunks_to_table, stats_from_proto
from services.rpc.convert import schema_to_proto, segment_id_to_proto
from services.rpc.gen.strata.v1 import historical_pb2, historical_pb2_grpc, types_pb2

_ONCE = "/strata.v1.HistoricalService/RunQueryOnce"
_STREAM = "/strata.v1.HistoricalService/RunQuery"
# Requests kept written out, in number and bytes.
_KEPT_REQUESTS = 1024
_KEPT_BYTES = 4 << 20
_KEPT_MAX_BYTES = 16 << 10  # a larger request (thousands of segments) is written every time
# NOT_FOUND's trailing metadata: the requested segments the historical does not serve (a JSON list
# of ids), so the broker asks elsewhere for just those; binary ("-bin"): ids may be any Unicode.
MISSING_SEGMENTS_KEY = "strata-missing-segments-bin"
_MISSING_MAX_BYTES = 4 << 10  # more would not fit gRPC's metadata limit: then every segment counts as missing


def missing_segments_metadata(missing: Iterable[SegmentId]) -> tuple:
    """The trailing metadata a historical sends with NOT_FOUND (empty when the list is too long)."""
    value = json.dumps([str(s) for s in missing]).encode()
    return ((MISSING_SEGMENTS_KEY, value),) if len(value) <= _MISSING_MAX_BYTES else ()


def missing_segments(exc, segments: Iterable[SegmentId]) -> set[SegmentId] | None:
    """Of ``segments`` (a call's), those a NOT_FOUND said the historical does not serve; None when
    it did not say (a historical before this list, or a list too long to send)."""
    try:
        metadata = exc.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - not a call's error (a ConnectionError): nothing said
        return None
    for key, value in metadata:
        if key == MISSING_SEGMENTS_KEY:
            try:
                named = set(json.loads(value))
            except (ValueError, TypeError):
                return None
            return {s for s in segments if str(s) in named}
    return None

class HistoricalClient:
    def __init__(self, target: str, security: TransportSecurity = NO_SECURITY) -> None:
        self.target = target
        # TLS and the internal credential when configured; RunQuery is read on the caller's thread.
        self._channel = channel(target, security, CHANNEL_OPTIONS + SINGLE_THREADED_STREAMS)
        self._stub = historical_pb2_grpc.HistoricalServiceStub(self._channel)
        # RunQueryOnce is unary but read as a one-message stream: the stub's unary call blocks
        # (no two historicals at once) or hands its reply over from gRPC's own thread, while a
        # stream is read on the caller's thread and several run at once. On the wire the two are
        # the same. Requests go out as bytes already written (see ``request_bytes``).
        self._once = self._channel.unary_stream(_ONCE, response_deserializer=types_pb2.ArrowChunk.FromString)
        self._stream = self._channel.unary_stream(_STREAM, response_deserializer=types_pb2.ArrowChunk.FromString)
        # (query JSON, segments, schema) -> the request's bytes without its query id
        self._written = BoundedCache(_KEPT_REQUESTS, _KEPT_BYTES)

    def close(self) -> None:
        self._channel.close()

    def ask(self, query_json: str, query_id: str, segments: Iterable[SegmentId], schema: dict[str, ColumnType],
            timeout_s: float) -> PartialCall:
        """Starts RunQueryOnce on ``segments``; returns the call (its ``read()`` is the partial)."""
        request = self.request_bytes(query_json, query_id, segments, schema)
        return PartialCall(self, request, time.monotonic() + timeout_s, self._once(request, timeout=timeout_s))

    def request_bytes(self, query_json: str, query_id: str, segments: Iterable[SegmentId],
                      schema: dict[str, ColumnType]) -> bytes:
        """The RunQueryRequest as bytes. A cached plan sends the same query, segments and schema on
        every run, only the query id differs: the rest is written once and kept, and the query id
        is appended (protobuf takes fields in any order)."""
        key = (query_json, tuple(segments), tuple(schema.items()))
        head = self._written.get(key)
        if head is None:
            head = _request(query_json, "", key[1], schema).SerializeToString()
            if len(head) <= _KEPT_MAX_BYTES:
                self._written.put(key, head, len(head))
        return head + query_id_field(query_id)

    def run_query(self, query_json: str, query_id: str, segments: Iterable[SegmentId],
                  schema: dict[str, ColumnType], timeout_s: float):
        """Starts RunQuery on ``segments``; returns the call (iterate it with ``read_partial``)."""
        return self.stream(_request(query_json, query_id, segments, schema), timeout_s)

    def stream(self, request: historical_pb2.RunQueryRequest | bytes, timeout_s: float):
        """Starts RunQuery with a request already built (a message, or its bytes)."""
        if isinstance(request, bytes):
            return self._stream(request, timeout=timeout_s)
        return self._stub.RunQuery(request, timeout=timeout_s)

    @staticmethod
    def read_partial(call) -> Partial:
        table, stats = chunks_to_table(call)
        return Partial(table, stats)

    @staticmethod
    def read_batches(call):
        """The partial as it arrives, one Arrow record batch at a time (nothing is kept here, so a
        caller that stops reading holds the historical back by gRPC's flow control); then, once,
        the ``RunStats`` its last chunk carries. Raises ConnectionError if the stream ends early."""
        for chunk in call:
            yield from pa.ipc.open_stream(pa.py_buffer(chunk.ipc_stream))
            if chunk.last:
                yield stats_from_proto(chunk.stats)
                return
        raise ConnectionError("result stream ended before its last chunk")

    def load_status(self, timeout_s: float = 10.0):
        return self._stub.GetLoadStatus(historical_pb2.HistoricalLoadStatusRequest(), timeout=timeout_s)


class PartialCall:
    """A RunQueryOnce in flight: ``read()`` waits for the partial; ``cancel()`` (from any thread)
    ends the call, or the RunQuery that fetches a partial too large for one message."""

    def __init__(self, client: HistoricalClient, request, deadline: float, call) -> None:
        self._client = client
        self._request = request
        self._deadline = deadline
        self._call = call
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()

    def read(self) -> Partial:
        replies = list(self._call)  # one message, then the status (an error raises here)
        if not replies:
            raise ConnectionError("RunQueryOnce ended without its reply")
        reply = replies[-1]
        if reply.last:
            return Partial(*chunks_to_table(replies))
        # Too large for one message: the historical kept it for RunQuery to stream.
        stream = self._client.stream(self._request, max(self._deadline - time.monotonic(), 0.001))
        self._call = stream
        if self._cancelled:  # cancelled while the stream was being started
            stream.cancel()
        return HistoricalClient.read_partial(stream)


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


def _request(query_json: str, query_id: str, segments: Iterable[SegmentId], schema: dict[str, ColumnType]):
    return historical_pb2.RunQueryRequest(query_json=query_json, query_id=query_id,
                                          segments=[segment_id_to_proto(s) for s in segments],
                                          schema=schema_to_proto(schema))
