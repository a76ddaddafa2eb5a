"""HistoricalClient: a historical's HistoricalService as the broker calls it.

``run_query`` hands back the streaming call itself: the caller reads the partial from it with
``read_partial`` and may ``cancel()`` it when the query's deadline passes or another replica is
chosen. gRPC errors are left as they are: which of them another replica may cure is the
caller's decision (see services/broker/query_executor.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from common.query.partial import Partial
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType
from services.grpc_server import CHANNEL_OPTIONS, SINGLE_THREADED_STREAMS, channel
from services.transport_security import NO_SECURITY, TransportSecurity
from services.rpc.arrow_stream import chunks_to_table, stats_from_proto
from services.rpc.convert import schema_to_proto, segment_id_to_proto
from services.rpc.gen.strata.v1 import historical_pb2, historical_pb2_grpc


class HistoricalClient:
    def __init__(self, target: str, security: TransportSecurity = NO_SECURITY) -> None:
        self.target = target
        # TLS and the internal credential when configured; RunQuery is read on the caller's thread.
        self._channel = channel(target, security, CHANNEL_OPTIONS + SINGLE_THREADED_STREAMS)
        self._stub = historical_pb2_grpc.HistoricalServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def run_query(self, query_json: str, query_id: str, segments: Iterable[SegmentId],
                  schema: dict[str, ColumnType], timeout_s: float):
        """Starts RunQuery on ``segments``; returns the call (iterate it with ``read_partial``)."""
        request = historical_pb2.RunQueryRequest(query_json=query_json, query_id=query_id,
                                                 segments=[segment_id_to_proto(s) for s in segments],
                                                 schema=schema_to_proto(schema))
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
