"""ClusterClient: the gRPC calls the command line (and tests, and benchmarks) make to a cluster."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable

import grpc
import pyarrow as pa

from common.errors import StrataError
from common.query.partial import RunStats
from common.segment.descriptor import SegmentDescriptor
from common.segment.time_partitioner import build_segments
from services.deep_storage import deep_storage_key
from services.grpc_server import channel
from services.transport_security import CredentialClientInterceptor, TransportSecurity, transport_security_from_env
from services.rpc.arrow_stream import chunks_to_table
from services.rpc.convert import descriptor_to_proto
from services.rpc.gen.strata.v1 import broker_pb2, broker_pb2_grpc, coordinator_pb2, coordinator_pb2_grpc


class ClusterError(StrataError):
    pass


class ClusterClient:
    def __init__(self, coordinator: str | None = None, broker: str | None = None,
                 credentials: tuple[str, str] | None = None, security: TransportSecurity | None = None) -> None:
        self.coordinator_target = coordinator
        self.broker_target = broker
        if credentials is None and os.environ.get("STRATA_USER"):
            credentials = (os.environ["STRATA_USER"], os.environ.get("STRATA_PASSWORD", ""))
        # Basic credentials on every call when the cluster has authentication on.
        self.metadata = []
        if credentials:
            import base64

            token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
            self.metadata = [("authorization", f"Basic {token}")]
        # TLS with the CA in STRATA_TLS_CA_FILE when the cluster serves it.
        self.security = security if security is not None else transport_security_from_env()
        self._channels = []
        self._coordinator = None
        self._broker = None

    def _channel(self, target: str):
        ch = channel(target, self.security)
        self._channels.append(ch)
        return ch

    @property
    def coordinator(self) -> coordinator_pb2_grpc.CoordinatorServiceStub:
        if self._coordinator is None:
            if not self.coordinator_target:
                raise ClusterError("no coordinator address; pass --coordinator host:port or --dir of a running cluster")
            ch = self._channel(self.coordinator_target)
            if self.metadata:  # with auth on, the coordinator admits the admin's credentials on every call
                ch = grpc.intercept_channel(ch, CredentialClientInterceptor(tuple(self.metadata)))
            self._coordinator = coordinator_pb2_grpc.CoordinatorServiceStub(ch)
        return self._coordinator

    @property
    def broker(self) -> broker_pb2_grpc.BrokerServiceStub:
        if self._broker is None:
            if not self.broker_target:
                raise ClusterError("no broker address; pass --broker host:port or --dir of a running cluster")
            self._broker = broker_pb2_grpc.BrokerServiceStub(self._channel(self.broker_target))
        return self._broker

    def close(self) -> None:
        for ch in self._channels:
            ch.close()

    # ---- queries -----------------------------------------------------------------------------
    def native(self, query: dict | str, timeout_s: float = 300.0) -> tuple[pa.Table, RunStats]:
        text = query if isinstance(query, str) else json.dumps(query)
        request = broker_pb2.QueryRequest(native_json=text, timeout_ms=int(timeout_s * 1000))
        try:
            return chunks_to_table(self.broker.Query(request, timeout=timeout_s + 5, metadata=self.metadata))
        except grpc.RpcError as exc:
            raise ClusterError(f"{exc.code().name}: {exc.details()}") from None

    # ---- segments ----------------------------------------------------------------------------
    def publish(self, descriptors: Iterable[SegmentDescriptor]) -> int:
        request = coordinator_pb2.PublishSegmentsRequest(segments=[descriptor_to_proto(d) for d in descriptors])
        try:
            return self.coordinator.PublishSegments(request, timeout=60).published
        except grpc.RpcError as exc:
            raise ClusterError(f"publish failed: {exc.code().name}: {exc.details()}") from None

    def build_and_publish(self, table: pa.Table, datasource: str, storage, *, segment_granularity="day",
                          sort_columns=(), rows_per_segment: int = 3_000_000, column_types=None,
                          column_options=None) -> list[SegmentDescriptor]:
        """Build segments locally, push them to deep storage, publish them in one transaction.
        ``column_types`` / ``column_options``: per column, as build_segment takes them."""
        with tempfile.TemporaryDirectory(prefix="strata-build-") as tmp:
            built = build_segments(table, datasource, tmp, segment_granularity=segment_granularity,
                                   sort_columns=sort_columns, rows_per_segment=rows_per_segment,
                                   column_types=column_types, column_options=column_options)
            sets: dict = {}
            for _, manifest in built:
                key = (manifest.segment_id.interval, manifest.segment_id.version)
                sets[key] = sets.get(key, 0) + 1
            descriptors = []
            for path, manifest in built:
                sid = manifest.segment_id
                key = deep_storage_key(sid)
                size = storage.push(path, key)
                descriptors.append(SegmentDescriptor.of(manifest, key, sets[(sid.interval, sid.version)],
                                                        os.path.getsize(path) if size is None else size))
        self.publish(descriptors)
        return descriptors

    def load_status(self, datasource: str = "") -> list:
        return list(self.coordinator.GetLoadStatus(coordinator_pb2.LoadStatusRequest(datasource=datasource),
                                                   timeout=30).segments)

    def wait_loaded(self, datasource: str, count: int, timeout_s: float = 120.0, replicas: int = 1) -> None:
        """Until ``count`` segments of ``datasource`` are served with at least ``replicas`` copies."""
        deadline = time.monotonic() + timeout_s
        while True:
            segments = self.load_status(datasource)
            ready = sum(1 for s in segments if len(s.servers) >= replicas)
            if ready >= count:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"only {ready} of {count} segments of '{datasource}' loaded after {timeout_s:.0f}s")
            time.sleep(0.1)

    def list_segments(self, datasource: str = "", include_unused: bool = True) -> list:
        """Published segments as (descriptor fields + used) records."""
        from types import SimpleNamespace

        from services.rpc.convert import descriptor_from_proto

        response = self.coordinator.ListSegments(
            coordinator_pb2.ListSegmentsRequest(datasource=datasource, include_unused=include_unused), timeout=30)
        out = []
        for rec in response.segments:
            d = descriptor_from_proto(rec.descriptor)
            out.append(SimpleNamespace(id=d.id, size=d.size, num_rows=d.num_rows, used=rec.used,
                                       created_ms=rec.created_ms, descriptor=d))
        return out

    def sql(self, sql: str, context: dict | None = None, timeout_s: float = 300.0) -> tuple[pa.Table, RunStats]:
        request = broker_pb2.QueryRequest(sql=sql, timeout_ms=int(timeout_s * 1000),
                                          context={k: str(v) for k, v in (context or {}).items()})
        try:
            return chunks_to_table(self.broker.Query(request, timeout=timeout_s + 5, metadata=self.metadata))
        except grpc.RpcError as exc:
            raise ClusterError(f"{exc.code().name}: {exc.details()}") from None

    def run_with_id(self, sql: str | None = None, native: dict | None = None, query_id: str = "",
                    timeout_s: float = 300.0) -> tuple[pa.Table, RunStats, str]:
        """Run SQL or a native query; also returns the query id the broker answered with (the one
        asked for, or its own), which sys.queries and cancel_query know it by."""
        statement = {"sql": sql} if sql is not None else {"native_json": json.dumps(native)}
        request = broker_pb2.QueryRequest(timeout_ms=int(timeout_s * 1000), query_id=query_id, **statement)
        try:
            call = self.broker.Query(request, timeout=timeout_s + 5, metadata=self.metadata)
            table, stats = chunks_to_table(call)
            return table, stats, dict(call.initial_metadata()).get("x-strata-query-id", "")
        except grpc.RpcError as exc:
            raise ClusterError(f"{exc.code().name}: {exc.details()}") from None

    def cancel_query(self, query_id: str) -> str:
        """End a running query (its owner's, or any for the admin); the id is in sys.queries."""
        try:
            return self.broker.CancelQuery(broker_pb2.CancelQueryRequest(query_id=query_id), timeout=30,
                                           metadata=self.metadata).message
        except grpc.RpcError as exc:
            raise ClusterError(f"{exc.code().name}: {exc.details()}") from None

    def submit_task(self, datasource: str, type_: str, statement: str, spec: dict | None = None):
        request = coordinator_pb2.SubmitTaskRequest(datasource=datasource, type=type_, statement=statement,
                                                    spec_json=json.dumps(spec or {}))
        try:
            return self.coordinator.SubmitTask(request, timeout=30)
        except grpc.RpcError as exc:
            raise ClusterError(f"{exc.code().name}: {exc.details()}") from None

    def task(self, task_id: str):
        try:
            return self.coordinator.GetTask(coordinator_pb2.TaskRequest(id=task_id), timeout=30)
        except grpc.RpcError as exc:
            raise ClusterError(f"{exc.code().name}: {exc.details()}") from None

    def tasks(self, datasource: str = "", state: str = "") -> list:
        return list(self.coordinator.ListTasks(coordinator_pb2.ListTasksRequest(datasource=datasource, state=state),
                                               timeout=30).tasks)

    def cancel_task(self, task_id: str):
        try:
            return self.coordinator.CancelTask(coordinator_pb2.TaskRequest(id=task_id), timeout=30)
        except grpc.RpcError as exc:
            raise ClusterError(f"{exc.code().name}: {exc.details()}") from None

    def servers(self):
        return self.coordinator.ListServers(coordinator_pb2.ListServersRequest(), timeout=10)
