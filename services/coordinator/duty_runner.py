"""DutyRunner: the I/O shell around the pure duties.

Each run snapshots the metadata store (used segments) and discovery (historicals, what they
serve, what they are assigned, which loads failed), runs the duties, and applies the commands: a
Load puts an assignment key, a RetryLoad puts it again (the historical sees a new assignment), a
Drop deletes it, an Unmatched (segments no retention rule applies to) logs a warning and sets
the ``strata_segments_unmatched`` gauge an alert watches, a ForgetLoadFailure deletes the historical's failure record (the historical
watches its records and forgets the attempt count with it), MarkUnused updates the store. The
clock of the pure duties is the ``now_ms`` each run passes in. Served segments without an
assignment key (after a coordinator restart with a fresh embedded store) are adopted by
writing their key, so a historical never loses a segment the duties want kept.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from common.errors import StrataError
from common.segment.descriptor import SegmentDescriptor
from common.segment.manifest import SegmentManifest
from common.segment.segment_id import SegmentId
from services.coordinator.core.duties import (DEFAULT_GIVE_UP_EXPIRY_MS, Drop, DutyParams, ForgetLoadFailure, Load,
                                              LoadFailure, MarkUnused, RetryLoad, RetrySent, SegmentEntry, ServerView,
                                              Unmatched, run_duties)
from services.coordinator.core.replication_throttle import DEFAULT_REPLICATION_THROTTLE_LIMIT
from services.coordinator.core.rules import DEFAULT_TIER, PartialLoadRule
from services.coordinator.core.segment_parts import SegmentParts
from services.coordinator.core.replication_status import replication_status
from services.coordinator.segment_metrics import SegmentMetrics
from services.discovery.keys import (assignment_key, assignments_prefix, load_failure_key, load_failures_prefix,
                                     nodes_prefix, parse_assignment_key, parse_load_failure_key, parse_node_key,
                                     parse_served_key, served_prefix)
from services.discovery.load_failure import LoadFailureReport

log = logging.getLogger("strata.coordinator")


class ClusterState:
    """What discovery says right now: historicals, served and assigned segments per server, and
    the loads that failed."""

    def __init__(self, discovery) -> None:
        self.historicals: dict[str, dict] = {}
        for key, value in discovery.get_prefix(nodes_prefix("historical")).items():
            self.historicals[parse_node_key(key).node_id] = json.loads(value)
        self.served: dict[str, dict[SegmentId, SegmentDescriptor]] = defaultdict(dict)
        # server -> segment -> the projections of a partial copy, as announced / as assigned
        # (a segment missing is whole; they differ while the historical reloads it in a new shape)
        self.served_shapes: dict[str, dict[SegmentId, tuple[str, ...]]] = defaultdict(dict)
        self.assigned_shapes: dict[str, dict[SegmentId, tuple[str, ...]]] = defaultdict(dict)
        for key, value in discovery.get_prefix(served_prefix()).items():
            server = parse_served_key(key).server
            obj = json.loads(value)
            d = SegmentDescriptor.from_json(obj)
            self.served[server][d.id] = d
            if shape := load_projections(obj):
                self.served_shapes[server][d.id] = shape
        self.assigned: dict[str, dict[SegmentId, str]] = defaultdict(dict)
        for key, value in discovery.get_prefix(assignments_prefix()).items():
            server = parse_assignment_key(key).server
            obj = json.loads(value)
            sid = SegmentDescriptor.from_json(obj).id
            self.assigned[server][sid] = key
            if shape := load_projections(obj):
                self.assigned_shapes[server][sid] = shape
        self.load_failures: dict[tuple[str, SegmentId], LoadFailure] = {}
        for key, value in discovery.get_prefix(load_failures_prefix()).items():
            try:
                report = LoadFailureReport.from_bytes(value)
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring a malformed load-failure report under %s", key)
                continue
            self.load_failures[(parse_load_failure_key(key).server, report.segment)] = LoadFailure(
                report.attempts, report.failed_ms, report.reason)


def load_projections(obj: dict) -> tuple[str, ...]:
    """The projections an assignment or announcement names (a partial copy's), () for whole."""
    names = obj.get("loadProjections")
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return tuple(sorted(names))
    return ()


class DutyRunner:
    def __init__(self, store, discovery, metrics, replication: int = 0, period_ms: int = 1000,
                 give_up_expiry_ms: int = DEFAULT_GIVE_UP_EXPIRY_MS, rules=None,
                 replication_throttle_limit: int = DEFAULT_REPLICATION_THROTTLE_LIMIT) -> None:
        self.store = store
        self.rules = rules  # a RuleStore; None: no stored rules (the seeded default only)
        self.discovery = discovery
        self.metrics = metrics
        self.replication = replication
        self.give_up_expiry_ms = give_up_expiry_ms
        self.replication_throttle_limit = replication_throttle_limit
        # The RetryLoads sent, so a report is answered once (see RetrySent); only the leader's
        # loop thread touches it, and a new leader starting empty sends at most one more each.
        self._retries_sent: dict[tuple[str, SegmentId], RetrySent] = {}
        # segment -> its projection names and their parts' sizes
        self._projections: dict[SegmentId, tuple[tuple[str, ...], SegmentParts | None]] = {}
        self.period_s = period_ms / 1000
        self._stop = threading.Event()
        # Set by wake(): run the next pass now instead of at the end of the period.
        self._wake = threading.Event()
        self._leader = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="strata-duties", daemon=True)
        self.last_run_ms = 0
        # More duties the leader runs after the segment duties (each a callable; auto-compaction).
        self.extra_duties: list = []
        self._gauge_datasources: set[str] = set()
        self._unmatched_datasources: set[str] = set()
        self._gauge_roles: set[str] = set()
        self.segment_metrics = SegmentMetrics(metrics)  # per tier and deep storage
        self._gauge_lock = threading.Lock()  # leadership changes arrive on the election's thread
        # () -> bool: whether leadership still holds right now (the election's lease is fresh);
        # checked before each run, so a leader resumed after a pause past its TTL runs nothing.
        self.leadership_fresh = lambda: True

    def set_leader(self, is_leader: bool) -> None:
        (self._leader.set if is_leader else self._leader.clear)()
        if is_leader:
            self.wake()  # a new leader assigns what waits now, not a period later
        else:
            self._retries_sent = {}  # another leader may answer the reports meanwhile
            with self._gauge_lock:
                self._clear_cluster_gauges()  # a follower's numbers would go stale beside the new leader's

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

    def start(self) -> DutyRunner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def wake(self) -> None:
        """Run a pass now rather than at the end of the period: a publish calls it, so new
        segments are assigned (and the historicals start loading them) at once instead of up to a
        whole period later. Wakes during a pass coalesce into one more pass right after it."""
        self._wake.set()

    def _loop(self) -> None:
        extras_due = 0.0  # monotonic time the extra duties run next: once a period, wakes or not
        while not self._stop.is_set():
            self._wake.clear()  # what this pass sees; a wake from here on asks for one more
            if self._leader.is_set() and self.leadership_fresh():
                try:
                    self.run_once()
                except Exception:  # a failed run must not stop later runs
                    log.exception("coordinator duties failed")
                if time.monotonic() >= extras_due:
                    extras_due = time.monotonic() + self.period_s
                    for duty in self.extra_duties:
                        try:
                            duty()
                        except Exception:
                            log.exception("coordinator duty %s failed", getattr(duty, "__qualname__", duty))
            self._wake.wait(self.period_s)

    def snapshot(self, used: dict | None = None, state: ClusterState | None = None) -> DutyParams:
        """The duties' input now: used segments, servers (with their tiers), stored rules."""
        if used is None:
            used = {r.id: r.descriptor() for r in self.store.used_segments()}
        state = state if state is not None else ClusterState(self.discovery)
        servers = {}
        unused: dict[SegmentId, SegmentEntry] = {}
        for server, info in state.historicals.items():
            loaded = frozenset(state.served.get(server, {}))
            loading = frozenset(s for s in state.assigned.get(server, {}) if s not in loaded)
            served_shapes = state.served_shapes.get(server, {})
            assigned = state.assigned_shapes.get(server, {})
            # A served copy without an assignment key (adopted after a restart) is of its served shape.
            shapes = {s: assigned.get(s, ()) if s in state.assigned.get(server, {}) else served_shapes.get(s, ())
                      for s in loaded | loading}
            servers[server] = ServerView(int(info.get("max_cache_bytes", 0)), loaded, loading,
                                         str(info.get("tier") or DEFAULT_TIER),
                                         {s: v for s, v in shapes.items() if v},
                                         served_shapes)
            for sid, d in state.served.get(server, {}).items():
                if sid not in used:
                    unused[sid] = SegmentEntry(sid, d.size, d.num_partitions)
        return DutyParams(used=tuple(SegmentEntry(d.id, d.size, d.num_partitions) for d in used.values()),
                          servers=servers, unused=tuple(unused.values()), now_ms=int(time.time() * 1000),
                          replication=self.replication, load_failures=state.load_failures,
                          give_up_expiry_ms=self.give_up_expiry_ms, retries_sent=self._retries_sent,
                          replication_throttle_limit=self.replication_throttle_limit,
                          rules=self.rules.stored() if self.rules is not None else {},
                          projections={sid: self._projections_of(d)[0] for sid, d in used.items()},
                          parts={sid: parts for sid, d in used.items() if (parts := self._projections_of(d)[1])})

    def _projections_of(self, descriptor) -> tuple[tuple[str, ...], SegmentParts | None]:
        """A segment's projection names and its parts' sizes, from its manifest (parsed once: a
        segment id names one immutable manifest)."""
        known = self._projections.get(descriptor.id)
        if known is None:
            names: tuple[str, ...] = ()
            parts = None
            try:
                manifest = json.loads(descriptor.manifest_json or "{}")
                names = tuple(str(p["name"]) for p in manifest.get("projections", ()) if p.get("name"))
                if names:
                    parts = SegmentParts.from_manifest(SegmentManifest.from_json(manifest, str(descriptor.id)),
                                                       descriptor.size)
            except (ValueError, TypeError, AttributeError, KeyError, StrataError):
                pass  # unreadable: no projections to select, or a partial copy reserves the whole size
            if len(self._projections) >= 200_000:
                self._projections.clear()
            known = self._projections[descriptor.id] = (names, parts)
        return known

    def _assignment(self, descriptor, params: DutyParams, names: tuple[str, ...]) -> bytes:
        """The assignment's value: the descriptor, plus the projections to serve (``names``) and
        the rule that wants them when it is a partial copy."""
        if not names:
            return descriptor.to_bytes()
        rule = params.rule(descriptor.id)
        named = f"{rule.kind} {json.dumps(rule.matcher.to_json(), separators=(',', ':'))} of datasource " \
                f"'{descriptor.id.datasource}'" if isinstance(rule, PartialLoadRule) else \
                f"a partial load rule of datasource '{descriptor.id.datasource}'"
        return json.dumps({**descriptor.to_json(), "loadProjections": list(names), "loadRule": named},
                          separators=(",", ":")).encode()

    def run_once(self) -> list:
        started = time.perf_counter()
        used = {r.id: r.descriptor() for r in self.store.used_segments()}
        self.metrics.used_segments.set(len(used))
        state = ClusterState(self.discovery)
        self._retries_sent = {k: v for k, v in self._retries_sent.items() if k in state.load_failures}
        params = self.snapshot(used, state)
        with self._gauge_lock:
            self._set_cluster_gauges(state, used, params.achievable)
        commands = run_duties(params)
        self._report_unmatched([c for c in commands if isinstance(c, Unmatched)])
        with self._gauge_lock:
            self.segment_metrics.observe(state.served, {s: params.tier_of(s) for s in params.servers}, commands)
            self.segment_metrics.observe_store(self.store.usage())
        dropped: set[tuple[str, SegmentId]] = set()
        for command in commands:
            if isinstance(command, Load):
                d = used[command.segment]
                self.discovery.put(assignment_key(command.server, d.id),
                                   self._assignment(d, params, command.projections))
                dropped.add((command.server, command.segment))  # assigned anew: not for _adopt to overwrite
                self.metrics.coordinator_commands.labels("load").inc()
            elif isinstance(command, RetryLoad):
                failure = state.load_failures.get((command.server, command.segment))
                log.info("retrying the load of %s on %s (failed %d times: %s)", command.segment, command.server,
                         failure.attempts if failure else 0, failure.reason if failure else "")
                self.discovery.put(assignment_key(command.server, command.segment),
                                   self._assignment(used[command.segment], params, params.partial(command.segment)))
                if failure is not None:
                    self._retries_sent[(command.server, command.segment)] = RetrySent(failure.failed_ms, params.now_ms)
                self.metrics.coordinator_commands.labels("retry_load").inc()
            elif isinstance(command, ForgetLoadFailure):
                failure = state.load_failures.get((command.server, command.segment))
                log.info("forgetting that %s failed to load %s (%d times, last: %s): it may be assigned there again",
                         command.server, command.segment, failure.attempts if failure else 0,
                         failure.reason if failure else "")
                self.discovery.delete(load_failure_key(command.server, command.segment))
                self.metrics.coordinator_commands.labels("forget_load_failure").inc()
            elif isinstance(command, Drop):
                dropped.add((command.server, command.segment))
                self._drop(state, command.server, command.segment)
                self.metrics.coordinator_commands.labels("drop").inc()
            elif isinstance(command, MarkUnused):
                self.store.mark_unused([command.segment])
                self.metrics.coordinator_commands.labels("mark_unused").inc()
        self._adopt(state, used, dropped, params)
        self.metrics.duty_seconds.observe(time.perf_counter() - started)
        self.last_run_ms = int(time.time() * 1000)
        return commands

    def _report_unmatched(self, unmatched: list[Unmatched]) -> None:
        """The alert for segments no rule applies to: a warning naming datasource and count,
        and a gauge per datasource (removed once every segment matches again)."""
        for u in unmatched:
            log.warning("%d used segments of datasource '%s' match no retention rule (nor the _default rules): "
                        "they are left as they are; add a rule that covers them (e.g. loadForever or dropForever "
                        "last) via POST /druid/coordinator/v1/rules/%s", u.count, u.datasource, u.datasource)
            self.metrics.segments_unmatched.labels(u.datasource).set(u.count)
        now = {u.datasource for u in unmatched}
        for ds in self._unmatched_datasources - now:
            self.metrics.segments_unmatched.remove(ds)
        self._unmatched_datasources = now

    def _set_cluster_gauges(self, state: ClusterState, used: dict, wanted) -> None:
        """Nodes by role and per-datasource replication, from this run's snapshot."""
        roles: dict[str, int] = defaultdict(int)
        for key in self.discovery.get_prefix(nodes_prefix()):
            roles[parse_node_key(key).role] += 1
        roles.setdefault("historical", 0)  # zero historicals is the state an alert must see
        for role in self._gauge_roles - set(roles):
            self.metrics.servers.remove(role)
        for role, n in roles.items():
            self.metrics.servers.labels(role).set(n)
        self._gauge_roles = set(roles)
        status = replication_status(used, {s: served.keys() for s, served in state.served.items()}, wanted)
        for ds in self._gauge_datasources - set(status):
            self.metrics.segments_unavailable.remove(ds)
            self.metrics.segments_under_replicated.remove(ds)
        for ds, st in status.items():
            self.metrics.segments_unavailable.labels(ds).set(st.unavailable)
            self.metrics.segments_under_replicated.labels(ds).set(st.under_replicated)
        self._gauge_datasources = set(status)

    def _clear_cluster_gauges(self) -> None:
        for role in self._gauge_roles:
            self.metrics.servers.remove(role)
        for ds in self._gauge_datasources:
            self.metrics.segments_unavailable.remove(ds)
            self.metrics.segments_under_replicated.remove(ds)
        for ds in self._unmatched_datasources:
            self.metrics.segments_unmatched.remove(ds)
        self._gauge_roles, self._gauge_datasources, self._unmatched_datasources = set(), set(), set()
        self.segment_metrics.clear()

    def _drop(self, state: ClusterState, server: str, sid: SegmentId) -> None:
        key = state.assigned.get(server, {}).get(sid)
        if key is None:
            # Served without an assignment (adopted state lost): assign then unassign so the
            # historical sees a delete and drops it.
            d = state.served[server][sid]
            key = assignment_key(server, d.id)
            self.discovery.put(key, d.to_bytes())
        self.discovery.delete(key)

    def _adopt(self, state: ClusterState, used: dict, dropped: set, params: DutyParams) -> None:
        for server, served in state.served.items():
            for sid, d in served.items():
                if sid in used and sid not in state.assigned.get(server, {}) and (server, sid) not in dropped:
                    log.info("adopting %s on %s", d.id, server)
                    # In the shape it serves: the next run's Reshape changes it if the rule wants another.
                    self.discovery.put(assignment_key(server, sid),
                                       self._assignment(used[sid], params, state.served_shapes[server].get(sid, ())))
