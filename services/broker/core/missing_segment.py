"""MissingSegment: what the broker does with a segment a replica did not answer for.

A historical drops a segment as soon as the coordinator unassigns it (a drop rule, markUnused, a
kill, a move), while the broker learns of it only when the unannouncement reaches its served view:
a query planned in between asks a historical for a segment it no longer serves. As Druid's broker
does with the ``missingSegments`` a data server reports (RetryQueryRunner), such a segment is asked
of another replica when the view has one; one that is no longer meant to be served (unused,
overshadowed, or kept by its rule in deep storage only) is left out and the query answers from the
rest, exactly as a query planned a moment later would; one that is still meant to be served fails
the query, retryable, once the view had its chance to catch up.

``next_step`` is the whole decision, pure; the scatter code (services/broker/query_executor.py)
gathers the facts (its served view, the coordinator's answer, the clock) and carries it out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from common.errors import ErrorKind
from common.segment.segment_id import SegmentId


class Cause(str, enum.Enum):
    """Why the last replica asked did not answer for the segment."""

    NOT_SERVED = "not_served"  # it said it does not serve the segment (its copy was dropped)
    UNREACHABLE = "unreachable"  # down, overloaded or the stream broke: it may serve the segment still
    FAILED = "failed"  # it failed reading it (a bug, a corrupt copy): asking again will not help


class InView(str, enum.Enum):
    """The segment in the broker's served view now."""

    VISIBLE = "visible"  # announced, and in the datasource's timeline
    OVERSHADOWED = "overshadowed"  # announced, but hidden by a newer version
    GONE = "gone"  # no historical announces it


class Used(str, enum.Enum):
    """The segment as the coordinator lists it."""

    USED = "used"  # used, and its rule wants replicas loaded
    UNUSED = "unused"  # marked unused (a drop rule, markUnused, a kill), or no such segment
    NO_REPLICAS = "no_replicas"  # used, but its rule keeps it in deep storage only (0 replicas)
    UNKNOWN = "unknown"  # the coordinator could not be asked


@dataclass(frozen=True)
class MissingSegment:
    """The facts about one segment no replica answered for yet."""

    segment: SegmentId
    cause: Cause
    last_server: str  # the replica that failed last
    last_failure: str  # what it said ("NOT_FOUND: historical h1 does not serve ...")
    tried: frozenset[str]  # every replica that failed on it in this query
    untried: frozenset[str]  # replicas the view lists now that this query has not tried
    in_view: InView
    used: Used | None = None  # None: the coordinator was not asked yet
    can_wait: bool = False  # time is left for the view to catch up (within the query's deadline)
    failure_kind: ErrorKind = ErrorKind.UNAVAILABLE  # the kind of the last failure, when it was FAILED


@dataclass(frozen=True)
class Retry:
    """Ask one of the untried replicas."""


@dataclass(frozen=True)
class AskCoordinator:
    """Whether the segment is still meant to be served decides: ask the coordinator first."""


@dataclass(frozen=True)
class WaitForView:
    """The view may not have caught up with the cluster yet: wait for it to change, then decide again."""


@dataclass(frozen=True)
class LeaveOut:
    """Answer without the segment: it is no longer meant to be served."""

    reason: str  # one of LEFT_OUT_REASONS, the metric's label
    detail: str


@dataclass(frozen=True)
class Fail:
    kind: ErrorKind
    message: str


Step = Retry | AskCoordinator | WaitForView | LeaveOut | Fail

LEFT_OUT_REASONS = ("overshadowed", "unused", "no_replicas", "unannounced")


def used_of(wanted: dict[SegmentId, int], segments) -> dict[SegmentId, Used]:
    """``segments`` as the coordinator's load status lists them: ``wanted``, used segment -> the
    replicas its rule wants loaded (the coordinator lists no unused segment)."""
    out = {}
    for sid in segments:
        replicas = wanted.get(sid)
        out[sid] = Used.UNUSED if replicas is None else Used.USED if replicas > 0 else Used.NO_REPLICAS
    return out


def next_step(m: MissingSegment) -> Step:
    if m.in_view is InView.OVERSHADOWED:
        # A query planned now would not read it either: the newer version answers for its interval.
        return LeaveOut("overshadowed", f"segment {m.segment} is overshadowed by a newer version")
    if m.untried:
        return Retry()
    tried = ", ".join(sorted(m.tried)) or m.last_server
    if m.cause is Cause.FAILED:
        # The same bug or bad copy everywhere it was asked: no refresh of the view changes that.
        return Fail(m.failure_kind, f"no replica left for {m.segment} (tried {tried}); the last one, on "
                                    f"{m.last_server}, failed with {m.last_failure}")
    if m.used is None:
        return AskCoordinator()
    if m.used is Used.UNUSED:
        return LeaveOut("unused", f"segment {m.segment} is no longer used")
    if m.used is Used.NO_REPLICAS:
        return LeaveOut("no_replicas", f"segment {m.segment} is kept in deep storage only by its load rule")
    if m.used is Used.UNKNOWN and m.in_view is InView.GONE:
        # The coordinator cannot say; the view, the broker's own truth, no longer has it: a query
        # planned now would not read it either (as Druid's broker, whose timeline is the truth).
        return LeaveOut("unannounced", f"segment {m.segment} is no longer announced by any historical")
    if m.cause is Cause.NOT_SERVED and m.can_wait:
        # A moved segment is announced by its new replica before the old one drops it: the view
        # will show it soon; a dropped one leaves the view.
        return WaitForView()
    if m.used is Used.USED:
        state = "the coordinator still lists it as used"
    else:
        state = "the coordinator could not be asked whether it is still used"
    return Fail(ErrorKind.UNAVAILABLE,
                f"segment {m.segment} is not available: no replica answered for it (tried {tried}; the last, "
                f"{m.last_server}, said {m.last_failure}) and {state}; it may be moving between historicals "
                f"or loading: run the query again")
