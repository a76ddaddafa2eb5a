"""SegmentManifest: the versioned description of a segment file's contents.

The manifest is what makes the container extensible without a format break:
- every column names its ``encoding`` and maps roles to internal part names, so a nested JSON
  column can later own many per-path parts, and a projection column can point at a dictionary
  part the base table already has;
- every column's encoding-specific settings live in a typed ``spec`` that the encoding parses,
  keeping keys it does not know so a rewrite never drops them;
- ``dictionaries`` names shared value dictionaries: the base table's string dictionaries, which
  projection columns reuse (and, for nested columns, one global dictionary per value type);
- ``projections`` lists embedded pre-aggregated tables, each with its own columns;
- ``requiredFeatures`` lists what a reader must understand; a reader refuses a segment that
  needs a feature it does not know instead of misreading it;
- ``partialProjections`` (with the feature ``partialCopy``) marks a historical's partial copy
  (a partial load rule's): only those projections' parts (and the shared dictionaries they use)
  are in the file; the base columns and other projections are described but absent;
- ``metrics`` (a rollup's segments only) names the columns that hold aggregated values, each with
  the Druid aggregator type that made it (null when Druid has none); the other columns but
  ``__time`` are dimensions. A manifest without the key (no rollup, or written before the key
  existed) has no metrics; older readers ignore the key, so it needs no required feature.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from common.errors import SegmentCorruptError
from common.segment.encoding import EncodingSpec, known_features, parse_spec
from common.segment.part_codec import COMPRESSED_PARTS
from common.segment.segment_id import SegmentId
from common.types.column_type import ColumnType

FORMAT_NAME = "strata-segment"
FORMAT_VERSION = 1
PARTIAL_COPY = "partialCopy"  # the requiredFeatures entry of a partial copy


@dataclass(frozen=True)
class PartEntry:
    """Where a part lies. A compressed part also names its codec and decoded length (stored in
    the manifest as a five-element entry; uncompressed parts keep the original three)."""

    offset: int
    length: int
    crc32: int
    codec: str | None = None
    raw_length: int | None = None

    def to_json(self) -> list:
        if self.codec is None:
            return [self.offset, self.length, self.crc32]
        return [self.offset, self.length, self.crc32, self.codec, self.raw_length]


@dataclass(frozen=True)
class ColumnManifest:
    name: str
    type: ColumnType
    encoding: str  # a name in the encoding registry (common/segment/encoding.py)
    parts: dict[str, str]  # role -> internal part name
    stats: dict = field(default_factory=dict)  # min, max, nullCount, cardinality
    spec: EncodingSpec = field(default_factory=EncodingSpec)  # the encoding's typed settings

    def to_json(self) -> dict:
        out = {
            "name": self.name,
            "type": self.type.native_name,
            "encoding": self.encoding,
            "parts": dict(self.parts),
            "stats": self.stats,
        }
        spec = self.spec.to_json()
        if spec:
            out["spec"] = spec
        return out

    @staticmethod
    def from_json(obj: dict) -> ColumnManifest:
        encoding = obj["encoding"]
        return ColumnManifest(obj["name"], ColumnType.parse(obj["type"]), encoding, dict(obj["parts"]),
                              dict(obj.get("stats", {})), parse_spec(encoding, obj.get("spec")))


@dataclass(frozen=True)
class DictionaryManifest:
    """A value dictionary that several columns may share (by name): the base table's string
    dictionaries, which projection columns reuse, and later a nested column's global ones."""

    name: str
    type: ColumnType
    part: str
    cardinality: int

    def to_json(self) -> dict:
        return {"type": self.type.native_name, "part": self.part, "cardinality": self.cardinality}

    @staticmethod
    def from_json(name: str, obj: dict) -> DictionaryManifest:
        return DictionaryManifest(name, ColumnType.parse(obj["type"]), obj["part"], int(obj["cardinality"]))


@dataclass(frozen=True)
class ProjectionManifest:
    """An embedded pre-aggregated table: its definition and the columns it stores.

    ``spec`` is the definition as written (Druid's aggregate projection JSON plus ``filter``);
    the other fields are what a reader needs without interpreting it: which columns group, which
    aggregators' intermediates are stored, how many rows, and their order.

    ``time_column`` names the projection's time column as the definition does (``h`` for
    ``timestamp_floor(__time, 'PT1H')``; ``__time`` only when it groups on raw time; None when it
    keeps no time). Its values are stored in the projection table's ``__time`` column (so engines
    read a projection's times as they read base rows'), but they are that column's values, not
    the rows' times: the matcher must not take them for ``__time``. Segments written before the
    manifest named it (``time_column_known`` False) say it only through ``spec``.
    """

    name: str
    spec: dict
    grouping_columns: tuple[str, ...]
    aggregators: tuple[dict, ...]
    num_rows: int
    ordering: tuple[str, ...]
    columns: tuple[ColumnManifest, ...]
    time_column: str | None = None
    time_column_known: bool = False
    # The definition as canonical JSON text (keys sorted), made with the manifest: the value that
    # names the definition, so a reader parses each distinct definition once (query's
    # projection.spec_of_text) without writing it out again per query.
    spec_text: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec_text", json.dumps(self.spec, sort_keys=True))

    def column(self, name: str) -> ColumnManifest | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None

    def to_json(self) -> dict:
        out = {
            "name": self.name,
            "spec": self.spec,
            "groupingColumns": list(self.grouping_columns),
            "aggregators": list(self.aggregators),
            "numRows": self.num_rows,
            "ordering": list(self.ordering),
            "columns": [c.to_json() for c in self.columns],
        }
        if self.time_column_known:
            out["timeColumn"] = self.time_column
        return out

    @staticmethod
    def from_json(obj: dict) -> ProjectionManifest:
        return ProjectionManifest(
            name=obj["name"],
            spec=dict(obj.get("spec", {})),
            grouping_columns=tuple(obj.get("groupingColumns", ())),
            aggregators=tuple(obj.get("aggregators", ())),
            num_rows=int(obj["numRows"]),
            ordering=tuple(obj.get("ordering", ())),
            columns=tuple(ColumnManifest.from_json(c) for c in obj["columns"]),
            time_column=obj.get("timeColumn"),
            time_column_known="timeColumn" in obj,
        )


@dataclass(frozen=True)
class SegmentManifest:
    segment_id: SegmentId
    num_rows: int
    min_time: int | None
    max_time: int | None
    ordering: tuple[str, ...]
    columns: tuple[ColumnManifest, ...]
    files: dict[str, PartEntry]
    created: str
    dictionaries: dict[str, DictionaryManifest] = field(default_factory=dict)
    projections: tuple[ProjectionManifest, ...] = ()
    required_features: tuple[str, ...] = ()
    format_version: int = FORMAT_VERSION
    partial_projections: tuple[str, ...] | None = None  # a partial copy's projections; None: whole
    metrics: dict[str, str | None] = field(default_factory=dict)  # metric column -> aggregator type

    def column(self, name: str) -> ColumnManifest | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None

    def projection(self, name: str) -> ProjectionManifest | None:
        for p in self.projections:
            if p.name == name:
                return p
        return None

    @property
    def schema(self) -> dict[str, ColumnType]:
        return {c.name: c.type for c in self.columns}

    @property
    def size(self) -> int:
        """Stored bytes of all parts (compressed sizes where parts are compressed)."""
        return sum(p.length for p in self.files.values())

    def to_json(self) -> dict:
        out = self._to_json()
        if self.partial_projections is not None:
            out["partialProjections"] = list(self.partial_projections)
        return out

    def _to_json(self) -> dict:
        out = {
            "format": FORMAT_NAME,
            "formatVersion": self.format_version,
            "requiredFeatures": list(self.required_features),
            "id": self.segment_id.to_json(),
            "numRows": self.num_rows,
            "minTime": self.min_time,
            "maxTime": self.max_time,
            "ordering": list(self.ordering),
            "columns": [c.to_json() for c in self.columns],
            "dictionaries": {k: v.to_json() for k, v in self.dictionaries.items()},
            "projections": [p.to_json() for p in self.projections],
            "files": {k: v.to_json() for k, v in self.files.items()},
            "created": self.created,
        }
        if self.metrics:
            out["metrics"] = [{"name": n, "type": t} for n, t in self.metrics.items()]
        return out

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True).encode()

    @staticmethod
    def from_json(obj: dict, where: str) -> SegmentManifest:
        if obj.get("format") != FORMAT_NAME:
            raise SegmentCorruptError(f"segment {where}: manifest check failed: not a {FORMAT_NAME} manifest")
        version = int(obj.get("formatVersion", -1))
        if version > FORMAT_VERSION or version < 1:
            raise SegmentCorruptError(
                f"segment {where}: format version check failed: version {version}, this reader knows 1..{FORMAT_VERSION}"
            )
        known = known_features() | {COMPRESSED_PARTS, PARTIAL_COPY}
        unknown = [f for f in obj.get("requiredFeatures", []) if f not in known]
        if unknown:
            raise SegmentCorruptError(
                f"segment {where}: feature check failed: needs {unknown}, which this version cannot read; upgrade strata"
            )
        return SegmentManifest(
            segment_id=SegmentId.from_json(obj["id"]),
            num_rows=int(obj["numRows"]),
            min_time=obj.get("minTime"),
            max_time=obj.get("maxTime"),
            ordering=tuple(obj.get("ordering", ())),
            columns=tuple(ColumnManifest.from_json(c) for c in obj["columns"]),
            files={k: PartEntry(*v) for k, v in obj["files"].items()},
            created=obj.get("created", ""),
            dictionaries={k: DictionaryManifest.from_json(k, v) for k, v in obj.get("dictionaries", {}).items()},
            projections=tuple(ProjectionManifest.from_json(p) for p in obj.get("projections", ())),
            required_features=tuple(obj.get("requiredFeatures", ())),
            format_version=version,
            partial_projections=tuple(obj["partialProjections"]) if obj.get("partialProjections") is not None else None,
            metrics=metrics_of(obj),
        )


def metrics_of(manifest: dict) -> dict[str, str | None]:
    """Metric column -> aggregator type of a manifest's JSON; {} when it records none."""
    return {m["name"]: m.get("type") for m in manifest.get("metrics") or () if isinstance(m, dict) and "name" in m}
