"""Rule: a Filter above a join moves into it where that keeps its meaning.

For an INNER join, conditions on one side filter that side before the join, and conditions
relating both sides join the join condition (so ``FROM a, b WHERE a.x = b.y`` becomes an
equi-join). For a LEFT join only conditions on the left side move: filtering the right side first
would keep left rows the WHERE clause removes.
"""

from __future__ import annotations

from common.sql.logical_plan import Filter, Join, RelNode
from common.sql.scalar import and_all, conjuncts, refs, shift


def push_filter_into_join(node: RelNode) -> RelNode:
    if not isinstance(node, Filter) or not isinstance(node.input, Join):
        return node
    join = node.input
    n = len(join.left.fields)
    left_only, right_only, both, keep = [], [], [], []
    for c in conjuncts(node.condition):
        used = refs(c)
        if used and max(used) < n:
            left_only.append(c)
        elif used and min(used) >= n and join.kind == "INNER":
            right_only.append(shift(c, -n))
        elif used and join.kind == "INNER":
            both.append(c)
        else:
            keep.append(c)
    if not left_only and not right_only and not both:
        return node
    left = join.left if not left_only else Filter(join.left, and_all(left_only))
    right = join.right if not right_only else Filter(join.right, and_all(right_only))
    condition = and_all(conjuncts(join.condition) + both)
    out: RelNode = Join(left, right, join.kind, condition, join.left_keys, join.right_keys, join.description)
    rest = and_all(keep)
    return out if rest is None else Filter(out, rest)
