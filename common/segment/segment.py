"""Segment: the read side of a segment file. Opening maps the file; columns load lazily."""

from __future__ import annotations

import json
import threading

from common.errors import SegmentCorruptError, ValidationError, unknown_name_message
from common.segment.container import Container
from common.segment.manifest import KNOWN_ENCODINGS, SegmentManifest
from common.segment.segment_id import SegmentId
from common.segment.string_column import StringColumn
from common.segment.value_column import ValueColumn
from common.types.column_type import ColumnType
from common.types.interval import Interval

Column = StringColumn | ValueColumn


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
        self._container.check_bounds(self.manifest.files)
        for col in self.manifest.columns:
            if col.encoding not in KNOWN_ENCODINGS:
                raise SegmentCorruptError(
                    f"segment {self.id}: encoding check failed: column '{col.name}' uses encoding "
                    f"'{col.encoding}', which this version cannot read"
                )
            missing = [p for p in col.parts.values() if p not in self.manifest.files]
            if missing:
                raise SegmentCorruptError(f"segment {self.id}: part check failed: column '{col.name}' lacks {missing}")
        self._columns: dict[str, Column] = {}
        self._lock = threading.Lock()
        if verify:
            self._container.verify_all()

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
        return self.manifest.column(name) is not None

    def column(self, name: str) -> Column:
        col = self._columns.get(name)
        if col is not None:
            return col
        meta = self.manifest.column(name)
        if meta is None:
            raise ValidationError(unknown_name_message("column", name, self.schema))
        if meta.encoding == "dictionary":
            col = StringColumn(self._container, meta.parts, self.num_rows, meta.stats)
        else:
            col = ValueColumn(self._container, meta.parts, self.num_rows, meta.stats, meta.type)
        with self._lock:
            self._columns.setdefault(name, col)
        return self._columns[name]

    def verify(self) -> None:
        """Check every part's checksum now (deep-storage downloads do this before serving)."""
        self._container.verify_all()

    def close(self) -> None:
        self._columns.clear()
        self._container.close()

    def __repr__(self) -> str:
        return f"Segment({self.id}, rows={self.num_rows})"
