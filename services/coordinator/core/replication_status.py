"""Replication status per datasource: how many used segments no historical serves, and how many
are served by fewer historicals than wanted (for the coordinator's gauges and alerts).

Pure: it reads the snapshot a duty run already took (used segments, what each historical
serves), so counting costs no extra metadata or discovery reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from common.segment.segment_id import SegmentId


@dataclass(frozen=True)
class ReplicationStatus:
    unavailable: int = 0  # served by no historical
    under_replicated: int = 0  # served by fewer than wanted (unavailable ones included)
    segments: int = 0


def replication_status(used: Iterable[SegmentId], served: Mapping[str, Iterable[SegmentId]],
                       wanted: int | Callable[[SegmentId], int]) -> dict[str, ReplicationStatus]:
    """datasource -> status. ``served`` maps each historical to the segments it announces;
    a replica still loading does not count (it cannot answer a query yet). ``wanted``: the
    replicas every segment should have, or a function of the segment (its rule's, capped by
    the servers of each tier). A segment its rule keeps unloaded (0 wanted) is not counted
    unavailable."""
    want = wanted if callable(wanted) else (lambda _sid: wanted)
    replicas: dict[SegmentId, int] = {}
    for segments in served.values():
        for sid in set(segments):
            replicas[sid] = replicas.get(sid, 0) + 1
    counts: dict[str, list[int]] = {}
    for sid in used:
        n = replicas.get(sid, 0)
        w = want(sid)
        c = counts.setdefault(sid.datasource, [0, 0, 0])
        c[0] += n == 0 and w > 0
        c[1] += n < w
        c[2] += 1
    return {ds: ReplicationStatus(*c) for ds, c in counts.items()}


__all__ = ["ReplicationStatus", "replication_status"]
