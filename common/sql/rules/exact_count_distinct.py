"""Rule: COUNT(DISTINCT x) (and SUM(DISTINCT x)) exactly, as two aggregations.

The inner aggregation groups by the query's keys plus ``x``, computing partial results of the
other calls; the outer one groups by the keys alone, counting (or summing) the non-null ``x``
groups and merging the partials (counts are summed, sums summed, minima and maxima re-taken).
Strata never answers COUNT(DISTINCT) approximately; APPROX_COUNT_DISTINCT is the approximate one.
A FILTER on a distinct call becomes part of its argument (``CASE WHEN filter THEN x END``).
"""

from __future__ import annotations

from common.errors import UnsupportedError
from common.sql.logical_plan import AggCall, Aggregate, Project, RelNode
from common.sql.scalar import Call, Literal, Ref
from common.sql.sql_types import BIGINT

_MERGE = {"COUNT": "SUM", "SUM": "SUM", "MIN": "MIN", "MAX": "MAX", "ANY_VALUE": "ANY_VALUE"}


def _distinct_arg(call: AggCall):
    arg = call.args[0]
    if call.filter is not None:
        arg = Call("CASE", (call.filter, arg), arg.type)
    return arg


def exact_count_distinct(node: RelNode) -> RelNode:
    if not isinstance(node, Aggregate) or not any(c.distinct for c in node.calls):
        return node
    distinct_args = []
    for c in node.calls:
        if c.distinct:
            arg = _distinct_arg(c)
            if arg not in distinct_args:
                distinct_args.append(arg)
    if len(distinct_args) > 1:
        raise UnsupportedError("COUNT(DISTINCT ...) over more than one distinct expression in one query is not "
                               "supported; compute each in its own query or subquery")
    for c in node.calls:
        if not c.distinct and c.func not in _MERGE:
            raise UnsupportedError(f"{c.func} cannot be combined with COUNT(DISTINCT ...) in one query; "
                                   "compute it in a separate query or subquery")
    x = distinct_args[0]
    k = len(node.group)
    inner_calls = [AggCall(c.func, c.args, c.type, False, c.filter) for c in node.calls if not c.distinct]
    inner = Aggregate(node.input, node.group + (x,), tuple(inner_calls),
                      tuple(f"$d{i}" for i in range(k + 1 + len(inner_calls))))
    key = Ref(k, x.type)
    outer_calls: list[AggCall] = []
    outputs = []
    partial = 0
    for c in node.calls:
        if c.distinct:
            call = AggCall(c.func, (key,), c.type)
            coalesce = False
        else:
            ref = Ref(k + 1 + partial, inner_calls[partial].type)
            partial += 1
            call = AggCall(_MERGE[c.func], (ref,), c.type)
            coalesce = c.func == "COUNT"  # no partial rows at all: the count is 0, not NULL
        if call not in outer_calls:
            outer_calls.append(call)
        outputs.append((outer_calls.index(call), coalesce))
    outer = Aggregate(inner, tuple(Ref(i, g.type) for i, g in enumerate(node.group)), tuple(outer_calls),
                      tuple(f"$o{i}" for i in range(k + len(outer_calls))))
    exprs = [Ref(i, g.type) for i, g in enumerate(node.group)]
    for index, coalesce in outputs:
        ref = Ref(k + index, outer_calls[index].type)
        exprs.append(Call("COALESCE", (ref, Literal(0, BIGINT)), BIGINT) if coalesce else ref)
    return Project(outer, tuple(exprs), node.names)
