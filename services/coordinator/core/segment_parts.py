"""SegmentParts: what a partial copy of a segment weighs, from its manifest.

A historical holding a segment for a partial load rule keeps only the named projections' parts
and the shared dictionaries their columns use (common/segment/partial_copy.py), so the
coordinator reserves those bytes on it, not the whole segment's. Projections may share a
dictionary, so a copy's size is the union of its projections' parts, not a sum per projection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from common.segment.manifest import SegmentManifest
from common.segment.partial_copy import parts_of_projections


@dataclass(frozen=True)
class SegmentParts:
    """``projections``: projection -> the parts a copy of it holds (shared dictionaries' too);
    ``lengths``: part -> bytes; ``overhead``: the bytes any copy holds besides its parts (the
    manifest and the container's framing, counted at the whole segment's: an upper bound)."""

    projections: Mapping[str, frozenset[str]]
    lengths: Mapping[str, int]
    overhead: int = 0

    def copy_size(self, names: Iterable[str], whole: int) -> int:
        """Bytes of a copy holding only ``names`` (at most ``whole``, the segment's size); with
        no names, or names it does not have, the whole segment."""
        parts: set[str] = set()
        for name in names:
            parts |= self.projections.get(name, frozenset())
        if not parts:
            return whole
        return min(whole, self.overhead + sum(self.lengths.get(p, 0) for p in parts))

    @staticmethod
    def from_manifest(manifest: SegmentManifest, size: int) -> SegmentParts:
        """``size``: the whole segment's bytes (the descriptor's), whose part lengths the
        manifest lists; what is left over is the overhead."""
        lengths = {name: entry.length for name, entry in manifest.files.items()}
        projections = {p.name: frozenset(parts_of_projections(manifest, (p.name,))[0]) for p in manifest.projections}
        return SegmentParts(projections, lengths, max(0, size - sum(lengths.values())))


__all__ = ["SegmentParts"]
