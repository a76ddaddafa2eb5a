"""TableChoice: which table each segment of a query reads (one of its projections, or its base
rows) and how many rows that is, worked out on the broker from the segments' manifests with the
same ``choose_projection`` the historicals run (as EXPLAIN does).

The query log records the choice per group of segments (partials come back merged, so the broker
cannot see it otherwise), and the executor uses the row count to send a query that reads little
to as few historicals as hold its segments. A cached SQL plan runs the same query object over the
same segments again and again and the answer is the same each time (a segment id names one
immutable manifest), so it is remembered per query text and segment list; each manifest is
parsed once.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from common.bounded_cache import BoundedCache
from common.errors import ValidationError
from common.query.engine import scan_spec_for
from common.query.projection_match import match_projection
from common.segment.manifest import SegmentManifest
from common.segment.segment import choose_projection
from services.broker.core.query_log import TableUse

# Parsed manifests kept (the oldest parsed goes first past this).
MAX_MANIFESTS = 20_000
# Choices kept, per query text and segment list.
MAX_CHOICES = 1024


@dataclass(frozen=True)
class Choice:
    tables: tuple[TableUse, ...]  # per group of segments that read the same table
    rows: int | None  # rows the segments read in all (a projection's rows, or the segment's); None: unknown


class TableChoice:
    def __init__(self, manifest_of) -> None:
        self.manifest_of = manifest_of  # SegmentId -> manifest JSON (or None)
        self._lock = threading.Lock()
        self._manifests: dict = {}  # SegmentId -> (manifest, signature), parsed once
        self._choices = BoundedCache(MAX_CHOICES)  # (query text, segment ids) -> Choice

    def of(self, query, datasource: str, segment_ids) -> Choice:
        # Keyed by the query's text (made once, with the query) and the segments: a cached SQL
        # plan asks the same pair on every run.
        key = (query.json_text(), tuple(segment_ids))
        hit = self._choices.get(key)
        if hit is None:
            hit, complete = self._decide(query, datasource, segment_ids)
            if complete:  # a manifest not known yet is not remembered as missing
                self._choices.put(key, hit)
        return hit

    def _decide(self, query, datasource: str, segment_ids) -> tuple[Choice, bool]:
        """The choice, and whether every segment's manifest was known."""
        complete = True
        rows = 0
        spec = scan_spec_for(query)
        edges = sorted({e for iv in query.intervals for e in (iv.start, iv.end)})
        groups: dict[tuple, TableUse] = {}
        # The choice depends only on the segment's projections (in the order they are tried) and
        # on which query interval edges fall inside it, so segments alike are decided once.
        decided: dict[tuple, tuple | None] = {}
        for sid, cached in zip(segment_ids, self._manifests_of(segment_ids)):
            if cached is None:
                complete = False
                continue
            manifest, signature = cached
            iv = sid.interval
            key = (signature, tuple(e for e in edges if iv.start < e < iv.end))
            if key not in decided:
                try:
                    proj, _, rejected = choose_projection(manifest, spec, match_projection)
                    decided[key] = (proj.name if proj is not None else "base", tuple(sorted(rejected)))
                except ValidationError:
                    decided[key] = None  # the historicals refuse it the same way, and the query fails
            outcome = decided[key]
            if outcome is None:
                complete = False
                continue
            proj = manifest.projection(outcome[0]) if outcome[0] != "base" else None
            rows += proj.num_rows if proj is not None else manifest.num_rows
            if outcome in groups:
                groups[outcome].segments += 1
            else:
                groups[outcome] = TableUse(datasource, outcome[0], 1, dict(outcome[1]))
        return Choice(tuple(groups.values()), rows if complete else None), complete

    def partial_refusal(self, query, sid, projections: tuple[str, ...]) -> str | None:
        """None when a copy of ``sid`` loaded as only ``projections`` (a partial load rule) can
        answer ``query``, else why not (the historical decides the same with the same function)."""
        key = ("partial", query.json_text(), sid, projections)
        hit = self._choices.get(key)
        if hit is None:
            cached = self._manifests_of([sid])[0]
            if cached is None:
                return f"segment {sid}'s manifest is not known to the broker yet"
            try:
                choose_projection(cached[0], scan_spec_for(query), match_projection, projections)
                hit = ("",)
            except ValidationError as exc:
                hit = (str(exc),)
            self._choices.put(key, hit)
        return hit[0] or None

    def _manifests_of(self, segment_ids) -> list[tuple[SegmentManifest, tuple] | None]:
        """Each segment's parsed manifest and its projections' signature (as tried: smallest first)."""
        with self._lock:
            found = [self._manifests.get(sid) for sid in segment_ids]
        for i, sid in enumerate(segment_ids):
            if found[i] is None:
                found[i] = self._parse(sid)
        return found

    def _parse(self, sid) -> tuple[SegmentManifest, tuple] | None:
        raw = self.manifest_of(sid)
        if not raw:
            return None
        manifest = SegmentManifest.from_json(json.loads(raw), str(sid))
        signature = tuple((p.name, json.dumps(p.spec, sort_keys=True))
                          for p in sorted(manifest.projections, key=lambda p: (p.num_rows, p.name)))
        with self._lock:
            self._manifests[sid] = (manifest, signature)
            while len(self._manifests) > MAX_MANIFESTS:
                self._manifests.pop(next(iter(self._manifests)))
        return manifest, signature


__all__ = ["Choice", "TableChoice"]
