"""The native query engine: the query model (scan, timeseries, topN, groupBy), filters, virtual
columns, aggregators with mergeable intermediates, row selection from bitmap indexes, and the
run -> merge -> finalize pipeline over segments or Arrow tables."""

from common.query.engine import Result, execute_on_table, finalize, merge, run, union_schema, validate
from common.query.model import GroupByQuery, Query, ScanQuery, TimeseriesQuery, TopNQuery, query_from_json
from common.query.partial import Partial, RunStats
from common.query.query_runner import execute

__all__ = ["GroupByQuery", "Partial", "Query", "Result", "RunStats", "ScanQuery", "TimeseriesQuery", "TopNQuery",
           "execute", "execute_on_table", "finalize", "merge", "query_from_json", "run", "union_schema", "validate"]
