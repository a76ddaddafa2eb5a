"""SegmentMetrics: the retention metrics the leading coordinator reports each duty run: segment
replicas and bytes each tier serves, loads and drops assigned per tier, and per datasource the
unused segments not yet killed and the bytes in deep storage (used and unused).

Gauges of a tier or datasource that is gone are removed rather than left at their last value,
and all of them on losing leadership (the new leader reports its own view).
"""

from __future__ import annotations

from collections import defaultdict

from services.coordinator.core.duties import Drop, Load


class SegmentMetrics:
    def __init__(self, metrics) -> None:
        self.metrics = metrics
        self._tiers: set[str] = set()
        self._datasources: set[str] = set()

    def observe(self, served: dict, tier_of: dict, commands) -> None:
        """``served``: server -> {SegmentId: SegmentDescriptor} it serves; ``tier_of``: every
        announced historical -> its tier (a tier with none served reports 0); ``commands``: this run's."""
        m = self.metrics
        count: dict[str, int] = {t: 0 for t in tier_of.values()}
        size: dict[str, int] = {t: 0 for t in tier_of.values()}
        for server, segments in served.items():
            tier = tier_of.get(server)
            if tier is None:  # gone from discovery: its announcements are about to go too
                continue
            count[tier] += len(segments)
            size[tier] += sum(d.size for d in segments.values())
        for command in commands:
            if isinstance(command, (Load, Drop)):
                tier = tier_of.get(command.server)
                if tier is not None:
                    (m.tier_segments_assigned if isinstance(command, Load) else m.tier_segments_dropped) \
                        .labels(tier).inc()
        for tier in self._tiers - set(count):
            m.tier_segments_loaded.remove(tier)
            m.tier_bytes_loaded.remove(tier)
        for tier in count:
            m.tier_segments_loaded.labels(tier).set(count[tier])
            m.tier_bytes_loaded.labels(tier).set(size[tier])
            # Counters at 0 from a tier's first sight: rate() sees nothing of a series' first sample.
            m.tier_segments_assigned.labels(tier)
            m.tier_segments_dropped.labels(tier)
        self._tiers = set(count)

    def observe_store(self, usage: dict) -> None:
        """``usage``: (datasource, used) -> (segments, bytes), as ``SegmentStore.usage`` gives it."""
        m = self.metrics
        unused: dict[str, int] = defaultdict(int)
        size: dict[str, int] = defaultdict(int)
        for (datasource, used), (n, nbytes) in usage.items():
            unused[datasource] += 0 if used else n
            size[datasource] += nbytes
        for ds in self._datasources - set(size):
            m.segments_unused.remove(ds)
            m.deep_storage_bytes.remove(ds)
        for ds in size:
            m.segments_unused.labels(ds).set(unused[ds])
            m.deep_storage_bytes.labels(ds).set(size[ds])
        self._datasources = set(size)

    def clear(self) -> None:
        m = self.metrics
        for tier in self._tiers:
            m.tier_segments_loaded.remove(tier)
            m.tier_bytes_loaded.remove(tier)
        for ds in self._datasources:
            m.segments_unused.remove(ds)
            m.deep_storage_bytes.remove(ds)
        self._tiers, self._datasources = set(), set()


__all__ = ["SegmentMetrics"]
