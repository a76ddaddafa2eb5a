"""The storage seam: typed manifests that keep what they do not know, the encoding registry,
segment files holding a base table plus projection tables that share its dictionaries, and the
segment's choice of table for a ScanSpec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError, ValidationError
from common.query import engine
from common.query.model import query_from_json
from common.query.row_source import SegmentRowSource
from common.segment.builder import ProjectionTable, build_segment
from common.segment.column_reader import ColumnIndex, ColumnReader
from common.segment.container import ipc_bytes
from common.segment.encoding import (
    EncodedColumn,
    Encoding,
    EncodingSpec,
    known_encodings,
    register,
)
from common.segment.manifest import ColumnManifest, SegmentManifest
from common.segment.scan_spec import ProjectionMatch, ScanSpec
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.column_type import LONG, ColumnType
from common.types.interval import Interval

IV = "2020-01-01/2020-01-02"
T0 = 1577836800000


def base_rows() -> pa.Table:
    channels = ["#en", "#fr", "#en", None, "#de", "#en", "#fr", "#de"]
    return pa.table({
        "__time": pa.array([T0 + i * 600_000 for i in range(8)], pa.int64()),
        "channel": channels,
        "page": [f"p{i % 3}" for i in range(8)],
        "added": pa.array([1, 2, 3, 4, 5, 6, 7, 8], pa.int64()),
    })


def channel_projection() -> ProjectionTable:
    rows = base_rows().group_by(["channel"], use_threads=False).aggregate([("added", "sum"), ([], "count_all")])
    rows = rows.rename_columns({"count_all": "n"}).select(["channel", "n", "added_sum"])
    spec = {"type": "aggregate", "name": "by_channel", "groupingColumns": [{"type": "string", "name": "channel"}],
            "aggregators": [{"type": "count", "name": "n"},
                            {"type": "longSum", "name": "added_sum", "fieldName": "added"}]}
    return ProjectionTable("by_channel", spec, ("channel",), tuple(spec["aggregators"]), rows)


@pytest.fixture
def with_projection(tmp_path):
    path = str(tmp_path / "p.sseg")
    sid = SegmentId("wiki", Interval.of(IV), "v1", 0)
    build_segment(base_rows(), path, sid, projections=[channel_projection()])
    seg = Segment.open(path, verify=True)
    yield seg
    seg.close()


# ---- manifests keep what they do not know ---------------------------------------------------------
def test_column_spec_keeps_unknown_keys_through_a_round_trip():
    obj = {"name": "c", "type": "STRING", "encoding": "dictionary", "parts": {"codes": "c/codes"},
           "stats": {}, "spec": {"sharedDictionary": "c", "futureKey": {"x": 1}}}
    col = ColumnManifest.from_json(obj)
    assert col.spec.shared_dictionary == "c"
    assert col.to_json()["spec"] == {"sharedDictionary": "c", "futureKey": {"x": 1}}


def test_manifest_round_trips_projections_and_shared_dictionaries(with_projection):
    m = with_projection.manifest
    again = SegmentManifest.from_json(m.to_json(), "test")
    assert again == m
    assert set(m.dictionaries) == {"channel", "page"}
    proj = m.projection("by_channel")
    assert proj.num_rows == 4 and proj.grouping_columns == ("channel",) and proj.ordering == ("channel",)
    assert [a["name"] for a in proj.aggregators] == ["n", "added_sum"]


# ---- projection tables share the base dictionary ----------------------------------------------------
def test_projection_column_reads_through_the_base_dictionary(with_projection):
    seg = with_projection
    table = seg.table("by_channel")
    channel = table.column("channel")
    col_meta = seg.manifest.projection("by_channel").column("channel")
    assert "dictionary" not in col_meta.parts  # no copy of the dictionary in the projection
    assert col_meta.spec.shared_dictionary == "channel"
    assert channel.dictionary.to_pylist() == seg.column("channel").dictionary.to_pylist()
    assert channel.values().cast(pa.string()).to_pylist() == [None, "#de", "#en", "#fr"]
    assert table.column("n").values().to_pylist() == [1, 2, 3, 2]
    assert table.column("added_sum").values().to_pylist() == [4, 13, 10, 9]
    idx = channel.index()
    assert isinstance(idx, ColumnIndex) and isinstance(channel, ColumnReader)
    assert list(idx.bitmap(idx.lookup("#en"))) == [2] and list(idx.null_bitmap()) == [0]


def test_projection_values_outside_the_shared_dictionary_are_refused(tmp_path):
    proj = channel_projection()
    bad = proj.rows.set_column(0, "channel", pa.array(["#xx", "#de", "#en", "#fr"]))
    with pytest.raises(ValidationError, match="'#xx' of 'channel' is not in the shared dictionary"):
        build_segment(base_rows(), str(tmp_path / "x.sseg"), SegmentId("wiki", Interval.of(IV), "v1", 0),
                      projections=[ProjectionTable("p", proj.spec, ("channel",), proj.aggregators, bad)])


def test_a_missing_shared_dictionary_is_corruption(with_projection, tmp_path):
    obj = with_projection.manifest.to_json()
    obj["dictionaries"].pop("channel")
    with pytest.raises(SegmentCorruptError, match="shared dictionary 'channel'"):
        _reopen_with_manifest(with_projection.path, obj, tmp_path)


def _reopen_with_manifest(path, obj, tmp_path):
    import json
    import struct

    from common.segment.container import _FOOTER, TAIL_MAGIC, crc32

    data = open(path, "rb").read()
    offset, length, _, version, _ = _FOOTER.unpack(data[-_FOOTER.size:])
    manifest = json.dumps(obj).encode()
    out = data[:offset] + manifest + _FOOTER.pack(offset, len(manifest), crc32(manifest), version, TAIL_MAGIC)
    target = tmp_path / "rewritten.sseg"
    target.write_bytes(out)
    assert struct.calcsize("<QQII8s") == _FOOTER.size
    return Segment.open(str(target))


# ---- the encoding registry ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OffsetSpec(EncodingSpec):
    offset: int = 0
    KEYS: ClassVar = (("offset", "offset"),)


class OffsetColumn:
    """A toy encoding: LONG values stored minus a per-column offset."""

    def __init__(self, stored):
        self.type, self.num_rows, self.stats = stored.type, stored.num_rows, dict(stored.stats)
        self._stored = stored

    def values(self):
        import pyarrow.compute as pc

        raw = self._stored.container.array(self._stored.parts["values"])
        return pc.add(raw, self._stored.spec.offset)

    def take(self, rows):
        return self.values() if rows is None else self.values().take(pa.array(rows))

    def dictionary_codes(self):
        return None

    def index(self):
        return None

    def part_bytes(self, roles):
        return 0


def test_a_registered_encoding_is_read_through_the_registry(tmp_path):
    import pyarrow.compute as pc

    def encode(values, ctype):
        low = pc.min(values).as_py()
        return EncodedColumn({"values": ipc_bytes(pc.subtract(values, low))}, {}, OffsetSpec(offset=low))

    register(Encoding("test-offset", OffsetSpec, OffsetColumn, encode, required_roles=("values",)))
    assert "test-offset" in known_encodings()
    path = str(tmp_path / "o.sseg")
    build_segment(base_rows(), path, SegmentId("wiki", Interval.of(IV), "v1", 0))
    seg = Segment.open(path)
    obj = seg.manifest.to_json()
    enc = encode(seg.column("added").values(), LONG)
    # Point the column at the toy encoding and a part holding offset values (re-using the bytes slot).
    col = next(c for c in obj["columns"] if c["name"] == "added")
    col["encoding"], col["spec"] = "test-offset", enc.spec.to_json()
    seg.close()
    rewritten = _write_segment_with_part(path, obj, "added/values", enc.parts["values"], tmp_path)
    assert rewritten.column("added").values().to_pylist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert rewritten.manifest.column("added").spec == OffsetSpec(offset=1)


def _write_segment_with_part(path, obj, part_name, data, tmp_path):
    import json

    from common.segment.container import Container, write_container
    from common.segment.manifest import PartEntry

    old = Container(path)
    m = SegmentManifest.from_json(obj, "t")
    old.check_bounds(m.files)
    parts = {name: (data if name == part_name else old.part(name)) for name in m.files}

    def make_manifest(entries):
        obj["files"] = {k: list(v) for k, v in entries.items()}
        return json.dumps(obj).encode()

    target = str(tmp_path / "with-part.sseg")
    write_container(target, parts, make_manifest)
    assert PartEntry
    return Segment.open(target)


# ---- the segment chooses the table ----------------------------------------------------------------
def _matcher(proj, spec, interval):
    if set(spec.grouping_columns) - set(proj.grouping_columns):
        return f"missing grouping column {sorted(set(spec.grouping_columns) - set(proj.grouping_columns))}"
    return ProjectionMatch({"n": "n", "added": "added_sum"})


AGG = ScanSpec(grouping_columns=("channel",), aggregators=("x",))


def test_source_for_prefers_a_matching_projection(with_projection):
    choice = with_projection.source_for(AGG, _matcher)
    assert choice.pre_aggregated and choice.projection == "by_channel" and choice.table.num_rows == 4


def test_source_for_reads_base_rows_without_a_match_and_says_why(with_projection):
    choice = with_projection.source_for(ScanSpec(grouping_columns=("page",)), _matcher)
    assert not choice.pre_aggregated and choice.table is with_projection.table()
    assert choice.rejected == (("by_channel", "missing grouping column ['page']"),)


def test_scans_and_no_projections_read_base_rows(with_projection):
    assert with_projection.source_for(ScanSpec(), _matcher).table is with_projection.table()
    spec = ScanSpec(grouping_columns=("channel",), context={"noProjections": True})
    assert with_projection.source_for(spec, _matcher).projection is None


@pytest.mark.parametrize("context, message", [
    ({"useProjection": "nope"}, "unknown projection 'nope'"),
    ({"useProjection": "by_channel"}, "useProjection 'by_channel' cannot serve this query.*missing grouping column"),
    ({"forceProjections": True}, r"forceProjections is set but no projection .* \(by_channel: missing grouping"),
])
def test_projection_context_keys_fail_with_the_reason(with_projection, context, message):
    with pytest.raises(ValidationError, match=message):
        with_projection.source_for(ScanSpec(grouping_columns=("page",), context=context), _matcher)


def test_combining_a_projection_gives_the_base_rows_answer(with_projection):
    query = query_from_json({
        "queryType": "groupBy", "dataSource": "wiki", "intervals": [IV], "granularity": "all",
        "dimensions": ["channel"], "aggregations": [{"type": "count", "name": "n"},
                                                     {"type": "longSum", "name": "added", "fieldName": "added"}]})
    schema = with_projection.schema
    base = engine.finalize(query, engine.run(query, with_projection, schema), schema)
    choice = with_projection.source_for(engine.scan_spec_for(query), _matcher)
    assert choice.pre_aggregated
    partial = engine.run(query, SegmentRowSource.of(choice), schema)
    assert partial.stats.rows_scanned == 4  # projection rows, not the 8 base rows
    assert engine.finalize(query, partial, schema).to_pylist() == base.to_pylist()
    assert base.to_pylist()[0] == {"channel": None, "n": 1, "added": 4}


def test_scan_spec_for_an_aggregate_query_names_what_it_reads():
    query = query_from_json({
        "queryType": "topN", "dataSource": "wiki", "intervals": [IV], "granularity": "hour",
        "dimension": "channel", "metric": "added", "threshold": 3,
        "filter": {"type": "equals", "column": "page", "matchValue": "p1"},
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]})
    spec = engine.scan_spec_for(query)
    assert spec.is_aggregate and spec.grouping_columns == ("channel",)
    assert spec.columns == frozenset({"channel", "page", "added"})
    assert spec.granularity == query.granularity
    assert not engine.scan_spec_for(query_from_json({"queryType": "scan", "dataSource": "wiki",
                                                     "intervals": [IV]})).is_aggregate


def test_column_types_survive(with_projection):
    assert with_projection.table("by_channel").schema["added_sum"] == ColumnType.parse("LONG")
    assert np.array_equal(with_projection.table().column("added").values().to_numpy(), np.arange(1, 9))
