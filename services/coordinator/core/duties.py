"""Coordinator duties: pure ``run(params) -> params`` steps over one cluster snapshot.

As Druid's coordinator, every run starts from a fresh snapshot (used segments from the
metadata store, what each historical has loaded and is loading) and each duty appends
commands to it. Nothing is remembered between runs: the edge sends the commands, historicals
act on them, and the next snapshot shows the outcome. That keeps the duties restartable (a new
leader needs no state) and lets tests feed snapshots and assert the exact commands.

Rules every duty follows:
- Later duties see earlier duties' commands: a Load counts as held and as used capacity, a
  Drop as no longer held. A Drop does NOT free capacity within the run, because the historical
  may process a new Load before the Drop, and a server must never exceed ``max_bytes``.
- Replicas count toward replication once loading (so one run never assigns twice), but only
  *loaded* replicas count when deciding what is surplus, so a copy is never dropped before its
  replacement is serving.
- A balancing move is a Load on the target and nothing else; once the target reports the
  segment loaded, the segment is over-replicated and DropUnneeded removes the copy that
  weighs most on the balance measure, which is the source's. Replication therefore never
  dips during a move, and the move needs no memory across runs.
- The edge must list a Load it has sent but the historical has not yet acknowledged under
  that server's ``loading``; otherwise the next run may assign the segment a second time.
- Every iteration is in a sorted order, so the same snapshot always yields the same commands.
- A failed load is part of the snapshot too (historicals report them in discovery):
  RetryFailedLoads retries it on the same server after a backoff that doubles per attempt, and
  after ``max_load_attempts`` failures there moves it to another server if one can take it.
  Assign and Balance do not place a segment on a server that has given up on it, but only for
  ``give_up_expiry_ms`` after its last failure there: then the give-up has expired, the server is
  a candidate again, and RetryFailedLoads forgets the record (ForgetLoadFailure) so the next
  attempt there counts from one. As Druid's coordinator, which keeps no failure memory and simply
  tries again on a later run, a server is never excluded for good: after a deep-storage outage
  every server gets its segments back. The clock is the snapshot's ``now_ms``; nothing sleeps.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Protocol

from common.errors import ValidationError
from common.segment.segment_id import SegmentId
from common.segment.timeline import Timeline, TimelineSegment
from services.coordinator.core.rules import (DEFAULT_TIER, PartialLoadRule, Rule, default_rules, matching_rule, rules_for,
                                             wanted_replicas)
from services.coordinator.core.replication_throttle import DEFAULT_REPLICATION_THROTTLE_LIMIT, ReplicationThrottle
from services.coordinator.core.segment_parts import SegmentParts

DEFAULT_MAX_MOVES = 10
DEFAULT_MAX_LOAD_ATTEMPTS = 3  # failed loads on one server before the segment goes elsewhere
DEFAULT_LOAD_BACKOFF_MS = 1_000  # before the first retry; doubles per attempt
DEFAULT_MAX_LOAD_BACKOFF_MS = 60_000
# How long a server that gave up on a segment is passed over for it, from its last failure.
DEFAULT_GIVE_UP_EXPIRY_MS = 300_000


class DutySegment(Protocol):
    """What the duties need of a segment: identity, bytes on a historical, size of its
    partition set. ``common.segment.descriptor.SegmentDescriptor`` has these, as does
    ``SegmentEntry``."""

    @property
    def id(self) -> SegmentId: ...

    @property
    def size(self) -> int: ...

    @property
    def num_partitions(self) -> int: ...


@dataclass(frozen=True)
class SegmentEntry:
    """The smallest DutySegment, for callers (and tests) that have no full descriptor."""

    id: SegmentId
    size: int
    num_partitions: int = 1


@dataclass(frozen=True)
class ServerView:
    """One historical as last reported: its capacity, what it serves and what it is loading, and
    the tier it belongs to (``[historical] tier``).

    A copy's shape is the projections it holds (a partial load rule's), () for the whole segment.
    ``shapes``: the shape each held segment is assigned (what the server holds or is fetching);
    ``served_shapes``: the shape each loaded copy is announced with (what queries use now). They
    differ while the server reloads a copy in another shape: it keeps serving the old one until
    the new one is in, so both take room meanwhile. A segment missing from either is whole."""

    max_bytes: int
    loaded: frozenset[SegmentId] = frozenset()
    loading: frozenset[SegmentId] = frozenset()
    tier: str = DEFAULT_TIER
    shapes: Mapping[SegmentId, tuple[str, ...]] = field(default_factory=dict)
    served_shapes: Mapping[SegmentId, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadFailure:
    """A historical's report that loading ``segment`` failed ``attempts`` times in a row."""

    attempts: int
    failed_ms: int
    reason: str = ""


@dataclass(frozen=True)
class RetrySent:
    """The edge's note that it sent a RetryLoad answering the failure reported at ``failed_ms``,
    at ``sent_ms``. The historical answers a retry with a new report (or by loading), so one
    RetryLoad per report is enough; sending it every run while the load runs would rewrite the
    assignment for nothing, and one landing just after the next failure would start another
    load at once, without its backoff."""

    failed_ms: int
    sent_ms: int


@dataclass(frozen=True)
class Load:
    """Load ``segment`` on ``server``; with ``projections``, only those projections of it (a
    partial load rule's tier), else the whole segment. For a segment the server already holds in
    another shape it is a reload: the server fetches the new shape while serving the old copy,
    then swaps them."""

    server: str
    segment: SegmentId
    projections: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetryLoad:
    """Ask ``server`` again to load a segment assigned to it whose load failed (the edge writes
    the assignment again, which the historical sees as a new assignment)."""

    server: str
    segment: SegmentId


@dataclass(frozen=True)
class Drop:
    server: str
    segment: SegmentId


@dataclass(frozen=True)
class ForgetLoadFailure:
    """The failure record of a segment ``server`` no longer holds has outlived
    ``give_up_expiry_ms``: the edge deletes it, and the historical forgets its attempt count with
    it, so a later assignment there starts counting from one."""

    server: str
    segment: SegmentId


@dataclass(frozen=True)
class MarkUnused:
    """Overshadowed segment: the edge marks it unused in the metadata store."""

    segment: SegmentId


@dataclass(frozen=True)
class Unmatched:
    """``count`` used segments of ``datasource`` that no rule (the datasource's nor the cluster
    default's) applies to: they are left as they are, and the edge raises an alert."""

    datasource: str
    count: int


@dataclass(frozen=True)
class Noop:
    """The whole result of a run that found nothing to do: the cluster has converged."""


Command = Load | Drop | MarkUnused | RetryLoad | ForgetLoadFailure | Unmatched | Noop


@dataclass(frozen=True)
class DutyParams:
    """A frozen cluster snapshot plus the commands the duties have decided so far.

    ``used``: the used segments (metadata store). ``unused``: segments marked unused that some
    historical may still hold; they are needed only for their sizes. A loaded segment in
    neither list is unknown: it is dropped, and counted as 0 bytes until then.
    ``rules``: datasource -> its retention/load rules as stored (``_default`` the cluster's);
    each segment follows the first that applies at ``now_ms`` (see ``rules.py``). Without a
    stored ``_default``, the default is ``loadForever`` with ``replication`` replicas on
    ``_default_tier`` (``[coordinator] replication``; 0 means 2). A tier never holds two copies
    on one server, so 2 replicas on a one-historical tier is one copy.
    ``max_moves``: balancing moves in flight at most, counting those of earlier runs.
    ``replication_throttle_limit``: per tier, loads of segments already served elsewhere (replicas,
    reloads in another shape) in flight at most, counting those of earlier runs; a segment no
    one serves is loaded regardless (see ``replication_throttle.py``).
    ``load_failures``: (server, segment) -> the failure that server reported; retried after
    ``load_backoff_ms * 2**(attempts - 1)`` (at most ``max_load_backoff_ms``), and after
    ``max_load_attempts`` the server has given up on the segment. A record of a segment the
    server no longer holds expires ``give_up_expiry_ms`` after that failure (``failed_ms``): a
    server that gave up is a candidate again from then on, and the record is forgotten.
    ``retries_sent``: (server, segment) -> the RetryLoad the edge last sent for it; a report
    already answered is not answered again (unless ``max_load_backoff_ms`` passed without a new
    report: the edge's put may have been lost).
    """

    used: tuple[DutySegment, ...]
    servers: Mapping[str, ServerView]
    unused: tuple[DutySegment, ...] = ()
    now_ms: int = 0
    replication: int = 0
    max_moves: int = DEFAULT_MAX_MOVES
    replication_throttle_limit: int = DEFAULT_REPLICATION_THROTTLE_LIMIT
    load_failures: Mapping[tuple[str, SegmentId], LoadFailure] = field(default_factory=dict)
    max_load_attempts: int = DEFAULT_MAX_LOAD_ATTEMPTS
    load_backoff_ms: int = DEFAULT_LOAD_BACKOFF_MS
    max_load_backoff_ms: int = DEFAULT_MAX_LOAD_BACKOFF_MS
    give_up_expiry_ms: int = DEFAULT_GIVE_UP_EXPIRY_MS
    retries_sent: Mapping[tuple[str, SegmentId], RetrySent] = field(default_factory=dict)
    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    # segment -> the names of its projections (from its manifest), which partial load rules select
    projections: Mapping[SegmentId, tuple[str, ...]] = field(default_factory=dict)
    # segment -> its parts' sizes (from its manifest), to reserve only a partial copy's bytes; a
    # segment without an entry reserves its whole size for any copy
    parts: Mapping[SegmentId, SegmentParts] = field(default_factory=dict)
    commands: tuple[Command, ...] = ()
    _by_id: dict[SegmentId, DutySegment] = field(init=False, repr=False, compare=False)
    _rule_of: dict[SegmentId, Rule | None] = field(init=False, repr=False, compare=False)
    _tier_sizes: dict[str, int] = field(init=False, repr=False, compare=False)
    _chains: dict[str, list[Rule]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise inputs once, here
        set_(self, "used", tuple(self.used))
        set_(self, "unused", tuple(self.unused))
        set_(self, "servers", dict(self.servers))
        set_(self, "commands", tuple(self.commands))
        set_(self, "load_failures", dict(self.load_failures))
        set_(self, "retries_sent", dict(self.retries_sent))
        if self.max_load_attempts < 1:
            raise ValidationError(f"coordinator max_load_attempts must be >= 1, got {self.max_load_attempts}")
        if self.load_backoff_ms < 0 or self.max_load_backoff_ms < self.load_backoff_ms:
            raise ValidationError(f"coordinator load backoff must satisfy 0 <= load_backoff_ms ({self.load_backoff_ms}) "
                                  f"<= max_load_backoff_ms ({self.max_load_backoff_ms})")
        if self.give_up_expiry_ms < 1:
            raise ValidationError(f"coordinator give_up_expiry_ms must be >= 1 (how long a historical that gave up "
                                  f"on a segment is passed over for it), got {self.give_up_expiry_ms}")
        if self.replication < 0:
            raise ValidationError(f"coordinator replication must be >= 0 (0 = automatic), got {self.replication}")
        if self.max_moves < 0:
            raise ValidationError(f"coordinator max_moves must be >= 0, got {self.max_moves}")
        if self.replication_throttle_limit < 0:
            raise ValidationError(f"coordinator replication_throttle_limit must be >= 0, got "
                                  f"{self.replication_throttle_limit}")
        by_id: dict[SegmentId, DutySegment] = {}
        for desc in self.used:
            if desc.id in by_id:
                raise ValidationError(f"segment {desc.id} is listed twice among the used segments")
            if desc.size < 0:
                raise ValidationError(f"segment {desc.id} has a negative size {desc.size}")
            by_id[desc.id] = desc
        for desc in self.unused:
            if desc.id in by_id:
                raise ValidationError(
                    f"segment {desc.id} is listed as both used and unused; pass it in one list only"
                )
        set_(self, "_by_id", by_id)
        set_(self, "rules", {ds: tuple(r) for ds, r in self.rules.items()})
        set_(self, "projections", {sid: tuple(names) for sid, names in self.projections.items()})
        tier_sizes: dict[str, int] = defaultdict(int)
        for view in self.servers.values():
            tier_sizes[view.tier] += 1
        set_(self, "_tier_sizes", dict(tier_sizes))
        set_(self, "_rule_of", {})  # filled as duties ask (each duty's params start afresh)
        set_(self, "_chains", {})

    @property
    def effective_replication(self) -> int:
        """The replicas the seeded default rule wants on a cluster of these servers (before rules,
        this was the one replication factor)."""
        if self.replication > 0:
            return self.replication
        return 2 if len(self.servers) >= 2 else 1

    def tier_of(self, server: str) -> str:
        return self.servers[server].tier

    @property
    def tier_sizes(self) -> dict[str, int]:
        """tier -> historicals in it."""
        return dict(self._tier_sizes)

    def rule(self, segment: SegmentId) -> Rule | None:
        """The first rule that applies to a used segment at ``now_ms``; None if none does."""
        if segment not in self._rule_of:
            chain = self._chains.get(segment.datasource)
            if chain is None:
                chain = self._chains[segment.datasource] = rules_for(segment.datasource, self.rules,
                                                                     default_rules(self.replication))
            self._rule_of[segment] = matching_rule(chain, segment.interval, self.now_ms,
                                                   self.projections.get(segment, ()))
        return self._rule_of[segment]

    def partial(self, segment: SegmentId) -> tuple[str, ...]:
        """The projections a used segment's tiers load under a partial load rule; () for the
        whole segment (any other rule, or a partial one whose matcher selects none of them)."""
        rule = self.rule(segment)
        if isinstance(rule, PartialLoadRule):
            return rule.projections_to_load(self.projections.get(segment, ())) or ()
        return ()

    def copy_size(self, segment: SegmentId, shape: tuple[str, ...], whole: int) -> int:
        """Bytes a copy of ``segment`` in ``shape`` takes on a server (``whole``: its size)."""
        parts = self.parts.get(segment)
        return parts.copy_size(shape, whole) if shape and parts is not None else whole

    def wanted(self, segment: SegmentId) -> dict[str, int]:
        """tier -> replicas a used segment should have (no entry: none there)."""
        return {t: n for t, n in wanted_replicas(self.rule(segment), self._tier_sizes).items() if n > 0}

    def achievable(self, segment: SegmentId) -> int:
        """Replicas the under-replication gauge counts a segment against: what its rule wants,
        capped by each tier's live servers (a one-historical cluster is not always under-replicated)
        unless [coordinator] replication is set: then, as before rules, losing a historical shows."""
        wanted = self.wanted(segment)
        if self.replication > 0:
            return sum(wanted.values())
        return sum(min(n, self._tier_sizes.get(t, 0)) for t, n in wanted.items())

    def descriptor(self, segment: SegmentId) -> DutySegment | None:
        return self._by_id.get(segment)

    def exhausted(self, failure: LoadFailure) -> bool:
        """Whether the server failed the segment ``max_load_attempts`` times in a row."""
        return failure.attempts >= self.max_load_attempts

    def expired(self, failure: LoadFailure) -> bool:
        """Whether ``give_up_expiry_ms`` has passed since the failure (inclusive bound)."""
        return self.now_ms >= failure.failed_ms + self.give_up_expiry_ms

    def gave_up(self, server: str, segment: SegmentId) -> bool:
        """Whether ``server`` failed ``segment`` too often to be given it again yet."""
        failure = self.load_failures.get((server, segment))
        return failure is not None and self.exhausted(failure) and not self.expired(failure)

    def retry_due(self, failure: LoadFailure) -> bool:
        backoff = min(self.load_backoff_ms * 2 ** min(max(failure.attempts - 1, 0), 30), self.max_load_backoff_ms)
        return self.now_ms >= failure.failed_ms + backoff

    def retry_sent(self, server: str, segment: SegmentId, failure: LoadFailure) -> bool:
        """Whether a RetryLoad already answered this very report, recently enough to wait for
        its outcome."""
        sent = self.retries_sent.get((server, segment))
        return (sent is not None and sent.failed_ms == failure.failed_ms
                and self.now_ms < sent.sent_ms + self.max_load_backoff_ms)

    def with_commands(self, commands: Iterable[Command]) -> DutyParams:
        return replace(self, commands=self.commands + tuple(commands))


class _Cluster:
    """The snapshot with this run's commands applied, indexed both ways (server -> segments,
    segment -> servers). Built afresh by each duty from the params alone."""

    def __init__(self, params: DutyParams) -> None:
        self.sizes = {d.id: d.size for d in params.unused}
        self.sizes.update({d.id: d.size for d in params.used})
        self.max_bytes = {s: v.max_bytes for s, v in params.servers.items()}
        self.holds: dict[str, set[SegmentId]] = {}
        self.loaded: dict[str, set[SegmentId]] = {}
        self.committed: dict[str, int] = {}  # loaded + loading + loads issued: for capacity
        self.held_bytes: dict[str, int] = {}  # the same less drops issued: for balance
        self.holders: dict[SegmentId, set[str]] = defaultdict(set)
        self.loaded_by: dict[SegmentId, set[str]] = defaultdict(set)
        self.marked_unused: set[SegmentId] = set()
        self.shape: dict[str, dict[SegmentId, tuple[str, ...]]] = {}  # assigned shapes (see ServerView)
        self.served_shape: dict[str, dict[SegmentId, tuple[str, ...]]] = {}
        self._params = params
        for server, view in params.servers.items():
            held = set(view.loaded) | set(view.loading)
            self.holds[server] = held
            self.loaded[server] = set(view.loaded)
            self.shape[server] = {s: tuple(view.shapes.get(s, ())) for s in held}
            self.served_shape[server] = {s: tuple(view.served_shapes.get(s, ())) for s in view.loaded}
            self.held_bytes[server] = sum(self.size_on(server, s) for s in held)
            # A copy being reloaded in another shape holds its old bytes too until the swap.
            self.committed[server] = self.held_bytes[server] + sum(
                self.copy_size(s, old) for s, old in self.served_shape[server].items() if old != self.shape[server][s])
            for seg in held:
                self.holders[seg].add(server)
            for seg in view.loaded:
                self.loaded_by[seg].add(server)
        for command in params.commands:
            self.apply(command)

    def apply(self, command: Command) -> None:
        if isinstance(command, MarkUnused):
            self.marked_unused.add(command.segment)
            return
        if isinstance(command, (Noop, RetryLoad, ForgetLoadFailure, Unmatched)):
            return
        server, seg = command.server, command.segment
        if server not in self.holds:
            raise ValidationError(f"command {command} names server '{server}', which is not in the snapshot")
        if isinstance(command, Load):
            shape = tuple(command.projections)
            if seg not in self.holds[server]:
                self.holds[server].add(seg)
                self.holders[seg].add(server)
                self.shape[server][seg] = shape
                self.committed[server] += self.size_on(server, seg)
                self.held_bytes[server] += self.size_on(server, seg)
            elif self.shape[server][seg] != shape:
                # A reload: the new shape's bytes come while the old copy still serves.
                self.held_bytes[server] -= self.size_on(server, seg)
                self.shape[server][seg] = shape
                self.committed[server] += self.size_on(server, seg)
                self.held_bytes[server] += self.size_on(server, seg)
        else:
            # Capacity stays committed until the server reports the drop done (see module doc).
            if seg in self.holds[server]:
                self.held_bytes[server] -= self.size_on(server, seg)
                self.shape[server].pop(seg, None)
            self.holds[server].discard(seg)
            self.loaded[server].discard(seg)
            self.holders[seg].discard(server)
            self.loaded_by[seg].discard(server)

    def free(self, server: str) -> int:
        return self.max_bytes[server] - self.committed[server]

    def copy_size(self, seg: SegmentId, shape: tuple[str, ...]) -> int:
        return self._params.copy_size(seg, shape, self.sizes.get(seg, 0))

    def size_on(self, server: str, seg: SegmentId) -> int:
        """Bytes the copy ``server`` holds (or is getting) of ``seg`` takes, by its shape."""
        return self.copy_size(seg, self.shape[server].get(seg, ()))

    def reloading(self, server: str, seg: SegmentId) -> bool:
        """Whether ``server`` serves ``seg`` in a shape other than the one it is assigned."""
        served = self.served_shape[server].get(seg)
        return served is not None and seg in self.loaded[server] and served != self.shape[server].get(seg, ())

    def drop_order(self, seg: SegmentId, among: Iterable[str]) -> list[str]:
        """Holders of ``seg`` best dropped first: those where a copy of this size weighs most
        on sum(bytes^2 / capacity), the measure Balance lowers. Using the same measure here
        is what makes a finished move drop the source's copy and not the target's."""
        def weight(server: str) -> tuple:
            size = self.size_on(server, seg)
            cap = self.max_bytes[server]
            # A server without capacity should hold nothing: drop there first.
            gain = Fraction(2 * self.held_bytes[server] - size, cap) if cap > 0 else None
            return (gain is not None, -(gain or 0), server)

        return sorted(among, key=weight)

    def is_loading(self, seg: SegmentId) -> bool:
        return len(self.holders[seg]) > len(self.loaded_by[seg])

    def throttle(self) -> ReplicationThrottle:
        """Per tier, copies of segments served elsewhere that are loading, or reloading in place."""
        in_flight: dict[str, int] = defaultdict(int)
        for server, held in self.holds.items():
            tier = self._params.tier_of(server)
            in_flight[tier] += sum(1 for seg in held if self.reloading(server, seg)
                                   or (seg not in self.loaded[server] and self.loaded_by[seg]))
        return ReplicationThrottle(self._params.replication_throttle_limit, in_flight)


def _timelines(descriptors: Iterable[DutySegment]) -> dict[str, Timeline]:
    out: dict[str, Timeline] = {}
    for d in descriptors:
        tl = out.get(d.id.datasource)
        if tl is None:
            tl = out[d.id.datasource] = Timeline(d.id.datasource)
        tl.add(TimelineSegment(d.id, d.num_partitions))
    return out


def _overshadowed(descriptors: Iterable[DutySegment]) -> set[SegmentId]:
    out: set[SegmentId] = set()
    for tl in _timelines(descriptors).values():
        out |= tl.overshadowed()
    return out


def _live(params: DutyParams, cluster: _Cluster) -> list[DutySegment]:
    """Used segments worth serving: not marked unused this run, not overshadowed in the full
    used timeline (a newer complete version exists, loaded or not)."""
    candidates = [d for d in params.used if d.id not in cluster.marked_unused]
    hidden = _overshadowed(candidates)
    return [d for d in candidates if d.id not in hidden]


class MarkOvershadowed:
    """Segments hidden by newer complete sets that are *served* become unused and are dropped
    everywhere. As in Druid, only served segments overshadow: dropping the old version before
    the new one is loaded would leave a hole in query results."""

    def run(self, params: DutyParams) -> DutyParams:
        cluster = _Cluster(params)
        served = _timelines(d for d in params.used if cluster.loaded_by[d.id])
        commands: list[Command] = []
        for desc in sorted(params.used, key=lambda d: d.id):
            tl = served.get(desc.id.datasource)
            if desc.id in cluster.marked_unused or tl is None or not tl.is_overshadowed(desc.id):
                continue
            commands.append(MarkUnused(desc.id))
            commands.extend(Drop(server, desc.id) for server in sorted(cluster.holders[desc.id]))
        return params.with_commands(commands)


class RetryFailedLoads:
    """Failed loads of live segments still assigned to the server that failed them: retried
    there once the backoff has passed; after ``max_load_attempts`` unassigned there (Assign
    then places the segment on another server) when some other server can take it, else
    retried at the longest backoff. The record of a segment a server no longer holds (it gave
    up and the segment moved, or the segment is no longer used) is forgotten once it expires;
    a server missing from the snapshot is skipped (its records go with its lease)."""

    def run(self, params: DutyParams) -> DutyParams:
        cluster = _Cluster(params)
        live = {d.id: d for d in _live(params, cluster)}
        commands: list[Command] = []
        for (server, seg), failure in sorted(params.load_failures.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            if server not in cluster.holds:
                continue  # gone from the snapshot (died): nothing to send it
            if seg not in cluster.holds[server]:
                if params.expired(failure):  # before Assign runs, which may now pick this server
                    commands.append(ForgetLoadFailure(server, seg))
                continue
            desc = live.get(seg)
            if desc is None:
                continue  # not wanted: its drop is DropUnneeded's
            if seg in cluster.loaded[server]:
                # Loaded after all; or a reload into another shape failed while the old copy
                # still serves: retried there after the backoff, never moved (that would drop
                # a serving copy).
                if (cluster.reloading(server, seg) and params.retry_due(failure)
                        and not params.retry_sent(server, seg, failure)):
                    commands.append(RetryLoad(server, seg))
                continue
            # An exhausted record older than the expiry (the leader was away, or the expiry is
            # shorter than a run) earns one more try here rather than a move: moving it now
            # would leave this server a candidate again at once, and Assign could put it back.
            if params.gave_up(server, seg):
                elsewhere = [s for s in cluster.holds if s != server and seg not in cluster.holds[s]
                             and params.tier_of(s) == params.tier_of(server)
                             and not params.gave_up(s, seg)
                             and cluster.free(s) >= params.copy_size(seg, params.partial(seg), desc.size)]
                if elsewhere:
                    command = Drop(server, seg)
                    cluster.apply(command)
                    commands.append(command)
                    continue
            if params.retry_due(failure) and not params.retry_sent(server, seg, failure):
                commands.append(RetryLoad(server, seg))
        return params.with_commands(commands)


class RunRules:
    """Retention rules (see ``rules.py``): a live segment whose first matching rule is a drop
    rule becomes unused and leaves every server; it stays in deep storage and in the metadata
    store (unused) until a kill deletes it. Segments no rule applies to are left as they are
    and reported, one Unmatched per datasource, for the edge to alert on. Load and broadcast
    rules are carried out by Assign, DropUnneeded and Balance through ``params.wanted``."""

    def run(self, params: DutyParams) -> DutyParams:
        cluster = _Cluster(params)
        commands: list[Command] = []
        unmatched: dict[str, int] = defaultdict(int)
        for desc in sorted(_live(params, cluster), key=lambda d: d.id):
            rule = params.rule(desc.id)
            if rule is None:
                unmatched[desc.id.datasource] += 1
            elif rule.action == "drop":
                commands.append(MarkUnused(desc.id))
                commands.extend(Drop(server, desc.id) for server in sorted(cluster.holders[desc.id]))
        commands.extend(Unmatched(ds, n) for ds, n in sorted(unmatched.items()))
        return params.with_commands(commands)


def _in_tier(params: DutyParams, servers: Iterable[str], tier: str) -> set[str]:
    return {s for s in servers if params.tier_of(s) == tier}


class Reshape:
    """Copies in a shape their rule no longer wants (the rule changed whole to partial, partial
    to whole, or to other projections) are loaded again in the wanted shape where they are. The
    server keeps serving the old copy until the new one is in and then swaps them, so the copy
    keeps counting as its tier's replica throughout; it needs room for both meanwhile, else it
    waits for a later run. Copies in tiers the rule does not want are left to DropUnneeded."""

    def run(self, params: DutyParams) -> DutyParams:
        cluster = _Cluster(params)
        throttle = cluster.throttle()
        commands: list[Command] = []
        for desc in sorted(_live(params, cluster), key=lambda d: d.id):
            rule = params.rule(desc.id)
            if rule is None or rule.action == "drop":
                continue
            shape = params.partial(desc.id)
            tiers = params.wanted(desc.id)
            for server in sorted(cluster.holders[desc.id]):
                if params.tier_of(server) not in tiers or cluster.shape[server].get(desc.id, ()) == shape:
                    continue
                if cluster.free(server) < params.copy_size(desc.id, shape, desc.size):
                    continue  # no room for both copies yet
                if desc.id in cluster.loaded[server] and not throttle.take(params.tier_of(server)):
                    continue  # the tier reloads enough at once: a later run
                command = Load(server, desc.id, shape)
                cluster.apply(command)
                commands.append(command)
        return params.with_commands(commands)


class Assign:
    """Unassigned and under-replicated segments go, tier by tier as their rule wants, to the
    servers of that tier with the most free bytes that do not already hold them (nor gave up on
    them), newest intervals first, never past ``max_bytes``."""

    def run(self, params: DutyParams) -> DutyParams:
        cluster = _Cluster(params)
        throttle = cluster.throttle()
        commands: list[Command] = []
        newest_first = sorted(_live(params, cluster), key=lambda d: (-d.id.interval.end, -d.id.interval.start, d.id))
        for desc in newest_first:
            size = params.copy_size(desc.id, params.partial(desc.id), desc.size)
            for tier, want in sorted(params.wanted(desc.id).items()):
                for _ in range(want - len(_in_tier(params, cluster.holders[desc.id], tier))):
                    targets = [s for s in cluster.holds
                               if params.tier_of(s) == tier and desc.id not in cluster.holds[s]
                               and cluster.free(s) >= size and not params.gave_up(s, desc.id)]
                    if not targets:
                        break  # no room in the tier: retried next run, after drops free space
                    if cluster.loaded_by[desc.id] and not throttle.take(tier):
                        break  # served elsewhere, and the tier loads enough such copies: a later run
                    target = min(targets, key=lambda s: (-cluster.free(s), s))
                    command = Load(target, desc.id, params.partial(desc.id))
                    cluster.apply(command)
                    commands.append(command)
        return params.with_commands(commands)


class DropUnneeded:
    """Drops what no one needs: segments that are unused or unknown, loaded replicas beyond what
    the rule wants in a tier (taken off the holders that are fullest for their size), and copies
    in tiers the rule does not want; those only once every wanted tier serves all it can, so a
    segment moving from a hot tier to a cold one stays queryable (and never while a wanted tier
    has no servers at all). Segments no rule applies to
    are left alone."""

    def run(self, params: DutyParams) -> DutyParams:
        cluster = _Cluster(params)
        wanted = {d.id for d in params.used} - cluster.marked_unused
        commands: list[Command] = []
        for server in sorted(cluster.holds):
            for seg in sorted(cluster.holds[server]):
                if seg not in wanted:
                    commands.append(Drop(server, seg))
        for command in commands:
            cluster.apply(command)
        sizes = params.tier_sizes
        for seg in sorted(wanted):
            if params.rule(seg) is None:
                continue
            want = params.wanted(seg)
            drops: list[str] = []
            # A wanted tier with no servers (unknown, or all down) can never be ready: the copies
            # elsewhere stay, rather than leave the segment unavailable for nothing.
            ready = all(sizes.get(t, 0) > 0 and len(_in_tier(params, cluster.loaded_by[seg], t)) >= min(n, sizes[t])
                        for t, n in want.items())
            if ready:
                drops.extend(sorted(s for s in cluster.holders[seg] if params.tier_of(s) not in want))
            for tier, n in sorted(want.items()):
                loaded = _in_tier(params, cluster.loaded_by[seg], tier)
                if len(loaded) > n:
                    drops.extend(cluster.drop_order(seg, loaded)[:len(loaded) - n])
            for server in drops:
                command = Drop(server, seg)
                cluster.apply(command)
                commands.append(command)
        return params.with_commands(commands)


class Balance:
    """Within each tier, moves segments from the fullest server (by fraction of capacity) to the
    emptiest, at most ``max_moves`` in flight over all tiers. A move is made only if it lowers
    sum(bytes^2 / capacity) over the tier's servers (with equal capacities: only if target +
    size < source), so no move can undo an earlier one and balancing settles instead of sending
    segments back and forth."""

    def run(self, params: DutyParams) -> DutyParams:
        cluster = _Cluster(params)
        live = {d.id: d for d in _live(params, cluster)}
        wants = {seg: params.wanted(seg) for seg in live}

        def counts(seg: SegmentId, tier: str) -> tuple[int, int]:
            return (len(_in_tier(params, cluster.holders[seg], tier)),
                    len(_in_tier(params, cluster.loaded_by[seg], tier)))

        # A live segment still loading in a tier where it is fully replicated is a move under way.
        in_flight = 0
        for seg, want in wants.items():
            for tier, n in want.items():
                held, loaded = counts(seg, tier)
                in_flight += held > loaded and loaded >= n
        budget = params.max_moves - in_flight
        commands: list[Command] = []
        for tier in sorted({params.tier_of(s) for s in cluster.holds}):
            servers = sorted(s for s in cluster.holds if params.tier_of(s) == tier and cluster.max_bytes[s] > 0)
            # Balance on what each server will hold once pending drops and moves are done (a
            # move under way will cost a copy to the holder DropUnneeded is going to pick);
            # capacity checks still use committed bytes, since a source keeps its copy until
            # the target has loaded it.
            projected = {s: cluster.held_bytes[s] for s in servers}
            for seg in sorted(live):
                n = wants[seg].get(tier, 0)
                held, loaded = counts(seg, tier)
                if n and held > n and loaded >= n:
                    for loser in cluster.drop_order(seg, _in_tier(params, cluster.loaded_by[seg], tier))[:held - n]:
                        if loser in projected:
                            projected[loser] -= cluster.size_on(loser, seg)
            while budget > 0 and len(servers) >= 2:
                share = {s: Fraction(projected[s], cluster.max_bytes[s]) for s in servers}
                source = min(servers, key=lambda s: (-share[s], s))
                target = min(servers, key=lambda s: (share[s], s))
                desc = self._pick(cluster, live, wants, tier, source, target, projected, params)
                if desc is None:
                    break
                command = Load(target, desc.id, params.partial(desc.id))
                size = cluster.size_on(source, desc.id)
                cluster.apply(command)
                commands.append(command)
                projected[target] += cluster.size_on(target, desc.id)
                projected[source] -= size
                budget -= 1
        return params.with_commands(commands)

    @staticmethod
    def _pick(cluster: _Cluster, live: Mapping[SegmentId, DutySegment], wants: Mapping[SegmentId, dict[str, int]],
              tier: str, source: str, target: str, projected: Mapping[str, int],
              params: DutyParams) -> DutySegment | None:
        src_cap, dst_cap = cluster.max_bytes[source], cluster.max_bytes[target]
        best: tuple[int, DutySegment] | None = None
        for seg in cluster.loaded[source]:
            desc = live.get(seg)
            if desc is None:
                continue
            want = wants[seg].get(tier, 0)
            # Only a copy of the wanted shape moves (Reshape reloads the others in place first);
            # its size is that shape's.
            shape = params.partial(seg)
            size = params.copy_size(seg, shape, desc.size)
            if (want == 0 or size <= 0 or seg in cluster.holds[target] or cluster.is_loading(seg)
                    or cluster.shape[source].get(seg, ()) != shape or cluster.reloading(source, seg)
                    or len(_in_tier(params, cluster.loaded_by[seg], tier)) < want
                    or size > cluster.free(target) or params.gave_up(target, seg)):
                continue
            # Moving s bytes from u to t changes sum(b^2/cap) by s(2t+s)/dst_cap - s(2u-s)/src_cap.
            if (2 * projected[target] + size) * src_cap >= (2 * projected[source] - size) * dst_cap:
                continue
            if best is None or (-size, seg) < (-best[0], best[1].id):
                best = (size, desc)
        return None if best is None else best[1]


DUTIES = (MarkOvershadowed(), RunRules(), RetryFailedLoads(), Reshape(), Assign(), DropUnneeded(), Balance())


def run_duties(params: DutyParams, duties=DUTIES) -> list[Command]:
    """Runs the pipeline; ``[Noop()]`` when no duty found anything to do."""
    for duty in duties:
        params = duty.run(params)
    return list(params.commands) or [Noop()]
