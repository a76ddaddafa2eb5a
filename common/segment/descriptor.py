"""SegmentDescriptor: what the cluster knows about a published segment without opening it.

It travels in publish requests, in the metadata store, in load assignments and in served-segment
announcements, so every role agrees on a segment's identity, size, location and schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

from common.segment.manifest import SegmentManifest, metrics_of
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType


@dataclass(frozen=True)
class SegmentDescriptor:
    id: SegmentId
    size: int
    num_rows: int
    location: str  # deep storage key
    num_partitions: int
    manifest_json: str  # the segment's manifest, for schemas and stats

    @staticmethod
    def of(manifest: SegmentManifest, location: str, num_partitions: int, size: int | None = None) -> SegmentDescriptor:
        return SegmentDescriptor(manifest.segment_id, size if size is not None else manifest.size, manifest.num_rows,
                                 location, num_partitions, manifest.to_bytes().decode())

    @property
    def key(self) -> str:
        """The segment id made safe as one path element of a discovery key."""
        return quote(str(self.id), safe="")

    def schema(self) -> dict[str, ColumnType]:
        cols = json.loads(self.manifest_json).get("columns", [])
        return {c["name"]: ColumnType.parse(c["type"]) for c in cols}

    def metrics(self) -> dict[str, str | None]:
        """A rollup segment's metric columns -> Druid aggregator type; {} for any other segment."""
        return metrics_of(json.loads(self.manifest_json or "{}"))

    def to_json(self) -> dict:
        return {"id": self.id.to_json(), "size": self.size, "numRows": self.num_rows, "location": self.location,
                "numPartitions": self.num_partitions, "manifest": self.manifest_json}

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @staticmethod
    def from_json(obj: dict) -> SegmentDescriptor:
        return SegmentDescriptor(SegmentId.from_json(obj["id"]), int(obj["size"]), int(obj["numRows"]),
                                 obj["location"], int(obj["numPartitions"]), obj["manifest"])

    @staticmethod
    def from_bytes(data: bytes) -> SegmentDescriptor:
        return SegmentDescriptor.from_json(json.loads(data))

