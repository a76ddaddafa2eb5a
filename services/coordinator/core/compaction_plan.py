"""Which time chunks need compaction: those whose segments' projections differ from the catalog's
definitions (a projection added, changed or dropped since they were built). Pure: the scheduler
gives the used segments, the catalog's definitions and the compactions already under way."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from common.errors import StrataError
from common.query.projection import ProjectionSpec
from common.segment.segment_id import SegmentId
from common.types.interval import Interval


@dataclass(frozen=True)
class Compaction:
    datasource: str
    interval: Interval


def canonical(projections: Iterable[dict]) -> frozenset[str]:
    """A definition set in one spelling, so a stored spec and the catalog's compare by meaning."""
    out = set()
    for p in projections:
        try:
            out.add(json.dumps(ProjectionSpec.from_json(p).to_json(), sort_keys=True))
        except StrataError:
            out.add(json.dumps(p, sort_keys=True))  # an unreadable definition only equals itself
    return frozenset(out)


def plan_compactions(segments: Iterable[tuple[SegmentId, list[dict]]], catalog: Mapping[str, list[dict]],
                     under_way: Iterable[Compaction], limit: int) -> list[Compaction]:
    """Up to ``limit`` minus the compactions under way, oldest chunks first; a chunk being compacted
    is not asked for again. Only datasources with a catalog entry are considered."""
    busy = set(under_way)
    room = max(0, limit - len(busy))
    if room == 0:
        return []
    wanted = {ds: canonical(defs) for ds, defs in catalog.items()}
    stale: set[Compaction] = set()
    for sid, projections in segments:
        if sid.datasource in wanted and canonical(projections) != wanted[sid.datasource]:
            stale.add(Compaction(sid.datasource, sid.interval))
    todo = sorted(stale - busy, key=lambda c: (c.interval.start, c.datasource))
    return todo[:room]


__all__ = ["Compaction", "canonical", "plan_compactions"]
