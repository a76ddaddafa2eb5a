-- System tables, checked against what the harness published (expected rows, not DuckDB):
-- wiki 4 days x 2 partitions of 2,500 rows, nulls 3 day segments of 6 rows, wikisample 3 hour
-- segments (10, 4, 6 rows), null_example 1 segment of 4 rows, countries 1 of 10, time_edges 4
-- year segments (1969, 2000, 2015, 2016) of 14 rows: 20 segments, and two historicals serve each.

-- name: sys_segments_per_datasource
SELECT datasource, COUNT(*) AS segments, SUM(num_rows) AS rows_, MIN(replication) AS min_r, MAX(replication) AS max_r, MIN(is_available) AS avail, MIN(is_published) AS pub FROM sys.segments GROUP BY datasource;
-- expected: [["countries", 1, 10, 2, 2, 1, 1], ["null_example", 1, 4, 2, 2, 1, 1], ["nulls", 3, 18, 2, 2, 1, 1],
--            ["time_edges", 4, 14, 2, 2, 1, 1], ["wiki", 8, 20000, 2, 2, 1, 1], ["wikisample", 3, 20, 2, 2, 1, 1]]

-- name: sys_segments_wiki_intervals
SELECT "start", "end", COUNT(*) AS parts, SUM(num_rows) AS rows_ FROM sys.segments WHERE datasource = 'wiki' GROUP BY 1, 2 ORDER BY 1;
-- expected: [["2015-09-12T00:00:00.000Z", "2015-09-13T00:00:00.000Z", 2, 5000],
--            ["2015-09-13T00:00:00.000Z", "2015-09-14T00:00:00.000Z", 2, 5000],
--            ["2015-09-14T00:00:00.000Z", "2015-09-15T00:00:00.000Z", 2, 5000],
--            ["2015-09-15T00:00:00.000Z", "2015-09-16T00:00:00.000Z", 2, 5000]]

-- name: sys_segments_partition_numbers
SELECT partition_num, COUNT(*) FROM sys.segments WHERE datasource = 'wiki' GROUP BY 1 ORDER BY 1;
-- expected: [[0, 4], [1, 4]]

-- name: sys_segments_hour_segments
SELECT "start", num_rows FROM sys.segments WHERE datasource = 'wikisample' ORDER BY "start";
-- expected: [["2016-06-27T00:00:00.000Z", 10], ["2016-06-27T01:00:00.000Z", 4], ["2016-06-27T02:00:00.000Z", 6]]

-- name: sys_segments_all_replicated_and_sized
SELECT COUNT(*) AS total, COUNT(*) FILTER (WHERE replication <> 2) AS under, COUNT(*) FILTER (WHERE size <= 0) AS empty, COUNT(DISTINCT segment_id) AS ids FROM sys.segments;
-- expected: [[20, 0, 0, 20]]

-- name: sys_segments_one_version_per_datasource
SELECT datasource, COUNT(DISTINCT version) FROM sys.segments GROUP BY 1;
-- expected: [["countries", 1], ["null_example", 1], ["nulls", 1], ["time_edges", 1], ["wiki", 1], ["wikisample", 1]]

-- name: sys_segment_rows_match_the_data
SELECT s.rows_, w.c FROM (SELECT datasource, SUM(num_rows) AS rows_ FROM sys.segments GROUP BY 1) s JOIN (SELECT 'wiki' AS ds, COUNT(*) AS c FROM wiki) w ON s.datasource = w.ds;
-- expected: [[20000, 20000]]

-- name: sys_servers_by_type
SELECT server_type, COUNT(*) FROM sys.servers GROUP BY 1;
-- expected: [["broker", 1], ["coordinator", 1], ["historical", 2]]

-- name: sys_server_segments_per_server
SELECT COUNT(*) AS servers, MIN(c), MAX(c) FROM (SELECT server, COUNT(*) AS c FROM sys.server_segments GROUP BY server);
-- expected: [[2, 20, 20]]

-- name: sys_server_segments_join_servers
SELECT v.server_type, COUNT(*) AS c, COUNT(DISTINCT ss.segment_id) AS segs FROM sys.server_segments ss JOIN sys.servers v ON ss.server = v.server GROUP BY 1;
-- expected: [["historical", 40, 20]]

-- name: sys_server_segments_join_segments
SELECT s.datasource, COUNT(*) AS replicas FROM sys.server_segments ss JOIN sys.segments s ON ss.segment_id = s.segment_id GROUP BY 1;
-- expected: [["countries", 2], ["null_example", 2], ["nulls", 6], ["time_edges", 8], ["wiki", 16],
--            ["wikisample", 6]]

-- name: sys_tasks_empty
SELECT COUNT(*) FROM sys.tasks;
-- expected: [[0]]

-- name: info_schema_schemata
SELECT CATALOG_NAME, COUNT(*) AS n FROM INFORMATION_SCHEMA.SCHEMATA WHERE SCHEMA_NAME IN ('druid', 'sys', 'INFORMATION_SCHEMA') GROUP BY 1;
-- expected: [["druid", 3]]

-- name: info_schema_tables
SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM INFORMATION_SCHEMA.TABLES;
-- expected: [["druid", "countries", "TABLE"], ["druid", "null_example", "TABLE"], ["druid", "nulls", "TABLE"],
--            ["druid", "time_edges", "TABLE"], ["druid", "wiki", "TABLE"], ["druid", "wikisample", "TABLE"],
--            ["INFORMATION_SCHEMA", "COLUMNS", "SYSTEM_TABLE"], ["INFORMATION_SCHEMA", "ROUTINES", "SYSTEM_TABLE"],
--            ["INFORMATION_SCHEMA", "SCHEMATA", "SYSTEM_TABLE"],
--            ["INFORMATION_SCHEMA", "TABLES", "SYSTEM_TABLE"], ["sys", "projection_advice", "SYSTEM_TABLE"],
--            ["sys", "projections", "SYSTEM_TABLE"], ["sys", "queries", "SYSTEM_TABLE"], ["sys", "rules", "SYSTEM_TABLE"],
--            ["sys", "schema_decisions", "SYSTEM_TABLE"], ["sys", "segments", "SYSTEM_TABLE"], ["sys", "server_properties", "SYSTEM_TABLE"],
--            ["sys", "server_segments", "SYSTEM_TABLE"], ["sys", "servers", "SYSTEM_TABLE"],
--            ["sys", "supervisors", "SYSTEM_TABLE"], ["sys", "tasks", "SYSTEM_TABLE"]]

-- name: info_schema_columns_wiki
SELECT COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, IS_NULLABLE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid' AND TABLE_NAME = 'wiki' ORDER BY ORDINAL_POSITION;
-- expected: [["__time", 1, "TIMESTAMP", "NO"], ["channel", 2, "VARCHAR", "YES"], ["page", 3, "VARCHAR", "YES"],
--            ["user", 4, "VARCHAR", "YES"], ["isRobot", 5, "VARCHAR", "YES"], ["isAnonymous", 6, "VARCHAR", "YES"],
--            ["isMinor", 7, "VARCHAR", "YES"], ["isNew", 8, "VARCHAR", "YES"], ["isUnpatrolled", 9, "VARCHAR", "YES"],
--            ["namespace", 10, "VARCHAR", "YES"], ["comment", 11, "VARCHAR", "YES"], ["cityName", 12, "VARCHAR", "YES"],
--            ["countryName", 13, "VARCHAR", "YES"], ["countryIsoCode", 14, "VARCHAR", "YES"],
--            ["regionName", 15, "VARCHAR", "YES"], ["metroCode", 16, "BIGINT", "YES"], ["added", 17, "BIGINT", "YES"],
--            ["deleted", 18, "BIGINT", "YES"], ["delta", 19, "BIGINT", "YES"]]

-- name: info_schema_columns_nulls
SELECT COLUMN_NAME, DATA_TYPE, JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'nulls' ORDER BY ORDINAL_POSITION;
-- expected: [["__time", "TIMESTAMP", 93], ["s", "VARCHAR", 12], ["n", "BIGINT", -5], ["d", "DOUBLE", 8],
--            ["g", "VARCHAR", 12], ["e", "VARCHAR", 12], ["m", "BIGINT", -5]]

-- name: info_schema_columns_wikisample_types
SELECT DATA_TYPE, COUNT(*) FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'wikisample' GROUP BY 1;
-- expected: [["BIGINT", 5], ["DOUBLE", 1], ["TIMESTAMP", 1], ["VARCHAR", 17]]

-- name: info_schema_columns_per_table
SELECT TABLE_SCHEMA, TABLE_NAME, COUNT(*) FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid' GROUP BY 1, 2;
-- expected: [["druid", "countries", 5], ["druid", "null_example", 4], ["druid", "nulls", 7],
--            ["druid", "time_edges", 3], ["druid", "wiki", 19], ["druid", "wikisample", 24]]

-- name: info_schema_columns_filter_like
SELECT TABLE_NAME, COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE COLUMN_NAME LIKE 'country%' AND TABLE_SCHEMA = 'druid';
-- expected: [["wiki", "countryName"], ["wiki", "countryIsoCode"], ["wikisample", "countryName"],
--            ["wikisample", "countryIsoCode"]]
