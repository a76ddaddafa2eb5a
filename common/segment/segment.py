"""Segment: the read side of a segment file. Opening maps the file; columns load lazily.

A segment file holds tables: the base table (every row) and any embedded projections
(pre-aggregated tables whose columns may share the base table's dictionaries). Engines read a
``SegmentTable`` through ``ColumnReader``s and never look at parts or encodings; which table
serves a query is the segment's decision (``source_for``).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable

from common.errors import SegmentCorruptError, ValidationError, unknown_name_message
from common.segment.column_reader import ColumnReader
from common.segment.container import Container
from common.segment.encoding import StoredColumn, encoding_named
from common.segment.manifest import ColumnManifest, ProjectionManifest, SegmentManifest
from common.segment.segment_lease import SegmentLease
from common.segment.scan_spec import ProjectionMatch, ScanSpec, SourceChoice
from common.segment.segment_id import SegmentId
from common.types.column_type import TIME_COLUMN, ColumnType
from common.types.interval import Interval

# A projection matcher answers, for one projection, one spec and the segment's interval, either
# how the projection serves the spec or the reason it cannot (any other object: its text is the
# reason shown, see projection_match.Refusal).
ProjectionMatcher = Callable[[ProjectionManifest, ScanSpec, Interval], object]


_GENERATIONS = itertools.count(1)


class SegmentTable:
    """One table of a segment: its columns as ``ColumnReader``s, opened on first use."""

    def __init__(self, segment: Segment, columns: tuple[ColumnManifest, ...], num_rows: int,
                 ordering: tuple[str, ...], projection: ProjectionManifest | None = None) -> None:
        self.segment = segment
        self.projection = projection
        self.num_rows = num_rows
        self.ordering = ordering
        self._manifests = {c.name: c for c in columns}
        self.schema: dict[str, ColumnType] = {c.name: c.type for c in columns}
        self._columns: dict[str, ColumnReader] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str | None:
        """The projection's name; None for the base table."""
        return None if self.projection is None else self.projection.name

    @property
    def label(self) -> str:
        return str(self.segment.id) if self.projection is None else f"{self.segment.id}#{self.projection.name}"

    @property
    def interval(self) -> Interval:
        return self.segment.interval

    def has_column(self, name: str) -> bool:
        return name in self._manifests

    def column(self, name: str) -> ColumnReader:
        col = self._columns.get(name)
        if col is not None:
            return col
        meta = self._manifests.get(name)
        if meta is None:
            raise ValidationError(unknown_name_message("column", name, self.schema))
        col = self.segment.open_column(meta, self.num_rows)
        with self._lock:
            self._columns.setdefault(name, col)
        return self._columns[name]

    def forget_columns(self) -> None:
        with self._lock:
            self._columns.clear()

    def time_bounds(self) -> tuple[int, int] | None:
        if self.projection is None:
            m = self.segment.manifest
            return None if m.min_time is None else (m.min_time, m.max_time)
        stats = self._manifests[TIME_COLUMN].stats if TIME_COLUMN in self._manifests else {}
        if "min" in stats:
            return int(stats["min"]), int(stats["max"])
        return None  # a projection without a time column covers the whole segment interval


class Segment:
    def __init__(self, path: str, *, verify: bool = False, label: str | None = None) -> None:
        self.path = path
        self._container = Container(path, label)
        where = self._container.label
        try:
            obj = json.loads(self._container.manifest_bytes)
            self.manifest = SegmentManifest.from_json(obj, where)
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            raise SegmentCorruptError(f"segment {where}: manifest check failed: {exc}") from None
        self._container.label = str(self.manifest.segment_id)
        self._container.segment_id = self.manifest.segment_id
        self._container.check_bounds(self.manifest.files)
        m = self.manifest
        for shared in m.dictionaries.values():
            if shared.part not in m.files:
                raise SegmentCorruptError(
                    f"segment {self.id}: part check failed: shared dictionary '{shared.name}' lacks '{shared.part}'",
                    self.id)
        # A partial copy (partial_copy.py) holds only its projections' parts: only they are checked
        # and opened; its base rows and other projections are described, not there.
        held = m.partial_projections
        if held is None:
            self._check_columns(m.columns, "")
        for proj in m.projections:
            if held is None or proj.name in held:
                self._check_columns(proj.columns, f"projection '{proj.name}' ")
        self._base = SegmentTable(self, m.columns, m.num_rows, m.ordering)
        self._projections = {p.name: SegmentTable(self, p.columns, p.num_rows, p.ordering, p)
                             for p in m.projections if held is None or p.name in held}
        # Every use holds the lease; ``close`` retires it, and the file closes after the last use.
        self.lease = SegmentLease(self._close_now, str(m.segment_id))
        # New at every open: what names this copy of the segment in a prepared query's key.
        self.generation = next(_GENERATIONS)
        # The projections this copy serves: a partial copy's (from its manifest), or those a
        # historical restricts a whole copy to for a partial load rule. None: the whole segment.
        self.loaded_projections: tuple[str, ...] | None = m.partial_projections
        if verify:
            self._container.verify_all()

    def _check_columns(self, columns: tuple[ColumnManifest, ...], where: str) -> None:
        for col in columns:
            enc = encoding_named(col.encoding, f"{where}{col.name}", str(self.id))
            parts = self._resolved_parts(col)
            missing = [r for r in col.spec.roles(enc.required_roles) if r not in parts]
            missing += [p for p in parts.values() if p not in self.manifest.files]
            if missing:
                raise SegmentCorruptError(f"segment {self.id}: part check failed: {where}column '{col.name}' lacks {missing}",
                                          self.id)

    def _resolved_parts(self, col: ColumnManifest) -> dict[str, str]:
        """Role -> part, with a shared dictionary standing in for the column's own."""
        parts = dict(col.parts)
        shared = getattr(col.spec, "shared_dictionary", None)
        if shared is not None:
            entry = self.manifest.dictionaries.get(shared)
            if entry is None:
                raise SegmentCorruptError(
                    f"segment {self.id}: part check failed: column '{col.name}' names shared dictionary "
                    f"'{shared}', which the manifest does not list", self.id)
            parts.setdefault("dictionary", entry.part)
        return parts

    def open_column(self, meta: ColumnManifest, num_rows: int) -> ColumnReader:
        enc = encoding_named(meta.encoding, meta.name, str(self.id))
        return enc.open(StoredColumn(meta.name, self._container, self._resolved_parts(meta), num_rows,
                                     meta.stats, meta.type, meta.spec))

    @classmethod
    def open(cls, path: str, *, verify: bool = False) -> Segment:
        return cls(path, verify=verify)

    @property
    def id(self) -> SegmentId:
        return self.manifest.segment_id

    @property
    def interval(self) -> Interval:
        return self.manifest.segment_id.interval

    @property
    def num_rows(self) -> int:
        return self.manifest.num_rows

    @property
    def schema(self) -> dict[str, ColumnType]:
        return self.manifest.schema

    @property
    def size(self) -> int:
        return self._container.size

    def has_column(self, name: str) -> bool:
        return self._base.has_column(name)

    def column(self, name: str) -> ColumnReader:
        """A column of the base table."""
        return self._base.column(name)

    def table(self, projection: str | None = None) -> SegmentTable:
        if projection is None:
            return self._base
        table = self._projections.get(projection)
        if table is None:
            raise ValidationError(unknown_name_message("projection", projection, list(self._projections)))
        return table

    def source_for(self, spec: ScanSpec, matcher: ProjectionMatcher | None = None) -> SourceChoice:
        """The table that serves ``spec``: the smallest matching projection, else the base rows
        (see ``choose_projection``)."""
        proj, match, rejected = choose_projection(self.manifest, spec, matcher, self.loaded_projections)
        if proj is None:
            return SourceChoice(self._base, rejected=rejected)
        return SourceChoice(self._projections[proj.name], True, proj.name, match, rejected)

    def verify(self) -> None:
        """Check every part's checksum now (deep-storage downloads do this before serving)."""
        self._container.verify_all()

    def check_unchanged(self) -> None:
        """SegmentCorruptError if the file changed since it was mapped (see Container)."""
        self._container.check_unchanged()

    def close(self) -> None:
        """Retire the segment (evicted, dropped, done with): no new lease, and its file and cached
        parts go once the queries holding a lease finish."""
        self.lease.retire()

    def _close_now(self) -> None:
        for table in (self._base, *self._projections.values()):
            table.forget_columns()
        self._container.close()
        self._container.release_file()

    def __repr__(self) -> str:
        return f"Segment({self.id}, rows={self.num_rows})"


class PartialCopyError(ValidationError):
    """A copy of a segment loaded only as some of its projections (a partial load rule) cannot
    serve a query those projections do not answer."""


def choose_projection(manifest: SegmentManifest, spec: ScanSpec, matcher: ProjectionMatcher | None,
                      only: tuple[str, ...] | None = None
                      ) -> tuple[ProjectionManifest | None, ProjectionMatch | None, tuple[tuple[str, str], ...]]:
    """(the projection that serves ``spec`` or None for base rows, how it serves it, and the reason
    each other candidate could not), from the manifest alone, so brokers can explain the choice.
    ``only``: a partial copy's projections, the only candidates; PartialCopyError when none of
    them serves the query (a partial copy has no base rows to fall back on).

    Candidates are tried smallest first; ``matcher`` (from the query engine, which understands
    aggregators and filters) decides whether one can answer. Query context keys steer the choice:
    ``noProjections`` reads base rows, ``useProjection`` must use the named projection, and
    ``forceProjections`` must use some projection; the last two fail with the reasons.
    """
    if only is not None:
        return _choose_within(manifest, spec, matcher, only)
    ctx = spec.context or {}
    sid = manifest.segment_id
    candidates = sorted(manifest.projections, key=lambda p: (p.num_rows, p.name))
    if not candidates or not spec.is_aggregate or matcher is None or _truthy(ctx.get("noProjections")):
        if _truthy(ctx.get("forceProjections")) and not _truthy(ctx.get("noProjections")):
            why = "it has no projections" if not candidates else "the query cannot use a projection"
            raise ValidationError(f"forceProjections is set but segment {sid} cannot use one: {why}")
        if ctx.get("useProjection") and not candidates:
            raise ValidationError(f"useProjection '{ctx['useProjection']}': segment {sid} has no projections")
        return None, None, ()
    wanted = ctx.get("useProjection")
    if wanted:
        proj = manifest.projection(str(wanted))
        if proj is None:
            raise ValidationError(f"useProjection: segment {sid} " +
                                  unknown_name_message("projection", str(wanted), [p.name for p in candidates]))
        candidates = [proj]
    rejected: list[tuple[str, str]] = []
    for proj in candidates:
        answer = matcher(proj, spec, sid.interval)
        if not isinstance(answer, ProjectionMatch):
            rejected.append((proj.name, str(answer)))
            continue
        return proj, answer, tuple(rejected)
    if wanted:
        raise ValidationError(f"useProjection '{wanted}' cannot serve this query on segment {sid}: {rejected[0][1]}")
    if _truthy(ctx.get("forceProjections")):
        reasons = "; ".join(f"{name}: {why}" for name, why in rejected)
        raise ValidationError(f"forceProjections is set but no projection of segment {sid} matches ({reasons})")
    return None, None, tuple(rejected)


def _choose_within(manifest: SegmentManifest, spec: ScanSpec, matcher: ProjectionMatcher | None,
                   only: tuple[str, ...]):
    sid = manifest.segment_id
    names = ", ".join(only) or "none"
    where = f"segment {sid} is loaded only as its projections ({names}) by a partial load rule"
    ctx = spec.context or {}
    if _truthy(ctx.get("noProjections")):
        raise PartialCopyError(f"{where}; noProjections asks for the base rows, which this copy does not serve")
    if not spec.is_aggregate or matcher is None:
        raise PartialCopyError(f"{where}; this query reads rows, not aggregates, so it needs the base rows")
    candidates = sorted((p for p in manifest.projections if p.name in only), key=lambda p: (p.num_rows, p.name))
    wanted = ctx.get("useProjection")
    if wanted:
        candidates = [p for p in candidates if p.name == str(wanted)]
        if not candidates:
            raise PartialCopyError(f"{where}; useProjection names '{wanted}', which this copy does not serve")
    rejected: list[tuple[str, str]] = []
    for proj in candidates:
        answer = matcher(proj, spec, sid.interval)
        if isinstance(answer, ProjectionMatch):
            return proj, answer, tuple(rejected)
        rejected.append((proj.name, str(answer)))
    reasons = "; ".join(f"{name}: {why}" for name, why in rejected) or "the segment has none of them"
    raise PartialCopyError(f"{where}, and none of them answers this query ({reasons})")


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


__all__ = ["PartialCopyError", "ProjectionMatcher", "Segment", "SegmentTable", "choose_projection"]
