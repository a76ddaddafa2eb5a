"""Input source / format / signature validation: clear errors naming the property and the valid values."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.types.column_type import DOUBLE, LONG, STRING, STRING_ARRAY
from common.ingest.external_source import DEFAULT_LIST_DELIMITER, ExternalSource, extend_column_type

SIG = [{"name": "ts", "type": "string"}, {"name": "n", "type": "long"}]


def test_defaults_and_signature_types():
    src = ExternalSource.of({"type": "local", "baseDir": "/d"}, {"type": "csv"},
                            SIG + [{"name": "d", "type": "double"}, {"name": "t", "type": "ARRAY<STRING>"}])
    assert src.input_source == {"type": "local", "baseDir": "/d", "filter": "*"}
    assert src.input_format["columns"] == ["ts", "n", "d", "t"]
    assert src.input_format["listDelimiter"] == DEFAULT_LIST_DELIMITER
    assert [t for _, t in src.signature] == [STRING, LONG, DOUBLE, STRING_ARRAY]
    assert "local csv input" in src.describe()


@pytest.mark.parametrize("source, fmt, sig, match", [
    ({"type": "s3", "uris": ["s3://b/k"]}, {"type": "json"}, SIG, "inputSource type 's3' is not supported; valid: inline, local, http"),
    ({"type": "local"}, {"type": "json"}, SIG, "needs 'baseDir'"),
    ({"type": "local", "baseDir": "/d", "fileter": "*"}, {"type": "json"}, SIG, "unknown local inputSource property fileter; valid: baseDir, files, filter, type"),
    ({"type": "http", "uris": ["ftp://x"]}, {"type": "json"}, SIG, "not an http"),
    ({"type": "inline", "data": "x"}, {"type": "avro"}, SIG, "inputFormat type 'avro' is not supported; valid: csv, tsv, json, parquet"),
    ({"type": "inline", "data": "x"}, {"type": "csv", "skipHeaderRows": -1}, SIG, "'skipHeaderRows' must be a whole number"),
    ({"type": "inline", "data": "x"}, {"type": "csv", "findColumnsFromHeader": "maybe"}, SIG, "'findColumnsFromHeader' must be true or false"),
    ({"type": "inline", "data": "x"}, {"type": "csv", "columns": ["ts"]}, SIG, r"signature column\(s\) n are not in the format's 'columns'"),
    ({"type": "inline", "data": "x"}, {"type": "csv", "delimiter": "|"}, SIG, "unknown csv inputFormat property delimiter"),
    ({"type": "inline", "data": "x"}, {"type": "tsv", "delimiter": "ab"}, SIG, "'delimiter' must be one character"),
    ({"type": "inline", "data": "x"}, {"type": "csv", "listDelimiter": ","}, SIG, "'listDelimiter' must differ"),
    ({"type": "inline", "data": "x"}, {"type": "json", "flattenSpec": {"fields": [{"type": "path"}]}}, SIG, "json properties 'flattenSpec' and"),
    ({"type": "inline", "data": "x"}, {"type": "json"}, [], "signature must be a non-empty list"),
    ({"type": "inline", "data": "x"}, {"type": "json"}, [{"name": "a", "type": "blob"}], "signature column 'a': unknown type 'blob'"),
    ({"type": "inline", "data": "x"}, {"type": "json"}, SIG + SIG[:1], "names column.* ts more than once"),
])
def test_validation_errors(source, fmt, sig, match):
    with pytest.raises(ValidationError, match=match):
        ExternalSource.of(source, fmt, sig, "FROM at line 1")


def test_extend_types():
    assert extend_column_type("VARCHAR ARRAY", "t", "x") == STRING_ARRAY
    assert extend_column_type("ARRAY<VARCHAR>", "t", "x") == STRING_ARRAY
    assert extend_column_type("BIGINT NOT NULL", "t", "x") == LONG
    with pytest.raises(ValidationError, match="EXTEND column 't': unknown type 'BLOB'"):
        extend_column_type("BLOB", "t", "x")
