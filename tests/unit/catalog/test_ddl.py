"""SQL DDL to catalog operations."""

from __future__ import annotations

import pytest

from common.catalog import (
    AddColumns,
    CreateTable,
    DropColumns,
    DropTable,
    EditTable,
    HideColumns,
    MoveColumn,
    SetProperties,
    TableId,
    translate_ddl,
)
from common.errors import ValidationError


def test_create_datasource_with_every_clause():
    op = translate_ddl("""
        CREATE TABLE wiki (
          __time TIMESTAMP, channel varchar, added BIGINT, tags VARCHAR ARRAY, nums ARRAY<DOUBLE>,
          payload COMPLEX<json>, untyped
        )
        PARTITIONED BY DAY
        CLUSTERED BY channel, added DESC
        WITH (targetSegmentRows = 5000000, sealed = TRUE, description = 'edits', hiddenColumns = 'old, older');
    """)
    assert isinstance(op, CreateTable) and op.action == "New" and op.table == TableId("druid", "wiki")
    assert op.spec.to_json() == {
        "type": "datasource",
        "properties": {"segmentGranularity": "P1D",
                       "clusterKeys": [{"column": "channel"}, {"column": "added", "desc": True}],
                       "targetSegmentRows": 5000000, "sealed": True, "description": "edits",
                       "hiddenColumns": ["old", "older"]},
        "columns": [{"name": "__time", "sqlType": "TIMESTAMP"}, {"name": "channel", "sqlType": "VARCHAR"},
                    {"name": "added", "sqlType": "BIGINT"}, {"name": "tags", "sqlType": "ARRAY<VARCHAR>"},
                    {"name": "nums", "sqlType": "ARRAY<DOUBLE>"}, {"name": "payload", "sqlType": "COMPLEX<json>"},
                    {"name": "untyped"}],
    }


@pytest.mark.parametrize("clause, value", [("ALL", "ALL"), ("ALL TIME", "ALL"), ("HOUR", "PT1H"),
                                           ("'PT15M'", "PT15M"), ("fifteen_minute", "PT15M"), ("MONTH", "P1M")])
def test_partitioned_by(clause, value):
    op = translate_ddl(f"CREATE TABLE t (a VARCHAR) PARTITIONED BY {clause}")
    assert op.spec.properties["segmentGranularity"] == value


def test_create_variants():
    op = translate_ddl("CREATE TABLE IF NOT EXISTS druid.\"my table\"")
    assert op.action == "IfNew" and op.table == TableId("druid", "my table") and op.spec.columns == ()
    assert translate_ddl("create or replace table t (a bigint)").action == "Force"


def test_create_external_tables():
    op = translate_ddl("CREATE EXTERNAL TABLE ext.wiki_files (ts VARCHAR, n BIGINT) WITH (source = 'local', "
                       "baseDir = '/data', filePattern = '*.csv', format = 'csv', skipHeaderRows = 1)")
    assert op.table == TableId("ext", "wiki_files")
    assert op.spec.to_json() == {"type": "local", "properties": {"baseDir": "/data", "filePattern": "*.csv",
                                                                 "format": "csv", "skipHeaderRows": 1},
                                 "columns": [{"name": "ts", "sqlType": "VARCHAR"}, {"name": "n", "sqlType": "BIGINT"}]}
    op = translate_ddl("CREATE EXTERNAL TABLE rows (a VARCHAR) WITH (source = 'inline', format = 'csv', "
                       "data = 'x\ny')")
    assert op.table == TableId("ext", "rows") and op.spec.properties["data"] == "x\ny"
    op = translate_ddl("CREATE EXTERNAL TABLE h (a VARCHAR) WITH (source = 'http', format = 'json', "
                       "uris = ARRAY['https://a/1.json', 'https://a/2.json'])")
    assert op.spec.properties["uris"] == ["https://a/1.json", "https://a/2.json"]


def test_alter_actions():
    op = translate_ddl("ALTER TABLE wiki ADD COLUMN x BIGINT, ADD y, DROP COLUMN a, b, HIDE COLUMN c, "
                       "UNHIDE COLUMNS d, e, MOVE COLUMN x AFTER y, MOVE COLUMN y FIRST, SET (description = NULL, "
                       "targetSegmentRows = 10)")
    assert isinstance(op, EditTable) and op.table == TableId("druid", "wiki")
    assert op.edits == (
        AddColumns((op.edits[0].columns[0], op.edits[0].columns[1])), DropColumns(("a", "b")),
        HideColumns(hide=("c",)), HideColumns(unhide=("d", "e")), MoveColumn("x", "after", "y"),
        MoveColumn("y", "first"), SetProperties({"description": None, "targetSegmentRows": 10}))
    assert [(c.name, c.sql_type) for c in op.edits[0].columns] == [("x", "BIGINT"), ("y", None)]
    assert translate_ddl("ALTER TABLE ext.src DROP c").table == TableId("ext", "src")


def test_drop():
    assert translate_ddl("DROP TABLE wiki") == DropTable(TableId("druid", "wiki"), False, False)
    assert translate_ddl("DROP TABLE IF EXISTS wiki PURGE;") == DropTable(TableId("druid", "wiki"), True, True)
    assert translate_ddl("DROP TABLE ext.src") == DropTable(TableId("ext", "src"))


@pytest.mark.parametrize("sql, words", [
    ("CREATE TABLE t (a LONG)", ["sqlType 'LONG'", "write BIGINT", "line 1, column 19"]),
    ("CREATE TABLE t (a VARCHAR) PARTITIONED BY P2D", ["P2D", "valid values", "PT1H"]),
    ("CREATE TABLE t (a VARCHAR) WITH (rollup = TRUE)", ["unknown datasource property rollup", "targetSegmentRows"]),
    ("CREATE TABLE t (a VARCHAR) WITH (sealed = NULL)", ["'sealed'", "NULL"]),
    ("CREATE TABLE t (a VARCHAR NOT NULL)", ["constraints"]),
    ("CREATE TABLE t (a VARCHAR) PARTITIONED BY DAY PARTITIONED BY HOUR", ["given twice"]),
    ("CREATE TABLE t AS SELECT 1", ["AS SELECT is not supported"]),
    ("CREATE OR REPLACE TABLE IF NOT EXISTS t (a VARCHAR)", ["contradict"]),
    ("CREATE TABLE ext.t (a VARCHAR)", ["schema 'druid', not 'ext'", "CREATE EXTERNAL TABLE"]),
    ("CREATE EXTERNAL TABLE x (a VARCHAR) WITH (format = 'csv')", ["source", "inline, local, http"]),
    ("CREATE EXTERNAL TABLE x (a VARCHAR) WITH (source = 's3', format = 'csv')", ["'s3'", "inline, local, http"]),
    ("CREATE EXTERNAL TABLE x (a VARCHAR) PARTITIONED BY DAY", ["PARTITIONED BY applies to datasources"]),
    ("CREATE EXTERNAL TABLE x (a VARCHAR) WITH (source = 'local', format = 'csv', delimiter = '|')",
     ["'delimiter' belongs to format tsv"]),
    ("ALTER TABLE t FROB x", ["expected ADD or DROP", "syntax: ALTER TABLE"]),
    ("ALTER TABLE t MOVE COLUMN a SIDEWAYS", ["FIRST or LAST or BEFORE or AFTER"]),
    ("ALTER TABLE sys.t DROP COLUMN a", ["schema 'sys'", "druid, ext"]),
    ("DROP TABLE ext.x PURGE", ["only datasources"]),
    ("DROP TABLE t CASCADE", ["unexpected 'CASCADE'"]),
    ("DROP VIEW t", ["expected TABLE"]),
    ("SELECT 1", ["not a DDL statement"]),
])
def test_errors(sql, words):
    with pytest.raises(ValidationError) as err:
        translate_ddl(sql)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_is_ddl():
    # One statement classifier, in common/sql, decides what is DDL.
    from common.errors import StrataError
    from common.sql.statement_kind import classify

    def is_ddl(sql):
        try:
            return classify(sql).is_ddl
        except StrataError:
            return False

    assert is_ddl("  create table t (a varchar)")
    assert is_ddl("DROP TABLE x") and is_ddl("ALTER TABLE x DROP COLUMN a")
    assert not is_ddl("SELECT * FROM t") and not is_ddl("INSERT INTO t SELECT 1") and not is_ddl("'unterminated")
