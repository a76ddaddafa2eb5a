"""A partial copy holds only the named projections' bytes and answers what they answer, the same
as the whole segment; everything else is refused by name."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from common.errors import SegmentCorruptError, ValidationError
from common.query import execute
from common.query.projection import ProjectionSpec, projection_rows
from common.segment import Segment
from common.segment.builder import build_segment
from common.segment.partial_copy import write_partial_copy
from common.segment.segment import PartialCopyError
from common.segment.segment_id import SegmentId
from common.types.interval import Interval

DAY = 86_400_000
SPECS = [ProjectionSpec.from_json({"type": "aggregate", "name": "by_page", "groupingColumns": [
             {"type": "string", "name": "page"}], "aggregators": [{"type": "longSum", "name": "added",
                                                                   "fieldName": "added"}]}),
         ProjectionSpec.from_json({"type": "aggregate", "name": "by_user", "groupingColumns": [
             {"type": "string", "name": "user"}], "aggregators": [{"type": "count", "name": "n"}]})]
BY_PAGE = {"queryType": "groupBy", "dataSource": "wiki", "intervals": ["1970-01-01/1970-01-02"], "granularity": "all",
           "dimensions": ["page"], "aggregations": [{"type": "longSum", "name": "a", "fieldName": "added"}]}


@pytest.fixture
def whole(tmp_path) -> str:
    n = 2000
    rows = pa.table({"__time": pa.array([i * 1000 for i in range(n)], pa.timestamp("ms", tz="UTC")),
                     "page": [None if i % 97 == 0 else f"p{i % 13}" for i in range(n)],
                     "user": [f"u{i % 401}" for i in range(n)],
                     "comment": [f"a long comment {i} " * 8 for i in range(n)],
                     "added": pa.array([None if i % 50 == 0 else i - 1000 for i in range(n)], pa.int64())})
    path = str(tmp_path / "whole.sseg")
    build_segment(rows, path, SegmentId("wiki", Interval(0, DAY), "v1"),
                  projections=[projection_rows(s, rows) for s in SPECS])
    return path


def copy_of(whole: str, path: str, names, share: float = 0.25) -> Segment:
    reads = []
    with open(whole, "rb") as f:
        def read_at(offset: int, length: int) -> bytes:
            reads.append(length)
            f.seek(offset)
            return f.read(length)
        write_partial_copy(read_at, os.path.getsize(whole), names, path, "test")
    assert sum(reads) < os.path.getsize(whole) * share  # only the projection's bytes were read
    return Segment.open(path, verify=True)


def test_a_partial_copy_answers_what_its_projection_answers(whole, tmp_path):
    full = Segment.open(whole)
    part = copy_of(whole, str(tmp_path / "part.sseg"), ["by_page", "absent"])
    try:
        assert part.loaded_projections == ("by_page",) and part.manifest.partial_projections == ("by_page",)
        assert os.path.getsize(part.path) < os.path.getsize(whole) / 4
        want = execute({**BY_PAGE, "context": {"noProjections": True}}, [full]).table.to_pylist()
        assert execute(BY_PAGE, [part]).table.to_pylist() == want
        # The base rows and the projection it did not keep are refused, naming why.
        with pytest.raises(PartialCopyError, match="reads rows, not aggregates"):
            execute({"queryType": "scan", "dataSource": "wiki", "intervals": ["1970-01-01/1970-01-02"]}, [part])
        by_user = {**BY_PAGE, "dimensions": ["user"], "aggregations": [{"type": "count", "name": "c"}]}
        with pytest.raises(PartialCopyError, match="none of them answers this query"):
            execute(by_user, [part])
        assert execute(by_user, [full]).table.num_rows == 401
    finally:
        full.close()
        part.close()


def test_bad_sources_are_named(whole, tmp_path):
    with pytest.raises(ValidationError, match=r"has none of the projections \['nope'\] to load \(it has: by_page, by_user\)"):
        copy_of(whole, str(tmp_path / "x.sseg"), ["nope"])
    part = copy_of(whole, str(tmp_path / "part.sseg"), ["by_user"], share=0.5)  # its dictionary is shared
    part.close()
    with open(part.path, "rb") as f:
        data = f.read()
    with pytest.raises(ValidationError, match="is itself a partial copy"):
        write_partial_copy(lambda o, n: data[o:o + n], len(data), ["by_user"], str(tmp_path / "y.sseg"), "copy")
    damaged = bytearray(open(whole, "rb").read())
    manifest = Segment.open(whole).manifest
    entry = next(e for name, e in manifest.files.items() if name.startswith("projections/by_user") or "by_user" in name)
    damaged[entry.offset] ^= 0xFF
    with pytest.raises(SegmentCorruptError, match="checksum check failed for part"):
        write_partial_copy(lambda o, n: bytes(damaged[o:o + n]), len(damaged), ["by_user"], str(tmp_path / "z.sseg"),
                           "damaged")
    with pytest.raises(SegmentCorruptError, match="footer check failed"):
        write_partial_copy(lambda o, n: b"\0" * n, 1000, ["by_user"], str(tmp_path / "w.sseg"), "zeros")
