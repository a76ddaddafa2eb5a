"""ServedView: which segments are queryable and where, as the broker sees it.

Built from historicals' served-segment announcements. Per datasource it keeps a Timeline of the
served segments (so a newer version hides older ones and incomplete partition sets are not
used) and each segment's replicas. ``plan`` picks, for a query's intervals, the visible segments
and one replica each, spreading segments over replicas (or gathering them on as few as hold them)
and skipping replicas that failed. It also knows which copies are partial loads (a partial load
rule's projections only), which a query may use only when those projections answer it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from common.errors import ValidationError
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from common.segment.timeline import Timeline, TimelineSegment
from common.types.column_type import ColumnType
from common.types.interval import Interval
from services.broker.core.schema_merge import DEFAULT_POLICY, MergedSchema, merge_schemas

# Plans are remembered per turn for rotations repeating at most this often (replica counts of 1-4
# give at most 12).
_MAX_PERIOD = 64


@dataclass
class Plan:
    by_server: dict[str, list[SegmentId]] = field(default_factory=dict)
    unavailable: list[SegmentId] = field(default_factory=list)
    coverage: tuple[int, int] | None = None

    @property
    def segments(self) -> list[SegmentId]:
        return [s for segs in self.by_server.values() for s in segs]


def context_tiers(context: dict | None) -> tuple[str, ...]:
    """The tiers a query's ``brokerTier`` context prefers: a tier name, a comma-separated list,
    or a JSON list of names; none: the broker's own preference alone."""
    value = (context or {}).get("brokerTier")
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        names = value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = value
    else:
        raise ValidationError(f"query context 'brokerTier' must be a tier name or a list of tier names "
                              f"(e.g. \"hot\" or [\"hot\", \"cold\"]), got {value!r:.80}")
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))


class ServedView:
    def __init__(self) -> None:
        self.replicas: dict[SegmentId, set[str]] = defaultdict(set)
        # Copies loaded by a partial load rule: segment -> server -> (its projections, the rule's type).
        self.partial: dict[SegmentId, dict[str, tuple[tuple[str, ...], str]]] = {}
        self.descriptors: dict[SegmentId, SegmentDescriptor] = {}
        self._timelines: dict[str, Timeline] = {}
        self._schemas: dict[tuple[str, str], MergedSchema] = {}
        # (datasource, query intervals) -> the visible segments over them and the span they cover.
        self._lookups: dict[tuple[str, tuple[Interval, ...]], tuple[tuple[SegmentId, ...], tuple[int, int] | None]] = {}
        # Plans without exclusions by (datasource, intervals): the period of the segments' replica
        # rotations, and the plans by (spread, turn within that period). A cached SQL plan asks for
        # the same one on every run, and working it out again hashes every segment id several
        # times. Dropped for a datasource whenever a replica of one of its segments comes or goes.
        self._plans: dict[tuple[str, tuple[Interval, ...]], tuple[int, dict[tuple[bool, int], Plan]]] = {}
        self.merge_policy = DEFAULT_POLICY  # the broker's columnTypeMergePolicy
        # [broker] tier_preference: queries go to replicas on the first of these tiers that holds
        # the segment (other tiers only when none of them does); empty: every replica alike.
        self._tier_preference: tuple[str, ...] = ()
        self._tier_of: dict[str, str] = {}  # historical -> its tier, from its announcement
        self._turn = 0
        self.generation = 0

    # ---- updates from announcements -----------------------------------------------------------
    def served(self, server: str, descriptor: SegmentDescriptor,
               partial: tuple[tuple[str, ...], str] | None = None) -> None:
        """``partial``: the copy is a partial load (its projections, the rule's type)."""
        sid = descriptor.id
        first = sid not in self.descriptors
        holders = self.replicas[sid]
        copies = self.partial.get(sid, {})
        if partial != copies.get(server):
            if partial is None:
                copies.pop(server, None)
            else:
                copies[server] = (tuple(partial[0]), partial[1])
            if copies:
                self.partial[sid] = copies
            else:
                self.partial.pop(sid, None)
            self._forget_plans(sid.datasource)
        if server not in holders:
            holders.add(server)
            self._forget_plans(sid.datasource)
        self.descriptors[sid] = descriptor
        if first:
            self._invalidate(sid.datasource)

    def unserved(self, server: str, sid: SegmentId) -> None:
        holders = self.replicas.get(sid)
        if holders is None:
            return
        if server in holders:
            holders.discard(server)
            self._forget_plans(sid.datasource)
        copies = self.partial.get(sid)
        if copies is not None:
            copies.pop(server, None)
            if not copies:
                del self.partial[sid]
        if not holders:
            del self.replicas[sid]
            self.descriptors.pop(sid, None)
            self._invalidate(sid.datasource)

    def server_gone(self, server: str) -> None:
        for sid in [s for s, holders in self.replicas.items() if server in holders]:
            self.unserved(server, sid)

    def _invalidate(self, datasource: str) -> None:
        self.generation += 1  # cached SQL plans built on the old view are stale now
        self._timelines.pop(datasource, None)
        for key in [k for k in self._schemas if k[0] == datasource]:
            del self._schemas[key]
        for key in [k for k in self._lookups if k[0] == datasource]:
            del self._lookups[key]
        self._forget_plans(datasource)

    def set_tiers(self, tier_of: dict[str, str]) -> None:
        """Historicals' tiers, as announced; cached plans go with any change."""
        if tier_of != self._tier_of:
            self._tier_of = dict(tier_of)
            self._plans.clear()

    def set_tier_preference(self, preference: tuple[str, ...]) -> None:
        if tuple(preference) != self._tier_preference:
            self._tier_preference = tuple(preference)
            self._plans.clear()

    def _preference(self, tiers: tuple[str, ...]) -> tuple[str, ...]:
        """A query's own tiers (its ``brokerTier``) first, then the broker's tier_preference."""
        return tiers + tuple(t for t in self._tier_preference if t not in tiers) if tiers else self._tier_preference

    def _holders(self, sid: SegmentId, tiers: tuple[str, ...] = ()) -> set[str]:
        """The replicas a query may use: all of them, or those on the most preferred tier."""
        holders = self.replicas.get(sid, set())
        preference = self._preference(tiers)
        if not preference or not holders:
            return holders
        rank = {t: i for i, t in enumerate(preference)}
        unranked = len(rank)
        best = min(rank.get(self._tier_of.get(s, ""), unranked) for s in holders)
        return {s for s in holders if rank.get(self._tier_of.get(s, ""), unranked) == best}

    def _forget_plans(self, datasource: str) -> None:
        for key in [k for k in self._plans if k[0] == datasource]:
            del self._plans[key]

    # ---- reads -------------------------------------------------------------------------------
    def datasources(self) -> list[str]:
        return sorted({s.datasource for s in self.descriptors})

    def timeline(self, datasource: str) -> Timeline:
        tl = self._timelines.get(datasource)
        if tl is None:
            tl = Timeline()
            for sid, d in self.descriptors.items():
                if sid.datasource == datasource:
                    tl.add(TimelineSegment(sid, d.num_partitions))
            self._timelines[datasource] = tl
        return tl

    def schema(self, datasource: str) -> dict[str, ColumnType]:
        """Union of the visible segments' columns, types merged by the broker's policy."""
        return self.merged(datasource).schema

    def merged(self, datasource: str, policy: str | None = None) -> MergedSchema:
        """The visible segments' schemas merged under ``policy`` (default: the broker's)."""
        policy = policy or self.merge_policy
        cached = self._schemas.get((datasource, policy))
        if cached is None:
            from common.types.interval import ETERNITY

            visible = [s for chunk in self.timeline(datasource).lookup([ETERNITY]) for s in chunk.segments]
            cached = merge_schemas(((sid, self.descriptors[sid].schema()) for sid in visible), policy)
            self._schemas[(datasource, policy)] = cached
        return cached

    def plan(self, datasource: str, intervals: list[Interval], exclude: dict[SegmentId, set[str]] | None = None,
             only: set[SegmentId] | None = None, spread: bool = True, tiers: tuple[str, ...] = ()) -> Plan:
        """The visible segments over ``intervals`` (``only`` those, when given) and one replica each,
        skipping the replicas ``exclude`` names. ``spread``: each segment to the least-loaded of its
        replicas, so historicals work in parallel; else on as few historicals as hold them (a query
        that reads little pays more for each historical it asks than it gains from parallelism).
        ``tiers``: the query's preferred tiers (its ``brokerTier`` context), ahead of the broker's."""
        self._turn += 1
        tiers = tuple(tiers)
        if exclude or only is not None:
            return self._plan(datasource, intervals, exclude or {}, only, spread, tiers)
        key = (datasource, tuple(intervals), tiers)
        known = self._plans.get(key)
        if known is None:
            segments, _ = self._visible(datasource, intervals)
            # The plan depends on the turn only through each segment's rotation (turn modulo its
            # replica count): it repeats with the least common multiple of those counts.
            period = 1
            for sid in segments:
                period = math.lcm(period, len(self._holders(sid, tiers)) or 1)
            if len(self._plans) >= 4096:
                self._plans.clear()
            known = self._plans[key] = (period, {})
        period, by_turn = known
        if period > _MAX_PERIOD:
            return self._plan(datasource, intervals, {}, None, spread, tiers)
        turn = (spread, self._turn % period)
        cached = by_turn.get(turn)
        if cached is None:
            cached = by_turn[turn] = self._plan(datasource, intervals, {}, None, spread, tiers)
        # A copy: callers own the plan they get.
        return Plan({server: list(segs) for server, segs in cached.by_server.items()}, list(cached.unavailable),
                    cached.coverage)

    def _plan(self, datasource: str, intervals: list[Interval], exclude: dict[SegmentId, set[str]],
              only: set[SegmentId] | None, spread: bool, tiers: tuple[str, ...] = ()) -> Plan:
        plan = Plan()
        segments, plan.coverage = self._visible(datasource, intervals)
        holders: dict[SegmentId, list[str]] = {}
        for sid in segments:
            if only is not None and sid not in only:
                continue
            # Excluded (failed) replicas leave the preferred tier: then the next tier is used.
            candidates = sorted(self._holders(sid, tiers) - exclude.get(sid, set())) or \
                sorted(self.replicas.get(sid, set()) - exclude.get(sid, set()))
            if not candidates:
                plan.unavailable.append(sid)
                continue
            # The rotating offset spreads ties across queries.
            k = self._turn % len(candidates)
            holders[sid] = candidates[k:] + candidates[:k]
        if spread:
            load: dict[str, int] = defaultdict(int)
            for sid, rotated in holders.items():
                server = min(rotated, key=lambda s: load[s])  # least-loaded replica in this plan
                load[server] += 1
                plan.by_server.setdefault(server, []).append(sid)
            return plan
        while holders:  # greedy cover: the historical holding most of the rest takes them
            counts: dict[str, int] = {}
            for rotated in holders.values():
                for server in rotated:
                    counts[server] = counts.get(server, 0) + 1
            best = max(counts, key=counts.__getitem__)
            taken = [sid for sid, rotated in holders.items() if best in rotated]
            plan.by_server[best] = taken
            for sid in taken:
                del holders[sid]
        return plan

    def partial_copies(self, segments) -> dict[SegmentId, dict[str, tuple[tuple[str, ...], str]]]:
        """Of ``segments``, those with partial copies: server -> (projections, rule type)."""
        return {sid: dict(self.partial[sid]) for sid in segments if sid in self.partial}

    def visible(self, datasource: str, intervals: list[Interval]) -> tuple[SegmentId, ...]:
        """The visible segments over ``intervals``, in time order."""
        return self._visible(datasource, intervals)[0]

    def _visible(self, datasource: str,
                 intervals: list[Interval]) -> tuple[tuple[SegmentId, ...], tuple[int, int] | None]:
        """The visible segments over ``intervals`` (in time order) and the span they cover. The same
        query asks the same again until the datasource's segments change, so it is remembered until
        then (a timeline lookup is a sizeable part of a small query's broker time)."""
        key = (datasource, tuple(intervals))
        found = self._lookups.get(key)
        if found is not None:
            return found
        segments: list[SegmentId] = []
        lo, hi = None, None
        for chunk in self.timeline(datasource).lookup(intervals):
            lo = chunk.interval.start if lo is None else min(lo, chunk.interval.start)
            hi = chunk.interval.end if hi is None else max(hi, chunk.interval.end)
            segments.extend(chunk.segments)
        found = (tuple(segments), None if lo is None else (lo, hi))
        if len(self._lookups) >= 4096:
            self._lookups.clear()
        self._lookups[key] = found
        return found
