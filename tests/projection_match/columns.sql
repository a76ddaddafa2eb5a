-- Virtual columns, filters, filtered aggregators and rollup metrics: what Druid's matcher accepts.
-- Table t has Druid's projection test columns (a, b strings; c long; d double; e float); rolled
-- is a rollup table whose metrics (sum_added, cnt, max_delta) are columns.

-- name: concat_matches_whatever_its_name
-- projection: SELECT CONCAT(a, b) AS ab, SUM(c) AS sc FROM t GROUP BY 1
SELECT CONCAT(a, b) AS x, SUM(c) FROM t GROUP BY 1;
-- expect: match

-- name: concat_operator_is_the_same_expression
-- projection: SELECT CONCAT(a, b) AS ab, SUM(c) AS sc FROM t GROUP BY 1
SELECT a || b, SUM(c) FROM t GROUP BY 1;
-- expect: match

-- name: concat_other_order_is_another_expression
-- projection: SELECT CONCAT(a, b) AS ab, SUM(c) AS sc FROM t GROUP BY 1
SELECT CONCAT(b, a), SUM(c) FROM t GROUP BY 1;
-- expect: virtual_column

-- name: sum_of_columns_matches
-- projection: SELECT d + e AS de, COUNT(*) AS n FROM t GROUP BY 1
SELECT d + e AS total, COUNT(*) FROM t GROUP BY 1;
-- expect: match

-- name: concat_literal_with_hourly_time
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, concat(b, 'foo') AS bf, SUM(d) AS sd FROM t GROUP BY 1, 2
SELECT concat(b, 'foo'), SUM(d) FROM t GROUP BY 1;
-- expect: match

-- name: concat_literal_daily_from_hourly
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, concat(b, 'foo') AS bf, SUM(d) AS sd FROM t GROUP BY 1, 2
SELECT TIME_FLOOR(__time, 'P1D'), concat(b, 'foo'), SUM(d) FROM t GROUP BY 1, 2;
-- expect: match

-- name: expression_over_grouped_columns_is_computed
-- projection: SELECT a, b, COUNT(*) AS n FROM t GROUP BY 1, 2
SELECT UPPER(a) || LOWER(b), COUNT(*) FROM t GROUP BY 1;
-- expect: match

-- name: expression_over_missing_column
-- projection: SELECT a, b, COUNT(*) AS n FROM t GROUP BY 1, 2
SELECT c * 2, COUNT(*) FROM t GROUP BY 1;
-- expect: virtual_column

-- name: filter_on_expression_equal_to_projection_filter
-- projection: SELECT a, SUM(d) AS sd, COUNT(*) AS n FROM t WHERE c + d IN (2.1, 4.2) GROUP BY 1
SELECT a, SUM(d) FROM t WHERE c + d IN (2.1, 4.2) GROUP BY 1;
-- expect: match

-- name: filter_on_expression_in_another_order
-- projection: SELECT a, SUM(d) AS sd, COUNT(*) AS n FROM t WHERE c + d IN (2.1, 4.2) GROUP BY 1
SELECT a, COUNT(*) FROM t WHERE c + d IN (4.2, 2.1) GROUP BY 1;
-- expect: match

-- name: filter_on_expression_narrower_needs_its_columns
-- projection: SELECT a, SUM(d) AS sd, COUNT(*) AS n FROM t WHERE c + d IN (2.1, 4.2) GROUP BY 1
SELECT a, COUNT(*) FROM t WHERE c + d = 2.1 GROUP BY 1;
-- expect: missing_column

-- name: filter_on_expression_wider_than_projection
-- projection: SELECT a, SUM(d) AS sd, COUNT(*) AS n FROM t WHERE c + d IN (2.1, 4.2) GROUP BY 1
SELECT a, COUNT(*) FROM t WHERE c + d IN (2.1, 4.2, 5.0) GROUP BY 1;
-- expect: filter

-- name: filter_narrower_on_grouping_column
-- projection: SELECT a, b, COUNT(*) AS n FROM t WHERE a IN ('a', 'b') GROUP BY 1, 2
SELECT b, COUNT(*) FROM t WHERE a = 'a' GROUP BY 1;
-- expect: match

-- name: filter_missing_projection_filter
-- projection: SELECT a, b, COUNT(*) AS n FROM t WHERE a IN ('a', 'b') GROUP BY 1, 2
SELECT b, COUNT(*) FROM t GROUP BY 1;
-- expect: filter

-- name: filtered_aggregator_on_grouping_column
-- projection: SELECT a, b, SUM(c) AS sc, COUNT(*) AS n FROM t GROUP BY 1, 2
SELECT SUM(c) FILTER (WHERE a = 'a') FROM t;
-- expect: match

-- name: filtered_aggregators_grouped
-- projection: SELECT a, b, SUM(c) AS sc, COUNT(*) AS n FROM t GROUP BY 1, 2
SELECT b, SUM(c) FILTER (WHERE a = 'a'), COUNT(*) FILTER (WHERE a <> 'a') FROM t GROUP BY 1;
-- expect: match

-- name: filtered_aggregator_on_other_column
-- projection: SELECT a, b, SUM(c) AS sc, COUNT(*) AS n FROM t GROUP BY 1, 2
SELECT SUM(c) FILTER (WHERE d > 1) FROM t;
-- expect: missing_column

-- name: filtered_aggregator_reading_raw_time
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, a, SUM(c) AS sc FROM t GROUP BY 1, 2
SELECT SUM(c) FILTER (WHERE TIME_EXTRACT(__time, 'MINUTE') < 30) FROM t;
-- expect: raw_time

-- name: filtered_aggregator_on_hour_bound
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, a, SUM(c) AS sc FROM t GROUP BY 1, 2
SELECT SUM(c) FILTER (WHERE __time >= TIMESTAMP '2015-09-12 03:00:00') FROM t;
-- expect: match

-- name: aggregator_not_stored
-- projection: SELECT a, b, SUM(c) AS sc, COUNT(*) AS n FROM t GROUP BY 1, 2
SELECT a, MAX(c) FROM t GROUP BY 1;
-- expect: aggregator

-- name: grouping_column_not_stored
-- projection: SELECT a, SUM(c) AS sc FROM t GROUP BY 1
SELECT b, SUM(c) FROM t GROUP BY 1;
-- expect: missing_column

-- name: rollup_metrics_summed_by_channel
-- projection: SELECT channel, SUM(sum_added) AS sum_added, SUM(cnt) AS cnt, MAX(max_delta) AS max_delta FROM rolled GROUP BY 1
SELECT channel, SUM(sum_added), SUM(cnt), MAX(max_delta) FROM rolled GROUP BY 1;
-- expect: match

-- name: rollup_metrics_total
-- projection: SELECT channel, SUM(sum_added) AS sum_added, SUM(cnt) AS cnt, MAX(max_delta) AS max_delta FROM rolled GROUP BY 1
SELECT SUM(cnt), MAX(max_delta) FROM rolled;
-- expect: match

-- name: rollup_metric_filtered_by_channel
-- projection: SELECT channel, SUM(sum_added) AS sum_added, SUM(cnt) AS cnt, MAX(max_delta) AS max_delta FROM rolled GROUP BY 1
SELECT SUM(sum_added) FILTER (WHERE channel = '#en.wikipedia') FROM rolled;
-- expect: match

-- name: rollup_count_of_rolled_rows_is_not_a_sum_of_counts
-- projection: SELECT channel, SUM(sum_added) AS sum_added, SUM(cnt) AS cnt, MAX(max_delta) AS max_delta FROM rolled GROUP BY 1
SELECT channel, COUNT(*) FROM rolled GROUP BY 1;
-- expect: aggregator

-- name: rollup_by_page_not_stored
-- projection: SELECT channel, SUM(sum_added) AS sum_added, SUM(cnt) AS cnt, MAX(max_delta) AS max_delta FROM rolled GROUP BY 1
SELECT page, SUM(cnt) FROM rolled GROUP BY 1;
-- expect: missing_column
