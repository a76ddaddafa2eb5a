"""sys.segments' and sys.projections' facts, read from segment manifests."""

import json

from services.broker.core.segment_facts import manifest_facts, projections_table


def manifest(projections=(), nested=()):
    return json.dumps({"projections": [{"name": n, "spec": {"name": n, "v": v}, "numRows": r} for n, v, r in projections],
                       "columns": [{"name": c, "encoding": "nested", "stats": {"fields": f, "guardTriggered": g}}
                                   for c, f, g in nested] + [{"name": "x", "encoding": "plain", "stats": {}}]})


def test_manifest_facts():
    facts = manifest_facts(manifest([("p", 1, 10)], [("j", 3, True)]))
    assert facts == {"projections": ["p"], "json_columns": {"j": {"fields": 3, "guardTriggered": True}}}
    assert manifest_facts("not json") == {"projections": [], "json_columns": {}}


def test_projections_table_counts_segments_and_rows_and_marks_catalog_definitions():
    segments = [("ds", "s1", 100, manifest([("p", 1, 10)])), ("ds", "s2", 50, manifest([("p", 2, 5)])),
                ("ds", "s3", 70, manifest()), ("other", "o1", 9, manifest([("q", 1, 3)]))]
    table = projections_table(segments, {"ds": [{"name": "p", "v": 3}, {"name": "new", "v": 1}]})
    rows = {(r["datasource"], r["name"]): r for r in table.to_pylist()}
    assert rows[("ds", "p")]["segments_with"] == 2 and rows[("ds", "p")]["segments_total"] == 3
    assert rows[("ds", "p")]["projection_rows"] == 15 and rows[("ds", "p")]["base_rows"] == 150
    assert rows[("ds", "p")]["defined_in_catalog"] == 1 and json.loads(rows[("ds", "p")]["spec"])["v"] == 3
    assert rows[("ds", "new")]["segments_with"] == 0
    assert rows[("other", "q")]["defined_in_catalog"] == 0 and rows[("other", "q")]["segments_total"] == 1


def test_dimensions_and_metrics_split_by_the_union_of_the_segments_metrics():
    from services.broker.core.segment_facts import dimensions_and_metrics

    columns = ["__time", "channel", "added", "cnt", "page"]
    # One rollup segment says cnt and added; a plain segment says nothing; another names page.
    dims, metrics = dimensions_and_metrics(columns, [{"cnt": "count", "added": "longSum"}, {}, {"page": None}])
    assert dims == ["channel"] and metrics == ["added", "cnt", "page"]  # in the schema's order
    assert dimensions_and_metrics(columns, []) == (["channel", "added", "cnt", "page"], [])
    assert dimensions_and_metrics(["__time", "a"], [{"gone": "longSum"}]) == (["a"], ["gone"])
