-- More joins (three-way, two keys, extra ON condition, expressions over both sides, duplicates on
-- the right) and unions (ordered by time, mixed numeric types, several inputs).

-- name: jx_join_three_way
SELECT c.name, s.c AS chan_edits, COUNT(*) AS n FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode JOIN (SELECT channel, COUNT(*) AS c FROM wiki GROUP BY channel) s ON w.channel = s.channel GROUP BY 1, 2;

-- name: jx_join_expression_over_both_sides
SELECT w.page, w.added * c.population AS x, c.area / NULLIF(w.added, 0) AS y FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode WHERE w.added > 3000;

-- name: jx_join_two_keys
SELECT a.s, a.g, COUNT(*) AS c FROM nulls a JOIN nulls b ON a.s = b.s AND a.g = b.g GROUP BY 1, 2;

-- name: jx_join_inner_with_extra_condition
SELECT w.page, c.name FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode AND c.population > 100000000 WHERE w.added > 1000;

-- name: jx_join_count_distinct_on_output
SELECT c.name, COUNT(DISTINCT w.page) AS pages, COUNT(DISTINCT w."user") AS users FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY c.name;

-- name: jx_join_time_floor_on_output
SELECT TIME_FLOOR(w.__time, 'P1D') AS d, c.name, COUNT(*) FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY 1, 2;
-- duckdb:
SELECT date_trunc('day', w.__time) AS d, c.name, COUNT(*) FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY 1, 2;

-- name: jx_join_left_duplicates_on_right
SELECT a.s, COUNT(*) AS c FROM nulls a LEFT JOIN nulls b ON a.s = b.s GROUP BY a.s;

-- name: jx_join_union_side
SELECT w.channel, COUNT(*) FROM wiki w JOIN (SELECT '#en.wikipedia' AS ch UNION ALL SELECT '#de.wikipedia') u ON w.channel = u.ch GROUP BY 1;

-- name: jx_join_ordered_limit
SELECT w.__time, w.page, c.name FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode ORDER BY w.__time DESC LIMIT 7;

-- name: jx_join_right_side_filter_pushdown_with_or
SELECT COUNT(*) FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode WHERE c.population > 60000000 OR w.countryIsoCode IS NULL;

-- name: jx_join_select_star
SELECT * FROM countries c JOIN (SELECT countryIsoCode, COUNT(*) AS n FROM wiki GROUP BY 1) w ON c.isoCode = w.countryIsoCode;

-- name: jx_join_having_on_join_agg
SELECT c.name, SUM(w.added) AS s FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode GROUP BY c.name HAVING SUM(w.added) > 10000 ORDER BY s DESC;

-- name: jx_in_subquery_on_join
SELECT COUNT(*) FROM wiki WHERE "user" IN (SELECT w."user" FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode WHERE c.name = 'France');

-- name: jx_subquery_distinct_join
SELECT d.namespace, COUNT(*) FROM (SELECT DISTINCT namespace, channel FROM wiki) d JOIN (SELECT DISTINCT channel FROM wiki WHERE channel LIKE '#e%') e ON d.channel = e.channel GROUP BY 1;

-- name: jx_union_all_ordered_by_time
SELECT __time, s AS v FROM nulls UNION ALL SELECT __time, label FROM time_edges ORDER BY __time DESC LIMIT 6;

-- name: jx_union_all_three_with_group
SELECT k, COUNT(*) AS c FROM (SELECT 'a' AS k FROM nulls UNION ALL SELECT 'b' FROM countries UNION ALL SELECT 'a' FROM null_example) GROUP BY k;

-- name: jx_union_distinct_numbers
SELECT n FROM nulls UNION SELECT v FROM time_edges;

-- name: jx_union_all_different_numeric_types
SELECT n AS x FROM nulls UNION ALL SELECT area FROM countries;
