"""SQL over real segments, checked against DuckDB over the same rows.

Each case is strata SQL, optionally with the DuckDB spelling when the dialects differ (TIME_FLOOR
vs date_trunc, integer division). Results compare in order when the query orders them (ties are
broken explicitly), as multisets otherwise. DuckDB is told to order NULLs as Druid does (first
ascending, last descending).
"""

from __future__ import annotations

import pytest

from tests.unit.query.oracle import assert_rows_equal, duck_rows, engine_rows

CASES = [
    # ---- scans, projections, filters -------------------------------------------------------------
    ("SELECT __time, channel, page, added FROM wiki WHERE channel = '#de.wikipedia' AND added > 500", None),
    ("SELECT page, added, deleted FROM wiki WHERE added BETWEEN 100 AND 120 AND deleted <> 0", None),
    ("SELECT page FROM wiki WHERE channel IN ('#fr.wikipedia', '#ja.wikipedia') AND NOT isRobot = 'true'", None),
    ("SELECT page, cityName FROM wiki WHERE cityName IS NOT NULL AND countryIsoCode = 'US'", None),
    ("SELECT page FROM wiki WHERE page LIKE 'Talk:%' AND channel LIKE '#e_.wikipedia'", None),
    ("SELECT page FROM wiki WHERE page NOT LIKE '%a%' AND added >= 1000", None),
    ("SELECT __time, page FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 06:00:00' "
     "AND __time < TIMESTAMP '2015-09-12 06:10:00'", None),
    ("SELECT page FROM wiki WHERE __time BETWEEN TIMESTAMP '2015-09-13 10:00:00' AND TIMESTAMP '2015-09-13 10:05:00' "
     "OR added > 5000", None),
    ("SELECT COUNT(*) FROM wiki WHERE TIME_IN_INTERVAL(__time, '2015-09-12T12:00:00/PT30M')",
     "SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 12:00:00' "
     "AND __time < TIMESTAMP '2015-09-12 12:30:00'"),
    ("SELECT COUNT(*) FROM wiki WHERE __time >= CURRENT_TIMESTAMP - INTERVAL '1' DAY",
     "SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2015-09-13 00:00:00'"),
    ("SELECT COUNT(*) FROM wiki WHERE __time > TIMESTAMP '2015-09-12 23:00:00' AND "
     "(__time < TIMESTAMP '2015-09-13 01:00:00' OR __time >= TIMESTAMP '2015-09-13 22:00:00')", None),
    ("SELECT __time, page, added FROM wiki WHERE channel = '#en.wikipedia' ORDER BY __time DESC LIMIT 7", None),
    ("SELECT __time, page FROM wiki ORDER BY __time LIMIT 5 OFFSET 9990", None),
    ("SELECT page, added FROM wiki WHERE channel = '#it.wikipedia' ORDER BY added DESC, page LIMIT 10", None),
    ("SELECT page, added FROM wiki ORDER BY added, page DESC LIMIT 5 OFFSET 3", None),
    ("SELECT UPPER(channel) AS ch, added * 2 + 1 AS x, CAST(added AS DOUBLE) / 4 AS q FROM wiki "
     "WHERE added < 3 AND channel = '#sv.wikipedia'", None),
    ("SELECT page, added - deleted AS net FROM wiki WHERE added - deleted > 3000", None),
    ("SELECT page FROM wiki WHERE LOWER(page) LIKE '%park%' AND CHAR_LENGTH(page) > 20", None),
    ("SELECT page FROM wiki WHERE UPPER(channel) = '#EN.WIKIPEDIA' AND added = 7", None),
    ("SELECT DISTINCT channel FROM wiki", None),
    ("SELECT DISTINCT namespace, isRobot FROM wiki ORDER BY namespace, isRobot", None),
    ("SELECT * FROM nulls", None),
    # EARLIEST_BY / LATEST_BY order by their second argument; a row without it never wins
    ("SELECT EARLIEST_BY(s, n) AS e, LATEST_BY(s, n) AS l, LATEST_BY(d, n) AS ld FROM nulls",
     "SELECT arg_min(s, n) FILTER (WHERE s IS NOT NULL) AS e, arg_max(s, n) FILTER (WHERE s IS NOT NULL) AS l, "
     "arg_max(d, n) FILTER (WHERE d IS NOT NULL) AS ld FROM nulls"),
    # ---- null semantics ---------------------------------------------------------------------------
    ("SELECT s, n FROM nulls WHERE s <> 'a'", None),
    ("SELECT s FROM nulls WHERE NOT (s = 'a')", None),
    ("SELECT s FROM nulls WHERE s NOT IN ('a', 'b')", None),
    ("SELECT n FROM nulls WHERE n NOT IN (1, 3)", None),
    ("SELECT n FROM nulls WHERE n IN (1, NULL)", None),
    ("SELECT n FROM nulls WHERE n NOT IN (1, NULL)", None),
    ("SELECT s, n FROM nulls WHERE n > 2 OR s = 'a'", None),
    ("SELECT s FROM nulls WHERE NOT (n > 2 OR s = 'a')", None),
    ("SELECT s FROM nulls WHERE s IS NULL", None),
    ("SELECT s FROM nulls WHERE s = ''", None),
    ("SELECT d FROM nulls WHERE d >= 2.5", None),
    ("SELECT COALESCE(s, 'none') AS s2, NULLIF(n, 4) AS n2, n + d AS nd, n > 3 AS big FROM nulls", None),
    ("SELECT CASE WHEN n > 3 THEN 'hi' WHEN n > 0 THEN 'lo' END AS c FROM nulls", None),
    ("SELECT CASE s WHEN 'a' THEN 1 WHEN 'b' THEN 2 ELSE 0 END AS c, s || '!' AS e FROM nulls", None),
    ("SELECT COUNT(*), COUNT(s), COUNT(n), COUNT(d), SUM(n), MIN(d), MAX(n), AVG(d) FROM nulls", None),
    ("SELECT g, COUNT(*), COUNT(s), SUM(n), AVG(n), MIN(CASE WHEN s IS NULL THEN 1 ELSE 0 END) FROM nulls GROUP BY g",
     None),
    ("SELECT s, COUNT(*) FROM nulls GROUP BY s ORDER BY s", None),
    ("SELECT s, COUNT(*) FROM nulls GROUP BY s ORDER BY s DESC", None),
    ("SELECT n FROM nulls ORDER BY n DESC LIMIT 4", None),
    ("SELECT n FROM nulls ORDER BY n LIMIT 4", None),
    ("SELECT n FROM nulls ORDER BY n NULLS LAST LIMIT 4", None),
    ("SELECT g, SUM(n) AS t FROM nulls GROUP BY g ORDER BY t NULLS FIRST, g", None),
    ("SELECT COUNT(DISTINCT s), COUNT(*) FROM nulls", None),
    ("SELECT COUNT(DISTINCT s), COUNT(DISTINCT g), COUNT(*) FROM nulls", None),
    ("SELECT g, COUNT(DISTINCT s) FILTER (WHERE n > 0), COUNT(DISTINCT n), SUM(d) FROM nulls GROUP BY g", None),
    ("SELECT g, COUNT(DISTINCT s) FILTER (WHERE n > 0), SUM(n) FROM nulls GROUP BY g", None),
    ("SELECT SUM(n), COUNT(*), AVG(d), MAX(__time) FROM nulls WHERE n > 100", None),
    ("SELECT g, SUM(n) FROM nulls WHERE n > 100 GROUP BY g", None),
    ("SELECT s, g FROM nulls WHERE s IS NOT DISTINCT FROM NULL OR g = 'x'", None),
    # ---- aggregation ------------------------------------------------------------------------------
    ("SELECT COUNT(*), SUM(added), MIN(delta), MAX(deleted), AVG(delta) FROM wiki", None),
    ("SELECT channel, COUNT(*) AS c, SUM(added) AS a FROM wiki GROUP BY channel", None),
    ("SELECT channel, SUM(added) AS s FROM wiki GROUP BY channel ORDER BY s DESC LIMIT 5", None),
    ("SELECT channel, SUM(delta) AS s FROM wiki GROUP BY channel ORDER BY s LIMIT 5", None),
    ("SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel ORDER BY c DESC, channel LIMIT 5", None),
    ("SELECT page, COUNT(*) AS c FROM wiki GROUP BY page ORDER BY c DESC, page LIMIT 10", None),
    ("SELECT channel, COUNT(*) FROM wiki GROUP BY channel ORDER BY channel DESC LIMIT 3", None),
    ("SELECT channel, namespace, COUNT(*) AS c, MAX(added) FROM wiki GROUP BY channel, namespace "
     "HAVING COUNT(*) > 100 ORDER BY c DESC, channel, namespace LIMIT 8 OFFSET 2", None),
    ("SELECT channel, SUM(added) FROM wiki GROUP BY 1 HAVING SUM(added) > 200000 AND MIN(added) = 0", None),
    ("SELECT isRobot, AVG(added) AS a, SUM(added) / COUNT(*) AS b FROM wiki GROUP BY isRobot",
     "SELECT isRobot, AVG(added) AS a, SUM(added) // COUNT(*) AS b FROM wiki GROUP BY isRobot"),
    ("SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*), SUM(added) FROM wiki GROUP BY 1 ORDER BY 1",
     "SELECT date_trunc('hour', __time) AS h, COUNT(*), SUM(added) FROM wiki GROUP BY 1 ORDER BY 1"),
    ("SELECT FLOOR(__time TO DAY) AS d, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 1 DESC",
     "SELECT date_trunc('day', __time) AS d, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 1 DESC"),
    ("SELECT TIME_FLOOR(__time, 'PT6H') AS t, channel, COUNT(*) AS c FROM wiki WHERE channel LIKE '#e%' "
     "GROUP BY 1, 2 ORDER BY c DESC, t, channel LIMIT 6",
     "SELECT time_bucket(INTERVAL 6 HOUR, __time) AS t, channel, COUNT(*) AS c FROM wiki WHERE channel LIKE '#e%' "
     "GROUP BY 1, 2 ORDER BY c DESC, t, channel LIMIT 6"),
    ("SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY c DESC, h LIMIT 3",
     "SELECT date_trunc('hour', __time) AS h, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY c DESC, h LIMIT 3"),
    ("SELECT EXTRACT(HOUR FROM __time) AS hr, COUNT(*) FROM wiki GROUP BY 1", None),
    ("SELECT CASE WHEN added > 100 THEN 'big' ELSE 'small' END AS size, COUNT(*) FROM wiki GROUP BY 1", None),
    ("SELECT UPPER(channel), COUNT(*) FROM wiki GROUP BY channel", None),
    ("SELECT channel, COUNT(DISTINCT page) AS p FROM wiki GROUP BY channel ORDER BY p DESC, channel LIMIT 5", None),
    ("SELECT COUNT(DISTINCT user), COUNT(*), SUM(added), MIN(added), MAX(added) FROM wiki", None),
    ("SELECT channel, COUNT(DISTINCT page) AS p, COUNT(DISTINCT user) AS u FROM wiki GROUP BY channel "
     "ORDER BY p DESC, channel LIMIT 5", None),
    ("SELECT namespace, COUNT(DISTINCT channel) AS chans, COUNT(*) AS c, SUM(delta) FROM wiki "
     "GROUP BY namespace", None),
    ("SELECT COUNT(DISTINCT page) FROM wiki WHERE channel = 'no such channel'", None),
    ("SELECT SUM(DISTINCT added), COUNT(DISTINCT added) FROM wiki WHERE channel = '#nl.wikipedia'", None),
    ("SELECT channel, COUNT(*) FILTER (WHERE isRobot = 'true') AS bots, SUM(added) FILTER (WHERE added > 100) "
     "FROM wiki GROUP BY channel", None),
    ("SELECT MIN(__time), MAX(__time) FROM wiki WHERE page LIKE 'A%'", None),
    ("SELECT COUNT(metroCode), SUM(metroCode), AVG(metroCode) FROM wiki", None),
    ("SELECT COUNT(*) FROM wiki GROUP BY channel HAVING COUNT(*) > 1000", None),
    ("SELECT COUNT(*) AS c FROM wiki HAVING COUNT(*) > 5", None),
    ("SELECT COUNT(*) AS c FROM wiki WHERE added < 0 HAVING COUNT(*) = 0", None),
    # ---- MIN/MAX of text (ClickBench's Druid queries use them) -----------------------------------
    ("SELECT MIN(page), MAX(page), MIN(channel), MAX(cityName) FROM wiki", None),
    ("SELECT channel, MIN(page) AS lo, MAX(page) AS hi, COUNT(*) FROM wiki GROUP BY channel", None),
    ("SELECT g, MIN(s), MAX(s) FROM nulls GROUP BY g", None),
    ("SELECT MIN(s), MAX(s) FROM nulls WHERE s IS NULL", None),
    ("SELECT MIN(s) FILTER (WHERE n > 3), MAX(s) FILTER (WHERE n < 0) FROM nulls", None),
    ("SELECT MIN(UPPER(s)), MAX(s || g) FROM nulls", None),
    ("SELECT MIN(CAST(n AS VARCHAR)), MAX(CAST(d AS VARCHAR)) FROM nulls",
     "SELECT MIN(CAST(n AS VARCHAR)), MAX(CASE WHEN d = 0 THEN '0.0' ELSE CAST(d AS VARCHAR) END) FROM nulls"),
    ("SELECT channel, MAX(page) AS hi FROM wiki GROUP BY channel ORDER BY hi DESC, channel LIMIT 5", None),
    # ---- expressions --------------------------------------------------------------------------
    ("SELECT SUBSTRING(page, 2, 4), CHAR_LENGTH(page), STRPOS(page, 'a'), LPAD(channel, 16, '*'), "
     "RPAD(namespace, 6, '-'), TRIM(BOTH '#' FROM channel), REVERSE(namespace), REPLACE(channel, 'wiki', 'W') "
     "FROM wiki WHERE added = 17", None),
    ("SELECT LEFT(page, 3), RIGHT(page, 3), CONCAT(channel, '/', namespace), LTRIM('  x'), RTRIM('y  ') "
     "FROM wiki WHERE added = 23", None),
    ("SELECT ABS(delta), CEIL(added / 7.0), FLOOR(added / 7.0), ROUND(added / 7.0, 1), MOD(added, 7), "
     "POWER(added, 2), SQRT(added), EXP(added / 1000.0), LN(added + 1), LOG10(added + 1) FROM wiki WHERE added < 9",
     None),
    ("SELECT added / 7, delta / 3, added * 1.5 FROM wiki WHERE added BETWEEN 1 AND 4",
     "SELECT added // 7, trunc(delta / 3)::BIGINT, added * 1.5 FROM wiki WHERE added BETWEEN 1 AND 4"),
    ("SELECT CAST(added AS VARCHAR) || '+', CAST('12' AS BIGINT) + added, CAST(added AS DOUBLE) FROM wiki "
     "WHERE added < 3", None),
    ("SELECT TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm'), TIME_EXTRACT(__time, 'MINUTE'), EXTRACT(DAY FROM __time), "
     "TIME_SHIFT(__time, 'PT1H', 2), __time + INTERVAL '1' DAY FROM wiki WHERE added = 31",
     "SELECT strftime(__time, '%Y-%m-%d %H:%M'), EXTRACT(MINUTE FROM __time), EXTRACT(DAY FROM __time), "
     "__time + INTERVAL 2 HOUR, __time + INTERVAL 1 DAY FROM wiki WHERE added = 31"),
    ("SELECT TIME_CEIL(__time, 'PT1H'), TIME_PARSE('2015-09-12 08:00:00'), CAST(__time AS VARCHAR) FROM wiki "
     "WHERE added = 41",
     "SELECT CASE WHEN date_trunc('hour', __time) = __time THEN __time ELSE date_trunc('hour', __time) + "
     "INTERVAL 1 HOUR END, TIMESTAMPTZ '2015-09-12 08:00:00', strftime(__time, '%Y-%m-%d %H:%M:%S') "
     "FROM wiki WHERE added = 41"),
    ("SELECT 1 + 1, 'x' || 'y', 10 / 4, 10 / 4.0, NULL IS NULL, COALESCE(NULL, 3)", "SELECT 2, 'xy', 2, 2.5, true, 3"),
    ("SELECT GREATEST(added, deleted), LEAST(added, deleted, 50) FROM wiki WHERE added < 5", None),
    ("SELECT page FROM wiki WHERE CONTAINS_STRING(page, 'Park') AND REGEXP_LIKE(page, '^[A-Z]')",
     "SELECT page FROM wiki WHERE contains(page, 'Park') AND regexp_matches(page, '^[A-Z]')"),
    # ---- subqueries -------------------------------------------------------------------------
    ("SELECT t.channel, t.c FROM (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) t WHERE t.c > 300", None),
    ("SELECT c, COUNT(*) AS n FROM (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) GROUP BY c", None),
    ("SELECT AVG(c), MAX(c) FROM (SELECT page, COUNT(*) AS c FROM wiki GROUP BY page)", None),
    ("SELECT * FROM (SELECT page, added FROM wiki ORDER BY added DESC, page LIMIT 20) ORDER BY page", None),
    ("SELECT x, y FROM (SELECT added AS x, deleted * 2 AS y FROM wiki WHERE channel = '#pl.wikipedia') "
     "WHERE y > 100", None),
    ("WITH top AS (SELECT channel, SUM(added) AS s FROM wiki GROUP BY channel ORDER BY s DESC LIMIT 3) "
     "SELECT channel FROM top ORDER BY channel", None),
    ("SELECT COUNT(*) FROM (SELECT DISTINCT channel, namespace FROM wiki)", None),
    # ---- unions ---------------------------------------------------------------------------------
    ("SELECT channel AS x FROM wiki WHERE added > 4000 UNION ALL SELECT s FROM nulls", None),
    ("SELECT g FROM nulls UNION SELECT s FROM nulls", None),
    ("SELECT n AS v FROM nulls UNION ALL SELECT d FROM nulls ORDER BY 1 LIMIT 5", None),
    ("SELECT x, COUNT(*) FROM (SELECT g AS x FROM nulls UNION ALL SELECT s FROM nulls) GROUP BY x", None),
    # ---- joins --------------------------------------------------------------------------------
    ("SELECT w.page, s.c FROM wiki w JOIN (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) s "
     "ON w.channel = s.channel WHERE w.added > 4000", None),
    ("SELECT a.s, a.n, b.g FROM nulls a JOIN nulls b ON a.s = b.s", None),
    ("SELECT a.s, a.n, b.n FROM nulls a LEFT JOIN (SELECT s, n FROM nulls WHERE n > 3) b ON a.s = b.s", None),
    ("SELECT a.g, COUNT(*), SUM(b.n) FROM nulls a JOIN nulls b ON a.g = b.g AND b.n > 0 GROUP BY a.g", None),
    ("SELECT a.s, b.s FROM nulls a, nulls b WHERE a.n = b.n + 1", None),
    ("SELECT a.n, b.g FROM nulls a RIGHT JOIN (SELECT g, MAX(n) AS m FROM nulls GROUP BY g) b ON a.n = b.m", None),
    ("SELECT a.s, b.s FROM nulls a JOIN nulls b ON UPPER(a.s) = UPPER(b.s) WHERE a.n > b.n", None),
    ("SELECT w.channel, COUNT(*) FROM wiki w JOIN (SELECT g FROM nulls) x ON w.namespace = x.g GROUP BY 1", None),
    ("SELECT * FROM (SELECT g, COUNT(*) AS c FROM nulls GROUP BY g) a JOIN "
     "(SELECT g, SUM(n) AS t FROM nulls GROUP BY g) b USING (g)", None),
    ("SELECT g, b.t FROM (SELECT g, COUNT(*) AS c FROM nulls WHERE g = 'x' GROUP BY g) a RIGHT JOIN "
     "(SELECT g, SUM(n) AS t FROM nulls GROUP BY g) b USING (g)", None),
    ("SELECT a.s, b.n FROM nulls a JOIN nulls b USING (s, g)", None),
    ("SELECT s, n FROM nulls WHERE n > 0 AND s IN (SELECT g FROM nulls UNION ALL SELECT 'a') AND d IS NOT NULL", None),
    ("SELECT channel, COUNT(*) FROM wiki WHERE channel IN (SELECT channel FROM wiki GROUP BY channel "
     "ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY channel", None),
    ("SELECT n FROM nulls WHERE n IN (SELECT n + 1 FROM nulls)", None),
    # ---- the events data set (schema evolution, '', unicode, float columns) -------------------
    ("SELECT channel, COUNT(*), SUM(score), MIN(price) FROM events GROUP BY channel", None),
    ("SELECT country, COUNT(*) AS c FROM events GROUP BY country ORDER BY c DESC, country", None),
    ("SELECT metro, COUNT(*) FROM events WHERE metro IS NOT NULL AND metro < 505 GROUP BY metro", None),
    ("SELECT rid, code FROM events WHERE code IN ('1', '10', '') ORDER BY rid LIMIT 20", None),
    ("SELECT page, COUNT(*) FROM events WHERE page LIKE '50!%%' ESCAPE '!' GROUP BY page", None),
    ("SELECT page, COUNT(*) FROM events WHERE page LIKE 'a_b' GROUP BY page", None),
    ("SELECT channel, AVG(price), COUNT(DISTINCT user) FROM events WHERE channel <> '' GROUP BY channel", None),
    ("SELECT FLOOR(__time TO DAY), COUNT(*), SUM(added) FROM events GROUP BY 1",
     "SELECT date_trunc('day', __time), COUNT(*), SUM(added) FROM events GROUP BY 1"),
    ("SELECT user, COUNT(*) AS c FROM events GROUP BY user ORDER BY c DESC, user LIMIT 5", None),
]


def _ordered(sql: str) -> bool:
    tail = sql.upper().rsplit(")", 1)[-1]
    return "ORDER BY" in tail


@pytest.mark.parametrize("sql,duck_sql", CASES, ids=[f"{i:03d}" for i in range(len(CASES))])
def test_matches_duckdb(sql_env, sql, duck_sql):
    got = engine_rows(sql_env.sql(sql))
    want = duck_rows(sql_env.duck, duck_sql or sql)
    assert_rows_equal(got, want, ordered=_ordered(sql), rel=1e-6)
