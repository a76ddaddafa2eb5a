"""Allocation: the version and partition numbers the coordinator hands an ingestion task for one
time chunk. A wire type both roles share (the coordinator allocates it, services/coordinator/core/
allocation.py; the ingestion builds segments under it), so it lives here rather than in either."""

from __future__ import annotations

from dataclasses import dataclass

from common.types.interval import Interval


@dataclass(frozen=True)
class Allocation:
    interval: Interval
    version: str
    first_partition: int
    core_partitions: int  # 0: a new set, whose size the task decides


__all__ = ["Allocation"]
