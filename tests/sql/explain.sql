-- name: explain_shows_the_query_plan
EXPLAIN PLAN FOR SELECT channel, COUNT(*) FROM wiki GROUP BY channel;
-- native:
-- [
--   {
--     "queryType": "groupBy",
--     "dataSource": "wiki",
--     "intervals": [
--       "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
--     ],
--     "granularity": "all",
--     "aggregations": [
--       {
--         "type": "count",
--         "name": "a0"
--       }
--     ],
--     "dimensions": [
--       {
--         "type": "default",
--         "dimension": "channel",
--         "outputName": "d0",
--         "outputType": "STRING"
--       }
--     ]
--   }
-- ]

-- name: set_statements_reach_native_context
SET useCache = false; SET timeout = 5000;
SELECT COUNT(*) FROM wiki;
-- native:
-- [
--   {
--     "queryType": "timeseries",
--     "dataSource": "wiki",
--     "intervals": [
--       "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
--     ],
--     "context": {
--       "useCache": false,
--       "timeout": 5000
--     },
--     "granularity": "all",
--     "aggregations": [
--       {
--         "type": "count",
--         "name": "a0"
--       }
--     ]
--   }
-- ]

-- name: information_schema_pushes_nothing
SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid';
-- native:
-- []

-- name: system_table_pushes_nothing
SELECT datasource, SUM(num_rows) FROM sys.segments GROUP BY 1;
-- native:
-- []
