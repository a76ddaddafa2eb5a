"""Per-type validation: every rejection names the property or column and the valid values."""

from __future__ import annotations

import pytest

from common.catalog import SQL_TYPES, TableId, TableSpec, validate_table
from common.catalog.validation import canonical_granularity, validate_sql_type
from common.errors import ValidationError

DS = TableId("druid", "wiki")
EXT = TableId("ext", "src")


def check(table, obj):
    validate_table(table, TableSpec.from_json(obj))


def rejects(table, obj, *words):
    with pytest.raises(ValidationError) as err:
        check(table, obj)
    for w in words:
        assert w in str(err.value), str(err.value)
    return str(err.value)


def test_a_full_datasource_is_valid():
    check(DS, {"type": "datasource", "properties": {
        "description": "x", "segmentGranularity": "P1D", "targetSegmentRows": 5, "sealed": False,
        "clusterKeys": [{"column": "a", "desc": False}], "hiddenColumns": ["z"]},
        "columns": [{"name": "__time"}, {"name": "a", "sqlType": "varchar"}, {"name": "j", "sqlType": "COMPLEX<json>"},
                    {"name": "t", "sqlType": "ARRAY<BIGINT>"}, {"name": "f", "sqlType": "FLOAT"}]})


@pytest.mark.parametrize("value", ["PT1H", "P1D", "pt15m", "DAY", "hour", "FIVE_MINUTE", "ALL", "all", "P1Y"])
def test_standard_granularities(value):
    check(DS, {"type": "datasource", "properties": {"segmentGranularity": value}})


@pytest.mark.parametrize("value", ["P2D", "PT7M", "NONE", "fortnight", 5, ""])
def test_non_standard_granularities_are_rejected(value):
    msg = rejects(DS, {"type": "datasource", "properties": {"segmentGranularity": value}},
                  "segmentGranularity", "PT1H", "P1D", "ALL")
    assert "table druid.wiki" in msg


def test_canonical_granularity():
    assert canonical_granularity("day") == "P1D"
    assert canonical_granularity("ALL TIME") == "all"
    assert canonical_granularity("pt1h") == "PT1H"


@pytest.mark.parametrize("props, words", [
    ({"targetSegmentRows": 0}, ["targetSegmentRows", "positive integer"]),
    ({"targetSegmentRows": "5"}, ["targetSegmentRows"]),
    ({"targetSegmentRows": True}, ["targetSegmentRows"]),
    ({"sealed": "yes"}, ["sealed", "true or false"]),
    ({"description": 5}, ["description", "string"]),
    ({"clusterKeys": "a"}, ["clusterKeys"]),
    ({"clusterKeys": [{"col": "a"}]}, ["clusterKeys"]),
    ({"clusterKeys": [{"column": "a", "order": "desc"}]}, ["clusterKeys", "order", "valid fields: column, desc"]),
    ({"clusterKeys": [{"column": "a", "desc": "yes"}]}, ["desc"]),
    ({"clusterKeys": [{"column": "a"}, {"column": "a"}]}, ["twice"]),
    ({"hiddenColumns": "a"}, ["hiddenColumns", "list"]),
    ({"hiddenColumns": ["a", "a"]}, ["more than once"]),
    ({"hiddenColumns": ["__time"]}, ["__time cannot be hidden"]),
    ({"rollup": True}, ["unknown datasource property rollup", "valid:", "segmentGranularity", "sealed"]),
    ({"sealed": None}, ["'sealed' is null"]),
])
def test_bad_datasource_properties(props, words):
    rejects(DS, {"type": "datasource", "properties": props}, *words)


def test_hidden_and_declared_is_a_contradiction():
    rejects(DS, {"type": "datasource", "properties": {"hiddenColumns": ["a"]}, "columns": [{"name": "a"}]},
            "both declared and hidden")


@pytest.mark.parametrize("sql_type", SQL_TYPES)
def test_every_listed_type_is_accepted(sql_type):
    name = "__time" if sql_type == "TIMESTAMP" else "c"
    assert validate_sql_type(sql_type, name) is not None
    assert validate_sql_type(sql_type.lower(), name) is not None


@pytest.mark.parametrize("sql_type, words", [
    ("LONG", ["'LONG' is not supported", "write BIGINT", "valid types: VARCHAR, BIGINT"]),
    ("STRING", ["write VARCHAR"]),
    ("INTEGER", ["write BIGINT"]),
    ("ARRAY<FLOAT>", ["not supported"]),
    ("COMPLEX<hll>", ["not supported", "COMPLEX<json>"]),
    ("BLOB", ["valid types"]),
])
def test_unsupported_types(sql_type, words):
    rejects(DS, {"type": "datasource", "columns": [{"name": "c", "sqlType": sql_type}]}, "column 'c'", *words)


def test_timestamp_only_for_time():
    rejects(DS, {"type": "datasource", "columns": [{"name": "ts", "sqlType": "TIMESTAMP"}]}, "only __time")
    rejects(DS, {"type": "datasource", "columns": [{"name": "__time", "sqlType": "BIGINT"}]}, "always TIMESTAMP")
    check(DS, {"type": "datasource", "columns": [{"name": "__time"}]})


def test_duplicate_and_bad_columns():
    rejects(DS, {"type": "datasource", "columns": [{"name": "a"}, {"name": "a"}]}, "'a' is declared more than once")
    rejects(DS, {"type": "datasource", "columns": [{"name": "a", "properties": {"format": "x"}}]},
            "unknown property format", "valid: description")


def test_schema_and_type_must_agree():
    rejects(EXT, {"type": "datasource"}, "belongs in schema 'druid'")
    rejects(DS, {"type": "inline", "properties": {"format": "csv", "data": "a"}}, "belongs in schema 'ext'")
    rejects(TableId("sys", "x"), {"type": "datasource"}, "schema 'sys'", "druid, ext")
    rejects(DS, {"type": "view"}, "table type 'view'", "datasource, inline, local, http")


@pytest.mark.parametrize("name, words", [("", "is empty"), ("a/b", "'/'"), (" a", "whitespace"), (".a", "'.'"),
                                         ("a\tb", "control"), ("x" * 300, "longer")])
def test_bad_names(name, words):
    rejects(TableId("druid", name), {"type": "datasource"}, words)


def test_input_tables():
    check(EXT, {"type": "inline", "properties": {"format": "csv", "data": ["a,1", "b,2"], "skipHeaderRows": 0},
                "columns": [{"name": "x", "sqlType": "VARCHAR"}, {"name": "n", "sqlType": "BIGINT"}]})
    check(EXT, {"type": "local", "properties": {"format": "json", "baseDir": "/d", "filePattern": "*.json",
                                                "keepNullColumns": True}})
    check(EXT, {"type": "local", "properties": {"format": "parquet", "files": ["/a.parquet"]}})
    check(EXT, {"type": "local", "properties": {"format": "csv"}})  # a template: files come per query
    check(EXT, {"type": "http", "properties": {"format": "tsv", "delimiter": "|", "uris": ["https://h/a.tsv"],
                                               "userName": "u", "passwordEnvVar": "PW"}})
    check(EXT, {"type": "http", "properties": {"format": "csv", "uriTemplate": "https://h/{}"}})


@pytest.mark.parametrize("obj, words", [
    ({"type": "local", "properties": {"baseDir": "/d"}}, ["needs property 'format'", "csv, tsv, json, parquet"]),
    ({"type": "local", "properties": {"format": "xml"}}, ["'format' is 'xml'", "csv, tsv, json, parquet"]),
    ({"type": "local", "properties": {"format": "csv", "filePattern": "*.csv"}}, ["'filePattern' needs 'baseDir'"]),
    ({"type": "local", "properties": {"format": "csv", "files": "a.csv"}}, ["'files'", "list"]),
    ({"type": "local", "properties": {"format": "csv", "uris": ["http://x"]}},
     ["unknown local input table property uris", "baseDir", "filePattern", "files"]),
    ({"type": "local", "properties": {"format": "csv", "delimiter": "|"}}, ["'delimiter' belongs to format tsv"]),
    ({"type": "local", "properties": {"format": "json", "skipHeaderRows": 1}}, ["belongs to format csv / tsv"]),
    ({"type": "local", "properties": {"format": "csv", "skipHeaderRows": -1}}, ["skipHeaderRows"]),
    ({"type": "inline", "properties": {"format": "csv"}}, ["needs property 'data'"]),
    ({"type": "inline", "properties": {"format": "csv", "data": 5}}, ["'data'"]),
    ({"type": "http", "properties": {"format": "csv", "uris": ["ftp://x"]}}, ["not an http:// or https:// URI"]),
    ({"type": "http", "properties": {"format": "csv", "password": "secret"}},
     ["unknown http input table property password", "passwordEnvVar"]),
    ({"type": "http", "properties": {"format": "csv", "uriTemplate": "https://h/x"}}, ["uriTemplate", "{}"]),
    ({"type": "http", "properties": {"format": "tsv", "delimiter": "||"}}, ["one character"]),
])
def test_bad_input_tables(obj, words):
    rejects(EXT, obj, *words)
