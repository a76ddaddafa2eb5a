-- Time arithmetic at its edges (time_edges): DST in Paris and Los Angeles, ISO week 53, leap days,
-- month ends and an instant before 1970. Zoned DuckDB spellings go through local time and back.

-- name: tedge_all_rows_ordered
SELECT __time, label, v FROM time_edges ORDER BY __time;

-- name: tedge_pre_epoch_filter
SELECT label FROM time_edges WHERE __time < TIMESTAMP '1970-01-01 00:00:00';

-- name: tedge_floor_hour_pre_epoch
SELECT label, TIME_FLOOR(__time, 'PT1H') AS h, FLOOR(__time TO MINUTE) AS m, TIME_CEIL(__time, 'PT1H') AS c FROM time_edges;
-- duckdb:
SELECT label, date_trunc('hour', __time) AS h, date_trunc('minute', __time) AS m, CASE WHEN date_trunc('hour', __time) = __time THEN __time ELSE date_trunc('hour', __time) + INTERVAL 1 HOUR END AS c FROM time_edges;

-- name: tedge_floor_calendar_units
SELECT label, FLOOR(__time TO WEEK) AS w, FLOOR(__time TO MONTH) AS mo, FLOOR(__time TO QUARTER) AS q, FLOOR(__time TO YEAR) AS y FROM time_edges;
-- duckdb:
SELECT label, date_trunc('week', __time) AS w, date_trunc('month', __time) AS mo, date_trunc('quarter', __time) AS q, date_trunc('year', __time) AS y FROM time_edges;

-- name: tedge_ceil_month
SELECT label, TIME_CEIL(__time, 'P1M') AS c FROM time_edges;
-- duckdb:
SELECT label, CASE WHEN date_trunc('month', __time) = __time THEN __time ELSE date_trunc('month', __time) + INTERVAL 1 MONTH END AS c FROM time_edges;

-- name: tedge_group_by_month
SELECT TIME_FLOOR(__time, 'P1M') AS mo, COUNT(*), SUM(v) FROM time_edges GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT date_trunc('month', __time) AS mo, COUNT(*), SUM(v) FROM time_edges GROUP BY 1 ORDER BY 1;

-- name: tedge_group_by_year_desc
SELECT FLOOR(__time TO YEAR) AS y, COUNT(*) FROM time_edges GROUP BY 1 ORDER BY 1 DESC;
-- duckdb:
SELECT date_trunc('year', __time) AS y, COUNT(*) FROM time_edges GROUP BY 1 ORDER BY 1 DESC;

-- name: tedge_extract_iso_fields
SELECT label, EXTRACT(WEEK FROM __time) AS wk, EXTRACT(ISOYEAR FROM __time) AS iy, EXTRACT(DOW FROM __time) AS dow, EXTRACT(ISODOW FROM __time) AS idow, EXTRACT(DOY FROM __time) AS doy FROM time_edges;
-- duckdb:
SELECT label, week(__time) AS wk, isoyear(__time) AS iy, isodow(__time) AS dow, isodow(__time) AS idow, dayofyear(__time) AS doy FROM time_edges;

-- name: tedge_extract_decade_century_millennium
SELECT label, EXTRACT(YEAR FROM __time) AS y, EXTRACT(DECADE FROM __time) AS de, EXTRACT(CENTURY FROM __time) AS ce, EXTRACT(MILLENNIUM FROM __time) AS mi, EXTRACT(QUARTER FROM __time) AS q FROM time_edges;
-- duckdb:
SELECT label, year(__time) AS y, decade(__time) AS de, century(__time) AS ce, millennium(__time) AS mi, quarter(__time) AS q FROM time_edges;

-- name: tedge_extract_epoch_and_millisecond
SELECT label, EXTRACT(EPOCH FROM __time) AS e, TIME_EXTRACT(__time, 'MILLISECOND') AS ms, TIME_EXTRACT(__time, 'SECOND') AS s FROM time_edges;
-- duckdb:
SELECT label, CAST(trunc(epoch_ms(__time) / 1000) AS BIGINT) AS e, millisecond(__time) % 1000 AS ms, second(__time) AS s FROM time_edges;

-- name: tedge_millis_round_trip
SELECT label, TIMESTAMP_TO_MILLIS(__time) AS ms, MILLIS_TO_TIMESTAMP(TIMESTAMP_TO_MILLIS(__time)) AS t FROM time_edges;
-- duckdb:
SELECT label, epoch_ms(__time) AS ms, __time AS t FROM time_edges;

-- name: tedge_format_pre_epoch_and_millis
SELECT label, TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm:ss.SSS') AS f FROM time_edges;
-- duckdb:
SELECT label, strftime(__time, '%Y-%m-%d %H:%M:%S.%g') AS f FROM time_edges;

-- name: tedge_shift_month_end_clamps
SELECT label, TIME_SHIFT(__time, 'P1M', 1) AS next_month, TIME_SHIFT(__time, 'P1Y', 1) AS next_year, TIME_SHIFT(__time, 'P1M', -1) AS prev_month FROM time_edges;
-- duckdb:
SELECT label, __time + INTERVAL 1 MONTH AS next_month, __time + INTERVAL 1 YEAR AS next_year, __time - INTERVAL 1 MONTH AS prev_month FROM time_edges;

-- name: tedge_interval_month_arithmetic
SELECT label, __time + INTERVAL '1' MONTH AS a, __time - INTERVAL '1' YEAR AS b FROM time_edges;
-- duckdb:
SELECT label, __time + INTERVAL 1 MONTH AS a, __time - INTERVAL 1 YEAR AS b FROM time_edges;

-- name: tedge_floor_day_los_angeles_across_dst
SELECT label, TIME_FLOOR(__time, 'P1D', NULL, 'America/Los_Angeles') AS d FROM time_edges WHERE __time >= TIMESTAMP '2015-01-01';
-- duckdb:
SELECT label, timezone('America/Los_Angeles', date_trunc('day', timezone('America/Los_Angeles', __time))) AS d FROM time_edges WHERE __time >= TIMESTAMP '2015-01-01';

-- name: tedge_floor_day_paris_across_dst
SELECT label, TIME_FLOOR(__time, 'P1D', NULL, 'Europe/Paris') AS d, TIME_FLOOR(__time, 'P1M', NULL, 'Europe/Paris') AS mo FROM time_edges;
-- duckdb:
SELECT label, timezone('Europe/Paris', date_trunc('day', timezone('Europe/Paris', __time))) AS d, timezone('Europe/Paris', date_trunc('month', timezone('Europe/Paris', __time))) AS mo FROM time_edges;

-- name: tedge_session_zone_day_buckets
SET sqlTimeZone = 'America/Los_Angeles';
SELECT FLOOR(__time TO DAY) AS d, COUNT(*) FROM time_edges GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT timezone('America/Los_Angeles', date_trunc('day', timezone('America/Los_Angeles', __time))) AS d, COUNT(*) FROM time_edges GROUP BY 1 ORDER BY 1;

-- name: tedge_hour_and_format_in_zone_across_dst
SELECT label, TIME_EXTRACT(__time, 'HOUR', 'America/Los_Angeles') AS h, TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm', 'America/Los_Angeles') AS f FROM time_edges WHERE label LIKE 'la-%';
-- duckdb:
SELECT label, hour(timezone('America/Los_Angeles', __time)) AS h, strftime(timezone('America/Los_Angeles', __time), '%Y-%m-%d %H:%M') AS f FROM time_edges WHERE label LIKE 'la-%';

-- name: tedge_paris_hours_across_dst
SELECT label, TIME_EXTRACT(__time, 'HOUR', 'Europe/Paris') AS h FROM time_edges WHERE label LIKE 'paris-%';
-- duckdb:
SELECT label, hour(timezone('Europe/Paris', __time)) AS h FROM time_edges WHERE label LIKE 'paris-%';

-- name: tedge_shift_day_in_zone_across_dst
SELECT label, TIME_SHIFT(__time, 'P1D', 1, 'America/Los_Angeles') AS next_day, TIME_SHIFT(__time, 'P1D', -1, 'America/Los_Angeles') AS prev_day FROM time_edges WHERE label LIKE 'la-%';
-- duckdb:
SELECT label, timezone('America/Los_Angeles', timezone('America/Los_Angeles', __time) + INTERVAL 1 DAY) AS next_day, timezone('America/Los_Angeles', timezone('America/Los_Angeles', __time) - INTERVAL 1 DAY) AS prev_day FROM time_edges WHERE label LIKE 'la-%';

-- name: tedge_shift_hours_is_absolute
SELECT label, TIME_SHIFT(__time, 'PT1H', 1, 'America/Los_Angeles') AS h FROM time_edges WHERE label LIKE 'la-%';
-- duckdb:
SELECT label, __time + INTERVAL 1 HOUR AS h FROM time_edges WHERE label LIKE 'la-%';

-- name: tedge_week_buckets_across_year_end
SELECT TIME_FLOOR(__time, 'P1W') AS w, COUNT(*) AS c FROM time_edges WHERE __time >= TIMESTAMP '2015-12-01' GROUP BY 1 ORDER BY 1;
-- duckdb:
SELECT date_trunc('week', __time) AS w, COUNT(*) AS c FROM time_edges WHERE __time >= TIMESTAMP '2015-12-01' GROUP BY 1 ORDER BY 1;

-- name: tedge_year_interval_filter_across_segments
SELECT COUNT(*), MIN(__time), MAX(__time) FROM time_edges WHERE __time >= TIMESTAMP '2015-06-01' AND __time < TIMESTAMP '2016-02-01';

-- name: tedge_time_in_interval_with_period_end
SELECT label FROM time_edges WHERE TIME_IN_INTERVAL(__time, '2015-12-31T00:00:00Z/P1D');
-- duckdb:
SELECT label FROM time_edges WHERE __time >= TIMESTAMPTZ '2015-12-31 00:00:00+00' AND __time < TIMESTAMPTZ '2016-01-01 00:00:00+00';

-- name: tedge_parse_formats
SELECT TIME_PARSE('2016-02-29', 'yyyy-MM-dd') AS a, TIME_PARSE('1969-12-31T23:59:59.500Z') AS b, TIME_PARSE('2015-02-29', 'yyyy-MM-dd') AS c;
-- duckdb:
SELECT TIMESTAMPTZ '2016-02-29 00:00:00+00' AS a, TIMESTAMPTZ '1969-12-31 23:59:59.5+00' AS b, CAST(NULL AS TIMESTAMPTZ) AS c;
