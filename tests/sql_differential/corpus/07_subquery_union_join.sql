-- Subqueries in FROM, WITH, UNION ALL / UNION, joins with a small side, IN (SELECT ...).

-- name: sub_filter_over_projection
SELECT a FROM (SELECT added * 2 AS a, channel FROM wiki) WHERE channel = '#en.wikipedia' AND a > 1000;

-- name: sub_filter_over_aggregate
SELECT t.channel, t.c FROM (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) t WHERE t.c > 300;

-- name: sub_aggregate_over_aggregate
SELECT c, COUNT(*) AS n FROM (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) GROUP BY c;

-- name: sub_avg_of_counts
SELECT AVG(c), MAX(c), MIN(c), COUNT(*) FROM (SELECT page, COUNT(*) AS c FROM wiki GROUP BY page);

-- name: sub_limit_then_reorder
SELECT * FROM (SELECT page, added FROM wiki ORDER BY added DESC, page LIMIT 20) ORDER BY page, added;

-- name: sub_with_clause
WITH edits AS (SELECT channel, SUM(added) AS s FROM wiki GROUP BY channel)
SELECT channel, s FROM edits WHERE s > 10000 ORDER BY s DESC, channel LIMIT 3;

-- name: sub_with_two_ctes
WITH a AS (SELECT channel, COUNT(*) AS c FROM wiki WHERE isRobot = 'true' GROUP BY channel),
     b AS (SELECT channel, COUNT(*) AS c FROM wiki WHERE isRobot = 'false' GROUP BY channel)
SELECT a.channel, a.c AS bots, b.c AS humans FROM a JOIN b ON a.channel = b.channel;

-- name: sub_count_of_distinct
SELECT COUNT(*) FROM (SELECT DISTINCT channel, namespace FROM wiki WHERE added > 0);

-- name: sub_three_levels
SELECT MAX(s) AS m FROM (SELECT ch, SUM(c) AS s FROM (SELECT channel AS ch, namespace, COUNT(*) AS c FROM wiki GROUP BY 1, 2) GROUP BY ch);

-- name: sub_expression_then_group
SELECT bucket, COUNT(*) AS c FROM (SELECT CASE WHEN added >= 100 THEN 'big' ELSE 'small' END AS bucket FROM wiki) GROUP BY bucket;

-- name: sub_time_bucket_in_subquery
SELECT MAX(c) AS busiest, MIN(c) AS quietest FROM (SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c FROM wiki GROUP BY 1);
-- duckdb:
SELECT MAX(c) AS busiest, MIN(c) AS quietest FROM (SELECT date_trunc('hour', __time) AS h, COUNT(*) AS c FROM wiki GROUP BY 1);

-- name: sub_order_limit_over_nulls
SELECT s, n FROM (SELECT s, n FROM nulls WHERE n IS NOT NULL ORDER BY n DESC LIMIT 5) ORDER BY s, n;

-- name: union_all_two_sources
SELECT channel AS x FROM wiki WHERE added > 20000 UNION ALL SELECT s FROM nulls;

-- name: union_all_order_limit
SELECT n AS v FROM nulls UNION ALL SELECT d FROM nulls ORDER BY 1 LIMIT 7;

-- name: union_distinct
SELECT g FROM nulls UNION SELECT s FROM nulls;

-- name: union_all_of_aggregates
SELECT 'wiki' AS src, COUNT(*) AS c FROM wiki UNION ALL SELECT 'nulls', COUNT(*) FROM nulls UNION ALL SELECT 'countries', COUNT(*) FROM countries;

-- name: union_all_in_subquery_grouped
SELECT x, COUNT(*) FROM (SELECT g AS x FROM nulls UNION ALL SELECT s FROM nulls) GROUP BY x;

-- name: union_all_same_table_twice
SELECT channel, SUM(c) AS c FROM (SELECT channel, COUNT(*) AS c FROM wiki WHERE isRobot = 'true' GROUP BY 1 UNION ALL SELECT channel, COUNT(*) FROM wiki WHERE isRobot = 'false' GROUP BY 1) GROUP BY channel;

-- name: join_lookup_table
SELECT c.name, COUNT(*) AS edits FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY c.name;

-- name: join_null_keys_do_not_match
SELECT COUNT(*) FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode;

-- name: join_left_keeps_unmatched
SELECT w.countryIsoCode, c.name, COUNT(*) AS edits FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY 1, 2;

-- name: join_left_filter_on_right
SELECT w.page, c.population FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode WHERE c.population > 100000000 AND w.added > 200;

-- name: join_comma_with_where_equality
SELECT w.page, c.population FROM wiki w, countries c WHERE w.countryIsoCode = c.isoCode AND c.population > 60000000 AND w.added > 500;

-- name: join_then_aggregate_ordered
SELECT c.name, COUNT(*) AS n, SUM(w.added) AS a FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY c.name ORDER BY n DESC, c.name LIMIT 5;

-- name: join_aggregate_subquery
SELECT w.page, s.c FROM wiki w JOIN (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) s ON w.channel = s.channel WHERE w.added > 20000;

-- name: join_right
SELECT c.isoCode, c.name, COUNT(w.page) AS edits FROM wiki w RIGHT JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY 1, 2;

-- name: join_using
SELECT * FROM (SELECT g, COUNT(*) AS c FROM nulls GROUP BY g) a JOIN (SELECT g, SUM(n) AS t FROM nulls GROUP BY g) b USING (g);
-- duckdb:
SELECT a.g, a.c, b.t FROM (SELECT g, COUNT(*) AS c FROM nulls GROUP BY g) a JOIN (SELECT g, SUM(n) AS t FROM nulls GROUP BY g) b USING (g);

-- name: join_self_with_condition
SELECT a.s, a.n, b.n AS bn FROM nulls a JOIN nulls b ON a.s = b.s WHERE a.n < b.n;

-- name: join_on_expression_key
SELECT w.page, c.name FROM wiki w JOIN countries c ON UPPER(w.countryName) = UPPER(c.name) WHERE w.added > 1000;

-- name: join_dimension_to_second_source
SELECT w.channel, COUNT(*) FROM wiki w JOIN (SELECT g FROM nulls WHERE g IS NOT NULL GROUP BY g) x ON w.namespace = x.g GROUP BY 1;

-- name: in_subquery_top_channels
SELECT channel, COUNT(*) FROM wiki WHERE channel IN (SELECT channel FROM wiki GROUP BY channel ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY channel;

-- name: in_subquery_from_lookup
SELECT countryIsoCode, COUNT(*) FROM wiki WHERE countryIsoCode IN (SELECT isoCode FROM countries WHERE population > 60000000) GROUP BY 1;

-- name: in_subquery_with_nulls
SELECT s, n FROM nulls WHERE g IN (SELECT g FROM nulls WHERE n > 6);
