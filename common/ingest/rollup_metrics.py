"""Which output columns of a rollup ingestion are metrics, and which Druid aggregator made each.

A rollup (INSERT/REPLACE ... GROUP BY) stores grouping columns (Druid's dimensions) and aggregated
columns (Druid's metrics). Segments record the metrics in their manifest so the broker can tell
them apart in ``/druid/v2/datasources/{ds}``, ``sys.segments`` and segmentMetadata.

``rollup_metrics`` reads the SELECT and gives each aggregated output column its aggregator
*kind* (sum, min, max, count, first, last, any), or None when the kind is not one Druid names (an
expression over aggregates, an approximate distinct count stored finalized). The kind becomes a
Druid aggregator type (longSum, doubleMax, stringFirst ...) once the column's stored type is known,
on the builder: ``aggregator_type``.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

# Aggregates written as plain function calls (sqlglot knows them only as Anonymous).
_ANONYMOUS_KINDS = {"EARLIEST": "first", "EARLIEST_BY": "first", "LATEST": "last", "LATEST_BY": "last",
                    "ANY_VALUE": "any"}
# Aggregates strata stores finalized (a number, not a sketch), so no Druid aggregator can merge them.
_ANONYMOUS_UNTYPED = {"APPROX_COUNT_DISTINCT", "APPROX_COUNT_DISTINCT_BUILTIN", "APPROX_COUNT_DISTINCT_DS_HLL",
                      "APPROX_COUNT_DISTINCT_DS_THETA", "DS_HLL", "DS_THETA", "APPROX_QUANTILE_DS"}
_KNOWN = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.AnyValue: "any"}


def _kind_of(node: exp.Expression) -> tuple[bool, str | None]:
    """(is it an aggregate, its kind)."""
    while isinstance(node, (exp.Cast, exp.TryCast, exp.Paren)):  # CAST(SUM(x) AS DOUBLE) keeps SUM's kind
        node = node.this
    for cls, kind in _KNOWN.items():
        if type(node) is cls:
            if isinstance(node.this, exp.Distinct):  # COUNT(DISTINCT x) is stored finalized
                return True, None
            return True, kind
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
        if name in _ANONYMOUS_KINDS:
            return True, _ANONYMOUS_KINDS[name]
        if name in _ANONYMOUS_UNTYPED:
            return True, None
    if isinstance(node, exp.AggFunc):
        return True, None
    contains = any(isinstance(n, exp.AggFunc) or (isinstance(n, exp.Anonymous) and (
        n.name.upper() in _ANONYMOUS_KINDS or n.name.upper() in _ANONYMOUS_UNTYPED)) for n in node.walk())
    return contains, None


def rollup_metrics(select: exp.Expression) -> dict[str, str | None]:
    """Output column -> aggregator kind (None: aggregated, kind unknown) of a rollup SELECT; empty
    for a SELECT without GROUP BY (no rollup: every column is a dimension)."""
    if not isinstance(select, exp.Select) or select.args.get("group") is None:
        return {}
    out: dict[str, str | None] = {}
    for e in select.expressions:
        inner = e.unalias() if isinstance(e, exp.Alias) else e
        is_aggregate, kind = _kind_of(inner)
        if is_aggregate and e.alias_or_name:
            out[e.alias_or_name] = kind
    return out


def aggregator_type(kind: str | None, column_type: pa.DataType) -> str | None:
    """Druid's aggregator type for a metric of ``kind`` stored as ``column_type``: ``count``, or
    a type prefix (long, double, float, string) before Sum/Min/Max/First/Last/Any. None when
    Druid has no such aggregator (a string sum, an unknown kind)."""
    if kind is None:
        return None
    if kind == "count":
        return "count"
    if pa.types.is_dictionary(column_type):
        column_type = column_type.value_type
    if pa.types.is_integer(column_type) or pa.types.is_boolean(column_type):
        prefix = "long"
    elif pa.types.is_float32(column_type):
        prefix = "float"
    elif pa.types.is_floating(column_type) or pa.types.is_decimal(column_type):
        prefix = "double"
    elif pa.types.is_string(column_type) or pa.types.is_large_string(column_type):
        prefix = "string"
    else:
        return None
    if prefix == "string" and kind in ("sum", "min", "max"):
        return None
    return prefix + kind.capitalize()


__all__ = ["aggregator_type", "rollup_metrics"]
