"""Input table entries as ingestion's EXTERN arguments, accepted by ingestion's own validation."""

from __future__ import annotations

import pytest

from common.catalog import TableSpec
from common.catalog.input_table import to_extern
from common.errors import ValidationError
from common.ingest.external_source import ExternalSource


def spec(kind, props, columns=({"name": "a", "sqlType": "VARCHAR"}, {"name": "n", "sqlType": "BIGINT"})):
    return TableSpec.from_json({"type": kind, "properties": props, "columns": list(columns)})


def test_inline():
    src, fmt, sig = to_extern(spec("inline", {"format": "csv", "data": ["x,1", "y,2"]}))
    assert src == {"type": "inline", "data": "x,1\ny,2\n"}
    assert fmt == {"type": "csv"}
    assert sig == [{"name": "a", "type": "STRING"}, {"name": "n", "type": "LONG"}]
    assert ExternalSource.of(src, fmt, sig).column_names == ["a", "n"]


def test_local_pattern_and_template_files():
    s = spec("local", {"format": "tsv", "baseDir": "/d", "filePattern": "*.tsv", "delimiter": "|"})
    src, fmt, _ = to_extern(s)
    assert src == {"type": "local", "baseDir": "/d", "filter": "*.tsv"}
    assert fmt == {"type": "tsv", "delimiter": "|"}
    src, _, sig = to_extern(s, {"files": "a.tsv, b.tsv"})
    assert src == {"type": "local", "files": ["/d/a.tsv", "/d/b.tsv"]}
    ExternalSource.of(src, fmt, sig)
    with pytest.raises(ValidationError, match="names no files"):
        to_extern(spec("local", {"format": "csv"}))
    with pytest.raises(ValidationError, match="unknown parameter"):
        to_extern(s, {"uris": ["x"]})


def test_http_template_and_env_password():
    s = spec("http", {"format": "json", "uriTemplate": "https://h/data/{}", "userName": "u",
                      "passwordEnvVar": "PW"}, [{"name": "a"}])
    src, fmt, sig = to_extern(s, {"uris": ["1.json", "2.json"]})
    assert src["uris"] == ["https://h/data/1.json", "https://h/data/2.json"]
    assert src["httpAuthenticationPassword"] == {"type": "environment", "variable": "PW"}
    assert sig == [{"name": "a", "type": "STRING"}]
    ExternalSource.of(src, fmt, sig)


def test_datasource_is_not_an_input():
    with pytest.raises(ValidationError, match="not an input table"):
        to_extern(TableSpec("datasource"))
