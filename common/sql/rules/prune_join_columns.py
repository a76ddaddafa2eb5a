"""Rule: a join's inputs keep only the columns used above the join (and its keys).

Join inputs run as their own native queries and are shipped whole to the broker, so unused
columns are pure cost. The rule matches the node that consumes a join (a Project or Aggregate,
possibly over a Filter) because only there is it known which columns are needed.
"""

from __future__ import annotations

from common.sql.logical_plan import Aggregate, Filter, Join, Project, RelNode
from common.sql.scalar import Ref, Scalar, refs, remap


def _used(node: RelNode) -> set[int]:
    out: set[int] = set()

    def collect(e: Scalar) -> Scalar:
        out.update(refs(e))
        return e

    node.map_scalars(collect)
    return out


def _keep(side: RelNode, used: list[int]) -> RelNode:
    fields = side.fields
    return Project(side, tuple(Ref(i, fields[i].type) for i in used), tuple(fields[i].name for i in used))


def prune_join_columns(node: RelNode) -> RelNode:
    if not isinstance(node, (Project, Aggregate)):
        return node
    filt = node.input if isinstance(node.input, Filter) else None
    join = filt.input if filt is not None else node.input
    if not isinstance(join, Join):
        return node
    n, m = len(join.left.fields), len(join.right.fields)
    used = _used(node) | (_used(filt) if filt is not None else set()) | _used(join)
    used |= set(join.left_keys) | {n + k for k in join.right_keys}
    left_used = sorted(i for i in used if i < n)
    right_used = sorted(i - n for i in used if i >= n)
    if len(left_used) == n and len(right_used) == m:
        return node
    # A side no column of which is used still decides how many rows match; keep one column.
    left_used = left_used or [0]
    right_used = right_used or [0]
    mapping = {i: k for k, i in enumerate(left_used)}
    mapping.update({n + j: len(left_used) + k for k, j in enumerate(right_used)})
    left = join.left if len(left_used) == n else _keep(join.left, left_used)
    right = join.right if len(right_used) == m else _keep(join.right, right_used)
    lmap = {i: k for k, i in enumerate(left_used)}
    rmap = {j: k for k, j in enumerate(right_used)}
    pruned = Join(left, right, join.kind, None if join.condition is None else remap(join.condition, mapping),
                  tuple(lmap[i] for i in join.left_keys), tuple(rmap[j] for j in join.right_keys), join.description)
    below: RelNode = pruned if filt is None else Filter(pruned, remap(filt.condition, mapping))
    return node.with_inputs((below,)).map_scalars(lambda e: remap(e, mapping))
