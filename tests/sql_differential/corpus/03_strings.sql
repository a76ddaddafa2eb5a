-- String functions, over the demo data and over NULL, '' and non-ASCII values.

-- name: str_lower_upper
SELECT s, LOWER(s) AS lo, UPPER(s) AS up FROM nulls;

-- name: str_lower_upper_grouped
SELECT UPPER(channel) AS ch, LOWER(namespace) AS ns, COUNT(*) FROM wiki GROUP BY 1, 2;

-- name: str_concat_function_and_operator
SELECT CONCAT(channel, '/', namespace) AS a, channel || ':' || page AS b FROM wiki WHERE added = 17;
-- duckdb:
SELECT channel || '/' || namespace AS a, channel || ':' || page AS b FROM wiki WHERE added = 17;

-- name: str_concat_number
SELECT CONCAT(s, n) AS a, s || CAST(n AS VARCHAR) AS b FROM nulls;
-- duckdb:
SELECT s || CAST(n AS VARCHAR) AS a, s || CAST(n AS VARCHAR) AS b FROM nulls;

-- name: str_substring_from_for
SELECT s, SUBSTRING(s, 2, 3) AS a, SUBSTRING(s, 1, 1) AS b, SUBSTRING(s, 2) AS c FROM nulls;

-- name: str_substring_past_end
SELECT s, SUBSTRING(s, 5, 2) AS a FROM nulls WHERE s IS NOT NULL;

-- name: str_substring_sql_syntax
SELECT SUBSTRING(page FROM 3 FOR 4) AS a FROM wiki WHERE added = 23;
-- duckdb:
SELECT substring(page, 3, 4) AS a FROM wiki WHERE added = 23;

-- name: str_char_length_unicode
SELECT s, CHAR_LENGTH(s) AS l, CHARACTER_LENGTH(s) AS l2, LENGTH(s) AS l3 FROM nulls;
-- duckdb:
SELECT s, length(s) AS l, length(s) AS l2, length(s) AS l3 FROM nulls;

-- name: str_char_length_grouped
SELECT CHAR_LENGTH(channel) AS l, COUNT(*) FROM wiki GROUP BY 1;
-- duckdb:
SELECT length(channel) AS l, COUNT(*) FROM wiki GROUP BY 1;

-- name: str_trim_default
SELECT s, TRIM(s) AS t, LTRIM(s) AS lt, RTRIM(s) AS rt FROM nulls;

-- name: str_trim_characters
SELECT TRIM(BOTH '#' FROM channel) AS a, TRIM(LEADING '#' FROM channel) AS b, TRIM(TRAILING 'a' FROM channel) AS c FROM wiki WHERE added = 31;
-- duckdb:
SELECT trim(channel, '#') AS a, ltrim(channel, '#') AS b, rtrim(channel, 'a') AS c FROM wiki WHERE added = 31;

-- name: str_ltrim_rtrim_two_args
SELECT LTRIM(channel, '#ed') AS a, RTRIM(channel, 'aikpw.') AS b, BTRIM(page, 'T') AS c FROM wiki WHERE added = 31;
-- duckdb:
SELECT ltrim(channel, '#ed') AS a, rtrim(channel, 'aikpw.') AS b, trim(page, 'T') AS c FROM wiki WHERE added = 31;

-- name: str_replace
SELECT REPLACE(channel, 'wiki', 'W') AS a, REPLACE(page, ' ', '_') AS b, REPLACE('banana', 'a', '') AS c FROM wiki WHERE added = 17;

-- name: str_replace_over_nulls
SELECT s, REPLACE(s, 'a', 'A') AS r FROM nulls;

-- name: str_strpos
SELECT page, STRPOS(page, 'a') AS p, STRPOS(page, 'zzz') AS none FROM wiki WHERE added = 41;

-- name: str_strpos_nulls
SELECT s, STRPOS(s, 'a') AS p FROM nulls;

-- name: str_position
SELECT page, POSITION('e' IN page) AS p FROM wiki WHERE added = 41;
-- duckdb:
SELECT page, strpos(page, 'e') AS p FROM wiki WHERE added = 41;

-- name: str_left_right
SELECT page, LEFT(page, 3) AS l, RIGHT(page, 3) AS r, LEFT(page, 0) AS l0 FROM wiki WHERE added = 23;

-- name: str_left_right_nulls_unicode
SELECT s, LEFT(s, 1) AS l, RIGHT(s, 1) AS r FROM nulls;

-- name: str_reverse
SELECT s, REVERSE(s) AS r FROM nulls;

-- name: str_reverse_grouped
SELECT REVERSE(namespace) AS r, COUNT(*) FROM wiki GROUP BY 1;

-- name: str_lpad_rpad
SELECT LPAD(channel, 16, '*') AS a, RPAD(namespace, 6, '-') AS b, LPAD(namespace, 2, '*') AS c, RPAD(channel, 3) AS d FROM wiki WHERE added = 17;
-- duckdb:
SELECT lpad(channel, 16, '*') AS a, rpad(namespace, 6, '-') AS b, lpad(namespace, 2, '*') AS c, rpad(channel, 3, ' ') AS d FROM wiki WHERE added = 17;

-- name: str_lpad_rpad_nulls
SELECT s, LPAD(s, 4, 'xy') AS l, RPAD(s, 3, '.') AS r FROM nulls;

-- name: str_like_in_select
SELECT s, s LIKE 'a%' AS a, s LIKE '%_%' AS any1, s NOT LIKE '' AS nonempty FROM nulls;

-- name: str_like_grouped
SELECT page LIKE '%Park%' AS park, COUNT(*) FROM wiki GROUP BY 1;

-- name: str_repeat
SELECT s, REPEAT(s, 2) AS r FROM nulls;

-- name: str_regexp_extract
SELECT page, REGEXP_EXTRACT(page, '([0-9]+)', 1) AS digits FROM wiki WHERE added = 17;
-- duckdb:
SELECT page, CASE WHEN regexp_matches(page, '([0-9]+)') THEN regexp_extract(page, '([0-9]+)', 1) END AS digits FROM wiki WHERE added = 17;

-- name: str_regexp_replace_all
SELECT page, REGEXP_REPLACE(page, '[aeiou]', '#') AS r FROM wiki WHERE added = 17;
-- duckdb:
SELECT page, regexp_replace(page, '[aeiou]', '#', 'g') AS r FROM wiki WHERE added = 17;

-- name: str_nested_functions
SELECT UPPER(SUBSTRING(TRIM(BOTH '#' FROM channel), 1, 2)) AS lang, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY c DESC, lang LIMIT 10;
-- duckdb:
SELECT upper(substring(trim(channel, '#'), 1, 2)) AS lang, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY c DESC, lang LIMIT 10;

-- name: str_compare_strings
SELECT s FROM nulls WHERE s >= 'b' AND s < 'x';

-- name: str_order_by_unicode
SELECT s FROM nulls WHERE s IS NOT NULL ORDER BY s;

-- name: str_filter_on_function
SELECT COUNT(*) FROM wiki WHERE LOWER(page) LIKE '%park%' AND CHAR_LENGTH(page) > 20;
-- duckdb:
SELECT COUNT(*) FROM wiki WHERE lower(page) LIKE '%park%' AND length(page) > 20;
