"""CoordinatorPublisher: the SegmentPublisher a task process uses, backed by coordinator RPCs."""

from __future__ import annotations

import grpc

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from common.segment.allocation import Allocation
from services.query_errors import error_from_rpc
from services.rpc.convert import (descriptor_from_proto, descriptor_to_proto, interval_from_proto, interval_to_proto,
                                  segment_id_to_proto)
from services.rpc.gen.strata.v1 import coordinator_pb2


class CoordinatorPublisher:
    def __init__(self, coordinator_stub, task_id: str, datasource: str) -> None:
        self.stub = coordinator_stub
        self.task_id = task_id
        self.datasource = datasource

    def allocate(self, datasource: str, intervals: list[Interval], mode: str,
                 partitions: dict[Interval, int] | None = None) -> dict[Interval, Allocation]:
        request = coordinator_pb2.AllocateSegmentsRequest(
            datasource=datasource, intervals=[interval_to_proto(i) for i in intervals], mode=mode.lower(),
            task_id=self.task_id, partitions=[partitions[i] for i in intervals] if partitions else [])
        try:
            response = self.stub.AllocateSegments(request, timeout=60)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, "segment allocation") from None  # a refusal stays a user error
        out = {}
        for a in response.allocations:
            iv = interval_from_proto(a.interval)
            out[iv] = Allocation(iv, a.version, a.first_partition, a.core_partitions)
        return out

    def publish(self, descriptors: list[SegmentDescriptor], replace_intervals: list[Interval] | None,
                stream: dict | None = None, expected: list[SegmentId] | None = None) -> None:
        """``stream``: {"datasource", "topic", "start", "end"} of a Kafka task, committed with the
        segments only if the stored offsets still equal ``start`` (see SupervisorStore).
        ``expected``: with ``replace_intervals``, the used segments there the new ones were built
        from (a stream handoff); the coordinator refuses the publish if others are used there."""
        request = coordinator_pb2.PublishSegmentsRequest(segments=[descriptor_to_proto(d) for d in descriptors],
                                                         task_id=self.task_id)
        if stream is not None:
            request.stream.datasource = stream["datasource"]
            request.stream.topic = stream["topic"]
            request.stream.start.update(stream["start"])
            request.stream.end.update(stream["end"])
        if replace_intervals is not None:
            request.replace_datasource = self.datasource
            request.replace_intervals.extend(interval_to_proto(i) for i in replace_intervals)
        if expected is not None:
            request.check_replace_expected = True
            request.replace_expected.extend(segment_id_to_proto(s) for s in expected)
        try:
            self.stub.PublishSegments(request, timeout=120)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, "publish") from None

    def used_segments(self, datasource: str) -> list[tuple[SegmentDescriptor, bool]]:
        """The datasource's used segments, each with whether it is realtime (a stream handoff's input)."""
        request = coordinator_pb2.ListSegmentsRequest(datasource=datasource, include_unused=False)
        try:
            response = self.stub.ListSegments(request, timeout=60)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc, "segment listing") from None
        return [(descriptor_from_proto(r.descriptor), r.realtime) for r in response.segments if r.used]


class ConditionalReplacePublisher:
    """A rewrite's publisher (a compaction, a stream handoff): its replace names the used segments
    it found in its intervals when it read its input, and the coordinator refuses it (CONFLICT)
    if any other is used there now: one appended meanwhile, whose rows the new version would hide."""

    def __init__(self, inner, expected: list[SegmentId]) -> None:
        self.inner = inner
        self.expected = list(expected)

    def allocate(self, datasource, intervals, mode, partitions=None):
        return self.inner.allocate(datasource, intervals, mode, partitions)

    def publish(self, descriptors: list[SegmentDescriptor], replace_intervals: list[Interval] | None) -> None:
        self.inner.publish(list(descriptors), replace_intervals, expected=self.expected)
