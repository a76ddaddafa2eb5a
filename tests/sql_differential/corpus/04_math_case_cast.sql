-- Arithmetic, math functions, CASE, CAST, COALESCE/NULLIF over numbers.

-- name: math_abs_ceil_floor_on_longs
SELECT delta, ABS(delta) AS a, CEIL(delta) AS c, FLOOR(delta) AS f FROM wiki WHERE added = 3;
-- duckdb:
SELECT delta, abs(delta) AS a, CAST(ceil(delta) AS BIGINT) AS c, CAST(floor(delta) AS BIGINT) AS f FROM wiki WHERE added = 3;

-- name: math_ceil_floor_on_doubles
SELECT d, CEIL(d) AS c, FLOOR(d) AS f, ABS(d) AS a FROM nulls;

-- name: math_ceil_floor_of_division
SELECT added, CEIL(added / 7.0) AS c, FLOOR(added / 7.0) AS f FROM wiki WHERE added < 9 AND channel = '#en.wikipedia';

-- name: math_round
SELECT d, ROUND(d) AS r0, ROUND(d, 1) AS r1 FROM nulls;

-- name: math_round_division
SELECT added, ROUND(added / 7.0, 2) AS r FROM wiki WHERE added < 40 AND channel = '#de.wikipedia';

-- name: math_round_long
SELECT n, ROUND(n) AS r FROM nulls;

-- name: math_sqrt_power_exp
SELECT added, SQRT(added) AS sq, POWER(added, 2) AS p2, POWER(added, 0.5) AS ph, EXP(added / 1000.0) AS e FROM wiki WHERE added < 9 AND channel = '#fr.wikipedia';

-- name: math_ln_log10
SELECT added, LN(added + 1) AS l, LOG10(added + 1) AS l10 FROM wiki WHERE added < 200 AND channel = '#it.wikipedia';

-- name: math_functions_over_nulls
SELECT n, d, SQRT(ABS(d)) AS sq, POWER(n, 2) AS p, EXP(d) AS e, LN(ABS(d) + 1) AS l, LOG10(ABS(n) + 1) AS l10 FROM nulls;

-- name: math_mod_signs
SELECT n, MOD(n, 4) AS m, MOD(-n, 4) AS mneg FROM nulls;

-- name: math_mod_grouped
SELECT MOD(added, 10) AS last_digit, COUNT(*) FROM wiki GROUP BY 1;

-- name: math_mod_double
SELECT d, MOD(d, 2) AS m FROM nulls WHERE d IS NOT NULL AND ABS(d) < 100;
-- duckdb:
SELECT d, d % 2 AS m FROM nulls WHERE d IS NOT NULL AND abs(d) < 100;

-- name: math_integer_division_truncates
SELECT delta, delta / 3 AS q, added / 7 AS q2 FROM wiki WHERE added BETWEEN 1 AND 4 AND channel = '#en.wikipedia';
-- duckdb:
SELECT delta, delta // 3 AS q, added // 7 AS q2 FROM wiki WHERE added BETWEEN 1 AND 4 AND channel = '#en.wikipedia';

-- name: math_integer_division_negative
SELECT n, n / 4 AS q, n / -4 AS q2 FROM nulls;
-- duckdb:
SELECT n, n // 4 AS q, n // -4 AS q2 FROM nulls;

-- name: math_double_division
SELECT n, n / 4.0 AS q, CAST(n AS DOUBLE) / 4 AS q2 FROM nulls;

-- name: math_mixed_arithmetic_precedence
SELECT added * 2 + 1 AS x, (added + 1) * 2 AS y, added - deleted * 2 AS z, -(added - 3) AS w, added * 1.5 AS v FROM wiki WHERE added < 5 AND channel = '#sv.wikipedia';

-- name: math_sign_cbrt_atan2
SELECT d, SIGN(d) AS sg, CBRT(d) AS cb, ATAN2(d, 2) AS at2 FROM nulls;
-- duckdb:
SELECT d, CAST(sign(d) AS DOUBLE) AS sg, cbrt(d) AS cb, atan2(d, 2) AS at2 FROM nulls;

-- name: math_trig
SELECT d, SIN(d) AS si, COS(d) AS co, TAN(d) AS ta, ATAN(d) AS at FROM nulls;

-- name: math_asin_acos
SELECT d, ASIN(d / 10) AS a, ACOS(d / 10) AS b FROM nulls WHERE ABS(d) <= 10;

-- name: math_greatest_least_longs
SELECT added, deleted, GREATEST(added, deleted) AS g, LEAST(added, deleted, 50) AS l FROM wiki WHERE added < 5 AND channel = '#ru.wikipedia';

-- name: math_expression_on_aggregates
SELECT channel, SUM(added) - SUM(deleted) AS net, SUM(added) * 1.0 / COUNT(*) AS avg_added, SUM(added) / COUNT(*) AS int_avg FROM wiki GROUP BY channel;
-- duckdb:
SELECT channel, SUM(added) - SUM(deleted) AS net, SUM(added) * 1.0 / COUNT(*) AS avg_added, CAST(SUM(added) // COUNT(*) AS BIGINT) AS int_avg FROM wiki GROUP BY channel;

-- name: case_searched
SELECT CASE WHEN added > 1000 THEN 'huge' WHEN added > 100 THEN 'big' WHEN added > 0 THEN 'small' ELSE 'none' END AS size, COUNT(*) FROM wiki GROUP BY 1;

-- name: case_simple
SELECT CASE channel WHEN '#en.wikipedia' THEN 'en' WHEN '#de.wikipedia' THEN 'de' ELSE 'other' END AS lang, SUM(added) FROM wiki GROUP BY 1;

-- name: case_numeric_result
SELECT n, CASE WHEN n > 5 THEN n * 10 WHEN n < 0 THEN 0 ELSE n END AS v FROM nulls;

-- name: case_mixed_numeric_result
SELECT n, CASE WHEN n > 5 THEN d ELSE n END AS v FROM nulls;

-- name: case_inside_aggregate
SELECT channel, SUM(CASE WHEN isRobot = 'true' THEN 1 ELSE 0 END) AS bots, SUM(CASE WHEN added > 100 THEN added END) AS big FROM wiki GROUP BY channel;

-- name: case_in_filter
SELECT COUNT(*) FROM wiki WHERE CASE WHEN namespace = 'Main' THEN added ELSE deleted END > 50;

-- name: cast_long_to_double_and_varchar
SELECT n, CAST(n AS DOUBLE) AS d, CAST(n AS VARCHAR) AS s FROM nulls;

-- name: cast_double_to_long_truncates
SELECT d, CAST(d AS BIGINT) AS l FROM nulls WHERE ABS(d) < 1000;
-- duckdb:
SELECT d, CAST(trunc(d) AS BIGINT) AS l FROM nulls WHERE abs(d) < 1000;

-- name: cast_double_to_varchar
SELECT d, CAST(d AS VARCHAR) AS s FROM nulls WHERE ABS(d) < 1000;

-- name: cast_string_to_number
SELECT CAST('42' AS BIGINT) AS a, CAST('2.5' AS DOUBLE) AS b, CAST('abc' AS BIGINT) AS c, CAST('-7' AS INTEGER) + 1 AS d;
-- duckdb:
SELECT CAST(42 AS BIGINT) AS a, CAST(2.5 AS DOUBLE) AS b, TRY_CAST('abc' AS BIGINT) AS c, CAST(-6 AS BIGINT) AS d;

-- name: cast_string_column_to_number
SELECT s, CAST(s AS BIGINT) AS n FROM nulls;
-- duckdb:
SELECT s, TRY_CAST(s AS BIGINT) AS n FROM nulls;

-- name: cast_boolean_to_long
SELECT n, CAST(n > 3 AS BIGINT) AS b FROM nulls;

-- name: cast_number_in_arithmetic
SELECT CAST(added AS VARCHAR) || '+' AS a, CAST('12' AS BIGINT) + added AS b, CAST(added AS DOUBLE) / 4 AS c FROM wiki WHERE added < 3 AND channel = '#nl.wikipedia';

-- name: cast_time_to_varchar_and_long
SELECT __time, CAST(__time AS VARCHAR) AS s, CAST(__time AS BIGINT) AS ms FROM nulls;
-- duckdb:
SELECT __time, strftime(__time, '%Y-%m-%d %H:%M:%S') AS s, epoch_ms(__time) AS ms FROM nulls;

-- name: coalesce_nullif_numbers_grouped
SELECT COALESCE(metroCode, 0) AS mc, COUNT(*) FROM wiki GROUP BY 1;

-- name: nullif_in_aggregate
SELECT channel, COUNT(NULLIF(comment, '')) AS with_comment, COUNT(*) AS c FROM wiki GROUP BY channel;

-- name: cast_double_to_varchar_large_and_small
SELECT CAST(d AS VARCHAR) AS s, CAST(d / 100000 AS VARCHAR) AS small, CAST(1e7 AS VARCHAR) AS lit FROM nulls WHERE d IN (1.5, 1e10);
-- expected: [["1.5", "1.5E-5", "1.0E7"], ["1.0E10", "100000.0", "1.0E7"]]
