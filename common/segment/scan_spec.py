"""ScanSpec: what a query needs from a segment, and the segment's answer (which table to read).

The engine derives a ``ScanSpec`` from a query (Druid's ``CursorBuildSpec``) and asks the
segment for a source with ``Segment.source_for(spec)``. The segment decides whether its base
rows or one of its embedded projections serve the spec, and says which in a ``SourceChoice``.
The spec holds the query's own filter, virtual column and aggregator objects; this package
treats them as opaque values and never imports the query package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common.types.interval import Interval


@dataclass(frozen=True)
class ScanSpec:
    intervals: tuple[Interval, ...] | None = None  # None: all time
    filter: Any = None
    virtual_columns: tuple = ()
    # None for queries that read rows (scan); a tuple (maybe empty) for aggregating queries.
    grouping_columns: tuple[str, ...] | None = None
    aggregators: tuple = ()
    granularity: Any = None  # the query's time bucketing, for aggregating queries
    selected_columns: tuple[str, ...] | None = None  # a scan's output columns; None: all
    preferred_ordering: tuple[str, ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_aggregate(self) -> bool:
        return self.grouping_columns is not None

    @property
    def columns(self) -> frozenset[str] | None:
        """Every column name the query reads (virtual ones included); None when a scan reads all."""
        if not self.is_aggregate and self.selected_columns is None:
            return None
        out = set(self.grouping_columns or ()) | set(self.selected_columns or ())
        for agg in self.aggregators:
            out |= agg.columns()
        if self.filter is not None:
            out |= self.filter.columns()
        return frozenset(out)


@dataclass(frozen=True)
class ProjectionMatch:
    """How a projection serves a spec: which stored column holds each query aggregator's
    intermediate, which query virtual columns are stored projection columns, and the filter to
    run on the projection's rows (terms the projection already applied are dropped), and for a
    filtered query aggregator served by a stored unfiltered one, the filter that selects the
    projection rows whose intermediates it combines."""

    aggregator_columns: Mapping[str, str] = field(default_factory=dict)
    column_aliases: Mapping[str, str] = field(default_factory=dict)
    filter: Any = None
    replaces_filter: bool = False
    aggregator_filters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceChoice:
    """The table that serves a spec. ``pre_aggregated`` tables hold aggregator intermediates:
    the engine combines them instead of accumulating rows. ``rejected`` gives, for each
    projection that was considered and not used, the reason."""

    table: Any  # common.segment.segment.SegmentTable
    pre_aggregated: bool = False
    projection: str | None = None
    match: ProjectionMatch = field(default_factory=ProjectionMatch)
    rejected: tuple[tuple[str, str], ...] = ()


__all__ = ["ProjectionMatch", "ScanSpec", "SourceChoice"]
