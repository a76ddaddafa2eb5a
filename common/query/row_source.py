"""RowSource: what the engine reads rows from, a segment table or an in-memory Arrow table.

Segment tables bring column indexes and dictionary codes through their ``ColumnReader``s;
tables (subquery results on the broker) do not, and the engine falls back to evaluating values. ``ColumnSource`` is the view of one
source restricted to the selected rows, with virtual columns computed on demand; it is the
``columns`` mapping that expressions and aggregators read.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from common.errors import ValidationError, unknown_name_message
from common.segment.column_reader import ColumnIndex
from common.segment.multi_value_column import apply_handling
from common.segment.scan_spec import SourceChoice
from common.segment.value_column import ValueColumn
from common.types.column_type import TIME_COLUMN, ColumnType, TypeKind
from common.types.interval import Interval
from common.types.number_parsing import strings_to_double


class RowSource:
    """Abstract reader. Missing columns read as typed nulls (schema evolution across segments).

    ``pre_aggregated`` sources (a segment's projection) hold aggregator intermediates in the
    columns ``aggregator_columns`` names; engines combine those instead of accumulating rows.
    """

    num_rows: int
    schema: dict[str, ColumnType]
    label: str
    pre_aggregated: bool = False
    projection: str | None = None
    aggregator_columns: Mapping[str, str] = {}
    # A filtered query aggregator served by a stored unfiltered one: the filter selecting the
    # projection rows whose intermediates it combines.
    aggregator_filters: Mapping[str, object] = {}
    aliases: Mapping[str, str] = {}  # query virtual column -> stored projection column
    # A projection's rows may be ordered by other columns first; base rows are ordered by time.
    time_sorted: bool = True
    # The filter to run instead of the query's (a projection already applied some of its terms).
    replaces_filter: bool = False
    residual_filter = None
    rejected: tuple = ()  # (projection, reason) of projections that could not serve the query
    # Sources whose rows ``engine.run_together`` may answer in one pass share this key (the same
    # projection, stored the same way); None for base rows and tables.
    batch_key: tuple | None = None
    interval: Interval | None = None  # the segment's interval, for time coverage

    def time(self) -> np.ndarray:
        raise NotImplementedError

    def index(self, name: str) -> ColumnIndex | None:
        """The column's dictionary index (lookups and row bitmaps), when it has one."""
        return None

    def dictionary_codes(self, name: str) -> tuple[np.ndarray, pa.Array] | None:
        """(codes with -1 for null, dictionary) when the column stores codes, else None."""
        return None

    def element_index(self, name: str):
        """An array column's per-element index (common/segment/element_index.py), when it has one."""
        return None

    def take(self, name: str, rows: np.ndarray | None) -> pa.Array:
        raise NotImplementedError

    def nested_field(self, name: str, path: str):
        """The ColumnReader of a nested column's field, when the source stores one."""
        return None

    def nested_paths_complete(self, name: str) -> bool:
        """Whether the source stores ``name`` nested with every literal path as a field."""
        return False

    def part_bytes(self, name: str, roles: tuple[str, ...]) -> int:
        return 0

    def time_bounds(self) -> tuple[int, int] | None:
        t = self.time()
        return (int(t.min()), int(t.max())) if len(t) else None

    def check_unchanged(self) -> None:
        """Fail (SegmentCorruptError) when the file behind the source changed since it was opened;
        a read of a stored part checks this too."""

    def stored_values(self, names: list[str]) -> list[pa.Array]:
        """Every row of each stored column (``take(name, None)``)."""
        return [self.take(name, None) for name in names]

    def derived(self, name: str, kind: str, make):
        """``make(values)`` of every row of stored column ``name``, kept with the source's file
        for the next queries (see ``ValueColumn.derived_values``); None when the source keeps
        nothing (the caller computes it from what it has)."""
        return None


class SegmentRowSource(RowSource):
    """A segment table (base rows or a projection) read through its ``ColumnReader``s."""

    def __init__(self, table, choice: SourceChoice | None = None) -> None:
        self.table = table
        self.num_rows = table.num_rows
        self.schema = table.schema
        self.interval = table.interval
        if choice is not None:
            self.pre_aggregated = choice.pre_aggregated
            self.projection = choice.projection
            self.aggregator_columns = dict(choice.match.aggregator_columns)
            self.aggregator_filters = dict(choice.match.aggregator_filters)
            self.aliases = dict(choice.match.column_aliases)
            self.replaces_filter = choice.match.replaces_filter
            self.residual_filter = choice.match.filter
            if self.pre_aggregated:
                self.batch_key = (self.projection, tuple(sorted(self.aggregator_columns.items())),
                                  tuple(sorted(self.aliases.items())))
        self.time_sorted = bool(table.ordering) and table.ordering[0] == TIME_COLUMN

    @property
    def label(self) -> str:
        # Formatted only when asked (errors, reports): formatting a segment id's interval took
        # longer than running a query over a projection's few rows.
        return self.table.label

    @classmethod
    def of(cls, choice: SourceChoice) -> SegmentRowSource:
        return cls(choice.table, choice)

    def time(self) -> np.ndarray:
        return _int64(self.table.column(TIME_COLUMN).values())

    def index(self, name: str) -> ColumnIndex | None:
        return self.table.column(name).index() if self.table.has_column(name) else None

    def dictionary_codes(self, name: str) -> tuple[np.ndarray, pa.Array] | None:
        return self.table.column(name).dictionary_codes() if self.table.has_column(name) else None

    def element_index(self, name: str):
        if not self.table.has_column(name):
            return None
        found = getattr(self.table.column(name), "element_index", None)
        return found() if found is not None else None

    def take(self, name: str, rows: np.ndarray | None) -> pa.Array:
        return self.table.column(name).take(rows)

    def nested_field(self, name: str, path: str):
        return self.table.column(name).field(path) if self.table.has_column(name) else None

    def nested_paths_complete(self, name: str) -> bool:
        return self.table.has_column(name) and self.table.column(name).paths_complete

    def part_bytes(self, name: str, roles: tuple[str, ...]) -> int:
        return self.table.column(name).part_bytes(roles)

    def time_bounds(self) -> tuple[int, int] | None:
        return self.table.time_bounds()

    def check_unchanged(self) -> None:
        self.table.segment.check_unchanged()

    def stored_values(self, names: list[str]) -> list[pa.Array]:
        """Every row of each stored column, the file checked unchanged once for all of them
        (reading a projection's intermediates again, a check per part was most of the read)."""
        self.table.segment.check_unchanged()
        out = []
        for name in names:
            col = self.table.column(name)
            out.append(col.values(check=False) if isinstance(col, ValueColumn) else col.take(None))
        return out

    def derived(self, name: str, kind: str, make):
        col = self.table.column(name)
        return col.derived_values(kind, make) if isinstance(col, ValueColumn) else None


class TableRowSource(RowSource):
    """An Arrow table as a row source; ``__time`` may be a timestamp or int64 millis."""

    def __init__(self, table: pa.Table, label: str = "table") -> None:
        self.table = table
        self.num_rows = table.num_rows
        self.label = label
        self.schema = {f.name: ColumnType.from_arrow(f.type, f.name) for f in table.schema}

    def time(self) -> np.ndarray:
        if TIME_COLUMN not in self.table.column_names:
            return np.zeros(self.num_rows, dtype=np.int64)
        return _int64(self.table.column(TIME_COLUMN).combine_chunks())

    def time_bounds(self) -> tuple[int, int] | None:
        if TIME_COLUMN not in self.table.column_names:
            return None  # e.g. a granularity-'all' subquery result: no time to restrict
        return super().time_bounds()

    def take(self, name: str, rows: np.ndarray | None) -> pa.Array:
        col = self.table.column(name)
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        return arr if rows is None else arr.take(pa.array(rows))


def _int64(col: pa.Array) -> np.ndarray:
    """Epoch millis as int64 numpy, zero-copy for a stored millisecond column without nulls."""
    if pa.types.is_timestamp(col.type):
        if col.type.unit != "ms":
            col = col.cast(pa.timestamp("ms", tz=col.type.tz))
        col = col.view(pa.int64())
    elif col.type != pa.int64():
        col = col.cast(pa.int64())
    if col.null_count:
        col = col.fill_null(0)
    return col.to_numpy(zero_copy_only=False)


def declared_types(stored: Mapping[str, ColumnType], expected: Mapping[str, ColumnType]) -> dict[str, ColumnType]:
    """The types of the values a query reads from a source: a declared (expected) type wins over
    the stored one, because ``ColumnSource`` casts the stored values to it (a column whose type a
    newer segment changed, or a catalog's declared type). Filters coerce their values to these
    types, so reporting the stored type here would compare, say, int64 values with a string set."""
    out = dict(expected)
    for name, ctype in stored.items():
        out.setdefault(name, ctype)
    return out


def null_array(ctype: ColumnType, n: int) -> pa.Array:
    return pa.nulls(n, type=ctype.to_arrow())


class ColumnSource(Mapping):
    """Columns of ``source`` at ``rows`` (sorted row ids, or None for all rows).

    String columns come back as DictionaryArrays so expressions can work per distinct value;
    virtual columns are evaluated on first access. ``expected`` gives types for columns this
    source lacks, which then read as typed nulls.
    """

    def __init__(self, source: RowSource, rows: np.ndarray | None, virtual_columns=(),
                 expected: Mapping[str, ColumnType] | None = None) -> None:
        self.source = source
        self.rows = rows
        self.num_rows = source.num_rows if rows is None else len(rows)
        self.virtual = {vc.name: vc for vc in virtual_columns}
        self.expected = dict(expected or {})
        self._cache: dict[str, pa.Array] = {}
        self._bytes = [0]  # a shared cell, so subsets add to the same count
        self._touched: set[str] = set()
        self._types: dict[str, ColumnType] | None = None

    def subset(self, mask: np.ndarray) -> ColumnSource:
        rows = np.flatnonzero(mask) if self.rows is None else self.rows[mask]
        out = ColumnSource(self.source, rows, self.virtual.values(), self.expected)
        out._touched = self._touched  # bytes are counted once per run, shared with subsets
        out._bytes = self._bytes
        out._types = self._types
        return out

    def type_of(self, name: str) -> ColumnType:
        types = self.types()
        if name in types:
            return types[name]
        raise ValidationError(unknown_name_message("column", name, types))

    def types(self) -> dict[str, ColumnType]:
        if self._types is None:
            out = declared_types(self.source.schema, self.expected)
            # Virtual columns may build on earlier ones, so infer them in declaration order.
            for name, vc in self.virtual.items():
                out[name] = vc.output_type_for(out)
            self._types = out
        return self._types

    def _touch(self, name: str, roles: tuple[str, ...]) -> None:
        key = (name, roles)
        if key not in self._touched:
            self._touched.add(key)
            self._bytes[0] += self.source.part_bytes(name, roles)

    def touch_bytes(self, key: str, nbytes: int) -> None:
        """Count bytes read once per run (for readers the source does not name, such as fields)."""
        if key not in self._touched:
            self._touched.add(key)
            self._bytes[0] += nbytes

    @property
    def bytes_read(self) -> int:
        return self._bytes[0]

    def overridden(self, name: str) -> bool:
        """True when a declared (expected) type differs from the stored one, so values get cast."""
        want = self.expected.get(name)
        return want is not None and name in self.source.schema and want != self.source.schema[name]

    def is_physical(self, name: str) -> bool:
        return name not in self.virtual and name in self.source.schema

    def stored_codes(self, name: str) -> tuple[np.ndarray, pa.Array] | None:
        """Codes at the selected rows plus the dictionary, when ``name`` is a stored column with a
        dictionary read as stored (not virtual, not cast to a declared type); else None."""
        if not self.is_physical(name) or self.overridden(name):
            return None
        found = self.source.dictionary_codes(name)
        if found is None:
            return None
        codes, dictionary = found
        self._touch(name, ("codes", "dictionary"))
        return (codes if self.rows is None else codes[self.rows]), dictionary

    def time(self) -> np.ndarray:
        t = self.source.time()
        self._touch(TIME_COLUMN, ("values",))
        return t if self.rows is None else t[self.rows]

    def __getitem__(self, name: str) -> pa.Array:
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        if name in self.virtual and name in self.source.aliases:
            arr = self[self.source.aliases[name]]  # a projection stored this virtual column
        elif name in self.virtual:
            arr = self.virtual[name].evaluate(self)
        elif name in self.source.schema:
            ctype = self.source.schema[name]
            arr = self.source.take(name, self.rows)  # zero-copy for all rows of a stored column
            self._touch(name, ("codes", "dictionary") if pa.types.is_dictionary(arr.type) else ("values",))
            if ctype.kind is TypeKind.TIMESTAMP and not pa.types.is_timestamp(arr.type):
                arr = arr.cast(pa.int64()).cast(ctype.to_arrow())
            want = self.expected.get(name)
            if want is not None and want != ctype:
                arr = _cast_lenient(arr, want)
        elif name in self.expected:
            arr = null_array(self.expected[name], self.num_rows)
        else:
            raise ValidationError(unknown_name_message("column", name, self.types()))
        self._cache[name] = arr
        return arr

    def __iter__(self):
        return iter(self.types())

    def __len__(self) -> int:
        return len(self.types())


def _cast_lenient(arr: pa.Array, ctype: ColumnType) -> pa.Array:
    """Cast to a wider or declared type; values that do not convert become null."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    target = ctype.to_arrow()
    if arr.type == target:
        return arr  # a cast to its own type changes nothing and costs a compute call
    if ctype.multi_value and not pa.types.is_list(arr.type):
        # A single-valued column read as multi-value (declared so after it was written): one
        # value per row, a null row without values.
        return apply_handling(arr, "ARRAY")
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if ctype.is_numeric and pa.types.is_string(arr.type):
            return strings_to_double(arr).cast(target, safe=False)
        return pa.nulls(len(arr), target)


def interval_rows(times: np.ndarray, intervals: list[Interval]) -> list[tuple[int, int]]:
    """Row ranges of a time-sorted column inside the intervals."""
    out = []
    for iv in intervals:
        lo = int(np.searchsorted(times, iv.start, side="left"))
        hi = int(np.searchsorted(times, iv.end, side="left"))
        if hi > lo:
            out.append((lo, hi))
    return out
