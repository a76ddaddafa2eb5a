-- Time: bucketing at several granularities, time functions, TIMESTAMP/INTERVAL literals, and
-- filters on __time that become query intervals (including intervals with no data).

-- name: time_bucket_hour
SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c, SUM(added) AS a FROM wiki GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, COUNT(*) AS c, SUM(added) AS a FROM wiki GROUP BY 1 ORDER BY 1;

-- name: time_bucket_15_minutes
SELECT TIME_FLOOR(__time, 'PT15M') AS t, COUNT(*) FROM wiki WHERE channel = '#de.wikipedia' GROUP BY 1;
-- duckdb:
SELECT time_bucket(INTERVAL 15 MINUTE, __time) AS t, COUNT(*) FROM wiki WHERE channel = '#de.wikipedia' GROUP BY 1;

-- name: time_bucket_6_hours_and_dimension
SELECT TIME_FLOOR(__time, 'PT6H') AS t, channel, COUNT(*) AS c FROM wiki WHERE channel LIKE '#e%' GROUP BY 1, 2 ORDER BY c DESC, t, channel LIMIT 6;
-- duckdb:
SELECT time_bucket(INTERVAL 6 HOUR, __time) AS t, channel, COUNT(*) AS c FROM wiki WHERE channel LIKE '#e%' GROUP BY 1, 2 ORDER BY c DESC, t, channel LIMIT 6;

-- name: time_bucket_day_descending
SELECT FLOOR(__time TO DAY) AS d, SUM(added) AS s, MIN(__time) AS first_edit, MAX(__time) AS last_edit FROM wiki GROUP BY 1 ORDER BY d DESC;
-- duckdb:
SELECT date_trunc('day', __time) AS d, SUM(added) AS s, MIN(__time), MAX(__time) FROM wiki GROUP BY 1 ORDER BY d DESC;

-- name: time_bucket_floor_to_minute
SELECT FLOOR(__time TO MINUTE) AS m, COUNT(*) FROM wiki WHERE __time < TIMESTAMP '2015-09-12 01:00:00' GROUP BY 1;
-- duckdb:
SELECT date_trunc('minute', __time) AS m, COUNT(*) FROM wiki WHERE __time < TIMESTAMP '2015-09-12 01:00:00' GROUP BY 1;

-- name: time_bucket_week_month_quarter_year
SELECT FLOOR(__time TO WEEK) AS w, FLOOR(__time TO MONTH) AS mo, FLOOR(__time TO QUARTER) AS q, FLOOR(__time TO YEAR) AS y, COUNT(*) FROM wiki GROUP BY 1, 2, 3, 4;
-- duckdb:
SELECT date_trunc('week', __time) AS w, date_trunc('month', __time) AS mo, date_trunc('quarter', __time) AS q, date_trunc('year', __time) AS y, COUNT(*) FROM wiki GROUP BY 1, 2, 3, 4;

-- name: time_bucket_p1w
SELECT TIME_FLOOR(__time, 'P1W') AS w, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT date_trunc('week', __time) AS w, COUNT(*) FROM wiki GROUP BY 1;

-- name: time_bucket_date_trunc
SELECT DATE_TRUNC('hour', __time) AS h, COUNT(*) FROM nulls GROUP BY 1;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, COUNT(*) FROM nulls GROUP BY 1;

-- name: time_bucket_sparse_data_has_no_empty_buckets
SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c, SUM(n) AS s FROM nulls GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, COUNT(*) AS c, SUM(n) AS s FROM nulls GROUP BY 1 ORDER BY 1;

-- name: time_bucket_with_origin
SELECT TIME_FLOOR(__time, 'PT12H', TIMESTAMP '2015-09-12 06:00:00') AS t, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT time_bucket(INTERVAL 12 HOUR, __time, TIMESTAMPTZ '2015-09-12 06:00:00') AS t, COUNT(*) FROM wiki GROUP BY 1;

-- name: time_bucket_in_time_zone
SELECT TIME_FLOOR(__time, 'P1D', NULL, 'America/Los_Angeles') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT timezone('America/Los_Angeles', date_trunc('day', timezone('America/Los_Angeles', __time))) AS d, COUNT(*) FROM wiki GROUP BY 1;

-- name: time_bucket_half_hour_offset_zone
SELECT TIME_FLOOR(__time, 'PT1H', NULL, 'Asia/Kolkata') AS h, COUNT(*) FROM nulls GROUP BY 1;
-- duckdb:
SELECT timezone('Asia/Kolkata', date_trunc('hour', timezone('Asia/Kolkata', __time))) AS h, COUNT(*) FROM nulls GROUP BY 1;

-- name: time_bucket_session_time_zone
SET sqlTimeZone = 'America/Los_Angeles';
SELECT TIME_FLOOR(__time, 'P1D') AS d, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT timezone('America/Los_Angeles', date_trunc('day', timezone('America/Los_Angeles', __time))) AS d, COUNT(*) FROM wiki GROUP BY 1;

-- name: time_session_zone_extract_and_format
SET sqlTimeZone = 'Asia/Tokyo';
SELECT __time, EXTRACT(HOUR FROM __time) AS h, TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm') AS f FROM nulls;
-- duckdb:
SELECT __time, hour(timezone('Asia/Tokyo', __time)) AS h, strftime(timezone('Asia/Tokyo', __time), '%Y-%m-%d %H:%M') AS f FROM nulls;

-- name: time_session_zone_literal
SET sqlTimeZone = 'America/Los_Angeles';
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2015-09-13 00:00:00';
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-13 07:00:00+00';

-- name: time_ceil_function
SELECT __time, TIME_CEIL(__time, 'PT1H') AS c FROM nulls;
-- duckdb:
SELECT __time, CASE WHEN date_trunc('hour', __time) = __time THEN __time ELSE date_trunc('hour', __time) + INTERVAL 1 HOUR END AS c FROM nulls;

-- name: time_ceil_to_unit
SELECT __time, CEIL(__time TO DAY) AS c FROM nulls;
-- duckdb:
SELECT __time, CASE WHEN date_trunc('day', __time) = __time THEN __time ELSE date_trunc('day', __time) + INTERVAL 1 DAY END AS c FROM nulls;

-- name: time_ceil_of_aligned_time_is_itself
SELECT TIME_CEIL(TIMESTAMP '2015-09-12 10:00:00', 'PT1H') AS a, TIME_FLOOR(TIMESTAMP '2015-09-12 10:00:00', 'PT1H') AS b;
-- duckdb:
SELECT TIMESTAMPTZ '2015-09-12 10:00:00' AS a, TIMESTAMPTZ '2015-09-12 10:00:00' AS b;

-- name: time_format_patterns
SELECT __time, TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm') AS a, TIME_FORMAT(__time, 'HH:mm:ss.SSS') AS b, TIME_FORMAT(__time, 'yyyyMMdd') AS c FROM nulls;
-- duckdb:
SELECT __time, strftime(__time, '%Y-%m-%d %H:%M') AS a, strftime(__time, '%H:%M:%S.%g') AS b, strftime(__time, '%Y%m%d') AS c FROM nulls;

-- name: time_format_default_iso
SELECT __time, TIME_FORMAT(__time) AS f FROM nulls;
-- duckdb:
SELECT __time, strftime(__time, '%Y-%m-%dT%H:%M:%S.%gZ') AS f FROM nulls;

-- name: time_format_with_zone
SELECT __time, TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm', 'Asia/Kolkata') AS f FROM nulls;
-- duckdb:
SELECT __time, strftime(timezone('Asia/Kolkata', __time), '%Y-%m-%d %H:%M') AS f FROM nulls;

-- name: time_format_grouped
SELECT TIME_FORMAT(__time, 'yyyy-MM-dd') AS day, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT strftime(__time, '%Y-%m-%d') AS day, COUNT(*) FROM wiki GROUP BY 1;

-- name: time_extract_units
SELECT __time, TIME_EXTRACT(__time, 'HOUR') AS h, TIME_EXTRACT(__time, 'MINUTE') AS mi, TIME_EXTRACT(__time, 'SECOND') AS s, TIME_EXTRACT(__time, 'DAY') AS d, TIME_EXTRACT(__time, 'MONTH') AS mo, TIME_EXTRACT(__time, 'YEAR') AS y FROM nulls;
-- duckdb:
SELECT __time, hour(__time) AS h, minute(__time) AS mi, second(__time) AS s, day(__time) AS d, month(__time) AS mo, year(__time) AS y FROM nulls;

-- name: time_extract_dow_doy_week_quarter
SELECT __time, TIME_EXTRACT(__time, 'DOW') AS dow, TIME_EXTRACT(__time, 'DOY') AS doy, TIME_EXTRACT(__time, 'WEEK') AS wk, TIME_EXTRACT(__time, 'QUARTER') AS q FROM nulls;
-- duckdb:
SELECT __time, isodow(__time) AS dow, dayofyear(__time) AS doy, week(__time) AS wk, quarter(__time) AS q FROM nulls;

-- name: time_extract_epoch_and_millisecond
SELECT __time, TIME_EXTRACT(__time, 'EPOCH') AS e, TIME_EXTRACT(__time, 'MILLISECOND') AS ms FROM nulls;
-- duckdb:
SELECT __time, CAST(floor(epoch(__time)) AS BIGINT) AS e, millisecond(__time) % 1000 AS ms FROM nulls;

-- name: time_extract_sql_syntax
SELECT EXTRACT(HOUR FROM __time) AS h, EXTRACT(DAY FROM __time) AS d, COUNT(*) FROM wiki GROUP BY 1, 2;

-- name: time_extract_dow_grouped
SELECT EXTRACT(DOW FROM __time) AS dow, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT isodow(__time) AS dow, COUNT(*) FROM wiki GROUP BY 1;

-- name: time_shift
SELECT __time, TIME_SHIFT(__time, 'PT1H', 2) AS a, TIME_SHIFT(__time, 'P1D', -1) AS b, TIME_SHIFT(__time, 'P1M', 1) AS c FROM nulls;
-- duckdb:
SELECT __time, __time + INTERVAL 2 HOUR AS a, __time - INTERVAL 1 DAY AS b, __time + INTERVAL 1 MONTH AS c FROM nulls;

-- name: time_interval_arithmetic
SELECT __time, __time + INTERVAL '2' HOUR AS a, __time - INTERVAL '1' DAY AS b, __time + INTERVAL '90' MINUTE AS c FROM nulls;
-- duckdb:
SELECT __time, __time + INTERVAL 2 HOUR AS a, __time - INTERVAL 1 DAY AS b, __time + INTERVAL 90 MINUTE AS c FROM nulls;

-- name: time_timestampadd
SELECT __time, TIMESTAMPADD(HOUR, 3, __time) AS a, TIMESTAMPADD(DAY, -2, __time) AS b FROM nulls;
-- duckdb:
SELECT __time, __time + INTERVAL 3 HOUR AS a, __time - INTERVAL 2 DAY AS b FROM nulls;

-- name: time_millis_conversions
SELECT __time, TIMESTAMP_TO_MILLIS(__time) AS ms, MILLIS_TO_TIMESTAMP(TIMESTAMP_TO_MILLIS(__time) + 1000) AS plus1s FROM nulls;
-- duckdb:
SELECT __time, epoch_ms(__time) AS ms, __time + INTERVAL 1 SECOND AS plus1s FROM nulls;

-- name: time_parse_literals
SELECT TIME_PARSE('2015-09-12T10:00:00Z') AS a, TIME_PARSE('2015-09-12 10:00:00') AS b, TIME_PARSE('12/09/2015 10:30', 'dd/MM/yyyy HH:mm') AS c, TIME_PARSE('garbage') AS d;
-- duckdb:
SELECT TIMESTAMPTZ '2015-09-12 10:00:00+00' AS a, TIMESTAMPTZ '2015-09-12 10:00:00+00' AS b, TIMESTAMPTZ '2015-09-12 10:30:00+00' AS c, CAST(NULL AS TIMESTAMPTZ) AS d;

-- name: time_parse_of_formatted_column
SELECT TIME_PARSE(TIME_FORMAT(__time, 'yyyy-MM-dd HH'), 'yyyy-MM-dd HH') AS h, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, COUNT(*) FROM wiki GROUP BY 1;

-- name: time_parse_with_zone
SELECT TIME_PARSE('2015-09-12 10:00', 'yyyy-MM-dd HH:mm', 'Asia/Tokyo') AS t;
-- duckdb:
SELECT TIMESTAMPTZ '2015-09-12 01:00:00+00' AS t;

-- name: time_cast_string_to_timestamp
SELECT s, CAST('2015-09-12 10:00:00' AS TIMESTAMP) AS t, CAST(s AS TIMESTAMP) AS u FROM nulls;
-- duckdb:
SELECT s, TIMESTAMPTZ '2015-09-12 10:00:00+00' AS t, CAST(NULL AS TIMESTAMPTZ) AS u FROM nulls;

-- name: time_literal_arithmetic_folds
SELECT TIMESTAMP '2015-09-12 00:00:00' + INTERVAL '1' DAY AS a, TIMESTAMP '2015-09-12 00:00:00' - INTERVAL '3' HOUR AS b;
-- duckdb:
SELECT TIMESTAMPTZ '2015-09-13 00:00:00+00' AS a, TIMESTAMPTZ '2015-09-11 21:00:00+00' AS b;

-- name: time_filter_half_open_day
SELECT COUNT(*), SUM(added) FROM wiki WHERE __time >= TIMESTAMP '2015-09-13' AND __time < TIMESTAMP '2015-09-14';

-- name: time_filter_between_inclusive
SELECT COUNT(*) FROM wiki WHERE __time BETWEEN TIMESTAMP '2015-09-12 00:00:00' AND TIMESTAMP '2015-09-12 01:00:00';

-- name: time_filter_exact_instant
SELECT s FROM nulls WHERE __time = TIMESTAMP '2015-09-12 05:07:00.001';

-- name: time_filter_in_instants
SELECT s FROM nulls WHERE __time IN (TIMESTAMP '2015-09-12 05:07:00.001', TIMESTAMP '2015-09-13 01:42:00.006');

-- name: time_filter_or_of_ranges
SELECT COUNT(*) FROM wiki WHERE (__time >= TIMESTAMP '2015-09-12 00:00:00' AND __time < TIMESTAMP '2015-09-12 01:00:00') OR (__time >= TIMESTAMP '2015-09-14 00:00:00' AND __time < TIMESTAMP '2015-09-14 01:00:00');

-- name: time_filter_and_other_conditions
SELECT COUNT(*) FROM wiki WHERE __time > TIMESTAMP '2015-09-12 12:00:00' AND channel = '#en.wikipedia' AND (__time < TIMESTAMP '2015-09-13 01:00:00' OR added > 1000);

-- name: time_filter_not_range
SELECT COUNT(*) FROM wiki WHERE NOT (__time < TIMESTAMP '2015-09-14 12:00:00');

-- name: time_filter_string_literal
SELECT COUNT(*) FROM wiki WHERE __time >= '2015-09-12 06:00:00' AND __time < '2015-09-12 07:00:00';
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-12 06:00:00+00' AND __time < TIMESTAMPTZ '2015-09-12 07:00:00+00';

-- name: time_filter_time_in_interval
SELECT COUNT(*) FROM wiki WHERE TIME_IN_INTERVAL(__time, '2015-09-12T12:00:00/PT30M');
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-12 12:00:00+00' AND __time < TIMESTAMPTZ '2015-09-12 12:30:00+00';

-- name: time_filter_time_in_interval_two_instants
SELECT COUNT(*) FROM wiki WHERE TIME_IN_INTERVAL(__time, '2015-09-13T23:00:00Z/2015-09-14T02:00:00Z');
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-13 23:00:00+00' AND __time < TIMESTAMPTZ '2015-09-14 02:00:00+00';

-- name: time_filter_on_floor
SELECT COUNT(*) FROM wiki WHERE TIME_FLOOR(__time, 'P1D') = TIMESTAMP '2015-09-13';
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE date_trunc('day', __time) = TIMESTAMPTZ '2015-09-13 00:00:00+00';

-- name: time_filter_on_extract
SELECT COUNT(*) FROM wiki WHERE EXTRACT(HOUR FROM __time) = 7;

-- name: time_filter_interval_with_no_data
SELECT COUNT(*) AS c, SUM(added) AS s FROM wiki WHERE __time >= TIMESTAMP '2010-01-01' AND __time < TIMESTAMP '2010-02-01';

-- name: time_filter_no_data_grouped
SELECT channel, COUNT(*) FROM wiki WHERE __time >= TIMESTAMP '2020-01-01' GROUP BY channel;

-- name: time_filter_no_data_bucketed
SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) FROM wiki WHERE __time < TIMESTAMP '2015-01-01' GROUP BY 1;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, COUNT(*) FROM wiki WHERE __time < TIMESTAMP '2015-01-01' GROUP BY 1;

-- name: time_filter_no_data_scan
SELECT __time, page FROM wiki WHERE __time > TIMESTAMP '2030-01-01' ORDER BY __time DESC LIMIT 5;

-- name: time_filter_contradiction
SELECT COUNT(*) FROM wiki WHERE __time > TIMESTAMP '2015-09-13' AND __time < TIMESTAMP '2015-09-12';

-- name: time_filter_current_timestamp_relative_empty
SELECT COUNT(*) FROM wiki WHERE __time >= CURRENT_TIMESTAMP - INTERVAL '1' DAY;
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= now() - INTERVAL 1 DAY;

-- name: time_filter_current_timestamp_relative_all
SELECT COUNT(*) FROM wiki WHERE __time < CURRENT_TIMESTAMP AND __time > CURRENT_TIMESTAMP - INTERVAL '30' YEAR;
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time < now() AND __time > now() - INTERVAL 30 YEAR;

-- name: time_min_max_with_filter
SELECT MIN(__time), MAX(__time) FROM wiki WHERE page LIKE 'A%';

-- name: time_bucket_top_hours
SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY c DESC, h LIMIT 3;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY c DESC, h LIMIT 3;

-- name: time_group_by_raw_time
SELECT __time, COUNT(*) FROM nulls GROUP BY __time ORDER BY __time DESC LIMIT 4;

-- name: time_order_by_bucket_desc_with_having
SELECT FLOOR(__time TO HOUR) AS h, SUM(added) AS s FROM wiki WHERE channel = '#en.wikipedia' GROUP BY 1 HAVING SUM(added) > 5000 ORDER BY h DESC;
-- duckdb:
SELECT date_trunc('hour', __time) AS h, SUM(added) AS s FROM wiki WHERE channel = '#en.wikipedia' GROUP BY 1 HAVING SUM(added) > 5000 ORDER BY h DESC;
