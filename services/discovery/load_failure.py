"""LoadFailureReport: the value under ``/strata/load_failures/{historical}/{segment}``.

A historical writes it (under its lease) when loading an assigned segment fails, and rewrites it
on each further failure; it deletes it once the segment loads. The coordinator reads these
reports in its snapshot to retry the load after a backoff or assign the segment elsewhere, and
deletes the report of a segment no longer assigned there once ``give_up_expiry_ms`` has passed
since ``failed_ms`` (the historical, watching its reports, then forgets the failure too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from common.segment.segment_id import SegmentId


@dataclass(frozen=True)
class LoadFailureReport:
    segment: SegmentId
    reason: str
    attempts: int  # failed loads of this segment on this historical in a row
    failed_ms: int  # when the last one failed (the historical's clock)

    def to_bytes(self) -> bytes:
        return json.dumps({"segment": self.segment.to_json(), "reason": self.reason, "attempts": self.attempts,
                           "failedMs": self.failed_ms}, separators=(",", ":")).encode()

    @staticmethod
    def from_bytes(data: bytes) -> LoadFailureReport:
        obj = json.loads(data)
        return LoadFailureReport(SegmentId.from_json(obj["segment"]), str(obj.get("reason", "")),
                                 int(obj["attempts"]), int(obj["failedMs"]))
