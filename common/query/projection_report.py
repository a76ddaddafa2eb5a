"""EXPLAIN's account of projections: for one native query, which table each segment would read
(a projection, or base rows) and why each other projection was refused, grouped so that segments
with the same outcome are one line. Computed from segment manifests, without opening segments."""

from __future__ import annotations

import json
from collections.abc import Iterable

from common.errors import ValidationError
from common.query.grouped_engine import counts_span
from common.query.model import Query, ScanQuery
from common.segment.manifest import SegmentManifest
from common.segment.segment import choose_projection


def explain_projections(query: Query, manifests: Iterable[str | dict]) -> list[dict]:
    """[{"projection": name or "base", "segments": n, "rejected": {projection: reason}}, ...] (or an
    "error" entry when the query's context cannot be satisfied on some segment)."""
    from common.query.engine import scan_spec_for
    from common.query.projection_match import match_projection

    if not isinstance(query.datasource, str):
        return []
    spec = scan_spec_for(query)
    groups: dict[tuple, dict] = {}
    for raw in manifests:
        obj = json.loads(raw) if isinstance(raw, str) else raw
        manifest = SegmentManifest.from_json(obj, "explain")
        iv = manifest.segment_id.interval
        if not any(q.overlaps(iv) for q in query.intervals):
            continue
        try:
            if _counted_from_metadata(query, manifest):
                proj, rejected = None, ()  # as engine.source_for: base rows, no column read
            else:
                proj, _, rejected = choose_projection(manifest, spec, match_projection)
        except ValidationError as exc:
            key = ("error", str(exc))
            entry = groups.setdefault(key, {"projection": None, "segments": 0, "error": str(exc)})
        else:
            name = proj.name if proj is not None else "base"
            key = (name, tuple(sorted(rejected)))
            entry = groups.setdefault(key, {"projection": name, "segments": 0, "rejected": dict(sorted(rejected))})
        entry["segments"] += 1
    return sorted(groups.values(), key=lambda g: (-g["segments"], str(g["projection"])))


def _counted_from_metadata(query: Query, manifest: SegmentManifest) -> bool:
    if isinstance(query, ScanQuery) or manifest.partial_projections is not None:
        return False
    if any(query.context.get(k) for k in ("useProjection", "forceProjections")):
        return False
    bounds = None if manifest.min_time is None else (manifest.min_time, manifest.max_time)
    return counts_span(query, manifest.num_rows, bounds)


__all__ = ["explain_projections"]
