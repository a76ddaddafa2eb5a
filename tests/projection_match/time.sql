-- Projections and __time: a projection that keeps time as timestamp_floor(__time, G) serves
-- __time only as floors G maps onto and as bounds on G's edges; a projection grouped on __time
-- itself serves anything that reads it. Segment 2015-09-12/2015-09-13 unless said otherwise.

-- name: hourly_serves_daily_buckets
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT TIME_FLOOR(__time, 'P1D') AS d, SUM(added) FROM wiki GROUP BY 1;
-- expect: match

-- name: hourly_serves_six_hour_buckets
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT TIME_FLOOR(__time, 'PT6H') AS d, channel, COUNT(*) FROM wiki GROUP BY 1, 2;
-- expect: match

-- name: hourly_refuses_minute_buckets
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT TIME_FLOOR(__time, 'PT1M') AS m, COUNT(*) FROM wiki GROUP BY 1;
-- expect: granularity

-- name: hourly_refuses_time_extract_minute
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE TIME_EXTRACT(__time, 'MINUTE') < 30;
-- expect: raw_time

-- name: hourly_refuses_timestamp_to_millis
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE TIMESTAMP_TO_MILLIS(__time) >= 1442030400000;
-- expect: raw_time

-- name: hourly_refuses_cast_to_bigint
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE CAST(__time AS BIGINT) >= 1442030400000;
-- expect: raw_time

-- name: hourly_refuses_not_between_inside_hours
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE __time NOT BETWEEN TIMESTAMP '2015-09-12 00:30:00' AND TIMESTAMP '2015-09-12 05:30:00';
-- expect: raw_time

-- name: hourly_serves_not_between_on_hour_edges
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE __time NOT BETWEEN TIMESTAMP '2015-09-12 01:00:00' AND TIMESTAMP '2015-09-12 05:59:59.999';
-- expect: match

-- name: hourly_refuses_not_of_a_bound_inside_an_hour
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE NOT (__time >= TIMESTAMP '2015-09-12 00:30:00');
-- expect: raw_time

-- name: hourly_refuses_bound_or_dimension
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:30:00' OR channel = '#en.wikipedia';
-- expect: raw_time

-- name: hourly_serves_hour_bound_or_dimension
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 07:00:00' OR channel = '#en.wikipedia';
-- expect: match

-- name: hourly_serves_interval_on_hour_edges
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT channel, SUM(added) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 06:00:00' AND __time < TIMESTAMP '2015-09-12 18:00:00' GROUP BY 1;
-- expect: match

-- name: hourly_refuses_interval_inside_an_hour
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT channel, SUM(added) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 06:10:00' GROUP BY 1;
-- expect: interval

-- name: hourly_ignores_interval_edges_outside_the_segment
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT channel, SUM(added) FROM wiki WHERE __time >= TIMESTAMP '2015-09-11 06:10:00' GROUP BY 1;
-- expect: match

-- name: hourly_refuses_group_by_raw_time
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT __time, channel, COUNT(*) FROM wiki GROUP BY 1, 2;
-- expect: raw_time

-- name: hourly_refuses_group_by_raw_time_and_expression
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT __time, CONCAT(channel, 'x') FROM wiki GROUP BY 1, 2;
-- expect: raw_time

-- name: hourly_refuses_hour_of_day_expression
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT TIME_EXTRACT(__time, 'HOUR') AS hr, COUNT(*) FROM wiki GROUP BY 1;
-- expect: raw_time

-- name: hourly_serves_whole_hour_zone_days
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT TIME_FLOOR(__time, 'P1D', NULL, 'America/Los_Angeles') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- expect: match

-- name: hourly_serves_whole_hour_zone_query_time_zone
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT TIME_FLOOR(__time, 'PT1H', NULL, 'Asia/Tokyo') AS d, channel, SUM(added) FROM wiki GROUP BY 1, 2;
-- expect: match

-- name: hourly_refuses_kolkata_days
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
SELECT TIME_FLOOR(__time, 'P1D', NULL, 'Asia/Kolkata') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- expect: time_floor

-- name: hourly_refuses_new_york_days_before_standard_time
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
-- segment: 1850-06-01/1850-06-02
SELECT TIME_FLOOR(__time, 'P1D', NULL, 'America/New_York') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- expect: time_floor

-- name: kolkata_hourly_refuses_utc_days
-- projection: SELECT TIME_FLOOR(__time, 'PT1H', NULL, 'Asia/Kolkata') AS h, COUNT(*) AS n FROM wiki GROUP BY 1
SELECT TIME_FLOOR(__time, 'P1D') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- expect: time_floor

-- name: kolkata_hourly_serves_kolkata_days
-- projection: SELECT TIME_FLOOR(__time, 'PT1H', NULL, 'Asia/Kolkata') AS h, COUNT(*) AS n FROM wiki GROUP BY 1
SELECT TIME_FLOOR(__time, 'P1D', NULL, 'Asia/Kolkata') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- expect: match

-- name: timeless_refuses_buckets
-- projection: SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1
SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) FROM wiki GROUP BY 1;
-- expect: no_time

-- name: timeless_serves_whole_segments
-- projection: SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1
SELECT channel, COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' GROUP BY 1;
-- expect: match

-- name: timeless_refuses_a_cut_segment
-- projection: SELECT channel, COUNT(*) AS n FROM wiki GROUP BY 1
SELECT channel, COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 06:00:00' GROUP BY 1;
-- expect: interval

-- name: raw_time_serves_time_extract
-- projection-json: {"type": "aggregate", "name": "raw", "groupingColumns": [{"name": "__time"}, {"name": "channel"}], "aggregators": [{"type": "count", "name": "n"}]}
SELECT COUNT(*) FROM wiki WHERE TIME_EXTRACT(__time, 'MINUTE') < 30;
-- expect: match

-- name: raw_time_serves_group_by_time
-- projection-json: {"type": "aggregate", "name": "raw", "groupingColumns": [{"name": "__time"}, {"name": "channel"}], "aggregators": [{"type": "count", "name": "n"}]}
SELECT __time, channel, COUNT(*) FROM wiki GROUP BY 1, 2;
-- expect: match

-- name: raw_time_serves_kolkata_days
-- projection-json: {"type": "aggregate", "name": "raw", "groupingColumns": [{"name": "__time"}, {"name": "channel"}], "aggregators": [{"type": "count", "name": "n"}]}
SELECT TIME_FLOOR(__time, 'P1D', NULL, 'Asia/Kolkata') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- expect: match

-- name: raw_time_serves_bounds_inside_hours
-- projection-json: {"type": "aggregate", "name": "raw", "groupingColumns": [{"name": "__time"}, {"name": "channel"}], "aggregators": [{"type": "count", "name": "n"}]}
SELECT COUNT(*) FROM wiki WHERE NOT (__time >= TIMESTAMP '2015-09-12 00:30:00') OR channel = '#en.wikipedia';
-- expect: match

-- name: hourly_serves_days_in_the_sql_time_zone
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
-- context: {"sqlTimeZone": "America/Los_Angeles"}
SELECT TIME_FLOOR(__time, 'P1D') AS d, channel, SUM(added) FROM wiki GROUP BY 1, 2;
-- expect: match

-- name: hourly_refuses_days_in_a_half_hour_sql_time_zone
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
-- context: {"sqlTimeZone": "Asia/Kolkata"}
SELECT TIME_FLOOR(__time, 'P1D') AS d, channel, SUM(added) FROM wiki GROUP BY 1, 2;
-- expect: time_floor

-- name: hourly_refuses_sql_time_zone_hour_extract
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
-- context: {"sqlTimeZone": "Asia/Tokyo"}
SELECT EXTRACT(HOUR FROM __time) AS hr, COUNT(*) FROM wiki GROUP BY 1;
-- expect: raw_time

-- name: hourly_serves_a_whole_day_in_a_whole_hour_zone
-- projection: SELECT TIME_FLOOR(__time, 'PT1H') AS h, channel, COUNT(*) AS n, SUM(added) AS a FROM wiki GROUP BY 1, 2
-- context: {"sqlTimeZone": "America/Los_Angeles"}
SELECT channel, SUM(added) FROM wiki WHERE __time >= TIMESTAMP '2015-09-12 00:00:00' AND __time < TIMESTAMP '2015-09-13 00:00:00' GROUP BY 1;
-- expect: match
