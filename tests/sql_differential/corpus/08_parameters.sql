-- ? parameters, bound through the ADBC driver (prepared statement + DoPut) and through DuckDB.
-- {"timestamp": "..."} in the JSON list is bound as a UTC datetime. A DuckDB spelling without ? gets no values.

-- name: param_filter_and_limit
-- parameters: ["#de.wikipedia", 1000, 5]
SELECT __time, page, added FROM wiki WHERE channel = ? AND added > ? ORDER BY __time LIMIT ?;

-- name: param_in_select_list
-- parameters: ["prefix:", 2]
SELECT ? || channel AS p, added * ? AS a FROM wiki WHERE added = 17;

-- name: param_double
-- parameters: [2.25]
SELECT s, d FROM nulls WHERE d > ?;

-- name: param_in_list
-- parameters: ["#fr.wikipedia", "#ja.wikipedia"]
SELECT channel, COUNT(*) FROM wiki WHERE channel IN (?, ?) GROUP BY channel;

-- name: param_null_matches_nothing
-- parameters: [null]
SELECT COUNT(*) FROM nulls WHERE n = ?;

-- name: param_null_is_null
-- parameters: [null]
SELECT COUNT(*) FROM nulls WHERE ? IS NULL;

-- name: param_timestamps_as_interval
-- parameters: [{"timestamp": "2015-09-13T00:00:00Z"}, {"timestamp": "2015-09-13T06:00:00Z"}]
SELECT COUNT(*), SUM(added) FROM wiki WHERE __time >= ? AND __time < ?;

-- name: param_having_and_order
-- parameters: [500]
SELECT namespace, COUNT(*) AS c FROM wiki GROUP BY namespace HAVING COUNT(*) > ? ORDER BY c DESC;

-- name: param_string_with_quote_and_unicode
-- parameters: ["dé", "it's"]
SELECT s FROM nulls WHERE s = ? OR s = ?;

-- name: param_like_pattern
-- parameters: ["Talk:%"]
SELECT COUNT(*) FROM wiki WHERE page LIKE ?;

-- name: param_in_function_argument
-- parameters: [3]
SELECT LEFT(channel, ?) AS l, COUNT(*) FROM wiki GROUP BY 1;

-- name: param_in_subquery_and_outer
-- parameters: [100, 10]
SELECT channel, c FROM (SELECT channel, COUNT(*) AS c FROM wiki WHERE added > ? GROUP BY channel) WHERE c > ?;

-- name: param_in_case_and_coalesce
-- parameters: [-1, 5, "big", "small"]
SELECT n, COALESCE(n, ?) AS n2, CASE WHEN n > ? THEN ? ELSE ? END AS size FROM nulls;
-- name: param_bool
-- parameters: [true]
SELECT COUNT(*) FROM nulls WHERE (n > 3) = ?;

-- name: param_period
-- parameters: ["PT6H"]
SELECT TIME_FLOOR(__time, ?) AS t, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT time_bucket(INTERVAL 6 HOUR, __time) AS t, COUNT(*) FROM wiki GROUP BY 1;

-- name: param_timestamp_in_select
-- parameters: [{"timestamp": "2015-09-12T10:00:00Z"}]
SELECT ? AS t, COUNT(*) AS c FROM nulls;

-- name: param_limit_offset
-- parameters: [3, 2]
SELECT n FROM nulls WHERE n IS NOT NULL ORDER BY n LIMIT ? OFFSET ?;

-- name: param_negative_and_float_mix
-- parameters: [-3, 0.5]
SELECT n, n * ? + ? AS x FROM nulls;

-- name: param_in_time_shift
-- parameters: [2]
SELECT __time, TIME_SHIFT(__time, 'PT1H', ?) AS t FROM nulls;
-- duckdb:
SELECT __time, __time + INTERVAL 2 HOUR AS t FROM nulls;

-- name: param_time_in_interval
-- parameters: ["2015-09-13T00:00:00Z/P1D"]
SELECT COUNT(*) FROM wiki WHERE TIME_IN_INTERVAL(__time, ?);
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-13 00:00:00+00' AND __time < TIMESTAMPTZ '2015-09-14 00:00:00+00';

-- name: param_string_compared_to_time
-- parameters: ["2015-09-14 00:00:00"]
SELECT COUNT(*) FROM wiki WHERE __time >= ?;
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE __time >= TIMESTAMPTZ '2015-09-14 00:00:00+00';

-- name: param_in_having_with_double
-- parameters: [1500.5]
SELECT channel, AVG(added) AS a FROM wiki GROUP BY channel HAVING AVG(added) > ?;

-- name: param_same_value_twice
-- parameters: ["a", "a"]
SELECT COUNT(*) FROM nulls WHERE s = ? OR g = ?;
