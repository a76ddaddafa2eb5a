-- Aggregation: COUNT/SUM/MIN/MAX/AVG, COUNT(DISTINCT), APPROX_COUNT_DISTINCT, FILTER, GROUP BY
-- columns/expressions/ordinals/aliases, HAVING, ORDER BY on dimensions and aggregates, LIMIT/OFFSET.

-- name: agg_totals
SELECT COUNT(*), SUM(added), MIN(delta), MAX(deleted), AVG(delta), AVG(added) FROM wiki;

-- name: agg_count_column_skips_nulls
SELECT COUNT(cityName), COUNT(metroCode), COUNT(*) FROM wiki;

-- name: agg_sum_avg_of_sparse_long
SELECT COUNT(metroCode), SUM(metroCode), AVG(metroCode), MIN(metroCode), MAX(metroCode) FROM wiki;

-- name: agg_group_by_one_column
SELECT channel, COUNT(*) AS c, SUM(added) AS a, MIN(added) AS mn, MAX(added) AS mx FROM wiki GROUP BY channel;

-- name: agg_group_by_two_columns
SELECT channel, namespace, COUNT(*) FROM wiki GROUP BY channel, namespace;

-- name: agg_group_by_ordinal_and_alias
SELECT channel AS ch, isRobot, SUM(added) FROM wiki GROUP BY ch, 2;

-- name: agg_group_by_hidden_key
SELECT COUNT(*) AS c FROM wiki GROUP BY channel;

-- name: agg_group_by_expression
SELECT added > deleted AS grew, COUNT(*) FROM wiki GROUP BY 1;

-- name: agg_expression_over_group_key
SELECT UPPER(channel) AS ch, COUNT(*) FROM wiki GROUP BY channel;

-- name: agg_group_by_number_column_with_null_key
SELECT metroCode, COUNT(*) AS c FROM wiki GROUP BY metroCode ORDER BY metroCode;

-- name: agg_group_by_null_heavy_string
SELECT countryName, COUNT(*) AS c FROM wiki GROUP BY countryName ORDER BY c DESC, countryName LIMIT 8;

-- name: agg_group_by_high_cardinality_with_having
SELECT page, COUNT(*) AS c, SUM(added) AS s FROM wiki GROUP BY page HAVING COUNT(*) >= 12;

-- name: agg_having_on_aggregate
SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel HAVING COUNT(*) > 100 ORDER BY c DESC, channel LIMIT 10;

-- name: agg_having_on_alias
SELECT channel, SUM(added) AS total FROM wiki GROUP BY channel HAVING total > 100000;
-- duckdb:
SELECT channel, SUM(added) AS total FROM wiki GROUP BY channel HAVING SUM(added) > 100000;

-- name: agg_having_compound
SELECT channel, SUM(added) AS s FROM wiki GROUP BY 1 HAVING SUM(added) > 20000 AND MIN(added) = 0 OR COUNT(*) < 20;

-- name: agg_having_without_group_by
SELECT COUNT(*) AS c FROM wiki HAVING COUNT(*) > 10;

-- name: agg_having_filters_out_grand_total
SELECT COUNT(*) AS c FROM wiki HAVING COUNT(*) > 1000000;

-- name: agg_order_by_aggregate_desc_limit
SELECT channel, SUM(added) AS s FROM wiki GROUP BY channel ORDER BY s DESC LIMIT 5;

-- name: agg_order_by_aggregate_asc_limit
SELECT channel, SUM(delta) AS s FROM wiki GROUP BY channel ORDER BY s LIMIT 5;

-- name: agg_order_by_count_expression
SELECT channel, COUNT(*) FROM wiki GROUP BY channel ORDER BY COUNT(*) DESC, channel LIMIT 5;

-- name: agg_order_by_dimension_desc_limit
SELECT channel, SUM(added) FROM wiki GROUP BY channel ORDER BY channel DESC LIMIT 3;

-- name: agg_order_by_hidden_aggregate
SELECT channel FROM wiki GROUP BY channel ORDER BY SUM(added) DESC, channel LIMIT 4;

-- name: agg_order_by_ordinal
SELECT namespace, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY 2 DESC, 1;

-- name: agg_order_limit_offset
SELECT channel, namespace, COUNT(*) AS c, MAX(added) FROM wiki GROUP BY channel, namespace HAVING COUNT(*) > 20 ORDER BY c DESC, channel, namespace LIMIT 8 OFFSET 2;

-- name: agg_top_pages_by_sum
SELECT page, SUM(added) AS s FROM wiki WHERE __time >= TIMESTAMP '2015-09-12' AND __time < TIMESTAMP '2015-09-13' GROUP BY page ORDER BY s DESC, page LIMIT 10;

-- name: agg_top_users_by_count
SELECT "user", COUNT(*) AS c FROM wiki GROUP BY "user" ORDER BY c DESC, "user" LIMIT 10;

-- name: agg_count_distinct_exact
SELECT channel, COUNT(DISTINCT "user") AS users FROM wiki GROUP BY channel;

-- name: agg_count_distinct_total_with_others
SELECT COUNT(DISTINCT page), COUNT(*), SUM(added) FROM wiki WHERE channel = '#en.wikipedia';

-- name: agg_several_count_distincts
SELECT channel, COUNT(DISTINCT page) AS p, COUNT(DISTINCT "user") AS u, SUM(added) AS s FROM wiki GROUP BY channel ORDER BY p DESC, channel LIMIT 5;

-- name: agg_count_distinct_of_expression
SELECT COUNT(DISTINCT UPPER(namespace)), COUNT(DISTINCT added / 100) FROM wiki;
-- duckdb:
SELECT COUNT(DISTINCT upper(namespace)), COUNT(DISTINCT added // 100) FROM wiki;

-- name: agg_count_distinct_on_empty_filter
SELECT COUNT(DISTINCT page) FROM wiki WHERE channel = 'no such channel';

-- name: agg_sum_and_count_distinct_values
SELECT SUM(DISTINCT added), COUNT(DISTINCT added) FROM wiki WHERE channel = '#nl.wikipedia';

-- name: agg_approx_count_distinct
-- tolerance: 0.03
SELECT APPROX_COUNT_DISTINCT("user") AS u, APPROX_COUNT_DISTINCT(page) AS p FROM wiki;
-- duckdb:
SELECT COUNT(DISTINCT "user") AS u, COUNT(DISTINCT page) AS p FROM wiki;

-- name: agg_approx_count_distinct_grouped
-- tolerance: 0.03
SELECT namespace, APPROX_COUNT_DISTINCT("user") AS u FROM wiki GROUP BY namespace;
-- duckdb:
SELECT namespace, COUNT(DISTINCT "user") AS u FROM wiki GROUP BY namespace;

-- name: agg_approx_count_distinct_by_day
-- tolerance: 0.03
SELECT FLOOR(__time TO DAY) AS d, APPROX_COUNT_DISTINCT(page) AS p FROM wiki GROUP BY 1;
-- duckdb:
SELECT date_trunc('day', __time) AS d, COUNT(DISTINCT page) AS p FROM wiki GROUP BY 1;

-- name: agg_filtered_aggregators
SELECT COUNT(*) FILTER (WHERE isRobot = 'true') AS bots, SUM(added) FILTER (WHERE channel = '#en.wikipedia') AS en FROM wiki;

-- name: agg_filtered_aggregators_grouped
SELECT channel, COUNT(*) FILTER (WHERE isRobot = 'true') AS bots, SUM(added) FILTER (WHERE added > 100) AS big FROM wiki GROUP BY channel;

-- name: agg_filtered_count_distinct
SELECT namespace, COUNT(DISTINCT channel) FILTER (WHERE added > 1000) AS chans, COUNT(*) AS c FROM wiki GROUP BY namespace;

-- name: agg_avg_is_double
SELECT isRobot, AVG(added) AS a, SUM(added) / COUNT(*) AS b FROM wiki GROUP BY isRobot;
-- duckdb:
SELECT isRobot, AVG(added) AS a, SUM(added) // COUNT(*) AS b FROM wiki GROUP BY isRobot;

-- name: agg_over_expressions
SELECT namespace, SUM(added - deleted) AS net, MAX(CHAR_LENGTH(page)) AS longest, MIN(ABS(delta)) AS smallest FROM wiki GROUP BY namespace;
-- duckdb:
SELECT namespace, SUM(added - deleted) AS net, MAX(length(page)) AS longest, MIN(abs(delta)) AS smallest FROM wiki GROUP BY namespace;

-- name: agg_min_max_time_per_group
SELECT channel, MIN(__time) AS first_edit, MAX(__time) AS last_edit FROM wiki GROUP BY channel;

-- name: agg_double_sums
SELECT g, SUM(d) AS s, AVG(d) AS a, MIN(d) AS mn, MAX(d) AS mx FROM nulls GROUP BY g;

-- name: agg_earliest_latest
SELECT channel, EARLIEST(page) AS first_page, LATEST(page) AS last_page, LATEST(added) AS last_added FROM wiki GROUP BY channel;
-- duckdb:
SELECT channel, arg_min(page, __time) AS first_page, arg_max(page, __time) AS last_page, arg_max(added, __time) AS last_added FROM wiki GROUP BY channel;

-- name: agg_earliest_latest_totals
SELECT EARLIEST(page), LATEST(page), MIN(__time), MAX(__time) FROM wiki;
-- duckdb:
SELECT arg_min(page, __time), arg_max(page, __time), MIN(__time), MAX(__time) FROM wiki;

-- name: agg_any_value_functionally_dependent
SELECT countryIsoCode, ANY_VALUE(countryName) AS name, COUNT(*) FROM wiki WHERE countryIsoCode IS NOT NULL GROUP BY countryIsoCode;

-- name: agg_group_by_time_and_dimensions_with_having
SELECT FLOOR(__time TO DAY) AS d, isRobot, COUNT(*) AS c, SUM(added) AS s FROM wiki GROUP BY 1, 2 HAVING SUM(added) > 1000 ORDER BY d, isRobot;
-- duckdb:
SELECT date_trunc('day', __time) AS d, isRobot, COUNT(*) AS c, SUM(added) AS s FROM wiki GROUP BY 1, 2 HAVING SUM(added) > 1000 ORDER BY d, isRobot;

-- name: agg_group_by_case_bucket_ordered
SELECT CASE WHEN delta < 0 THEN 'removed' WHEN delta = 0 THEN 'same' ELSE 'added' END AS kind, COUNT(*) AS c, SUM(delta) AS s FROM wiki GROUP BY 1 ORDER BY 1;

-- name: agg_sum_of_large_values
SELECT SUM(added * 1000000) AS big, SUM(CAST(added AS DOUBLE) * 0.1) AS tenth FROM wiki;

-- name: agg_count_star_filtered_to_nothing_grand_total
SELECT COUNT(*), COUNT(page), SUM(added), MIN(added), MAX(__time) FROM wiki WHERE added < 0;
