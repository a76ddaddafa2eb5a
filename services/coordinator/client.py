"""CoordinatorClient: the coordinator's CoordinatorService as other roles (the broker) and tools
call it: published segments, servers, load status, publishing, and tasks.

A refused request (INVALID_ARGUMENT) comes back as a ValidationError with the coordinator's
message, so a user error stays a user error on the caller's side; anything else is a
CoordinatorError naming the status code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import grpc

from common.errors import StrataError, ValidationError
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from services.grpc_server import channel
from services.query_errors import kind_of_code
from services.transport_security import NO_SECURITY, TransportSecurity
from services.rpc.convert import descriptor_from_proto, descriptor_to_proto
from services.rpc.gen.strata.v1 import coordinator_pb2, coordinator_pb2_grpc


class CoordinatorError(StrataError):
    """A coordinator call failed for a reason other than the request itself (unreachable,
    internal error, deadline); the message starts with the gRPC status code."""


@dataclass(frozen=True)
class PublishedSegment:
    """One row of the coordinator's segment table."""

    descriptor: SegmentDescriptor
    used: bool
    created_ms: int
    realtime: bool = False  # published by a stream task's micro-batch, not handed off yet

    @property
    def id(self) -> SegmentId:
        return self.descriptor.id

    @property
    def size(self) -> int:
        return self.descriptor.size

    @property
    def num_rows(self) -> int:
        return self.descriptor.num_rows


def _failed(what: str, exc: grpc.RpcError) -> StrataError:
    if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
        return ValidationError(exc.details())
    # The coordinator's kind travels on: a missing task stays NOT_FOUND, a missing grant a denial.
    return CoordinatorError(f"{what}{exc.code().name}: {exc.details()}", kind=kind_of_code(exc.code()))


class CoordinatorClient:
    def __init__(self, target: str, metadata=(), security: TransportSecurity = NO_SECURITY) -> None:
        self.target = target
        self._channel = channel(target, security)  # TLS and the internal credential when configured
        self._stub = coordinator_pb2_grpc.CoordinatorServiceStub(self._channel)
        self._metadata = tuple(metadata)

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request, timeout_s: float, what: str = ""):
        try:
            return getattr(self._stub, method)(request, timeout=timeout_s, metadata=self._metadata or None)
        except grpc.RpcError as exc:
            raise _failed(what, exc) from None

    # ---- segments ----------------------------------------------------------------------------
    def publish(self, descriptors: Iterable[SegmentDescriptor]) -> int:
        request = coordinator_pb2.PublishSegmentsRequest(segments=[descriptor_to_proto(d) for d in descriptors])
        return self._call("PublishSegments", request, 60, "publish failed: ").published

    def list_segments(self, datasource: str = "", include_unused: bool = True) -> list[PublishedSegment]:
        request = coordinator_pb2.ListSegmentsRequest(datasource=datasource, include_unused=include_unused)
        return [PublishedSegment(descriptor_from_proto(r.descriptor), r.used, r.created_ms, r.realtime)
                for r in self._call("ListSegments", request, 30).segments]

    def load_status(self, datasource: str = "", timeout_s: float = 30) -> list:
        return list(self._call("GetLoadStatus", coordinator_pb2.LoadStatusRequest(datasource=datasource),
                               timeout_s).segments)

    def servers(self):
        return self._call("ListServers", coordinator_pb2.ListServersRequest(), 10)

    def rules(self) -> dict:
        """datasource -> its retention rules as Druid JSON (``_default`` included)."""
        return json.loads(self._call("ListRules", coordinator_pb2.ListRulesRequest(), 10).rules_json)

    def supervisors(self) -> list[dict]:
        """Kafka supervisors not terminated, as sys.supervisors rows."""
        return json.loads(self._call("ListSupervisors", coordinator_pb2.ListSupervisorsRequest(), 10).supervisors_json)

    # ---- tasks -------------------------------------------------------------------------------
    def submit_task(self, datasource: str, type_: str, statement: str, spec: dict | None = None):
        request = coordinator_pb2.SubmitTaskRequest(datasource=datasource, type=type_, statement=statement,
                                                    spec_json=json.dumps(spec or {}))
        return self._call("SubmitTask", request, 30)

    def task(self, task_id: str):
        return self._call("GetTask", coordinator_pb2.TaskRequest(id=task_id), 30)

    def tasks(self, datasource: str = "", state: str = "") -> list:
        return list(self._call("ListTasks", coordinator_pb2.ListTasksRequest(datasource=datasource, state=state),
                               30).tasks)

    def cancel_task(self, task_id: str):
        return self._call("CancelTask", coordinator_pb2.TaskRequest(id=task_id), 30)
