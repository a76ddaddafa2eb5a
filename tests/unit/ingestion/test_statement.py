"""Parsing Druid SQL INSERT/REPLACE statements: clauses, granularities, OVERWRITE ranges, SET
context, external sources, and errors that name the clause and the position."""

from __future__ import annotations

import pytest
from sqlglot import exp

from common.errors import ValidationError
from common.types import ALL, Granularity, Interval
from common.types.column_type import LONG, STRING, STRING_ARRAY, ColumnType
from common.types.interval import ETERNITY
from common.ingest.statement import parse_ingestion

EXTERN = """TABLE(EXTERN('{"type": "inline", "data": "2020-01-01,a,1\\n"}', '{"type": "csv", "columns": ["ts", "s", "n"]}',
    '[{"name": "ts", "type": "string"}, {"name": "s", "type": "string"}, {"name": "n", "type": "long"}]'))"""


def stmt(tail: str = "PARTITIONED BY DAY", head: str = "INSERT INTO ds", select: str | None = None):
    select = select or f"SELECT TIME_PARSE(ts) AS __time, s, n FROM {EXTERN}"
    return parse_ingestion(f"{head}\n{select}\n{tail}")


def test_insert_with_extern():
    s = stmt("PARTITIONED BY DAY CLUSTERED BY s, n")
    assert (s.mode, s.datasource, s.overwrite) == ("INSERT", "ds", None)
    assert s.partitioned_by == Granularity.parse("day")
    assert s.clustered_by == ("s", "n")
    assert s.replace_intervals is None and not s.is_rollup
    [(name, source)] = s.sources.items()
    assert isinstance(s.select, exp.Select) and s.select.find(exp.Table).name == name
    assert source.input_source == {"type": "inline", "data": "2020-01-01,a,1\n"}
    assert source.signature == (("ts", STRING), ("s", STRING), ("n", LONG))
    assert source.input_format["columns"] == ["ts", "s", "n"]


@pytest.mark.parametrize("tail, want", [
    ("PARTITIONED BY HOUR", Granularity.parse("hour")),
    ("PARTITIONED BY second", Granularity.parse("second")),
    ("PARTITIONED BY FIFTEEN_MINUTE", Granularity.parse("PT15M")),
    ("PARTITIONED BY MONTH", Granularity.parse("month")),
    ("PARTITIONED BY YEAR", Granularity.parse("year")),
    ("PARTITIONED BY ALL", ALL),
    ("PARTITIONED BY ALL TIME", ALL),
    ("PARTITIONED BY 'PT5M'", Granularity.parse("PT5M")),
    ("PARTITIONED BY 'P1D'", Granularity.parse("day")),
    ("PARTITIONED BY TIME_FLOOR(__time, 'PT1H')", Granularity.parse("hour")),
    ("PARTITIONED BY FLOOR(__time TO DAY)", Granularity.parse("day")),
    ("PARTITIONED BY TIME_FLOOR(__time, 'P1D', NULL, 'America/Los_Angeles')",
     Granularity.parse({"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"})),
    ("", None),
    ("CLUSTERED BY s", None),
])
def test_granularities(tail, want):
    assert stmt(tail).partitioned_by == want


def test_replace_overwrite_all_and_where():
    s = stmt(head="REPLACE INTO ds OVERWRITE ALL")
    assert s.overwrite == "ALL" and s.replace_intervals == [ETERNITY]
    s = stmt(head="REPLACE INTO ds OVERWRITE WHERE __time >= TIMESTAMP '2020-01-01' AND __time < TIMESTAMP '2020-01-03'"
                  " OR __time BETWEEN TIMESTAMP '2020-02-01' AND TIMESTAMP '2020-02-01 23:59:59.999'")
    assert s.replace_intervals == [Interval.parse("2020-01-01/2020-01-03"), Interval.parse("2020-02-01/2020-02-02")]


def test_overwrite_where_must_align_with_granularity():
    with pytest.raises(ValidationError, match="not aligned with PARTITIONED BY day"):
        stmt(head="REPLACE INTO ds OVERWRITE WHERE __time >= TIMESTAMP '2020-01-01 12:00:00' "
                  "AND __time < TIMESTAMP '2020-01-03'")
    s = stmt("PARTITIONED BY HOUR", head="REPLACE INTO ds OVERWRITE WHERE __time >= TIMESTAMP '2020-01-01 12:00:00' "
                                         "AND __time < TIMESTAMP '2020-01-03'")
    assert s.replace_intervals == [Interval.parse("2020-01-01T12:00:00Z/2020-01-03")]


@pytest.mark.parametrize("cond, match", [
    ("page = 'x'", "only comparisons of __time"),
    ("__time >= 5", "is not a time literal"),
    ("__time >= TIMESTAMP '2020-01-02' AND __time < TIMESTAMP '2020-01-01'", "selects no time"),
])
def test_bad_overwrite_where(cond, match):
    with pytest.raises(ValidationError, match=match):
        stmt(head=f"REPLACE INTO ds OVERWRITE WHERE {cond}")


def test_set_statements_become_context():
    s = parse_ingestion(f"SET maxParseExceptions = -1;\nset rowsPerSegment = 1000;SET mode = 'fast'; SET x = TRUE;\n"
                        f"INSERT INTO ds SELECT TIME_PARSE(ts) AS __time FROM {EXTERN} PARTITIONED BY DAY;",
                        context={"rowsPerSegment": 5, "other": 1})
    assert s.context == {"maxParseExceptions": -1, "rowsPerSegment": 1000, "mode": "fast", "x": True, "other": 1}


def test_with_clause_group_by_and_quoted_names():
    s = parse_ingestion(f"""INSERT INTO "my ds" WITH src AS (SELECT * FROM {EXTERN})
        SELECT TIME_FLOOR(TIME_PARSE(ts), 'PT1H') AS __time, s, SUM(n) AS n FROM src WHERE n > 0 GROUP BY 1, 2
        PARTITIONED BY DAY CLUSTERED BY 2""")
    assert s.datasource == "my ds" and s.is_rollup and s.clustered_by == ("s",)


def test_table_functions_with_extend():
    s = stmt(select="""SELECT * FROM TABLE(localfiles(baseDir => '/data', filter => '*.tsv', format => 'tsv',
                       delimiter => '|', listDelimiter => ';', skipHeaderRows => 1))
                       EXTEND (ts VARCHAR, tags VARCHAR ARRAY, n BIGINT NOT NULL, j COMPLEX<json>) AS t""")
    [source] = s.sources.values()
    assert source.input_source == {"type": "local", "baseDir": "/data", "filter": "*.tsv"}
    assert source.input_format == {"type": "tsv", "findColumnsFromHeader": False, "skipHeaderRows": 1,
                                   "delimiter": "|", "listDelimiter": ";", "columns": ["ts", "tags", "n", "j"]}
    assert [t for _, t in source.signature] == [STRING, STRING_ARRAY, LONG, ColumnType.parse("COMPLEX<json>")]
    assert s.select.find(exp.Table).alias == "t"
    s = stmt(select="""SELECT * FROM TABLE(inline(data => ARRAY['a', 'b'], format => 'csv')) (x VARCHAR)""")
    assert list(s.sources.values())[0].input_source["data"] == "a\nb\n"
    s = stmt(select="""SELECT * FROM TABLE(http(uris => ARRAY['http://h/a.json', 'https://h/b.json'], format => 'json',
                       userName => 'bob', passwordEnvVar => 'PW')) EXTEND (x VARCHAR)""")
    assert list(s.sources.values())[0].input_source == {
        "type": "http", "uris": ["http://h/a.json", "https://h/b.json"], "httpAuthenticationUsername": "bob",
        "httpAuthenticationPassword": {"type": "environment", "variable": "PW"}}


def test_named_extern_arguments_and_two_sources():
    s = stmt(select=f"""SELECT a.ts AS __time FROM TABLE(EXTERN(inputSource => '{{"type": "inline", "data": "x"}}',
                        inputFormat => '{{"type": "json"}}', signature => '[{{"name": "ts", "type": "string"}}]')) a
                        JOIN {EXTERN} b ON a.ts = b.ts""")
    assert len(s.sources) == 2


@pytest.mark.parametrize("sql, match", [
    ("", "empty"),
    ("SELECT 1", "expected INSERT or REPLACE at line 1, column 1"),
    ("INSERT ds SELECT 1", "must be followed by INTO"),
    (f"REPLACE INTO ds SELECT * FROM {EXTERN} PARTITIONED BY DAY", "REPLACE needs OVERWRITE"),
    (f"INSERT INTO ds OVERWRITE ALL SELECT * FROM {EXTERN}", "OVERWRITE at line 1, column 16 is only for REPLACE"),
    (f"INSERT INTO ds\nSELECT * FROM {EXTERN}\nPARTITIONED BY WEEKLY", "PARTITIONED BY at line 4, column 1.*WEEKLY"),
    (f"INSERT INTO ds\nSELECT * FROM {EXTERN}\nPARTITIONED BY NONE", "unknown granularity 'NONE'"),
    (f"INSERT INTO ds\nSELECT * FROM {EXTERN}\nPARTITIONED BY DAY CLUSTERED BY s DESC", "DESC at line 4"),
    (f"INSERT INTO ds\nSELECT * FROM {EXTERN}\nPARTITIONED BY DAY CLUSTERED BY UPPER(s)", "is not a column name"),
    (f"INSERT INTO ds\nSELECT * FROM {EXTERN}\nCLUSTERED BY s PARTITIONED BY DAY", "must come after PARTITIONED BY"),
    (f"INSERT INTO ds\nSELECT * FROM {EXTERN} ORDER BY s\nPARTITIONED BY DAY", "use CLUSTERED BY"),
    ("INSERT INTO ds\nSELECT * FROM wikipedia\nPARTITIONED BY DAY", "FROM wikipedia at line 2: ingestion reads external"),
    ("INSERT INTO ds\nSELECT (a FROM x\nPARTITIONED BY DAY", r"SELECT: .* at line 2, column"),
    ("INSERT INTO ds\nSELECT * FROM TABLE(EXTERN('{bad json', '{}', '[]'))", "not valid JSON"),
    ("INSERT INTO a/b SELECT 1", "datasource name"),
    ("SET x = ;\nINSERT INTO ds SELECT 1", "SET x at"),
    (f"INSERT INTO ds SELECT * FROM {EXTERN}; SET x = 1", "only SET statements may come before"),
    ("INSERT INTO ds SELECT * FROM TABLE(EXTERN('x'", "unbalanced parenthesis|not closed"),
    ("INSERT INTO ds SELECT 'unterminated", "unterminated"),
])
def test_errors_name_the_clause_and_position(sql, match):
    with pytest.raises(ValidationError, match=match):
        parse_ingestion(sql)


def test_select_error_position_is_in_the_users_text():
    sql = f"INSERT INTO ds\nSELECT TIME_PARSE(ts) AS __time\nFROM {EXTERN}\nWHERE n >\nPARTITIONED BY DAY"
    with pytest.raises(ValidationError, match=r"SELECT: .* line (5|6)"):
        parse_ingestion(sql)
