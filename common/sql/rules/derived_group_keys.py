"""Rule: a GROUP BY key that is a function of other keys is computed once per group, above the
aggregate, instead of over every row and grouped on.

``GROUP BY x, x - 1, x - 2`` has exactly the groups of ``GROUP BY x``: each group's ``x - 1`` is
its ``x`` minus one. So the aggregate groups by ``x`` alone and a Project above it computes the
other keys from each group's ``x`` (native post-aggregators). The same holds for a constant key
(``GROUP BY 1, URL``) and a repeated one (``GROUP BY x, x``), as long as one key remains: a
GROUP BY of constants alone still gives no row over no input, where no GROUP BY gives one. A key
is computed per group only from columns earlier keys group on (``GROUP BY x, -x``, not ``GROUP
BY -x, x``), so the groups' order by their keys, Druid's order without ORDER BY, stays the same.

Only keys whose columns group by exact equality: BIGINT, VARCHAR, TIMESTAMP and BOOLEAN, one
value per group. A DOUBLE key groups -0.0 with 0.0 (and every NaN together), where a function of
it can tell them apart (``1 / x``, ``CAST(x AS VARCHAR)``), so a key over a DOUBLE stays a key.
Expressions are deterministic (the clock is a constant by the time rules run), so evaluating one
per group gives each row's value.
"""

from __future__ import annotations

from common.sql.logical_plan import Aggregate, Project, RelNode
from common.sql.scalar import Ref, Scalar, refs, transform

_EXACT = frozenset({"BIGINT", "VARCHAR", "TIMESTAMP", "BOOLEAN"})


def _derived(key: Scalar, bases: dict[int, int]) -> bool:
    """Whether ``key`` is computed from the columns ``bases`` holds (column -> kept key position)."""
    return not isinstance(key, Ref) and refs(key) <= bases.keys()


def derived_group_keys(node: RelNode) -> RelNode:
    if not isinstance(node, Aggregate) or len(node.group) < 2:
        return node
    group = node.group
    # Columns grouped on as themselves, by exact equality (the first key naming each), and the
    # keys computed from such columns named by earlier keys only: dropping those leaves the
    # order of groups by their keys (Druid's order without ORDER BY) as it was.
    bases: dict[int, int] = {}
    kept = []
    for i, g in enumerate(group):
        if _derived(g, bases) or (isinstance(g, Ref) and g.index in bases):
            continue
        kept.append(i)
        if isinstance(g, Ref) and g.type.name in _EXACT:
            bases[g.index] = i
    if len(kept) == len(group):
        return node
    if not kept:
        kept = [0]  # constants only: one stays a key, so no input still gives no group
    position = {i: at for at, i in enumerate(kept)}
    # A kept base key's column, as a reference to that key's output above the aggregate.
    column_out = {col: Ref(position[i], group[i].type) for col, i in bases.items() if i in position}
    inner_names = tuple(node.names[i] for i in kept) + node.names[len(group):]
    inner = Aggregate(node.input, tuple(group[i] for i in kept), node.calls, inner_names)
    exprs: list[Scalar] = []
    for i, g in enumerate(group):
        if i in position:
            exprs.append(Ref(position[i], g.type))
        else:
            exprs.append(transform(g, lambda e: column_out[e.index] if isinstance(e, Ref) else e))
    k = len(kept)
    exprs += [Ref(k + j, c.type) for j, c in enumerate(node.calls)]
    return Project(inner, tuple(exprs), node.names)
