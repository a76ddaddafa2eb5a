"""The on-disk segment: identity, manifest, the single-file container, column encodings, the
builder (Arrow batches in) and the reader (pread, checksum-verified columns out)."""

from common.segment.builder import SegmentBuilder, build_segment
from common.segment.manifest import ColumnManifest, SegmentManifest
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId

__all__ = ["ColumnManifest", "Segment", "SegmentBuilder", "SegmentId", "SegmentManifest", "build_segment"]
