"""Filters on a virtual column that maps one indexed string column use that column's index (the
expression runs once per dictionary value), and answer exactly what evaluating values answers."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.query.filters import filter_from_json
from common.query.row_source import SegmentRowSource, TableRowSource
from common.query.selection import SourceIndexes, select
from common.query.virtual_column import MappedIndex, VirtualColumn
from common.types.column_type import STRING

IV = "2020-01-01/2020-01-02"
T0 = 1577836800000
VALUES = ["Apple", "apple", "APPLE", "banana", None, "Cherry", "", "b", "BANANA", None, "épée", "Épée"]

EXPRESSIONS = [
    "lower(s)",
    "upper(s)",
    "concat(s, '-x')",
    "nvl(s, 'none')",
    "substring(s, 0, 1)",
    "case_searched(s == 'b', 'bee', s)",
    "lower(missing)",
    "nvl(missing, 'm')",
]
FILTERS = [
    {"type": "equals", "column": "v", "matchValue": "apple"},
    {"type": "equals", "column": "v", "matchValue": "none"},
    {"type": "in", "dimension": "v", "values": ["banana", "b-x", "bee", None]},
    {"type": "like", "dimension": "v", "pattern": "a%"},
    {"type": "like", "dimension": "v", "pattern": "%a_a%"},
    {"type": "range", "column": "v", "lower": "b", "upper": "c", "upperOpen": True},
    {"type": "regex", "dimension": "v", "pattern": "^[A-Z]"},
    {"type": "null", "column": "v"},
    {"type": "not", "field": {"type": "equals", "column": "v", "matchValue": "apple"}},
    {"type": "equals", "column": "v", "matchValue": "m"},
]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    from common.segment.builder import build_segment
    from common.segment.segment import Segment
    from common.segment.segment_id import SegmentId
    from common.types.interval import Interval

    table = pa.table({"__time": pa.array([T0 + i for i in range(len(VALUES))], pa.int64()),
                      "s": VALUES, "rid": list(range(len(VALUES)))})
    path = str(tmp_path_factory.mktemp("vci") / "s.sseg")
    build_segment(table, path, SegmentId("ds", Interval.of(IV), "v1", 0))
    seg = Segment.open(path)
    plain = table.set_column(0, "__time", table.column("__time").cast(pa.timestamp("ms", tz="UTC")))
    yield SegmentRowSource(seg.table()), TableRowSource(plain)
    seg.close()


def _rids(source, flt, vc):
    # "missing" is a column other segments have: here it reads as typed nulls.
    sel = select(source, filter_from_json(flt), None, [vc], {"missing": STRING})
    return sorted(sel.columns["rid"].to_pylist()), sel.rows_after_prefilter


@pytest.mark.parametrize("expression", EXPRESSIONS)
@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: f["type"] + ":" + str(f.get("matchValue", f.get("pattern", ""))))
def test_indexed_virtual_filter_matches_value_evaluation(sources, expression, flt):
    segment, table = sources
    vc = VirtualColumn("v", expression)
    got, after_prefilter = _rids(segment, flt, vc)
    want, _ = _rids(table, flt, vc)
    assert got == want
    # The answer came from the index: the pre-filter already holds exactly the matching rows.
    assert after_prefilter == len(got)


def test_the_index_is_derived_only_when_it_can_be(sources):
    segment, _ = sources
    indexes = SourceIndexes(segment, [VirtualColumn("a", "lower(s)"), VirtualColumn("b", "strlen(s)"),
                                      VirtualColumn("c", "concat(s, rid)"), VirtualColumn("d", "lower(a)")])
    assert isinstance(indexes.index_for("a"), MappedIndex)
    assert indexes.index_for("b") is None  # a LONG result: compared as numbers, on values
    assert indexes.index_for("c") is None  # two input columns
    assert indexes.index_for("d") is None  # built on another virtual column
    assert indexes.index_for("rid") is None  # a plain LONG column has no index


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(expression=st.sampled_from(EXPRESSIONS),
       value=st.sampled_from(["apple", "APPLE", "", "b", "none", "m", "épée", "Ép", "-x", "a"]),
       kind=st.sampled_from(["equals", "like", "range", "in"]), negate=st.booleans())
def test_random_virtual_filters_agree(sources, expression, value, kind, negate):
    segment, table = sources
    if kind == "equals":
        flt = {"type": "equals", "column": "v", "matchValue": value}
    elif kind == "like":
        flt = {"type": "like", "dimension": "v", "pattern": value + "%"}
    elif kind == "range":
        flt = {"type": "range", "column": "v", "lower": value, "lowerOpen": True}
    else:
        flt = {"type": "in", "dimension": "v", "values": [value, None]}
    if negate:
        flt = {"type": "not", "field": flt}
    vc = VirtualColumn("v", expression)
    assert _rids(segment, flt, vc)[0] == _rids(table, flt, vc)[0]
