"""Rule: the conditions of a Filter above an UNNEST that read only the unnested table's own columns
move below it, so they filter the table's rows before they are repeated per element (and, next
to the scan, become native filters the historicals apply)."""

from __future__ import annotations

from common.sql.logical_plan import Filter, RelNode, Unnest
from common.sql.scalar import and_all, conjuncts, refs


def filter_through_unnest(node: RelNode) -> RelNode:
    if not isinstance(node, Filter) or not isinstance(node.input, Unnest):
        return node
    unnest = node.input
    n = len(unnest.input.fields)  # the element is column n; the table's columns come before it
    below, keep = [], []
    for c in conjuncts(node.condition):
        used = refs(c)
        (below if used and max(used) < n else keep).append(c)
    if not below:
        return node
    out: RelNode = Unnest(Filter(unnest.input, and_all(below)), unnest.expr, unnest.name)
    rest = and_all(keep)
    return out if rest is None else Filter(out, rest)
