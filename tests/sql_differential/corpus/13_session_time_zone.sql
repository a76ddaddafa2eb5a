-- Session time zone (SET sqlTimeZone): literals, parsing, formatting, bucketing and filters all
-- read and print local time, while results stay UTC instants.

-- name: tz_time_parse_session
SET sqlTimeZone = 'Asia/Tokyo';
SELECT TIME_PARSE('2015-09-12 10:00:00') AS a, TIME_PARSE('2015-09-12', 'yyyy-MM-dd') AS b, TIMESTAMP '2015-09-12 10:00:00' AS c;
-- duckdb:
SELECT TIMESTAMPTZ '2015-09-12 01:00:00+00' AS a, TIMESTAMPTZ '2015-09-11 15:00:00+00' AS b, TIMESTAMPTZ '2015-09-12 01:00:00+00' AS c;

-- name: tz_cast_time_to_varchar
SET sqlTimeZone = 'Asia/Tokyo';
SELECT __time, CAST(__time AS VARCHAR) AS s FROM nulls;
-- duckdb:
SELECT __time, strftime(timezone('Asia/Tokyo', __time), '%Y-%m-%d %H:%M:%S') AS s FROM nulls;

-- name: tz_time_format_default
SET sqlTimeZone = 'Asia/Tokyo';
SELECT __time, TIME_FORMAT(__time) AS s FROM nulls;
-- duckdb:
SELECT __time, strftime(timezone('Asia/Tokyo', __time), '%Y-%m-%dT%H:%M:%S.%g+09:00') AS s FROM nulls;

-- name: tz_floor_week_month
SET sqlTimeZone = 'America/Los_Angeles';
SELECT label, FLOOR(__time TO WEEK) AS w, FLOOR(__time TO MONTH) AS m, EXTRACT(DAY FROM __time) AS d FROM time_edges;
-- duckdb:
SELECT label, timezone('America/Los_Angeles', date_trunc('week', timezone('America/Los_Angeles', __time))) AS w, timezone('America/Los_Angeles', date_trunc('month', timezone('America/Los_Angeles', __time))) AS m, day(timezone('America/Los_Angeles', __time)) AS d FROM time_edges;

-- name: tz_string_literal_filter
SET sqlTimeZone = 'Asia/Tokyo';
SELECT COUNT(*) FROM wiki WHERE __time >= '2015-09-13 00:00:00' AND __time < '2015-09-14';
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-12 15:00:00+00' AND __time < TIMESTAMPTZ '2015-09-13 15:00:00+00';

-- name: tz_time_in_interval_session
SET sqlTimeZone = 'Asia/Tokyo';
SELECT COUNT(*) FROM wiki WHERE TIME_IN_INTERVAL(__time, '2015-09-13T00:00:00Z/PT6H');
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-13 00:00:00+00' AND __time < TIMESTAMPTZ '2015-09-13 06:00:00+00';

-- name: tz_date_trunc_day_group
SET sqlTimeZone = 'Asia/Kolkata';
SELECT DATE_TRUNC('day', __time) AS d, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT timezone('Asia/Kolkata', date_trunc('day', timezone('Asia/Kolkata', __time))) AS d, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 1;

-- name: tz_time_floor_hour_kolkata_session
SET sqlTimeZone = 'Asia/Kolkata';
SELECT TIME_FLOOR(__time, 'PT1H') AS h, COUNT(*) FROM nulls GROUP BY 1;
-- duckdb:
SELECT timezone('Asia/Kolkata', date_trunc('hour', timezone('Asia/Kolkata', __time))) AS h, COUNT(*) FROM nulls GROUP BY 1;

-- name: tz_param_timestamp_session
SET sqlTimeZone = 'Asia/Tokyo';
SELECT COUNT(*) FROM wiki WHERE __time < TIMESTAMP '2015-09-12 09:00:00';
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time < TIMESTAMPTZ '2015-09-12 00:00:00+00';

-- name: tz_extract_epoch_session
SET sqlTimeZone = 'Asia/Tokyo';
SELECT __time, EXTRACT(EPOCH FROM __time) AS e, TIMESTAMP_TO_MILLIS(__time) AS ms FROM nulls;
-- duckdb:
SELECT __time, CAST(epoch_ms(__time) // 1000 AS BIGINT) AS e, epoch_ms(__time) AS ms FROM nulls;

-- name: tz_time_ceil_session
SET sqlTimeZone = 'Asia/Kolkata';
SELECT __time, CEIL(__time TO HOUR) AS c FROM nulls;
-- duckdb:
SELECT __time, timezone('Asia/Kolkata', date_trunc('hour', timezone('Asia/Kolkata', __time)) + INTERVAL 1 HOUR) AS c FROM nulls;
