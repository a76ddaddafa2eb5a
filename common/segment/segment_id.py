"""SegmentId: datasource + interval + version + partition, spelled as Druid spells segment ids."""

from __future__ import annotations

from dataclasses import dataclass

from common.errors import ValidationError
from common.types.interval import Interval, format_instant


@dataclass(frozen=True, order=True)
class SegmentId:
    datasource: str
    interval: Interval
    version: str
    partition: int = 0

    def __post_init__(self) -> None:
        if not self.datasource:
            raise ValidationError("segment datasource must not be empty")
        if self.partition < 0:
            raise ValidationError(f"segment partition must be >= 0, got {self.partition}")

    def __str__(self) -> str:
        start, end = format_instant(self.interval.start), format_instant(self.interval.end)
        return f"{self.datasource}_{start}_{end}_{self.version}_{self.partition}"

    def to_json(self) -> dict:
        return {
            "dataSource": self.datasource,
            "interval": str(self.interval),
            "version": self.version,
            "partition": self.partition,
        }

    @staticmethod
    def from_json(obj: dict) -> SegmentId:
        return SegmentId(obj["dataSource"], Interval.parse(obj["interval"]), obj["version"], int(obj["partition"]))
