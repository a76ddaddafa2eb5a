"""The catalog overlay rules: declared order and types, hidden columns, input table definitions."""

import pytest

from common.errors import ValidationError
from common.types.column_type import DOUBLE, LONG, STRING, TIMESTAMP, ColumnType
from services.broker.core.catalog_overlay import external_definition, overlay_schema

PHYSICAL = {"__time": TIMESTAMP, "page": STRING, "added": LONG, "secret": STRING, "user": STRING}


def spec(columns=(), **properties):
    return {"type": "datasource", "properties": properties, "columns": list(columns)}


def test_no_catalog_entry_leaves_the_segment_schema():
    assert overlay_schema(None, PHYSICAL) == PHYSICAL


def test_declared_columns_come_first_then_undeclared_ones():
    got = overlay_schema(spec([{"name": "user"}, {"name": "added", "sqlType": "DOUBLE"}]), PHYSICAL)
    assert list(got) == ["__time", "user", "added", "page", "secret"]
    assert got["added"] == DOUBLE and got["user"] == STRING


def test_time_can_be_placed_by_the_catalog():
    got = overlay_schema(spec([{"name": "page"}, {"name": "__time", "sqlType": "TIMESTAMP"}]), PHYSICAL)
    assert list(got)[:2] == ["page", "__time"]


def test_hidden_columns_disappear():
    got = overlay_schema(spec([{"name": "secret"}], hiddenColumns=["secret", "user"]), PHYSICAL)
    assert "secret" not in got and "user" not in got


def test_a_table_with_no_segments_has_its_declared_schema():
    got = overlay_schema(spec([{"name": "a", "sqlType": "BIGINT"}, {"name": "b"}]), None)
    assert got == {"__time": TIMESTAMP, "a": LONG, "b": STRING}
    assert got["a"] == ColumnType.parse("BIGINT")


def test_input_table_templates_need_their_parameters():
    local = {"type": "local", "properties": {"baseDir": "/data", "format": "csv"},
             "columns": [{"name": "a", "sqlType": "VARCHAR"}]}
    with pytest.raises(ValidationError, match="ext.wiki is a template.*missing parameters: files, filePattern"):
        external_definition("wiki", local, {})
    source, fmt, signature = external_definition("wiki", local, {"files": "a.csv, b.csv"})
    assert source == {"type": "local", "files": ["/data/a.csv", "/data/b.csv"]}
    assert fmt["type"] == "csv" and [s["name"] for s in signature] == ["a"]
    with pytest.raises(ValidationError, match="nope"):
        external_definition("wiki", local, {"files": "a.csv", "nope": 1})


def test_inline_table_joins_its_data_lines():
    inline = {"type": "inline", "properties": {"format": "csv", "data": ["a,1", "b,2"]},
              "columns": [{"name": "x"}, {"name": "n", "sqlType": "BIGINT"}]}
    source, _, signature = external_definition("t", inline, {})
    assert source == {"type": "inline", "data": "a,1\nb,2\n"}
    assert [(s["name"], s["type"].upper()) for s in signature] in (
        [("x", "VARCHAR"), ("n", "BIGINT")], [("x", "STRING"), ("n", "LONG")])
