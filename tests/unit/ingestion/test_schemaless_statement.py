"""Parsing of sources without a declared schema: EXTERN without signature, table functions without
EXTEND, inferSchema, PARTIAL, exclude; * expansion and the __dynamic struct of a rollup."""

import pytest

from common.errors import ValidationError
from common.types.column_type import LONG, STRING, ColumnType
from common.ingest.discovered_schema import DYNAMIC_COLUMN, dynamic_columns, expand_star
from common.ingest.statement import IngestionStatement, parse_ingestion

EXAMPLE = """INSERT INTO dst SELECT TIME_PARSE(ts) AS __time, SUM(bytes) AS bytes, *
FROM TABLE(localfiles(baseDir => '/data', filter => '*.json', format => 'json', exclude => ARRAY['comment']))
PARTIAL (ts VARCHAR, bytes BIGINT) GROUP BY ALL PARTITIONED BY DAY"""


def _source(stmt):
    [src] = stmt.sources.values()
    return src


def test_issue_example_parses_to_a_discovering_source():
    stmt = parse_ingestion(EXAMPLE)
    src = _source(stmt)
    assert src.discover and src.signature == ()
    assert src.partial == (("ts", STRING), ("bytes", LONG))
    assert src.exclude == ("comment",)
    again = IngestionStatement.from_json(stmt.to_json())
    assert _source(again).partial == src.partial and _source(again).exclude == ("comment",) and _source(again).discover


@pytest.mark.parametrize("frm", [
    "TABLE(EXTERN('{\"type\": \"inline\", \"data\": \"{}\"}', '{\"type\": \"json\"}'))",
    "TABLE(inline(data => '{}', format => 'json'))",
    "TABLE(inline(data => '{}', format => 'json', inferSchema => TRUE))",
    "TABLE(http(uris => ARRAY['http://h/x.json'], format => 'json')) PARTIAL (a BIGINT)",
])
def test_sources_without_a_declared_schema_discover(frm):
    src = _source(parse_ingestion(f"INSERT INTO t SELECT TIMESTAMP '2000-01-01' AS __time, * FROM {frm} "
                                  "PARTITIONED BY DAY"))
    assert src.discover


@pytest.mark.parametrize("frm, fragment", [
    ("TABLE(inline(data => 'x', format => 'json')) EXTEND (a BIGINT) PARTIAL (b BIGINT)", "PARTIAL"),
    ("TABLE(inline(data => 'x', format => 'json', inferSchema => TRUE)) EXTEND (a BIGINT)", "inferSchema"),
    ("TABLE(inline(data => 'x', format => 'json', exclude => ARRAY['a'])) EXTEND (a BIGINT)", "exclude"),
    ("TABLE(inline(data => 'x', format => 'json', exclude => ARRAY['a'])) PARTIAL (a BIGINT)", "excluded"),
    ("TABLE(inline(data => 'x', format => 'json')) PARTIAL a BIGINT", "PARTIAL"),
])
def test_contradictions_are_named(frm, fragment):
    with pytest.raises(ValidationError, match=fragment):
        parse_ingestion(f"INSERT INTO t SELECT TIMESTAMP '2000-01-01' AS __time, * FROM {frm} PARTITIONED BY DAY")


def _resolved(stmt, signature):
    import dataclasses

    [(name, src)] = stmt.sources.items()
    return {name: dataclasses.replace(src, signature=signature)}


def test_star_is_every_column_not_named_elsewhere():
    stmt = parse_ingestion("INSERT INTO t SELECT TIME_PARSE(ts) AS __time, UPPER(host) AS h, * "
                           "FROM TABLE(inline(data => 'x', format => 'json')) PARTITIONED BY DAY")
    sig = (("ts", STRING), ("host", STRING), ("code", LONG), ("h", LONG), ("tags", ColumnType.parse("COMPLEX<json>")))
    select = expand_star(stmt.select, _resolved(stmt, sig))
    assert [e.alias_or_name for e in select.expressions] == ["__time", "h", "code", "tags"]


def test_rollup_star_travels_as_one_sorted_dynamic_struct():
    stmt = parse_ingestion(EXAMPLE)
    sig = (("ts", STRING), ("bytes", LONG), ("zone", STRING), ("host", STRING), ("tags", ColumnType.parse("COMPLEX<json>")))
    sources = _resolved(stmt, sig)
    select = expand_star(stmt.select, sources)
    assert [e.alias_or_name for e in select.expressions] == ["__time", "bytes", DYNAMIC_COLUMN]
    assert dynamic_columns(select) == ("host", "tags", "zone")
    import dataclasses

    resolved = dataclasses.replace(stmt, select=select, sources=sources)
    assert resolved.json_columns() == ("tags",)


def test_explain_shows_dynamic_for_the_discovered_columns():
    import json

    from common.ingest.discovered_schema import explain_ingestion

    out = explain_ingestion(parse_ingestion(EXAMPLE))
    plan = json.loads(out["PLAN"])
    [source] = plan["sources"].values()
    assert [(c["name"], c["type"]) for c in source["columns"]] == [("ts", "STRING"), ("bytes", "LONG"),
                                                                   ("__dynamic", "COMPLEX<json>")]
    assert source["exclude"] == ["comment"]
    assert plan["select"] == "SELECT TIME_PARSE(ts) AS __time, SUM(bytes) AS bytes, __dynamic FROM __extern0 GROUP BY ALL"
    assert json.loads(out["ATTRIBUTES"])["targetDataSource"] == "dst"
