"""Rule: a Filter over a Filter is one Filter (AND of both); a Filter that is always TRUE goes."""

from __future__ import annotations

from common.sql.logical_plan import Filter, RelNode
from common.sql.scalar import Literal, and_all, conjuncts


def merge_filters(node: RelNode) -> RelNode:
    if not isinstance(node, Filter):
        return node
    if isinstance(node.condition, Literal) and node.condition.value is True:
        return node.input
    if isinstance(node.input, Filter):
        inner = node.input
        return Filter(inner.input, and_all(conjuncts(inner.condition) + conjuncts(node.condition)))
    return node
