-- Druid's own wikipedia-sampled.json (20 rows of 2016-06-27, keys missing in 18 of 20 rows,
-- JSON booleans as 'true'/'false' strings), published as hour segments.

-- name: real_totals
SELECT COUNT(*), SUM(added), SUM(deleted), SUM(delta), MIN(delta), MAX(commentLength), SUM(deltaBucket) FROM wikisample;

-- name: real_by_channel
SELECT channel, COUNT(*) AS c, SUM(added) AS a FROM wikisample GROUP BY channel ORDER BY c DESC, channel;

-- name: real_boolean_strings
SELECT isRobot, isNew, COUNT(*) FROM wikisample GROUP BY 1, 2;

-- name: real_missing_keys_are_null
SELECT COUNT(cityName), COUNT(countryName), COUNT(regionIsoCode), COUNT(metroCode), SUM(metroCode), COUNT(*) FROM wikisample;

-- name: real_rows_with_geo
SELECT __time, page, cityName, countryName, countryIsoCode, regionName FROM wikisample WHERE countryName IS NOT NULL;

-- name: real_hourly
SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*), SUM(delta) FROM wikisample GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, COUNT(*), SUM(delta) FROM wikisample GROUP BY 1 ORDER BY 1;

-- name: real_scan_ordered_by_time
SELECT __time, channel, "user", added FROM wikisample ORDER BY __time DESC LIMIT 8;

-- name: real_flags_empty_string
SELECT flags, COUNT(*) FROM wikisample GROUP BY flags;

-- name: real_comment_length_vs_char_length
SELECT page, commentLength, CHAR_LENGTH(comment) AS l FROM wikisample;
-- duckdb:
SELECT page, commentLength, length(comment) AS l FROM wikisample;

-- name: real_unicode_pages
SELECT page, UPPER(page) AS up, REVERSE(page) AS rev, CHAR_LENGTH(page) AS l FROM wikisample WHERE channel <> '#en.wikipedia';
-- duckdb:
SELECT page, upper(page) AS up, reverse(page) AS rev, length(page) AS l FROM wikisample WHERE channel <> '#en.wikipedia';

-- name: real_time_interval_filter
SELECT COUNT(*) FROM wikisample WHERE __time >= TIMESTAMP '2016-06-27 01:00:00' AND __time < TIMESTAMP '2016-06-27 02:02:30';

-- name: real_namespace_delta_stats
SELECT namespace, COUNT(*) AS c, AVG(delta) AS avg_delta, MAX(ABS(delta)) AS biggest FROM wikisample GROUP BY namespace;

-- name: real_earliest_latest
SELECT EARLIEST(page), LATEST(page), EARLIEST("user"), LATEST(added) FROM wikisample;
-- duckdb:
SELECT arg_min(page, __time), arg_max(page, __time), arg_min("user", __time), arg_max(added, __time) FROM wikisample;

-- name: real_join_with_lookup
SELECT w.countryIsoCode, c.name, COUNT(*) FROM wikisample w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode WHERE w.countryIsoCode IS NOT NULL GROUP BY 1, 2;

-- name: real_union_with_demo
SELECT channel, COUNT(*) AS c FROM (SELECT channel FROM wikisample UNION ALL SELECT channel FROM wiki WHERE added > 30000) GROUP BY channel;
