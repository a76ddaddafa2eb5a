"""Error messages: syntax errors with their position, unknown names with the closest candidates,
type errors naming the expression, and unsupported constructs named exactly."""

from __future__ import annotations

import pytest

from common.errors import UnsupportedError, ValidationError
from common.sql import plan_sql
from tests.unit.sql.test_golden import golden_catalog

V, U = ValidationError, UnsupportedError

CASES = [
    # syntax
    ("SELECT page FROM wiki WHERE (added = 1", V, "at line 1, column"),
    ("SELECT page\nFROM wiki\nWHERE added = = 1", V, "at line 3, column"),
    ("", V, "empty SQL statement"),
    # names
    ("SELECT page FROM wikii", V, "unknown table 'wikii'; did you mean 'wiki'"),
    ("SELECT pagee FROM wiki", V, "unknown column 'pagee'; did you mean 'page'"),
    ("SELECT w.pagee FROM wiki w", V, "unknown column 'pagee'"),
    ("SELECT x.page FROM wiki w", V, "unknown table alias 'x'"),
    ("SELECT * FROM nosuch.wiki", V, "unknown schema 'nosuch'"),
    ("SELECT * FROM sys.segmentz", V, "unknown table 'sys.segmentz'; did you mean 'sys.segments'"),
    ("SELECT * FROM INFORMATION_SCHEMA.COLUMNZ", V, "did you mean 'INFORMATION_SCHEMA.COLUMNS'"),
    ("SELECT FOO(page) FROM wiki", V, "unknown function 'FOO'"),
    ("SELECT LOWR(page) FROM wiki", V, "did you mean 'LOWER'"),
    ("SELECT name FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode "
     "JOIN countries d ON c.isoCode = d.isoCode",
     V, "column 'name' is ambiguous"),
    # types
    ("SELECT SUM(page) FROM wiki", V, "cannot apply SUM to VARCHAR expression 'page'"),
    ("SELECT AVG(__time) FROM wiki", V, "cannot apply AVG to TIMESTAMP expression '__time'"),
    ("SELECT MIN(page = 'x') FROM wiki", V, "cannot apply MIN to BOOLEAN expression"),
    ("SELECT page + 1 FROM wiki", V, "cannot apply '+' to VARCHAR expression 'page'"),
    ("SELECT __time * 2 FROM wiki", V, "cannot apply '*' to TIMESTAMP expression '__time'"),
    ("SELECT LOWER(added) FROM wiki", V, "LOWER needs VARCHAR for 'added', got BIGINT"),
    ("SELECT page FROM wiki WHERE added", V, "WHERE must be a boolean condition, but 'added' is BIGINT"),
    ("SELECT page FROM wiki WHERE added = 'abc'", V, "cannot compare BIGINT with 'abc'"),
    ("SELECT CASE WHEN added > 1 THEN 'a' ELSE 1 END FROM wiki", V, "incompatible types VARCHAR and BIGINT"),
    ("SELECT page FROM wiki WHERE __time > 5", V, "cannot compare TIMESTAMP with BIGINT"),
    ("SELECT TIME_FLOOR(__time, 'PT1X') FROM wiki GROUP BY 1", V, "invalid ISO-8601 period 'PT1X'"),
    ("SELECT EXTRACT(FORTNIGHT FROM __time) FROM wiki", V, "unknown EXTRACT unit 'FORTNIGHT'"),
    ("SELECT TIME_FLOOR(__time, page) FROM wiki", V, "argument 2 of TIME_FLOOR must be a constant"),
    ("SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMP 'yesterday'", V, "cannot parse 'yesterday' as a TIMESTAMP"),
    # aggregation rules
    ("SELECT page, COUNT(*) FROM wiki", V, "column 'page' must appear in GROUP BY"),
    ("SELECT channel, page FROM wiki GROUP BY channel", V, "column 'page' must appear in GROUP BY"),
    ("SELECT page FROM wiki WHERE COUNT(*) > 1", V, "aggregate function COUNT is not allowed in WHERE"),
    ("SELECT SUM(COUNT(*)) FROM wiki", V, "aggregate functions cannot be nested"),
    ("SELECT COUNT(*) FROM wiki GROUP BY 3", V, "GROUP BY position 3 is not in the select list"),
    ("SELECT page FROM wiki ORDER BY 2", V, "ORDER BY position 2 is not in the select list"),
    ("SELECT DISTINCT page FROM wiki ORDER BY added", V, "ORDER BY expressions must appear in the select list"),
    ("SELECT page FROM wiki LIMIT -1", V, "LIMIT must be a non-negative integer"),
    ("SELECT COUNT(DISTINCT page), APPROX_COUNT_DISTINCT(channel) FROM wiki", U,
     "APPROX_COUNT_DISTINCT cannot be combined with COUNT(DISTINCT ...)"),
    # unsupported constructs
    ("SELECT page, COUNT(*) OVER (PARTITION BY channel) FROM wiki", U, "window functions (OVER) are not supported"),
    ("SELECT * FROM wiki w FULL OUTER JOIN countries c ON w.countryIsoCode = c.isoCode", U,
     "FULL OUTER JOIN is not supported"),
    ("SELECT page FROM wiki INTERSECT SELECT name FROM countries", U, "INTERSECT is not supported"),
    ("SELECT page FROM wiki EXCEPT SELECT name FROM countries", U, "EXCEPT is not supported"),
    ("SELECT page FROM wiki WHERE channel NOT IN (SELECT name FROM countries)", U,
     "IN (SELECT ...) is supported only as a condition of its own in WHERE"),
    ("SELECT page FROM wiki WHERE added > 5 OR channel IN (SELECT name FROM countries)", U,
     "IN (SELECT ...) is supported only as a condition of its own in WHERE"),
    ("SELECT page FROM wiki WHERE channel IN (SELECT name, isoCode FROM countries)", V,
     "the subquery of IN must return one column"),
    ("SELECT page FROM wiki WHERE EXISTS (SELECT 1 FROM countries)", U, "subqueries in WHERE are not supported"),
    ("SELECT page, (SELECT MAX(population) FROM countries) FROM wiki", U, "subqueries in SELECT are not supported"),
    ("SELECT channel FROM wiki GROUP BY ROLLUP(channel)", U, "GROUPING SETS, ROLLUP and CUBE are not supported"),
    ("SELECT STDDEV(added) FROM wiki", U, "aggregate function STDDEV is not supported"),
    ("INSERT INTO wiki SELECT * FROM wiki", U, "INSERT statements are not supported"),
    ("EXPLAIN SELECT 1", U, "only EXPLAIN PLAN FOR <query> is supported"),
    ("SELECT w.page FROM wiki w CROSS JOIN countries c", U, "cross joins are not supported"),
    ("SELECT w.page FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode AND w.added > 5", U,
     "LEFT JOIN of w and c"),
    ("SELECT page FROM wiki UNION ALL SELECT name, isoCode FROM countries", V,
     "UNION inputs have different numbers of columns"),
    ("SELECT page FROM wiki UNION ALL SELECT population FROM countries", V, "incompatible types VARCHAR and BIGINT"),
    ("SELECT CAST(page AS VARBINARY) FROM wiki", U, "CAST to VARBINARY is not supported"),
    ("WITH RECURSIVE t AS (SELECT 1) SELECT * FROM t", U, "WITH RECURSIVE is not supported"),
    ("SELECT * FROM wiki w NATURAL JOIN countries c", U, "NATURAL JOIN is not supported"),
    ("SELECT page FROM wiki TABLESAMPLE SYSTEM (10)", U, "TABLESAMPLE is not supported"),
    ("SELECT page FROM wiki WHERE page SIMILAR TO 'a'", U, "is not supported"),
]


@pytest.mark.parametrize("sql,error,message", CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_error_message(sql, error, message):
    with pytest.raises(error) as info:
        plan_sql(sql, golden_catalog(), context={"sqlCurrentTimestamp": "2015-09-14"})
    assert message in str(info.value), str(info.value)


def test_parameter_count_mismatch():
    with pytest.raises(ValidationError, match=r"2 \? parameters but 1 values"):
        plan_sql("SELECT page FROM wiki WHERE added > ? AND deleted < ?", golden_catalog(), [1])


def test_unknown_session_time_zone():
    with pytest.raises(ValidationError, match="unknown time zone 'Mars/Olympus'"):
        plan_sql("SELECT 1", golden_catalog(), context={"sqlTimeZone": "Mars/Olympus"})


def test_unbound_parameters_describe_but_do_not_run():
    plan = plan_sql("SELECT page FROM wiki WHERE channel = ?", golden_catalog())
    assert plan.parameter_count == 1
    assert plan.output_schema.names == ["page"]
    with pytest.raises(ValidationError, match="no values were given"):
        plan.execute(lambda q: None)


def test_join_over_max_join_rows_is_refused_not_wrong(sql_env):
    sql = "SELECT a.page FROM wiki a JOIN wiki b ON a.page = b.page"
    with pytest.raises(UnsupportedError) as info:
        sql_env.sql(sql, context={"maxJoinRows": 100})
    assert "INNER JOIN of a and b" in str(info.value)
    assert "maxJoinRows=100" in str(info.value)
    # one small side is enough
    small = sql_env.sql("SELECT a.page, b.c FROM wiki a "
                        "JOIN (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) b "
                        "ON a.channel = b.channel", context={"maxJoinRows": 100})
    assert small.num_rows == 20_000
