"""PUT merge rules and the column edits, as pure spec -> spec functions."""

from __future__ import annotations

import pytest

from common.catalog import (
    AddColumns,
    ColumnSpec,
    DropColumns,
    HideColumns,
    MergeUpdate,
    MoveColumn,
    SetProperties,
    TableSpec,
    apply_edits,
    edit_from_json,
)
from common.catalog.operations import (
    add_columns,
    drop_columns,
    hide_columns,
    merge_update,
    move_column,
    parse_action,
    set_properties,
)
from common.errors import ValidationError

DS = TableSpec.from_json({
    "type": "datasource",
    "properties": {"segmentGranularity": "DAY", "hiddenColumns": ["h1"], "description": "d",
                   "clusterKeys": [{"column": "a"}]},
    "columns": [{"name": "a", "sqlType": "VARCHAR", "properties": {"description": "first"}},
                {"name": "b", "sqlType": "BIGINT"}, {"name": "c"}],
})
INPUT = TableSpec.from_json({"type": "local", "properties": {"format": "csv", "baseDir": "/d"},
                             "columns": [{"name": "x"}, {"name": "y", "sqlType": "BIGINT"}]})


def test_properties_replace_remove_and_append_hidden():
    out = merge_update(DS, {"properties": {"segmentGranularity": "HOUR", "description": None,
                                           "hiddenColumns": ["h2", "h1"], "clusterKeys": [{"column": "b"}],
                                           "targetSegmentRows": 10}})
    assert out.properties == {"segmentGranularity": "HOUR", "hiddenColumns": ["h1", "h2"],
                              "clusterKeys": [{"column": "b"}], "targetSegmentRows": 10}
    assert out.columns == DS.columns
    assert DS.properties["segmentGranularity"] == "DAY"  # the input is untouched


def test_datasource_columns_merge_by_name_and_append():
    out = merge_update(DS, {"columns": [{"name": "c", "sqlType": "DOUBLE"}, {"name": "new", "sqlType": "FLOAT"},
                                        {"name": "a", "properties": {"description": None}},
                                        {"name": "b", "sqlType": None}]})
    assert out.to_json()["columns"] == [{"name": "a", "sqlType": "VARCHAR"}, {"name": "b"},
                                        {"name": "c", "sqlType": "DOUBLE"}, {"name": "new", "sqlType": "FLOAT"}]


def test_input_columns_are_replaced_whole():
    out = merge_update(INPUT, {"columns": [{"name": "y"}, {"name": "z"}]})
    assert out.column_names == ["y", "z"]
    assert merge_update(INPUT, {"properties": {"filePattern": "*.csv"}}).column_names == ["x", "y"]


def test_type_cannot_change():
    with pytest.raises(ValidationError, match="cannot change the table type from 'datasource' to 'inline'"):
        merge_update(DS, {"type": "inline"})
    assert merge_update(DS, {"type": "datasource"}) == DS


def test_update_shape_errors():
    with pytest.raises(ValidationError, match="JSON object"):
        merge_update(DS, ["a"])
    with pytest.raises(ValidationError, match="unknown table spec key"):
        merge_update(DS, {"segmentGranularity": "DAY"})


@pytest.mark.parametrize("where, anchor, order", [
    ("first", None, ["c", "a", "b"]), ("last", None, ["a", "b", "c"]), ("before", "a", ["c", "a", "b"]),
    ("after", "a", ["a", "c", "b"]), ("FIRST", None, ["c", "a", "b"]),
])
def test_move_column(where, anchor, order):
    assert move_column(DS, "c", where, anchor).column_names == order


def test_move_a_to_after_b():
    assert move_column(DS, "a", "after", "b").column_names == ["b", "a", "c"]
    assert move_column(DS, "a", "before", "c").column_names == ["b", "a", "c"]


@pytest.mark.parametrize("column, where, anchor, words", [
    ("zz", "first", None, "'zz' is not a declared column of the table; declared columns: a, b, c"),
    ("a", "after", "zz", "anchor column 'zz'"),
    ("a", "after", None, "needs an 'anchor'"),
    ("a", "middle", None, "valid: first, last, before, after"),
    ("a", "after", "a", "itself"),
])
def test_move_errors(column, where, anchor, words):
    with pytest.raises(ValidationError) as err:
        move_column(DS, column, where, anchor)
    assert words in str(err.value)


def test_drop_columns():
    out = drop_columns(DS, ["a", "c"])
    assert out.column_names == ["b"]
    assert out.properties["hiddenColumns"] == ["h1"]  # dropping does not hide or unhide
    with pytest.raises(ValidationError, match="'nope' is not a declared column"):
        drop_columns(DS, ["a", "nope"])
    with pytest.raises(ValidationError, match="JSON list"):
        drop_columns(DS, "a")


def test_hide_and_unhide():
    out = hide_columns(DS, hide=["h2", "h3", "h2"], unhide=["h1"])
    assert out.properties["hiddenColumns"] == ["h2", "h3"]
    assert "hiddenColumns" not in hide_columns(DS, unhide=["h1", "never"]).properties
    with pytest.raises(ValidationError, match="only datasources hide columns"):
        hide_columns(INPUT, hide=["x"])


def test_add_columns():
    out = add_columns(DS, [ColumnSpec("d", "DOUBLE")])
    assert out.column_names == ["a", "b", "c", "d"]
    with pytest.raises(ValidationError, match="column 'b' already exists"):
        add_columns(DS, [ColumnSpec("b", "DOUBLE")])


def test_set_properties_replaces_lists():
    out = set_properties(DS, {"hiddenColumns": ["z"], "description": None})
    assert out.properties["hiddenColumns"] == ["z"] and "description" not in out.properties


def test_edits_travel_as_json():
    edits = [MergeUpdate({"properties": {"targetSegmentRows": 5}}), SetProperties({"sealed": True}),
             AddColumns((ColumnSpec("d", "DOUBLE"),)), DropColumns(("c",)), HideColumns(("x",), ("h1",)),
             MoveColumn("d", "first"), MoveColumn("a", "after", "b")]
    again = [edit_from_json(e.to_json()) for e in edits]
    assert again == edits
    out = apply_edits(DS, again)
    assert out.column_names == ["d", "b", "a"]
    assert out.properties["hiddenColumns"] == ["x"] and out.sealed and out.target_segment_rows == 5


@pytest.mark.parametrize("obj, words", [({"op": "frob"}, "valid ops"), ({"op": "update"}, "'update' object"),
                                        ({"op": "addColumns", "columns": []}, "non-empty"),
                                        ({"op": "dropColumns", "columns": "a"}, "list of column names"),
                                        ({"op": "moveColumn"}, "needs")])
def test_bad_edits(obj, words):
    with pytest.raises(ValidationError) as err:
        edit_from_json(obj)
    assert words in str(err.value)


def test_actions():
    assert parse_action(None) == "New"
    assert parse_action("ifnew") == "IfNew"
    with pytest.raises(ValidationError, match="valid actions: New, IfNew, Replace, Force"):
        parse_action("Upsert")
