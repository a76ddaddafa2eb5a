"""Partial copies (a partial load rule's projections only) in the broker's plan: a query goes to
one only when its projections answer it, else to a whole copy; with none, it fails naming the
segment, projections and rule. And the choice itself (``choose_projection(..., only=...)``)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.query.model import query_from_json
from common.query.engine import scan_spec_for
from common.query.projection import ProjectionSpec, projection_rows
from common.query.projection_match import match_projection
from common.segment.builder import build_segment
from common.segment.descriptor import SegmentDescriptor
from common.segment.manifest import SegmentManifest
from common.segment.segment import PartialCopyError, choose_projection
from common.segment.segment_id import SegmentId
from common.types.interval import Interval
from services.broker.core.served_view import ServedView
from services.broker.query_executor import QueryExecutor
from services.broker.table_choice import TableChoice

DAY = 86_400_000
BY_AGE = {"type": "aggregate", "name": "by_age", "groupingColumns": [{"type": "string", "name": "age"}],
          "aggregators": [{"type": "count", "name": "n"}, {"type": "longSum", "name": "total", "fieldName": "value"}]}
RULE = 'loadPartialForever {"type":"exactProjection","names":["by_age"]}'
FITS = {"queryType": "groupBy", "dataSource": "ds", "intervals": ["1970-01-01/1970-01-03"], "granularity": "all",
        "dimensions": ["age"], "aggregations": [{"type": "count", "name": "c"}]}
SCAN = {"queryType": "scan", "dataSource": "ds", "intervals": ["1970-01-01/1970-01-03"], "columns": ["age"]}


@pytest.fixture
def descriptor(tmp_path) -> SegmentDescriptor:
    rows = pa.table({"__time": pa.array([0, 60_000, 120_000], pa.timestamp("ms", tz="UTC")),
                     "age": ["a", "b", None], "value": pa.array([1, None, 3], pa.int64())})
    manifest = build_segment(rows, str(tmp_path / "s.sseg"), SegmentId("ds", Interval(0, DAY), "v1"),
                             projections=[projection_rows(ProjectionSpec.from_json(BY_AGE), rows)])
    return SegmentDescriptor.of(manifest, "ds/s.sseg", 1)


def executor(view: ServedView, descriptor: SegmentDescriptor) -> QueryExecutor:
    ex = QueryExecutor(view, historical_client=None, metrics=None, threads=1)
    ex.tables = TableChoice(lambda sid: descriptor.manifest_json if sid == descriptor.id else None)
    return ex


def test_only_fitting_queries_go_to_a_partial_copy(descriptor):
    view = ServedView()
    view.set_tiers({"h1": "hot", "c1": "cold"})
    view.served("h1", descriptor)
    view.served("c1", descriptor, (("by_age",), RULE))
    ex = executor(view, descriptor)
    sid = descriptor.id
    cold_first = {"brokerTier": "cold"}
    # The cold (partial) copy is preferred and answers the grouped query...
    fits = query_from_json({**FITS, "context": cold_first})
    assert ex._plan(fits, list(fits.intervals)).by_server == {"c1": [sid]}
    # ...but rows and noProjections go to the whole copy on the hot tier.
    for body in ({**SCAN, "context": cold_first}, {**FITS, "context": {**cold_first, "noProjections": True}}):
        query = query_from_json(body)
        assert ex._plan(query, list(query.intervals)).by_server == {"h1": [sid]}
    # Without a whole copy, the query fails, naming the segment, its projections and the rule.
    view.unserved("h1", sid)
    scan = query_from_json(SCAN)
    with pytest.raises(ValidationError) as caught:
        ex._plan(scan, list(scan.intervals))
    assert f"segment {sid} is loaded only as its projections (by_age)" in str(caught.value)
    assert RULE in str(caught.value) and "on c1" in str(caught.value)
    assert ex._plan(fits, list(fits.intervals)).by_server == {"c1": [sid]}
    # The copy announced whole again (a rule change) is a whole copy.
    view.served("c1", descriptor)
    assert view.partial == {} and ex._plan(scan, list(scan.intervals)).by_server == {"c1": [sid]}
    view.served("c1", descriptor, (("by_age",), RULE))
    view.unserved("c1", sid)
    assert view.partial == {} and sid not in view.replicas


def test_choose_within_a_partial_copys_projections(descriptor):
    manifest = SegmentManifest.from_json(json.loads(descriptor.manifest_json), "test")

    def choose(body, only):
        return choose_projection(manifest, scan_spec_for(query_from_json(body)), match_projection, only)

    proj, _, _ = choose(FITS, ("by_age",))
    assert proj.name == "by_age"
    assert choose(FITS, None)[0].name == "by_age"  # a whole copy chooses the same
    assert choose(SCAN, None)[0] is None  # and reads base rows for rows
    cases = [(SCAN, ("by_age",), "this query reads rows, not aggregates"),
             ({**FITS, "context": {"noProjections": True}}, ("by_age",), "noProjections asks for the base rows"),
             ({**FITS, "context": {"useProjection": "other"}}, ("by_age",), "useProjection names 'other'"),
             ({**FITS, "dimensions": ["value"]}, ("by_age",), "none of them answers this query (by_age: "),
             (FITS, ("gone",), "the segment has none of them")]
    for body, only, message in cases:
        with pytest.raises(PartialCopyError, match=f"loaded only as its projections .*{message.replace('(', '[(]')}"):
            choose(body, only)
