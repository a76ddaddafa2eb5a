-- Scans: projections, filters becoming native filters, LIMIT/OFFSET, DISTINCT, ORDER BY.

-- name: scan_select_columns_filter
SELECT __time, channel, page, added FROM wiki WHERE channel = '#de.wikipedia' AND added > 500;

-- name: scan_star_by_time_limit
SELECT * FROM wiki ORDER BY __time LIMIT 25;

-- name: scan_time_desc_limit_offset
SELECT __time, page, added FROM wiki ORDER BY __time DESC LIMIT 20 OFFSET 5;

-- name: scan_offset_deep
SELECT __time, page FROM wiki ORDER BY __time LIMIT 5 OFFSET 19990;

-- name: scan_offset_past_end
SELECT __time, page FROM wiki ORDER BY __time LIMIT 5 OFFSET 25000;

-- name: scan_order_by_non_time_column
SELECT page, added FROM wiki WHERE channel = '#it.wikipedia' ORDER BY added DESC, __time LIMIT 10;

-- name: scan_order_by_two_columns_mixed
SELECT channel, added, __time FROM wiki WHERE added > 2000 ORDER BY channel DESC, added, __time LIMIT 30;

-- name: scan_limit_zero
SELECT page FROM wiki LIMIT 0;

-- name: scan_qualified_druid_schema
SELECT COUNT(*) FROM druid.wiki WHERE namespace = 'Talk';

-- name: filter_not_equals
SELECT COUNT(*) FROM wiki WHERE namespace <> 'Main';

-- name: filter_numeric_range
SELECT page, added FROM wiki WHERE added >= 10 AND added < 20.5 AND delta > -3 AND channel = '#sv.wikipedia';

-- name: filter_between
SELECT __time, added FROM wiki WHERE added BETWEEN 100 AND 105 AND deleted <> 0;

-- name: filter_not_between
SELECT COUNT(*) FROM wiki WHERE added NOT BETWEEN 1 AND 1000;

-- name: filter_in_list
SELECT page FROM wiki WHERE channel IN ('#fr.wikipedia', '#ja.wikipedia') AND isRobot = 'true' AND added > 300;

-- name: filter_not_in_list
SELECT channel, COUNT(*) FROM wiki WHERE channel NOT IN ('#en.wikipedia', '#de.wikipedia', '#fr.wikipedia') GROUP BY channel;

-- name: filter_in_numbers
SELECT metroCode, COUNT(*) FROM wiki WHERE metroCode IN (501, 602, 803) GROUP BY metroCode;

-- name: filter_like_prefix
SELECT page FROM wiki WHERE page LIKE 'Talk:%' AND added > 100;

-- name: filter_like_underscore
SELECT DISTINCT channel FROM wiki WHERE channel LIKE '#e_.wikipedia';

-- name: filter_not_like
SELECT COUNT(*) FROM wiki WHERE page NOT LIKE '%a%';

-- name: filter_like_escape
SELECT s FROM nulls WHERE s LIKE '50!%' ESCAPE '!' OR s LIKE 'x!_y' ESCAPE '!';

-- name: filter_or_and_not
SELECT COUNT(*) FROM wiki WHERE NOT (isRobot = 'true' OR (isMinor = 'true' AND isNew = 'false'));

-- name: filter_expression_on_column
SELECT COUNT(*) FROM wiki WHERE UPPER(channel) = '#EN.WIKIPEDIA' AND added > deleted;

-- name: filter_column_vs_column
SELECT COUNT(*) FROM wiki WHERE added - deleted > delta - 1;

-- name: filter_string_range
SELECT COUNT(*) FROM wiki WHERE page > 'M' AND page <= 'N';

-- name: filter_always_false
SELECT page FROM wiki WHERE 1 = 0;

-- name: filter_always_true
SELECT COUNT(*) FROM wiki WHERE 1 = 1 AND added > 5;

-- name: filter_matches_nothing
SELECT page, added FROM wiki WHERE channel = 'no such channel';

-- name: filter_regexp_like
SELECT COUNT(*) FROM wiki WHERE REGEXP_LIKE(page, '^[0-9]+');
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE regexp_matches(page, '^[0-9]+');

-- name: filter_contains_string
SELECT COUNT(*) FROM wiki WHERE CONTAINS_STRING(page, 'Park');
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE contains(page, 'Park');

-- name: filter_icontains_string
SELECT COUNT(*) FROM wiki WHERE ICONTAINS_STRING(page, 'park');
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE contains(lower(page), 'park');

-- name: distinct_one_column
SELECT DISTINCT namespace FROM wiki;

-- name: distinct_two_columns_ordered
SELECT DISTINCT namespace, isRobot FROM wiki ORDER BY namespace, isRobot;

-- name: distinct_with_limit
SELECT DISTINCT channel FROM wiki ORDER BY channel DESC LIMIT 7;

-- name: select_constant_expressions_without_from
SELECT 1 + 2 AS three, 'a' || 'b' AS ab, 10 / 4 AS q, 10 / 4.0 AS r, NULL IS NULL AS t;
-- duckdb:
SELECT 3 AS three, 'ab' AS ab, 2 AS q, 2.5 AS r, true AS t;

-- name: boolean_result_columns
SELECT added > deleted AS grew, page LIKE 'A%' AS a, cityName IS NULL AS nocity FROM wiki WHERE channel = '#pl.wikipedia';
