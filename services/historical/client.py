"""HistoricalClient: a historical's HistoricalService as the broker calls it.

``ask`` starts RunQueryOnce and hands back a ``PartialCall``: the caller reads the partial with
``read()`` (one message; a partial too large for one is then fetched with RunQuery, streamed) and
may ``cancel()`` it when the query's deadline passes or another replica is chosen. The request is
written once per query, segments and schema (``request_bytes``) and the call is one batch of gRPC
operations (``OneBatchCall``) where this gRPC allows, else a one-message stream.
``run_query`` starts the streaming RunQuery itself, for callers that use rows as they arrive
(``read_batches``) or read the partial with ``read_partial``. gRPC errors are left as they are:
which of them another replica may cure is the caller's decision (see
services/broker/query_executor.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import grpc
import pyarrow as pa

from common.query.partial import Partial
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from services.grpc_server import CHANNEL_OPTIONS, SINGLE_THREADED_STREAMS, channel
from services.historical.query_request import query_id_field
from services.transport_security import NO_SECURITY, TransportSecurity
from services.rpc.arrow_stream import chunks_to_table, stats_from_proto
from services.rpc.convert import schema_to_proto, segment_id_to_proto
from services.rpc.gen.strata.v1 import historical_pb2, historical_pb2_grpc, types_pb2

_ONCE = "/strata.v1.HistoricalService/RunQueryOnce"
_STREAM = "/strata.v1.HistoricalService/RunQuery"
# Query texts whose requests are kept written out (each for a few segment lists and schemas).
_KEPT_TEXTS = 256
_KEPT_PER_TEXT = 4
_KEPT_MAX_BYTES = 16 << 10  # a larger request (thousands of segments) is written every time

try:  # gRPC's own pieces of its blocking unary call (private: without them, the public stream below)
    from grpc import _channel as _grpc_channel
    from grpc._cython import cygrpc as _cygrpc

    _ONE_BATCH = (_grpc_channel.Channel, _cygrpc.PropagationConstants.GRPC_PROPAGATE_DEFAULTS,
                  _cygrpc.OperationType.receive_message, _cygrpc.OperationType.receive_status_on_client,
                  _cygrpc.StatusCode.ok, _cygrpc.StatusCode.cancelled)
    _STATUS = {code.value[0]: code for code in grpc.StatusCode}
except (ImportError, AttributeError):  # another gRPC
    _ONE_BATCH = None


class HistoricalClient:
    def __init__(self, target: str, security: TransportSecurity = NO_SECURITY) -> None:
        self.target = target
        # TLS and the internal credential when configured; RunQuery is read on the caller's thread.
        self._channel = channel(target, security, CHANNEL_OPTIONS + SINGLE_THREADED_STREAMS)
        self._stub = historical_pb2_grpc.HistoricalServiceStub(self._channel)
        # Without the one-batch call below, RunQueryOnce is unary but read as a one-message
        # stream: the stub's unary call blocks (no two historicals at once) or hands its reply
        # over from gRPC's own thread, while a stream is read on the caller's thread and several
        # run at once. On the wire the two are the same.
        # Requests go out as bytes already written (see ``request_bytes``).
        self._once = self._channel.unary_stream(_ONCE, response_deserializer=types_pb2.ArrowChunk.FromString)
        self._stream = self._channel.unary_stream(_STREAM, response_deserializer=types_pb2.ArrowChunk.FromString)
        # query JSON -> [(segments, schema, the request's bytes without its query id)]
        self._written: dict[str, list[tuple[list, dict, bytes]]] = {}
        # RunQueryOnce as one batch of operations on a completion queue of its own, as gRPC's
        # blocking unary call runs it but started without waiting: the call is one completion
        # event read on the caller's thread instead of the stream's five, and several run at once.
        # The internal credential, which the channel's interceptor adds to public calls, is sent
        # with the batch; any other kind of channel takes the public stream.
        self._metadata = security.call_metadata() or None
        plain = getattr(self._channel, "_channel", None) if self._metadata else self._channel
        self._raw = plain._channel if _ONE_BATCH is not None and type(plain) is _ONE_BATCH[0] else None

    def close(self) -> None:
        self._channel.close()

    def ask(self, query_json: str, query_id: str, segments: Iterable[SegmentId], schema: dict[str, ColumnType],
            timeout_s: float) -> PartialCall:
        """Starts RunQueryOnce on ``segments``; returns the call (its ``read()`` is the partial)."""
        request = self.request_bytes(query_json, query_id, segments, schema)
        if self._raw is not None:
            try:
                call = OneBatchCall(self._raw, request, timeout_s, self._metadata)
            except TypeError:  # gRPC's private call changed its arguments: the public way from now on
                self._raw = None
            else:
                return PartialCall(self, request, time.monotonic() + timeout_s, call)
        return PartialCall(self, request, time.monotonic() + timeout_s, self._once(request, timeout=timeout_s))

    def request_bytes(self, query_json: str, query_id: str, segments: Iterable[SegmentId],
                      schema: dict[str, ColumnType]) -> bytes:
        """The RunQueryRequest as bytes. A cached plan sends the same query, segments and schema on
        every run, only the query id differs: the rest is written once and kept, and the query id
        is written last (so the historical finds its parse of the rest again, see
        services/historical/query_request.py)."""
        segments = segments if isinstance(segments, list) else list(segments)
        kept = self._written.get(query_json)
        if kept is not None:
            for segs, sch, head in kept:
                if segs == segments and sch == schema:
                    return head + query_id_field(query_id)
        head = _request(query_json, "", segments, schema).SerializeToString()
        if len(head) > _KEPT_MAX_BYTES:
            return head + query_id_field(query_id)
        if kept is None:
            if len(self._written) >= _KEPT_TEXTS:
                self._written.clear()
            kept = self._written.setdefault(query_json, [])
        if len(kept) >= _KEPT_PER_TEXT:
            del kept[0]
        kept.append((list(segments), dict(schema), head))
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


class CallError(grpc.RpcError):
    """A one-batch RunQueryOnce that ended with another status than OK (as gRPC's own calls raise:
    ``code()``, ``details()``)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class OneBatchCall:
    """RunQueryOnce started as one batch (send the request and close, receive the metadata, the
    reply and the status); iterating it waits for that batch: the reply, or ``CallError``."""

    _METHOD = _ONCE.encode()

    def __init__(self, raw_channel, request: bytes, timeout_s: float, metadata=None) -> None:
        c = _cygrpc
        operations = (c.SendInitialMetadataOperation(metadata, 0), c.SendMessageOperation(request, 0),
                      c.SendCloseFromClientOperation(0), c.ReceiveInitialMetadataOperation(0),
                      c.ReceiveMessageOperation(0), c.ReceiveStatusOnClientOperation(0))
        self._call = raw_channel.segregated_call(_ONE_BATCH[1], self._METHOD, None, time.time() + timeout_s,
                                                 metadata, None, ((operations, None),), None)
        self._finished = False

    def cancel(self) -> None:
        if not self._finished:
            self._call.cancel(_ONE_BATCH[5], "Locally cancelled by application!")

    def __iter__(self):
        event = self._call.next_event()
        self._finished = True
        message, code, details = None, None, ""
        for op in event.batch_operations:
            kind = op.type()
            if kind == _ONE_BATCH[2]:
                message = op.message()
            elif kind == _ONE_BATCH[3]:
                code, details = op.code(), op.details()
        if code != _ONE_BATCH[4]:
            raise CallError(_STATUS.get(code, grpc.StatusCode.UNKNOWN), details or "")
        if message is not None:
            yield types_pb2.ArrowChunk.FromString(message)


def _request(query_json: str, query_id: str, segments: Iterable[SegmentId], schema: dict[str, ColumnType]):
    return historical_pb2.RunQueryRequest(query_json=query_json, query_id=query_id,
                                          segments=[segment_id_to_proto(s) for s in segments],
                                          schema=schema_to_proto(schema))
