"""Rule: turn a join condition into key pairs for the broker's hash join.

Equalities between an expression of the left input and one of the right become keys (expressions
that are not plain columns are first computed by a Project on their side). Conjuncts touching one
side only are pushed into that side where that keeps the join's meaning: both sides of an INNER
join, the right side of a LEFT join. What remains stays a Filter above an INNER join; a LEFT join
left with such a condition is refused by the native planner, never answered wrongly.
"""

from __future__ import annotations

from common.sql.logical_plan import Filter, Join, Project, RelNode
from common.sql.scalar import Call, Ref, Scalar, and_all, conjuncts, refs, shift


def _extend(side: RelNode, exprs: list[Scalar]) -> tuple[RelNode, list[int]]:
    """``side`` with extra computed columns for ``exprs`` (plain references need none)."""
    fields = side.fields
    extra = [e for e in exprs if not isinstance(e, Ref)]
    if not extra:
        return side, [e.index for e in exprs]
    base = [Ref(i, f.type) for i, f in enumerate(fields)]
    unique = []
    for e in extra:
        if e not in unique:
            unique.append(e)
    project = Project(side, tuple(base + unique),
                      tuple(f.name for f in fields) + tuple(f"$key{i}" for i in range(len(unique))))
    return project, [e.index if isinstance(e, Ref) else len(fields) + unique.index(e) for e in exprs]


def equi_join(node: RelNode) -> RelNode:
    if not isinstance(node, Join) or node.condition is None:
        return node
    n = len(node.left.fields)
    m = len(node.right.fields)
    left_keys, right_keys, left_only, right_only, rest = [], [], [], [], []
    for c in conjuncts(node.condition):
        used = refs(c)
        if isinstance(c, Call) and c.op == "=":
            a, b = c.args
            ra, rb = refs(a), refs(b)
            if ra and rb and max(ra) < n <= min(rb):
                left_keys.append(a)
                right_keys.append(shift(b, -n))
                continue
            if ra and rb and max(rb) < n <= min(ra):
                left_keys.append(b)
                right_keys.append(shift(a, -n))
                continue
        if used and max(used) < n and node.kind == "INNER":
            left_only.append(c)
        elif used and min(used) >= n:
            right_only.append(shift(c, -n))
        else:
            rest.append(c)
    if not left_keys and not left_only and not right_only:
        if node.kind == "INNER" and rest:
            return Filter(Join(node.left, node.right, node.kind, None, node.left_keys, node.right_keys,
                               node.description), and_all(rest))
        return node
    left = node.left if not left_only else Filter(node.left, and_all(left_only))
    right = node.right if not right_only else Filter(node.right, and_all(right_only))
    left, lk = _extend(left, left_keys)
    right, rk = _extend(right, right_keys)
    nl = len(left.fields)
    residual = None if not rest else _reindex(and_all(rest), n, nl)
    out: RelNode = Join(left, right, node.kind, residual if node.kind == "LEFT" else None,
                        node.left_keys + tuple(lk), node.right_keys + tuple(rk), node.description)
    if node.kind == "INNER" and residual is not None:
        out = Filter(out, residual)
    if nl != n or len(right.fields) != m:
        # Drop the computed key columns, so the join's output is what it was.
        fields = node.fields
        exprs = [Ref(i, f.type) for i, f in enumerate(fields[:n])] + \
                [Ref(nl + j, f.type) for j, f in enumerate(fields[n:])]
        out = Project(out, tuple(exprs), tuple(f.name for f in fields))
    return out


def _reindex(expr: Scalar, n: int, new_n: int) -> Scalar:
    """References to right fields move when the left side gained computed columns."""
    if n == new_n:
        return expr
    from common.sql.scalar import transform

    return transform(expr, lambda e: Ref(e.index + new_n - n, e.type) if isinstance(e, Ref) and e.index >= n else e)
