"""TableSpec / TableMetadata JSON round trips and shape errors."""

from __future__ import annotations

import json

import pytest

from common.catalog import ColumnSpec, TableId, TableMetadata, TableSpec
from common.errors import ValidationError

WIKI = {
    "type": "datasource",
    "properties": {
        "description": "edits",
        "segmentGranularity": "PT1H",
        "targetSegmentRows": 4_000_000,
        "clusterKeys": [{"column": "channel"}, {"column": "page", "desc": True}],
        "hiddenColumns": ["old"],
        "sealed": True,
    },
    "columns": [
        {"name": "__time", "sqlType": "TIMESTAMP"},
        {"name": "channel", "sqlType": "VARCHAR", "properties": {"description": "where"}},
        {"name": "added"},
    ],
}


def test_spec_round_trips_exactly():
    spec = TableSpec.from_json(WIKI)
    assert spec.to_json() == WIKI
    assert TableSpec.from_text(json.dumps(WIKI)).to_json() == WIKI
    # The stored text is canonical JSON that parses back to the same spec.
    assert TableSpec.from_text(spec.to_text()) == spec


def test_spec_does_not_alias_its_input():
    raw = json.loads(json.dumps(WIKI))
    spec = TableSpec.from_json(raw)
    raw["properties"]["hiddenColumns"].append("x")
    assert spec.hidden_columns == ["old"]


def test_empty_parts_are_left_out():
    assert TableSpec.from_json({"type": "datasource", "properties": {}, "columns": []}).to_json() == {
        "type": "datasource"}


def test_accessors():
    spec = TableSpec.from_json(WIKI)
    assert spec.segment_granularity == "PT1H"
    assert spec.cluster_keys == [("channel", False), ("page", True)]
    assert spec.target_segment_rows == 4_000_000
    assert spec.sealed is True
    assert spec.column_names == ["__time", "channel", "added"]
    assert spec.column("added") == ColumnSpec("added")
    assert TableSpec.from_json({"type": "datasource", "properties": {"segmentGranularity": "day"}}
                               ).segment_granularity == "P1D"
    assert TableSpec("datasource").sealed is False


@pytest.mark.parametrize("obj, words", [
    ([], "JSON object"),
    ({"type": "datasource", "segmentGranularity": "DAY"}, "unknown table spec key(s) segmentGranularity"),
    ({"properties": {}}, 'needs a "type"'),
    ({"type": "datasource", "properties": []}, '"properties" must be an object'),
    ({"type": "datasource", "columns": {"a": 1}}, '"columns" must be a list'),
    ({"type": "datasource", "columns": [{"sqlType": "BIGINT"}]}, 'non-empty "name"'),
    ({"type": "datasource", "columns": [{"name": "a", "type": "column"}]}, "unknown key(s) type"),
    ({"type": "datasource", "columns": [{"name": "a", "sqlType": 5}]}, "sqlType must be a string"),
])
def test_shape_errors_say_what_is_wrong(obj, words):
    with pytest.raises(ValidationError) as err:
        TableSpec.from_json(obj)
    assert words in str(err.value)


def test_malformed_json_text():
    with pytest.raises(ValidationError, match="not valid JSON"):
        TableSpec.from_text("{nope")


def test_metadata_round_trip():
    meta = TableMetadata(TableId("druid", "wiki"), 1, 2, "ACTIVE", TableSpec.from_json(WIKI))
    obj = meta.to_json()
    assert obj["id"] == {"schema": "druid", "name": "wiki"}
    assert obj["updateTime"] == 2 and meta.version == 2
    assert TableMetadata.from_json(obj) == meta


def test_table_id_parse():
    assert TableId.parse("wiki") == TableId("druid", "wiki")
    assert TableId.parse("ext.input") == TableId("ext", "input")
    assert TableId.parse("druid.a.b") == TableId("druid", "a.b")
    assert TableId.parse("my.ds") == TableId("druid", "my.ds")  # not a schema: the name has a dot
    assert str(TableId("ext", "x")) == "ext.x"
