"""The per-element index of arrays inside nested JSON columns: a field that holds only arrays keeps
the same element index as an ARRAY column (common/segment/element_index.py), and an
``arrayContainsElement`` filter on a ``nested-field`` virtual column reading that field as its own
array type answers from it. Every answer is checked against the scan: the same filter on an
expression virtual column over the same nested-field column (which has no index, so every row's
array is read from the field).

The documents are mean: null documents, documents without the path, empty arrays, arrays holding
nulls, repeated elements, non-ASCII text, -0.0, 2 beside 2.0, arrays of mixed element types
(read as text), arrays under objects and under arrays of objects, and a path that holds an array in
some rows and a scalar in others (no index: it reads from values).
"""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from common.query import execute
from common.query.engine import union_schema
from common.segment.builder import build_segment
from common.segment.segment import Segment
from common.segment.segment_id import SegmentId
from common.sql import execute_sql
from common.types.column_type import JSON
from common.types.interval import Interval
from tests.unit.sql.fake_catalog import FakeCatalog

INTERVAL = "2024-01-01/2024-01-02"
T0 = 1704067200000
WORDS = ["a", "b", "é", "ключ", "", "a b", "日本"]


def _doc(rng: random.Random):
    if rng.random() < 0.05:
        return None
    doc: dict = {"k": rng.randrange(5)}
    if rng.random() < 0.85:
        doc["tags"] = [rng.choice(WORDS + [None]) for _ in range(rng.randrange(0, 5))]
    if rng.random() < 0.8:
        doc["nums"] = [rng.randrange(-3, 4) for _ in range(rng.randrange(0, 6))]
    if rng.random() < 0.8:
        doc["fracs"] = [rng.choice([0.5, -0.0, 0.0, 2.0, 2.5, None, 1e300]) for _ in range(rng.randrange(0, 4))]
    if rng.random() < 0.6:
        doc["mix"] = [rng.choice(["x", 1, 2.5, True, None, "1"]) for _ in range(rng.randrange(1, 4))]
    if rng.random() < 0.7:
        doc["o"] = {"deep": [rng.choice(WORDS) for _ in range(rng.randrange(0, 3))]}
    if rng.random() < 0.7:
        doc["objs"] = [{"ids": [rng.randrange(3) for _ in range(rng.randrange(0, 3))]} for _ in range(2)]
    if rng.random() < 0.7:  # an array in some rows, a scalar in others: a field of several types
        doc["sometimes"] = rng.choice([["a", "b"], "a", 3, ["a"]])
    return doc


def _docs_table(docs: list) -> pa.Table:
    return pa.table({"__time": pa.array([T0 + i for i in range(len(docs))], pa.int64()),
                     "doc": pa.array([None if d is None else json.dumps(d) for d in docs], pa.string())})


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    rng = random.Random(30)
    docs = [_doc(rng) for _ in range(600)]
    path = str(tmp_path_factory.mktemp("nested-index") / "n.sseg")
    build_segment(_docs_table(docs), path, SegmentId("t", Interval.of(INTERVAL), "v1", 0), column_types={"doc": JSON})
    return docs, [Segment.open(path)]


def test_a_segment_written_without_the_index_reads_values_alike(env, tmp_path):
    """``elementIndex: false`` (as a segment from before the index): no parts, the same answers."""
    docs, segments = env
    path = str(tmp_path / "old.sseg")
    build_segment(_docs_table(docs), path, SegmentId("t", Interval.of(INTERVAL), "v1", 1), column_types={"doc": JSON},
                  column_options={"doc": {"elementIndex": False}})
    old = [Segment.open(path)]
    assert old[0].column("doc").field("$.tags").element_index() is None
    assert "elementIndex" not in json.dumps(old[0].manifest.to_json())
    for path_, kind, value in (("$.tags", "ARRAY<STRING>", "a"), ("$.fracs", "ARRAY<DOUBLE>", 2)):
        got, stats = _count(old, _nested(path_, kind), value, False)
        assert stats.rows_after_prefilter == stats.rows_in_segments
        assert got == _count(segments, _nested(path_, kind), value, False)[0]


def _nested(path: str, kind: str, name: str = "v") -> dict:
    return {"type": "nested-field", "columnName": "doc", "path": path, "outputName": name, "expectedType": kind}


def _scan(path: str, kind: str) -> list:
    """The field's arrays through a column without an index: an expression over the nested field."""
    return [_nested(path, kind, "f"), {"type": "expression", "name": "v", "expression": "\"f\"", "outputType": kind}]


def _count(segments, vcs, value, negate: bool, value_type=None):
    f = {"type": "arrayContainsElement", "column": "v", "elementMatchValue": value}
    if value_type:
        f["elementMatchValueType"] = value_type
    q = {"queryType": "timeseries", "dataSource": "t", "intervals": [INTERVAL], "granularity": "all",
         "virtualColumns": vcs if isinstance(vcs, list) else [vcs], "aggregations": [{"type": "count", "name": "c"}],
         "filter": {"type": "not", "field": f} if negate else f}
    result = execute(q, segments)
    count = result.table.column("c").to_pylist()[0] if result.table.num_rows else 0
    return count, result.stats


CASES = [("$.tags", "ARRAY<STRING>", v) for v in ("a", "é", "ключ", "", "a b", "nope")] + \
    [("$.nums", "ARRAY<LONG>", v) for v in (0, 2, -3, 2.0, 7)] + \
    [("$.fracs", "ARRAY<DOUBLE>", v) for v in (2, 2.0, 0.0, -0.0, 2.5, 1e300, 3)] + \
    [("$.mix", "ARRAY<STRING>", v) for v in ("x", "1", "2.5", "true")] + \
    [("$.o.deep", "ARRAY<STRING>", v) for v in ("日本", "b")] + \
    [("$.objs[1].ids", "ARRAY<LONG>", v) for v in (0, 2)]


@pytest.mark.parametrize("path,kind,value", CASES)
@pytest.mark.parametrize("negate", [False, True])
def test_the_index_answers_as_the_scan_does(env, path, kind, value, negate):
    _, segments = env
    got, stats = _count(segments, _nested(path, kind), value, negate)
    want, scan_stats = _count(segments, _scan(path, kind), value, negate)
    assert got == want
    assert scan_stats.rows_after_prefilter == scan_stats.rows_in_segments  # the scan reads every row
    if not negate:  # the index picks exactly the matching rows before any array is read
        assert stats.rows_after_prefilter == got


def test_the_index_matches_the_documents(env):
    """The rows the index names for a text element are those whose array at the path holds it."""
    docs, segments = env
    field = segments[0].column("doc").field("$.tags")
    index = field.element_index()
    assert index is not None
    for word in WORDS:
        want = [i for i, d in enumerate(docs) if d is not None and isinstance(d.get("tags"), list) and word in d["tags"]]
        assert list(index.rows_with(word)) == want
    assert list(index.null_bitmap()) == [i for i, d in enumerate(docs) if d is None or "tags" not in d]


def test_a_field_of_several_types_has_no_index_and_reads_values(env):
    _, segments = env
    column = segments[0].column("doc")
    assert column.field("$.sometimes").element_index() is None
    assert column.field("$.k").element_index() is None  # not arrays at all
    got, stats = _count(segments, _nested("$.sometimes", "ARRAY<STRING>"), "a", False)
    want = _count(segments, _scan("$.sometimes", "ARRAY<STRING>"), "a", False)[0]
    assert (got, stats.rows_after_prefilter) == (want, stats.rows_in_segments)


def test_another_array_type_than_the_fields_reads_values(env):
    """Text elements asked of a field of numbers: the index (numbers) is not used; the values,
    read as text, answer."""
    _, segments = env
    got, stats = _count(segments, _nested("$.nums", "ARRAY<STRING>"), "2", False)
    assert stats.rows_after_prefilter == stats.rows_in_segments
    assert got == _count(segments, _scan("$.nums", "ARRAY<STRING>"), "2", False)[0] > 0


def test_sql_array_contains_on_a_json_path_plans_to_the_index(env):
    docs, segments = env
    catalog = FakeCatalog({"t": union_schema(segments)})
    sql = ("SELECT COUNT(*) AS c FROM t WHERE ARRAY_CONTAINS(JSON_VALUE(doc, '$.tags' RETURNING VARCHAR ARRAY), 'é') "
           "AND ARRAY_OVERLAP(JSON_VALUE(doc, '$.nums' RETURNING BIGINT ARRAY), ARRAY[1, 3])")
    native = execute_sql("EXPLAIN PLAN FOR " + sql, catalog, None).column("PLAN").to_pylist()[0]
    assert native.count('"arrayContainsElement"') == 3 and '"nested-field"' in native
    got = execute_sql(sql, catalog, lambda q: execute(q, segments).table).to_pylist()
    want = sum(1 for d in docs if d is not None and "é" in (d.get("tags") or [])
               and {1, 3} & set(d.get("nums") or []))
    assert got == [{"c": want}]
