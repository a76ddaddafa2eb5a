"""A corrupt segment is reported by its id, exactly: partition 10 being corrupt says nothing about
partition 1 (whose id is a prefix of it)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from common.errors import SegmentCorruptError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.historical.historical_node import HistoricalNode

IV = Interval.parse("2020-01-01/2020-01-02")


def node_serving(*sids):
    fed = []
    fake = SimpleNamespace(_lock=threading.Lock(), state=SimpleNamespace(served=set(sids)), feed=fed.append,
                           stimulus_id=lambda kind: f"{kind}-1")
    return fake, fed


def test_only_the_named_segment_is_refetched():
    p1, p10 = SegmentId("ds", IV, "v1", 1), SegmentId("ds", IV, "v1", 10)
    assert str(p1) in str(p10)  # what the old substring match tripped over
    node, fed = node_serving(p1, p10)
    HistoricalNode.report_corrupt(node, SegmentCorruptError(f"segment {p10}: checksum check failed", p10))
    assert [(e.segment, e.stimulus_id) for e in fed] == [(p10, "segment-corrupted-1")]


def test_an_error_without_an_id_marks_nothing():
    p1 = SegmentId("ds", IV, "v1", 1)
    node, fed = node_serving(p1)
    HistoricalNode.report_corrupt(node, SegmentCorruptError(f"segment {p1}: cannot open"))
    assert fed == []


def test_segment_reads_raise_with_the_segment_id(tmp_path):
    import pyarrow as pa

    from common.segment.builder import build_segment
    from common.segment.segment import Segment

    sid = SegmentId("ds", IV, "v1", 10)
    path = str(tmp_path / "s.sseg")
    build_segment(pa.table({"__time": pa.array([IV.start], pa.int64()), "n": [1]}), path, sid)
    seg = Segment.open(path)
    entry = seg.manifest.files["n/values"]
    with open(path, "r+b") as f:
        f.seek(entry.offset + entry.length - 1)
        f.write(b"\xff")
    try:
        Segment.open(path).column("n").values()
    except SegmentCorruptError as exc:
        assert exc.segment_id == sid
    else:
        raise AssertionError("a damaged part was read")
