"""Druid SQL over strata: statements parsed with sqlglot's Druid dialect, translated into a logical
plan, rewritten by small rules, and planned onto native queries (scan, timeseries, topN, groupBy)
pushed to the cluster, with whatever cannot be pushed (subqueries, joins, unions, system tables,
some orderings) run on the broker over Arrow.

Pipeline, one module per step: ``statement_kind`` (what a request is, for every front end;
``set_statement`` reads its SET prefixes) -> ``statement`` (EXPLAIN, parameters, syntax errors) ->
``translator`` + ``scalar_translator`` (names, types; ``functions`` is the function catalog) ->
``logical_plan`` + ``rules`` -> ``native_planner`` (``druid_expression``, ``native_filter``,
``time_intervals``) -> ``stages`` + ``broker_ops`` -> ``sql_plan`` (the API below). ``catalog``
defines what the broker provides and builds INFORMATION_SCHEMA.
"""

from common.sql.catalog import SqlCatalog
from common.sql.sql_plan import SqlPlan, execute_sql, plan_sql

__all__ = ["SqlCatalog", "SqlPlan", "execute_sql", "plan_sql"]
