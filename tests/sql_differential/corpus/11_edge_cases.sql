-- Edge cases: three-valued logic in the select list, IS [NOT] TRUE/FALSE, anti joins through
-- LEFT JOIN ... IS NULL, shadowing aliases, literal spellings, odd-but-valid SQL.

-- name: edge_three_valued_or_and_in_select
SELECT s, n, n > 3 OR s = 'a' AS o, n > 3 AND s = 'a' AS a, NOT (n > 3) AS nt FROM nulls;

-- name: edge_in_list_in_select_with_nulls
SELECT n, n IN (1, 3) AS i, n NOT IN (1, 3) AS ni, s IN ('a', 'b') AS si FROM nulls;

-- name: edge_not_in_with_null_in_select
SELECT n, n NOT IN (1, NULL) AS x FROM nulls;

-- name: edge_between_in_select_and_null_bound
SELECT n, n BETWEEN 1 AND 5 AS b, n BETWEEN 1 AND NULL AS bn FROM nulls;

-- name: edge_is_true_is_not_true
SELECT s, n FROM nulls WHERE (n > 3) IS NOT TRUE;

-- name: edge_is_false_is_not_false
SELECT COUNT(*) FILTER (WHERE (n > 3) IS FALSE) AS f, COUNT(*) FILTER (WHERE (n > 3) IS NOT FALSE) AS nf, COUNT(*) FILTER (WHERE (n > 3) IS TRUE) AS t FROM nulls;

-- name: edge_case_with_null_condition_goes_to_else
SELECT n, CASE WHEN n > 3 THEN 'big' ELSE 'other' END AS c FROM nulls;

-- name: edge_nested_case
SELECT n, CASE WHEN n IS NULL THEN 'none' ELSE CASE WHEN n < 0 THEN 'neg' WHEN n = 0 THEN 'zero' ELSE 'pos' END END AS sign_ FROM nulls;

-- name: edge_where_on_expression_with_null
SELECT s FROM nulls WHERE NOT (CHAR_LENGTH(s) > 1);
-- duckdb:
SELECT s FROM nulls WHERE NOT (length(s) > 1);

-- name: edge_where_concat_equals
SELECT s FROM nulls WHERE s || 'x' = 'ax';

-- name: edge_where_coalesce_equals
SELECT s, n FROM nulls WHERE COALESCE(n, 0) = 0;

-- name: edge_where_long_vs_double_column
SELECT n, d FROM nulls WHERE n > d;

-- name: edge_where_number_vs_numeric_string
SELECT s, n FROM nulls WHERE n = '3';
-- duckdb:
SELECT s, n FROM nulls WHERE n = 3;

-- name: edge_where_true_literal
SELECT COUNT(*) FROM nulls WHERE TRUE AND NOT FALSE;

-- name: edge_where_date_only_string
SELECT COUNT(*) FROM wiki WHERE __time >= '2015-09-14';
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-14 00:00:00+00';

-- name: edge_anti_join_via_left_join
SELECT COUNT(*) FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode WHERE c.isoCode IS NULL;

-- name: edge_codes_missing_from_lookup
SELECT w.countryIsoCode, COUNT(*) AS c FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode WHERE c.name IS NULL AND w.countryIsoCode IS NOT NULL GROUP BY 1 ORDER BY c DESC, 1 LIMIT 5;

-- name: edge_group_by_outer_join_null_side
SELECT c.name, COUNT(*) AS edits, SUM(c.population) AS pop FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY c.name;

-- name: edge_several_count_distincts_with_null_key
SELECT g, COUNT(DISTINCT s) AS ds, COUNT(DISTINCT n) AS dn, SUM(d) AS sd FROM nulls GROUP BY g;

-- name: edge_count_distinct_on_double_and_time
SELECT COUNT(DISTINCT d), COUNT(DISTINCT __time), COUNT(DISTINCT FLOOR(__time TO DAY)) FROM nulls;
-- duckdb:
SELECT COUNT(DISTINCT d), COUNT(DISTINCT __time), COUNT(DISTINCT date_trunc('day', __time)) FROM nulls;

-- name: edge_having_with_count_distinct
SELECT channel, COUNT(DISTINCT namespace) AS ns FROM wiki GROUP BY channel HAVING COUNT(DISTINCT namespace) > 8;

-- name: edge_having_on_aggregate_not_selected
SELECT namespace FROM wiki GROUP BY namespace HAVING MAX(added) > 20000 AND COUNT(*) > 10;

-- name: edge_order_by_output_alias_shadowing_column
SELECT added AS deleted, deleted AS added FROM wiki WHERE channel = '#sv.wikipedia' AND added > 50 ORDER BY deleted DESC, added, __time LIMIT 10;
-- duckdb:
SELECT added AS deleted, deleted AS added FROM wiki WHERE channel = '#sv.wikipedia' AND added > 50 ORDER BY 1 DESC, 2, __time LIMIT 10;

-- name: edge_count_variants
SELECT COUNT(1), COUNT('x'), SUM(1), COUNT(*) FROM nulls;

-- name: edge_constant_group_key
SELECT 'all' AS k, COUNT(*) AS c FROM nulls GROUP BY 1;

-- name: edge_comment_in_sql
SELECT /* a block comment */ COUNT(*) AS c FROM wiki WHERE channel = '#en.wikipedia';

-- name: edge_quoted_identifiers_and_alias
SELECT w."channel", COUNT(*) FROM "wiki" AS w WHERE w."namespace" = 'Main' GROUP BY w."channel";

-- name: edge_star_from_aliased_subquery
SELECT t.* FROM (SELECT g, COUNT(*) AS c FROM nulls GROUP BY g) t;

-- name: edge_cast_null_literals
SELECT CAST(NULL AS VARCHAR) AS a, CAST(NULL AS BIGINT) AS b, CAST(NULL AS DOUBLE) AS c, COALESCE(CAST(NULL AS BIGINT), 7) AS d;

-- name: edge_large_in_list
SELECT COUNT(*) FROM wiki WHERE added IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900);

-- name: edge_distinct_expression_with_null
SELECT DISTINCT UPPER(s) AS u FROM nulls ORDER BY u;

-- name: edge_offset_without_limit_on_group_by
SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel ORDER BY c DESC, channel OFFSET 45;

-- name: edge_limit_larger_than_result
SELECT g, COUNT(*) FROM nulls GROUP BY g ORDER BY g LIMIT 100;

-- name: edge_order_by_expression_not_selected
SELECT page FROM wiki WHERE channel = '#pl.wikipedia' ORDER BY CHAR_LENGTH(page) DESC, page LIMIT 5;
-- duckdb:
SELECT page FROM wiki WHERE channel = '#pl.wikipedia' ORDER BY length(page) DESC, page LIMIT 5;

-- name: edge_scan_time_order_with_time_filter_across_segments
SELECT __time, channel FROM wiki WHERE __time >= TIMESTAMP '2015-09-13 23:59:00' AND channel LIKE '#e%' ORDER BY __time LIMIT 12;

-- name: edge_group_by_desc_nulls_first
SELECT n, COUNT(*) FROM nulls GROUP BY n ORDER BY n DESC NULLS FIRST;

-- name: edge_approx_count_distinct_numeric
-- tolerance: 0.03
SELECT APPROX_COUNT_DISTINCT(added) AS a, APPROX_COUNT_DISTINCT(metroCode) AS m FROM wiki;
-- duckdb:
SELECT COUNT(DISTINCT added) AS a, COUNT(DISTINCT metroCode) AS m FROM wiki;

-- name: edge_same_aggregate_different_filters
SELECT SUM(added) FILTER (WHERE isRobot = 'true') AS bots, SUM(added) FILTER (WHERE isRobot = 'false') AS humans, SUM(added) AS total FROM wiki;

-- name: edge_arithmetic_on_aggregate_with_null
SELECT g, SUM(n) + 1 AS s1, COALESCE(SUM(n), 0) AS s0, MAX(d) - MIN(d) AS spread FROM nulls GROUP BY g;

-- name: edge_distinct_then_order_limit_subquery
SELECT COUNT(*) AS c, COUNT(DISTINCT channel) AS d FROM (SELECT DISTINCT channel FROM wiki ORDER BY channel LIMIT 10);
