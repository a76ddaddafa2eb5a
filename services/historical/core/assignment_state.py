"""AssignmentState: a historical's pure state machine, events in, commands out.

The coordinator's assignments (keys in discovery) say what this historical should serve. The
state machine decides when to load, announce, unannounce and drop, and when to report a failed
load back to the coordinator; the node around it only executes commands and feeds back what
happened. Tests drive it with events and assert the exact commands, with no threads or files.

As in dask's worker state machine, every event carries a ``stimulus_id`` (what caused it: an
assignment put, a load finishing, a query finding corruption) and every command carries the
stimulus id of the event that produced it, so a log line or a test can tell why anything was
done. ``validate()`` checks the invariants; tests call it after every event, and
``validate=True`` makes ``handle`` do it too.

A failed load is kept (reason and attempt count) and reported with ``ReportLoadFailure``: the
coordinator decides whether to assign it here again after a backoff (an ``Assigned`` for a
segment that failed is a retry) or to move it to another historical. The record stays after an
unassignment, so the coordinator still sees that this server failed the segment; a successful
load clears it (``ClearLoadFailure``). It does not stay for ever: the coordinator deletes the
record of a segment no longer assigned here once its ``give_up_expiry_ms`` has passed, and
``LoadFailureForgotten`` (the node watches its records) drops the attempt count with it, so a
later assignment here counts its failures from one. The record and this memory agree: a
segment is in ``failed`` exactly while this server's record of it should exist.

A copy has a shape: the projections a partial load rule wants of it (``projections``), or () for
the whole segment. An assignment of a served segment in another shape (the rule changed) is a
reload: the new copy is fetched while the old one keeps serving (``reloading``), then swapped
in and announced with its shape. A reload that fails leaves the old copy serving and reports
the failure, so the coordinator retries it; a segment may then be both served and failed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId

STIMULUS_LOG_SIZE = 1000


# ---- events ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Assigned:
    descriptor: SegmentDescriptor
    stimulus_id: str
    projections: tuple[str, ...] = ()  # the shape: a partial copy's projections, () whole


@dataclass(frozen=True)
class Unassigned:
    segment: SegmentId
    stimulus_id: str


@dataclass(frozen=True)
class AssignmentsResynced:
    """The full set of current assignments (after a watch reconnect)."""

    descriptors: tuple[SegmentDescriptor, ...]
    stimulus_id: str
    projections: dict = field(default_factory=dict)  # segment -> its shape, when partial


@dataclass(frozen=True)
class LoadSucceeded:
    segment: SegmentId
    stimulus_id: str
    projections: tuple[str, ...] = ()  # the shape of the copy now served


@dataclass(frozen=True)
class LoadFailed:
    segment: SegmentId
    reason: str
    stimulus_id: str


@dataclass(frozen=True)
class SegmentCorrupted:
    """A served segment failed a checksum at query or verify time."""

    segment: SegmentId
    stimulus_id: str


@dataclass(frozen=True)
class LoadFailureForgotten:
    """This server's failure record of ``segment`` was deleted by someone else: the coordinator,
    when the give-up expired (or the store, when this node's lease was lost)."""

    segment: SegmentId
    stimulus_id: str


Event = (Assigned | Unassigned | AssignmentsResynced | LoadSucceeded | LoadFailed | SegmentCorrupted
         | LoadFailureForgotten)


# ---- commands --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    """Load the segment in shape ``projections``; with ``reload``, beside the copy it serves in
    another shape, which serves until the new one replaces it."""

    descriptor: SegmentDescriptor
    stimulus_id: str
    force_refetch: bool = False
    projections: tuple[str, ...] = ()
    reload: bool = False


@dataclass(frozen=True)
class Drop:
    segment: SegmentId
    stimulus_id: str


@dataclass(frozen=True)
class Announce:
    descriptor: SegmentDescriptor
    stimulus_id: str
    projections: tuple[str, ...] = ()  # the served copy's shape


@dataclass(frozen=True)
class Unannounce:
    segment: SegmentId
    stimulus_id: str


@dataclass(frozen=True)
class ReportLoadFailure:
    """Tell the coordinator this server failed to load ``segment`` ``attempts`` times in a row."""

    segment: SegmentId
    reason: str
    attempts: int
    stimulus_id: str


@dataclass(frozen=True)
class ClearLoadFailure:
    """The failure reported for ``segment`` no longer holds: it loaded."""

    segment: SegmentId
    stimulus_id: str


Command = Load | Drop | Announce | Unannounce | ReportLoadFailure | ClearLoadFailure


@dataclass(frozen=True)
class LoadFailure:
    reason: str
    attempts: int


class InvalidState(AssertionError):
    """An invariant of AssignmentState does not hold: a bug in the state machine."""


@dataclass
class AssignmentState:
    assigned: dict[SegmentId, SegmentDescriptor] = field(default_factory=dict)
    loading: set[SegmentId] = field(default_factory=set)
    served: set[SegmentId] = field(default_factory=set)
    failed: dict[SegmentId, LoadFailure] = field(default_factory=dict)
    shapes: dict[SegmentId, tuple[str, ...]] = field(default_factory=dict)  # assigned shape (absent: whole)
    served_shapes: dict[SegmentId, tuple[str, ...]] = field(default_factory=dict)  # served copy's (absent: whole)
    reloading: set[SegmentId] = field(default_factory=set)  # served, and fetched again in the assigned shape
    validate: bool = False
    # The latest events handled, for post-mortems: (stimulus id, event).
    stimulus_log: deque = field(default_factory=lambda: deque(maxlen=STIMULUS_LOG_SIZE))

    def handle(self, event: Event) -> list[Command]:
        self.stimulus_log.append((event.stimulus_id, event))
        commands = self._handle(event)
        if self.validate:
            self.validate_state()
        return commands

    def _handle(self, event: Event) -> list[Command]:
        sid_ = event.stimulus_id
        if isinstance(event, Assigned):
            return self._assigned(event.descriptor, sid_, tuple(event.projections))
        if isinstance(event, Unassigned):
            return self._unassigned(event.segment, sid_)
        if isinstance(event, AssignmentsResynced):
            wanted = {d.id: d for d in event.descriptors}
            out = []
            for sid in [s for s in self.assigned if s not in wanted]:
                out.extend(self._unassigned(sid, sid_))
            for d in event.descriptors:
                out.extend(self._assigned(d, sid_, tuple(event.projections.get(d.id, ()))))
            return out
        if isinstance(event, LoadSucceeded):
            seg = event.segment
            if seg not in self.loading and seg not in self.reloading:
                return []  # a stale outcome (nothing of ours is loading it)
            self.loading.discard(seg)
            self.reloading.discard(seg)
            out: list[Command] = []
            if self.failed.pop(seg, None) is not None:
                out.append(ClearLoadFailure(seg, sid_))
            if seg not in self.assigned:
                return out + [Drop(seg, sid_)]  # unassigned while loading
            self.served.add(seg)
            self._set_served_shape(seg, tuple(event.projections))
            out.append(Announce(self.assigned[seg], sid_, tuple(event.projections)))
            # The assignment changed shape again while this copy was fetched: once more.
            return out + self._reload_if_reshaped(seg, sid_)
        if isinstance(event, LoadFailed):
            if event.segment in self.reloading:
                # The old copy still serves; the coordinator retries the reload after its backoff.
                self.reloading.discard(event.segment)
                before = self.failed.get(event.segment)
                failure = LoadFailure(event.reason, (before.attempts if before else 0) + 1)
                self.failed[event.segment] = failure
                return [ReportLoadFailure(event.segment, failure.reason, failure.attempts, sid_)]
            if event.segment not in self.loading:
                return []
            self.loading.discard(event.segment)
            if event.segment not in self.assigned:
                return []  # unassigned meanwhile: nobody waits for it here
            before = self.failed.get(event.segment)
            failure = LoadFailure(event.reason, (before.attempts if before else 0) + 1)
            self.failed[event.segment] = failure
            return [ReportLoadFailure(event.segment, failure.reason, failure.attempts, sid_)]
        if isinstance(event, LoadFailureForgotten):
            return self._forgotten(event.segment, sid_)
        if isinstance(event, SegmentCorrupted):
            if event.segment not in self.served:
                return []
            self.served.discard(event.segment)
            self.served_shapes.pop(event.segment, None)
            self.loading.add(event.segment)
            if event.segment in self.reloading:
                # A fresh copy in the assigned shape is already being fetched: its outcome is the load's.
                self.reloading.discard(event.segment)
                return [Unannounce(event.segment, sid_)]
            return [Unannounce(event.segment, sid_), Load(self.assigned[event.segment], sid_, force_refetch=True,
                                                          projections=self.shapes.get(event.segment, ()))]
        raise TypeError(f"unknown event {event!r}")

    def _assigned(self, descriptor: SegmentDescriptor, stimulus_id: str,
                  projections: tuple[str, ...] = ()) -> list[Command]:
        sid = descriptor.id
        self.assigned[sid] = descriptor
        if projections:
            self.shapes[sid] = projections
        else:
            self.shapes.pop(sid, None)
        if sid in self.served:
            return self._reload_if_reshaped(sid, stimulus_id)
        if sid in self.loading:
            return []  # LoadSucceeded compares the loaded shape with the one assigned by then
        # A segment that failed before is retried (the coordinator put its assignment again); the
        # failure record stays, with its attempt count, until a load succeeds.
        self.loading.add(sid)
        return [Load(descriptor, stimulus_id, force_refetch=sid in self.failed, projections=projections)]

    def _set_served_shape(self, sid: SegmentId, shape: tuple[str, ...]) -> None:
        if shape:
            self.served_shapes[sid] = shape
        else:
            self.served_shapes.pop(sid, None)

    def _reload_if_reshaped(self, sid: SegmentId, stimulus_id: str) -> list[Command]:
        """A served copy whose shape is not the assigned one is fetched again in that shape (not
        forced: the old copy must keep serving), unless that is already under way."""
        shape = self.shapes.get(sid, ())
        if sid in self.reloading:
            return []
        if self.served_shapes.get(sid, ()) == shape:
            # Assigned back to the shape served (a reload had failed): nothing failed any more.
            return [ClearLoadFailure(sid, stimulus_id)] if self.failed.pop(sid, None) is not None else []
        self.reloading.add(sid)
        return [Load(self.assigned[sid], stimulus_id, projections=shape, reload=True)]

    def _forgotten(self, sid: SegmentId, stimulus_id: str) -> list[Command]:
        failure = self.failed.get(sid)
        if failure is None:
            return []  # our own ClearLoadFailure coming back, or a record we no longer keep
        if sid in self.assigned and sid not in self.loading:
            # Still assigned and waiting for the coordinator's retry, which it bases on the record:
            # put it back (the coordinator deletes only records of unassigned segments, so this
            # deletion came from a lost lease or a coordinator that saw the unassignment first).
            return [ReportLoadFailure(sid, failure.reason, failure.attempts, stimulus_id)]
        # Unassigned (the give-up expired), or being loaded again (a new assignment got here
        # before the deletion): the count starts over; the outcome of a load in flight reports
        # afresh. The clear makes the node's announcer drop the key too, not put it back later.
        del self.failed[sid]
        return [ClearLoadFailure(sid, stimulus_id)]

    def _unassigned(self, sid: SegmentId, stimulus_id: str) -> list[Command]:
        if self.assigned.pop(sid, None) is None:
            return []
        self.shapes.pop(sid, None)
        if sid in self.served:
            self.served.discard(sid)
            self.served_shapes.pop(sid, None)
            if sid in self.reloading:
                # Its fetch still runs: LoadSucceeded finds it unassigned and drops what it brought.
                self.reloading.discard(sid)
                self.loading.add(sid)
            return [Unannounce(sid, stimulus_id), Drop(sid, stimulus_id)]
        return []  # still loading: LoadSucceeded will see it unassigned and drop it

    def validate_state(self) -> None:
        """Raises InvalidState naming the first broken invariant."""
        both = self.loading & self.served
        if both:
            raise InvalidState(f"segments both loading and served: {sorted(map(str, both))}")
        unassigned = self.served - set(self.assigned)
        if unassigned:
            raise InvalidState(f"served without an assignment: {sorted(map(str, unassigned))}")
        served_failed = {s for s in self.served & set(self.failed)
                         if self.served_shapes.get(s, ()) == self.shapes.get(s, ())}
        if served_failed:
            raise InvalidState(f"served yet recorded as failed: {sorted(map(str, served_failed))}")
        if not self.reloading <= self.served:
            raise InvalidState(f"reloading yet not served: {sorted(map(str, self.reloading - self.served))}")
        if not set(self.shapes) <= set(self.assigned) or not set(self.served_shapes) <= self.served:
            raise InvalidState("a shape is kept for a segment not assigned or not served")
        for sid, failure in self.failed.items():
            if failure.attempts < 1:
                raise InvalidState(f"failure of {sid} has {failure.attempts} attempts")
        for sid, descriptor in self.assigned.items():
            if descriptor.id != sid:
                raise InvalidState(f"assignment of {sid} holds the descriptor of {descriptor.id}")
