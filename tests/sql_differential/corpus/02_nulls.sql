-- NULL handling: three-valued filters, COALESCE/NULLIF, aggregates over NULLs and all-NULL groups,
-- NULL group keys, NULLs in ORDER BY ('' is a value, not NULL).

-- name: nulls_select_all
SELECT * FROM nulls;

-- name: nulls_not_equals_skips_null
SELECT s, n FROM nulls WHERE s <> 'a';

-- name: nulls_not_of_equals_skips_null
SELECT s FROM nulls WHERE NOT (s = 'a');

-- name: nulls_not_in_skips_null
SELECT s FROM nulls WHERE s NOT IN ('a', 'b');

-- name: nulls_in_list_with_null
SELECT n FROM nulls WHERE n IN (1, NULL);

-- name: nulls_not_in_list_with_null_is_empty
SELECT n FROM nulls WHERE n NOT IN (1, NULL);

-- name: nulls_in_strings_with_null
SELECT s, g FROM nulls WHERE g IN ('z', NULL);

-- name: nulls_or_with_unknown
SELECT s, n FROM nulls WHERE n > 5 OR s = 'a';

-- name: nulls_not_of_or
SELECT s, n FROM nulls WHERE NOT (n > 2 OR s = 'a');

-- name: nulls_is_null_and_is_not_null
SELECT s, n, d FROM nulls WHERE s IS NULL OR (n IS NOT NULL AND d IS NULL);

-- name: nulls_empty_string_is_not_null
SELECT COUNT(*) FILTER (WHERE s = ''), COUNT(*) FILTER (WHERE s IS NULL), COUNT(s), COUNT(*) FROM nulls;

-- name: nulls_compare_with_null_literal
SELECT s FROM nulls WHERE n = NULL;

-- name: nulls_is_not_distinct_from
SELECT s, g FROM nulls WHERE s IS NOT DISTINCT FROM NULL OR g IS NOT DISTINCT FROM 'z';

-- name: nulls_is_distinct_from
SELECT s, g FROM nulls WHERE g IS DISTINCT FROM 'x';

-- name: nulls_coalesce_and_nullif
SELECT COALESCE(s, 'none') AS s2, COALESCE(n, -1) AS n2, NULLIF(n, 4) AS n3, NULLIF(s, '') AS s3 FROM nulls;

-- name: nulls_coalesce_mixed_numeric
SELECT COALESCE(d, n, 0) AS v FROM nulls;

-- name: nulls_coalesce_over_all_null_column
SELECT COALESCE(e, s, g, '?') AS v FROM nulls;

-- name: nulls_arithmetic_propagates
SELECT n + d AS nd, n * 2 AS n2, d - 1 AS d1, -n AS neg FROM nulls;

-- name: nulls_concat_with_null_is_null
SELECT s || '!' AS a, CONCAT(s, '-', g) AS b FROM nulls;
-- duckdb:
SELECT s || '!' AS a, s || '-' || g AS b FROM nulls;

-- name: nulls_case_without_else
SELECT CASE WHEN n > 3 THEN 'hi' WHEN n > 0 THEN 'lo' END AS c FROM nulls;

-- name: nulls_simple_case_on_null
SELECT CASE s WHEN 'a' THEN 1 WHEN 'b' THEN 2 ELSE 0 END AS c FROM nulls;

-- name: nulls_comparison_result_is_null
SELECT n, n > 3 AS big FROM nulls;

-- name: nulls_aggregates_skip_nulls
SELECT COUNT(*), COUNT(s), COUNT(n), COUNT(d), SUM(n), MIN(d), MAX(n), AVG(d), AVG(n) FROM nulls;

-- name: nulls_aggregates_per_group_incl_null_group
SELECT g, COUNT(*), COUNT(n), SUM(n), AVG(n), MIN(n), MAX(d) FROM nulls GROUP BY g;

-- name: nulls_all_null_group_aggregates_are_null
SELECT SUM(n), MIN(n), MAX(n), AVG(n), COUNT(n), COUNT(*) FROM nulls WHERE g = 'z';

-- name: nulls_all_null_column_aggregates
SELECT COUNT(e), COUNT(DISTINCT e), COUNT(*) FROM nulls;

-- name: nulls_group_by_all_null_column
SELECT e, COUNT(*) FROM nulls GROUP BY e;

-- name: nulls_column_missing_from_a_segment
SELECT FLOOR(__time TO DAY) AS d, COUNT(m), SUM(m), MIN(m) FROM nulls GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT date_trunc('day', __time) AS d, COUNT(m), SUM(m), MIN(m) FROM nulls GROUP BY 1 ORDER BY 1;

-- name: nulls_filter_on_column_missing_from_a_segment
SELECT __time, m FROM nulls WHERE m IS NULL OR m > 60 ORDER BY __time;

-- name: nulls_group_key_order_asc_nulls_first
SELECT s, COUNT(*) AS c FROM nulls GROUP BY s ORDER BY s;

-- name: nulls_group_key_order_desc_nulls_last
SELECT s, COUNT(*) AS c FROM nulls GROUP BY s ORDER BY s DESC;

-- name: nulls_order_numbers_asc
SELECT n FROM nulls ORDER BY n LIMIT 6;

-- name: nulls_order_numbers_desc
SELECT n FROM nulls ORDER BY n DESC LIMIT 6;

-- name: nulls_order_explicit_nulls_last
SELECT n, __time FROM nulls ORDER BY n NULLS LAST, __time LIMIT 20;

-- name: nulls_order_desc_nulls_first
SELECT d, __time FROM nulls ORDER BY d DESC NULLS FIRST, __time LIMIT 20;

-- name: nulls_order_by_aggregate_with_null
SELECT g, SUM(n) AS t FROM nulls GROUP BY g ORDER BY t NULLS FIRST, g;

-- name: nulls_count_distinct_skips_null
SELECT COUNT(DISTINCT s), COUNT(DISTINCT g), COUNT(DISTINCT n), COUNT(*) FROM nulls;

-- name: nulls_count_distinct_per_group
SELECT g, COUNT(DISTINCT s) AS ds FROM nulls GROUP BY g;

-- name: nulls_sum_over_empty_set_is_null
SELECT SUM(n), COUNT(*), AVG(d), MAX(__time), MIN(d), COUNT(DISTINCT s) FROM nulls WHERE n > 1000;

-- name: nulls_group_by_over_empty_set_has_no_rows
SELECT g, SUM(n) FROM nulls WHERE n > 1000 GROUP BY g;

-- name: nulls_having_on_null_aggregate
SELECT g, SUM(n) AS t FROM nulls GROUP BY g HAVING SUM(n) IS NULL OR SUM(n) > 10;

-- name: nulls_filtered_aggregate
SELECT g, COUNT(*) FILTER (WHERE n IS NULL) AS missing, SUM(d) FILTER (WHERE s IS NOT NULL) AS sd FROM nulls GROUP BY g;

-- name: nulls_double_edge_values
SELECT d, d = 0 AS zero, d < 0 AS negative FROM nulls WHERE d IS NOT NULL ORDER BY d;

-- name: nulls_greatest_least
SELECT GREATEST(n, 3) AS gr, LEAST(d, 1.0) AS le FROM nulls;
-- types: loose

-- name: nulls_null_literal_column
SELECT NULL AS x, s FROM nulls WHERE s = 'a';
-- types: loose

-- name: nulls_tutorial_counts
SELECT COUNT(*) AS total, COUNT(string_value) AS strings, COUNT(numeric_value) AS numbers FROM null_example;

-- name: nulls_tutorial_is_null_vs_empty
SELECT title, string_value IS NULL AS is_null, string_value = '' AS is_empty, numeric_value IS NULL AS no_number FROM null_example ORDER BY title;

-- name: nulls_tutorial_not_equal_excludes_null
SELECT title FROM null_example WHERE numeric_value <> 1;

-- name: nulls_tutorial_sum_avg
SELECT SUM(numeric_value) AS s, AVG(numeric_value) AS a, MIN(numeric_value) AS mn FROM null_example;

-- name: nulls_tutorial_coalesce
SELECT title, COALESCE(string_value, 'n/a') AS v, COALESCE(numeric_value, 0) AS n FROM null_example;

-- name: nulls_tutorial_group_by_string_value
SELECT string_value, COUNT(*) FROM null_example GROUP BY string_value ORDER BY string_value;
