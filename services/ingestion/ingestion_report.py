"""IngestionReport: what an ingestion job did, for task status, logs and the user.

Pure data (JSON-ready), so the coordinator and task runner can keep and show it without Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.errors import StrataError
from common.segment.segment_id import SegmentId


@dataclass(frozen=True)
class ParseExceptionSample:
    source: str  # file path or URI ("inline data" for inline input)
    line: int  # 1-based line in the file (a Parquet row's 1-based position)
    raw: str  # the row's text, cut to a bounded length
    reason: str

    def describe(self) -> str:
        raw = self.raw if len(self.raw) <= 200 else self.raw[:200] + "..."
        return f"{self.source}, line {self.line}: {self.reason} (row: {raw!r})"

    def to_json(self) -> dict:
        return {"source": self.source, "line": self.line, "raw": self.raw, "reason": self.reason}


@dataclass(frozen=True)
class SegmentReport:
    id: SegmentId
    rows: int
    bytes: int
    location: str

    def to_json(self) -> dict:
        return {"id": str(self.id), "rows": self.rows, "bytes": self.bytes, "location": self.location}


@dataclass(frozen=True)
class IngestionReport:
    job_id: str
    datasource: str
    mode: str
    status: str  # SUCCESS, FAILED or CANCELLED
    rows_read: int = 0  # input rows, parse exceptions included
    rows_written: int = 0
    rows_filtered: int | None = None  # dropped by the WHERE; None when the query is too complex to tell
    parse_exceptions: int = 0
    parse_exception_samples: tuple[ParseExceptionSample, ...] = ()
    segments: tuple[SegmentReport, ...] = ()
    duration_s: float = 0.0
    spark_job_ids: tuple[int, ...] = ()
    error: str | None = None
    phases: dict = field(default_factory=dict)  # phase -> seconds
    schema_decisions: tuple[dict, ...] = ()  # discovered column types: column, typesSeen, chosen, rule, example

    @property
    def bytes_written(self) -> int:
        return sum(s.bytes for s in self.segments)

    def to_json(self) -> dict:
        return {
            "jobId": self.job_id, "dataSource": self.datasource, "mode": self.mode, "status": self.status,
            "rowsRead": self.rows_read, "rowsWritten": self.rows_written, "rowsFiltered": self.rows_filtered,
            "parseExceptions": self.parse_exceptions,
            "parseExceptionSamples": [s.to_json() for s in self.parse_exception_samples],
            "segments": [s.to_json() for s in self.segments], "bytesWritten": self.bytes_written,
            "durationSeconds": round(self.duration_s, 3), "sparkJobIds": list(self.spark_job_ids),
            "error": self.error, "phases": {k: round(v, 3) for k, v in self.phases.items()},
            "schemaDecisions": list(self.schema_decisions),
        }


class IngestionFailed(StrataError):
    """The job failed; nothing was published and its uploads were deleted. ``report`` says how far it got."""

    def __init__(self, message: str, report: IngestionReport | None = None) -> None:
        super().__init__(message)
        self.report = report


class IngestionCancelled(IngestionFailed):
    """The job was cancelled; nothing was published and its uploads were deleted."""


class TooManyParseExceptions(IngestionFailed):
    """More input rows were unparseable than maxParseExceptions allows."""


__all__ = ["IngestionCancelled", "IngestionFailed", "IngestionReport", "ParseExceptionSample", "SegmentReport",
           "TooManyParseExceptions"]
