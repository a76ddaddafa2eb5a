"""Compaction's pure parts: which segments, which granularity, the exported rows and the REPLACE."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.errors import ValidationError
from common.segment.builder import build_segment
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.types.column_type import JSON
from common.types.interval import Interval
from services.ingestion.compaction import (chosen_segments, chunk_granularity, compaction_sql, export_rows,
                                           present_segments)
from common.ingest.statement import parse_ingestion

DAY = 86_400_000
T0 = 1577836800000


def test_chunk_granularity():
    assert chunk_granularity([Interval(T0, T0 + DAY), Interval(T0 + DAY, T0 + 2 * DAY)]) == "DAY"
    assert chunk_granularity([Interval(T0, T0 + 3_600_000)]) == "HOUR"
    assert chunk_granularity([Interval.parse("2020-01-01/2020-02-01"), Interval.parse("2020-02-01/2020-03-01")]) == "MONTH"
    with pytest.raises(ValidationError, match="do not share one granularity"):
        chunk_granularity([Interval(T0, T0 + DAY), Interval(T0 + DAY, T0 + DAY + 3_600_000)])


def test_whole_chunks_inside_the_interval_are_chosen():
    ds = [SegmentDescriptor(SegmentId("ds", Interval(T0 + i * DAY, T0 + (i + 1) * DAY), "v1", 0), 1, 1, "k", 1, "{}")
          for i in range(3)]
    assert chosen_segments(ds, None) == ds
    assert chosen_segments(ds, Interval(T0 + DAY, T0 + 2 * DAY + 5)) == [ds[1]]
    assert present_segments(ds, Interval(T0 + DAY, T0 + 2 * DAY + 5)) == [ds[1].id, ds[2].id]


def test_overshadowed_segments_are_never_read_again():
    # A stream handoff's v2 is published; its small v1 input stays used until v2 is served.
    small = [SegmentDescriptor(SegmentId("ds", Interval(T0, T0 + DAY), "v1", p), 1, 1, "k", 1, "{}") for p in (0, 1)]
    full = SegmentDescriptor(SegmentId("ds", Interval(T0, T0 + DAY), "v2", 0), 1, 2, "k", 1, "{}")
    assert chosen_segments([*small, full], None) == [full]
    assert present_segments([*small, full], Interval(T0, T0 + DAY)) == [s.id for s in [*small, full]]


def test_exported_rows_and_the_replace_they_feed(tmp_path):
    table = pa.table({"__time": pa.array([T0, T0 + 5], pa.int64()), "c": ["a", None],
                      "j": [json.dumps({"x": 1}), None], "n": pa.array([1, 2], pa.int64())})
    path = str(tmp_path / "s.sseg")
    build_segment(table, path, SegmentId("ds", Interval(T0, T0 + DAY), "v1", 0), column_types={"j": JSON})
    seg = Segment.open(path)
    out = str(tmp_path / "rows.parquet")
    schema = export_rows([seg], out)
    rows = pq.read_table(out).to_pylist()
    assert [r["c"] for r in rows] == ["a", None] and json.loads(rows[0]["j"]) == {"x": 1}
    sql = compaction_sql("ds", [Interval(T0, T0 + DAY)], schema, out, "DAY")
    st = parse_ingestion(sql)
    assert st.mode == "REPLACE" and st.overwrite == (Interval(T0, T0 + DAY),) and st.json_columns() == ("j",)
    assert str(st.partitioned_by) == "day" or st.partitioned_by.to_json() == "day"


def test_compaction_keeps_the_chosen_segments_metrics():
    from services.ingestion.compaction import compaction_metrics

    def seg(day: int, metrics: dict | None) -> SegmentDescriptor:
        manifest = {} if metrics is None else {"metrics": [{"name": n, "type": t} for n, t in metrics.items()]}
        return SegmentDescriptor(SegmentId("ds", Interval(T0 + day * DAY, T0 + (day + 1) * DAY), "v1", 0), 1, 1, "k",
                                 1, json.dumps(manifest))

    ds = [seg(0, {"cnt": "count", "added": "longSum"}), seg(1, {"cnt": "count", "added": "doubleSum", "u": None}),
          seg(2, None)]
    assert compaction_metrics(ds, None) == {"cnt": "count", "added": None, "u": None}  # conflicting types: unknown
    assert compaction_metrics(ds, Interval(T0, T0 + DAY)) == {"cnt": "count", "added": "longSum"}
    assert compaction_metrics(ds, Interval(T0 + 2 * DAY, T0 + 3 * DAY)) == {}  # plain rows stay plain
