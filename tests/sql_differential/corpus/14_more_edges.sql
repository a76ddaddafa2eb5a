-- More edge cases: LIKE/REPLACE/TRIM/STRPOS with regex metacharacters (must stay literal), joins on
-- BIGINT vs DOUBLE and NULL keys, negative ROUND digits, epoch-aligned odd periods, Joda names in
-- TIME_FORMAT, booleans, and odd-but-valid arguments.

-- name: more_like_paren
SELECT COUNT(*) FROM wiki WHERE page LIKE '%(%';

-- name: more_like_brackets
SELECT COUNT(*) FROM wiki WHERE comment LIKE '%[[%' AND comment LIKE '%|%]]%';

-- name: more_like_dot
SELECT COUNT(*) FROM wiki WHERE channel LIKE '#e..wikipedia';

-- name: more_like_star_plus
SELECT COUNT(*) FROM wiki WHERE comment LIKE '%*%' OR comment LIKE '%+%' OR comment LIKE '%?%' OR comment LIKE '%$%' OR comment LIKE '%^%';

-- name: more_like_backslash
SELECT COUNT(*) FROM wiki WHERE comment LIKE '%\%';

-- name: more_replace_regex_chars
SELECT page, REPLACE(page, '(', '[') AS r, REPLACE(page, '.', '!') AS d FROM wiki WHERE added = 17;

-- name: more_trim_regex_chars
SELECT comment, TRIM(BOTH '[]' FROM comment) AS t, LTRIM(comment, '/* ') AS l FROM wiki WHERE added = 17;
-- duckdb:
SELECT comment, trim(comment, '[]') AS t, ltrim(comment, '/* ') AS l FROM wiki WHERE added = 17;

-- name: more_strpos_regex_chars
SELECT page, STRPOS(page, '(') AS p, POSITION('.' IN page) AS q FROM wiki WHERE added = 17;
-- duckdb:
SELECT page, strpos(page, '(') AS p, strpos(page, '.') AS q FROM wiki WHERE added = 17;

-- name: more_contains_regex_chars
SELECT COUNT(*) FROM wiki WHERE CONTAINS_STRING(page, '(') OR CONTAINS_STRING(comment, '[[');
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE contains(page, '(') OR contains(comment, '[[');

-- name: more_join_long_double_keys
SELECT a.n, b.d FROM nulls a JOIN nulls b ON a.n = b.d;

-- name: more_join_null_numeric_keys
SELECT a.s, b.s FROM nulls a JOIN nulls b ON a.n = b.n;

-- name: more_in_subquery_cross_type
SELECT n FROM nulls WHERE n IN (SELECT d FROM nulls);

-- name: more_round_negative
SELECT added, ROUND(added, -1) AS r, ROUND(added, -2) AS r2 FROM wiki WHERE added BETWEEN 40 AND 60 AND channel = '#en.wikipedia';

-- name: more_round_double_negative
SELECT d, ROUND(d * 100, -1) AS r FROM nulls;

-- name: more_truncate_fn
SELECT d, TRUNCATE(d, 1) AS t, TRUNCATE(d) AS t0 FROM nulls;
-- duckdb:
SELECT d, trunc(d * 10) / 10 AS t, trunc(d) AS t0 FROM nulls;

-- name: more_time_floor_p2d
SELECT TIME_FLOOR(__time, 'P2D') AS t, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT time_bucket(INTERVAL 2 DAY, __time, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS t, COUNT(*) FROM wiki GROUP BY 1;

-- name: more_time_floor_pt7h
SELECT TIME_FLOOR(__time, 'PT7H') AS t, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT time_bucket(INTERVAL 7 HOUR, __time, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS t, COUNT(*) FROM wiki GROUP BY 1;

-- name: more_time_floor_pt90m
SELECT TIME_FLOOR(__time, 'PT1H30M') AS t, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT time_bucket(INTERVAL 90 MINUTE, __time, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS t, COUNT(*) FROM wiki GROUP BY 1;

-- name: more_time_floor_pt30s
SELECT TIME_FLOOR(__time, 'PT30S') AS t, COUNT(*) FROM nulls GROUP BY 1;
-- duckdb:
SELECT time_bucket(INTERVAL 30 SECOND, __time, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS t, COUNT(*) FROM nulls GROUP BY 1;

-- name: more_time_floor_p3m_p1y
SELECT label, TIME_FLOOR(__time, 'P3M') AS q, TIME_FLOOR(__time, 'P1Y') AS y, TIME_FLOOR(__time, 'P2M') AS b FROM time_edges;
-- duckdb:
SELECT label, date_trunc('quarter', __time) AS q, date_trunc('year', __time) AS y, time_bucket(INTERVAL 2 MONTH, __time, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS b FROM time_edges;

-- name: more_time_shift_odd
SELECT __time, TIME_SHIFT(__time, 'PT90M', -3) AS a FROM nulls;
-- duckdb:
SELECT __time, __time - INTERVAL 270 MINUTE AS a FROM nulls;

-- name: more_time_format_names
SELECT __time, TIME_FORMAT(__time, 'EEE dd MMM yyyy hh:mm a') AS f, TIME_FORMAT(__time, 'yyyy-MM-dd''T''HH:mm') AS g FROM nulls;
-- duckdb:
SELECT __time, strftime(__time, '%a %d %b %Y %I:%M %p') AS f, strftime(__time, '%Y-%m-%dT%H:%M') AS g FROM nulls;

-- name: more_time_format_full_names
SELECT __time, TIME_FORMAT(__time, 'EEEE, MMMM d') AS f FROM nulls;
-- duckdb:
SELECT __time, strftime(__time, '%A, %B ') || CAST(day(__time) AS VARCHAR) AS f FROM nulls;

-- name: more_count_of_limited_scan
SELECT COUNT(*) FROM (SELECT page FROM wiki LIMIT 7);

-- name: more_count_of_offset_scan
SELECT COUNT(*) FROM (SELECT * FROM wiki OFFSET 19995);

-- name: more_distinct_all_null
SELECT DISTINCT e FROM nulls;

-- name: more_count_distinct_over_union
SELECT COUNT(DISTINCT x) FROM (SELECT s AS x FROM nulls UNION ALL SELECT g FROM nulls);

-- name: more_agg_ratio_nullif
SELECT channel, SUM(added) * 1.0 / NULLIF(SUM(deleted), 0) AS ratio FROM wiki GROUP BY channel;

-- name: more_avg_case_null
SELECT namespace, AVG(CASE WHEN isRobot = 'true' THEN added END) AS bot_avg, COUNT(DISTINCT CASE WHEN added > 100 THEN page END) AS big_pages FROM wiki GROUP BY namespace;

-- name: more_bool_from_aggregate
SELECT channel, MAX(added) > 10000 AS big FROM wiki GROUP BY 1;

-- name: more_group_by_bool_with_null
SELECT n > 3 AS big, COUNT(*) FROM nulls GROUP BY 1;

-- name: more_duplicate_columns
SELECT page, page, added AS page FROM wiki WHERE added = 17;

-- name: more_unicode_alias
SELECT COUNT(*) AS "count é" FROM wiki;

-- name: more_empty_string_param
-- parameters: [""]
SELECT COUNT(*) FROM nulls WHERE s = ?;

-- name: more_union_with_null_literal
SELECT s, NULL AS x FROM nulls UNION ALL SELECT g, 'y' FROM nulls;

-- name: more_millis_negative
SELECT MILLIS_TO_TIMESTAMP(-500) AS a, MILLIS_TO_TIMESTAMP(0) AS b;
-- duckdb:
SELECT epoch_ms(-500) AS a, epoch_ms(0) AS b;

-- name: more_substring_zero_start
SELECT s, SUBSTRING(s, 0, 2) AS a FROM nulls;

-- name: more_left_negative
SELECT s, LEFT(s, 10) AS l, RIGHT(s, 10) AS r FROM nulls;

-- name: more_repeat_zero
SELECT s, REPEAT(s, 0) AS r FROM nulls;

-- name: more_power_of_longs_type
SELECT n, POWER(n, 2) AS p, n * n AS sq FROM nulls;

-- name: more_mod_negative_divisor
SELECT n, MOD(n, -4) AS m FROM nulls;

-- name: more_abs_double_neg_zero
SELECT d, ABS(d) AS a, -d AS neg FROM nulls;

-- name: more_order_by_double_with_neg
SELECT d FROM nulls ORDER BY d DESC;

-- name: more_case_bool_result
SELECT n, CASE WHEN n > 3 THEN TRUE ELSE FALSE END AS b FROM nulls;

-- name: more_filter_on_bool_case
SELECT n FROM nulls WHERE CASE WHEN n > 3 THEN TRUE ELSE n < 0 END;

-- name: more_coalesce_bool
SELECT n, COALESCE(n > 3, FALSE) AS b FROM nulls;

-- name: more_not_like_null
SELECT COUNT(*) FROM nulls WHERE s NOT LIKE 'a%';

-- name: more_in_with_expression_items
SELECT n FROM nulls WHERE n IN (1 + 2, 2 * 3, -9);

-- name: more_between_reversed
SELECT n FROM nulls WHERE n BETWEEN 5 AND 1;

-- name: more_between_symmetric_strings
SELECT s FROM nulls WHERE s BETWEEN 'a' AND 'c';

-- name: more_greatest_strings
SELECT s, g, GREATEST(s, g) AS gr, LEAST(s, g) AS le FROM nulls;

-- name: more_sum_double_filter_empty
SELECT SUM(d) FILTER (WHERE n > 1000) AS s, COUNT(d) FILTER (WHERE n > 1000) AS c FROM nulls;

-- name: more_having_count_distinct_zero
SELECT g, COUNT(DISTINCT e) AS de FROM nulls GROUP BY g;
