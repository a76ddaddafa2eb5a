"""The same queries give identical results over the same rows stored in the format before issue
16's encodings (uncompressed, a Roaring bitmap per string value, int codes with Arrow validity,
plain doubles) and in today's default (compressed parts, no stored bitmaps, bit-packed or
validity-free codes, value-dictionary doubles), and in today's default with STRING codes in
small blocks (``codeBlockRows``), so the demo-sized segments have several code blocks each."""

import struct

import numpy as np
import pyarrow as pa
import pytest

from common.demo import table as demo_table
from common.query import execute
from common.segment import Segment
from common.segment.time_partitioner import build_segments

DAYS = "2015-09-12/2015-09-20"
NAN_PAYLOAD = np.array([0x7FF8_0000_0000_0042], dtype=np.uint64).view(np.float64)[0]


def _rows(n: int) -> pa.Table:
    data = demo_table(n)
    rng = np.random.default_rng(9)
    added = data.column("added").to_numpy(zero_copy_only=False).astype(np.float64)
    ratio = np.round(added / (added + 10.0), 2)
    # Hostile doubles among ordinary repeated ones: -0.0, NaNs, infinities, and nulls.
    hostile = np.array([-0.0, np.nan, NAN_PAYLOAD, np.inf, -np.inf])
    pick = rng.random(n) < 0.02
    ratio[pick] = hostile[rng.integers(0, len(hostile), int(pick.sum()))]
    tags = np.array(["", "é", "\U0001F600", "x" * 3000, "plain"], dtype=object)[rng.integers(0, 5, n)]
    return (data.append_column("ratio", pa.array(ratio, mask=rng.random(n) < 0.05))
            .append_column("tag", pa.array(tags.tolist(), pa.string())))


def _legacy_options(table: pa.Table) -> dict:
    out = {"__time": {"blockRows": 0}}
    for field in table.schema:
        if pa.types.is_string(field.type):
            out[field.name] = {"packCodes": False, "bitmaps": True}
        elif pa.types.is_floating(field.type):
            out[field.name] = {"valueDictionary": False, "blockRows": 0}
        elif pa.types.is_integer(field.type):
            out[field.name] = {"blockRows": 0}
    return out


@pytest.fixture(scope="module", params=["default", "code-blocks"])
def both(tmp_path_factory, request):
    data = _rows(30_000)
    base = tmp_path_factory.mktemp("differential")
    old = build_segments(data, "wiki", str(base / "old"), compression=None, string_bitmaps=True,
                         column_options=_legacy_options(data))
    blocks = {f.name: {"codeBlockRows": 700} for f in data.schema if pa.types.is_string(f.type)}
    new = build_segments(data, "wiki", str(base / "new"),
                         column_options=blocks if request.param == "code-blocks" else None)
    if request.param == "code-blocks":
        assert new[0][1].column("user").spec.to_json()["codeBlockRows"] == 700
    old_segs, new_segs = [Segment.open(p) for p, _ in old], [Segment.open(p, verify=True) for p, _ in new]
    m_old, m_new = old[0][1], new[0][1]
    assert "bitmaps" in m_old.column("channel").parts and "bitmaps" not in m_new.column("channel").parts
    assert "codeBits" in m_new.column("isRobot").spec.to_json()
    assert m_new.column("ratio").spec.to_json() == {"valueDictionary": True}
    assert m_old.column("ratio").parts == {"values": "ratio/values"}
    yield old_segs, new_segs
    for s in old_segs + new_segs:
        s.close()


def _bits(table: pa.Table) -> list:
    """Rows with every float as its bit pattern, so NaN equals NaN and -0.0 differs from 0.0."""
    def cell(v):
        return ("f", struct.pack("<d", v)) if isinstance(v, float) else v
    return [tuple(cell(v) for v in row.values()) for row in table.to_pylist()]


def _q(query_type: str, **kw) -> dict:
    return {"queryType": query_type, "dataSource": "wiki", "intervals": [DAYS], **kw}


COUNT = [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"},
         {"type": "doubleSum", "name": "r", "fieldName": "ratio"}, {"type": "doubleMin", "name": "rmin", "fieldName": "ratio"}]
FILTERS = {
    "equals-dense": {"type": "equals", "column": "namespace", "matchValue": "Main"},
    "equals-bool": {"type": "equals", "column": "isRobot", "matchValue": "true"},
    "equals-empty-string": {"type": "equals", "column": "tag", "matchValue": ""},
    "equals-unicode": {"type": "equals", "column": "tag", "matchValue": "\U0001F600"},
    "equals-long-string": {"type": "equals", "column": "tag", "matchValue": "x" * 3000},
    "equals-absent": {"type": "equals", "column": "user", "matchValue": "no such user \U0001F600"},
    "in-absent-and-present": {"type": "in", "dimension": "tag", "values": ["nope", "é", "x" * 2999]},
    "in-many": {"type": "in", "dimension": "channel", "values": [f"#{c}.wikipedia" for c in ("en", "de", "fr", "ja")]},
    "null-geo": {"type": "null", "column": "cityName"},
    "not-null-geo": {"type": "not", "field": {"type": "null", "column": "countryIsoCode"}},
    "like-prefix": {"type": "like", "dimension": "page", "pattern": "S%"},
    "range-strings": {"type": "range", "column": "user", "matchValueType": "STRING", "lower": "A", "upper": "M"},
    "range-doubles": {"type": "range", "column": "ratio", "matchValueType": "DOUBLE", "lower": 0.25, "upper": 0.75},
    "and-or": {"type": "and", "fields": [
        {"type": "or", "fields": [{"type": "equals", "column": "isNew", "matchValue": "true"},
                                  {"type": "null", "column": "regionName"}]},
        {"type": "not", "field": {"type": "equals", "column": "isMinor", "matchValue": "true"}}]},
}


@pytest.mark.parametrize("name", list(FILTERS), ids=list(FILTERS))
def test_filtered_aggregates_agree(both, name):
    old, new = both
    q = _q("groupBy", granularity="all", dimensions=["channel", "isAnonymous"], filter=FILTERS[name],
           aggregations=COUNT)
    a, b = execute(q, old).table, execute(q, new).table
    assert a.num_rows > 0 or name in ("equals-long-string", "equals-absent")
    assert _bits(a) == _bits(b), name


def test_groupby_topn_timeseries_and_scans_agree(both):
    old, new = both
    queries = [
        _q("timeseries", granularity="hour", aggregations=COUNT),
        _q("topN", granularity="all", dimension="page", metric="a", threshold=20, aggregations=COUNT),
        _q("groupBy", granularity="day", dimensions=["cityName", "tag", "isUnpatrolled"], aggregations=COUNT),
        _q("groupBy", granularity="all", dimensions=["ratio"], aggregations=[{"type": "count", "name": "c"}]),
        _q("scan", columns=["__time", "page", "user", "ratio", "tag", "cityName", "isRobot"], limit=500),
        _q("scan", columns=["__time", "ratio", "tag"], filter=FILTERS["equals-bool"], limit=300),
        _q("timeseries", granularity="day",
           aggregations=[{"type": "HLLSketchBuild", "name": "u", "fieldName": "user", "round": True}]),
    ]
    for q in queries:
        a, b = execute(q, old).table, execute(q, new).table
        assert a.num_rows > 0
        assert _bits(a) == _bits(b), q["queryType"]


def test_needle_scans_agree(both):
    """Equality on the high-cardinality user column (the storage benchmark's needle query)."""
    old, new = both
    users = execute(_q("scan", columns=["user"], limit=2000), old).table.column("user").to_pylist()
    for user in sorted({u for u in users if u is not None})[:5]:
        q = _q("scan", columns=["__time", "page", "added", "user"],
               filter={"type": "equals", "column": "user", "matchValue": user})
        a, b = execute(q, old).table, execute(q, new).table
        assert a.num_rows > 0
        assert _bits(a) == _bits(b), user
