"""AssignmentState: a historical's pure state machine, events in, commands out.

The coordinator's assignments (keys in discovery) say what this historical should serve. The
state machine decides when to load, announce, unannounce and drop; the node around it only
executes commands and feeds back what happened. Tests drive it with events and assert the exact
commands, with no threads or files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId


# ---- events ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Assigned:
    descriptor: SegmentDescriptor


@dataclass(frozen=True)
class Unassigned:
    segment: SegmentId


@dataclass(frozen=True)
class AssignmentsResynced:
    """The full set of current assignments (after a watch reconnect)."""

    descriptors: tuple[SegmentDescriptor, ...]


@dataclass(frozen=True)
class LoadSucceeded:
    segment: SegmentId


@dataclass(frozen=True)
class LoadFailed:
    segment: SegmentId
    reason: str


@dataclass(frozen=True)
class SegmentCorrupted:
    """A served segment failed a checksum at query or verify time."""

    segment: SegmentId


# ---- commands --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    descriptor: SegmentDescriptor
    force_refetch: bool = False


@dataclass(frozen=True)
class Drop:
    segment: SegmentId


@dataclass(frozen=True)
class Announce:
    descriptor: SegmentDescriptor


@dataclass(frozen=True)
class Unannounce:
    segment: SegmentId


@dataclass
class AssignmentState:
    assigned: dict[SegmentId, SegmentDescriptor] = field(default_factory=dict)
    loading: set[SegmentId] = field(default_factory=set)
    served: set[SegmentId] = field(default_factory=set)
    failed: dict[SegmentId, str] = field(default_factory=dict)

    def handle(self, event) -> list:
        if isinstance(event, Assigned):
            return self._assigned(event.descriptor)
        if isinstance(event, Unassigned):
            return self._unassigned(event.segment)
        if isinstance(event, AssignmentsResynced):
            wanted = {d.id: d for d in event.descriptors}
            out = []
            for sid in [s for s in self.assigned if s not in wanted]:
                out.extend(self._unassigned(sid))
            for d in event.descriptors:
                out.extend(self._assigned(d))
            return out
        if isinstance(event, LoadSucceeded):
            self.loading.discard(event.segment)
            self.failed.pop(event.segment, None)
            if event.segment in self.assigned:
                self.served.add(event.segment)
                return [Announce(self.assigned[event.segment])]
            return [Drop(event.segment)]  # unassigned while loading
        if isinstance(event, LoadFailed):
            self.loading.discard(event.segment)
            if event.segment in self.assigned:
                self.failed[event.segment] = event.reason
            return []
        if isinstance(event, SegmentCorrupted):
            if event.segment not in self.served:
                return []
            self.served.discard(event.segment)
            self.loading.add(event.segment)
            return [Unannounce(event.segment), Load(self.assigned[event.segment], force_refetch=True)]
        raise TypeError(f"unknown event {event!r}")

    def _assigned(self, descriptor: SegmentDescriptor) -> list:
        sid = descriptor.id
        self.assigned[sid] = descriptor
        if sid in self.served or sid in self.loading:
            return []
        self.failed.pop(sid, None)
        self.loading.add(sid)
        return [Load(descriptor)]

    def _unassigned(self, sid: SegmentId) -> list:
        if self.assigned.pop(sid, None) is None:
            return []
        self.failed.pop(sid, None)
        if sid in self.served:
            self.served.discard(sid)
            return [Unannounce(sid), Drop(sid)]
        return []  # still loading: LoadSucceeded will see it unassigned and drop it
