"""Rule: a Project over a Project is one Project, the outer expressions rewritten over the inner
ones (subqueries in FROM collapse this way)."""

from __future__ import annotations

from common.sql.logical_plan import Project, RelNode
from common.sql.scalar import substitute


def merge_projects(node: RelNode) -> RelNode:
    if not isinstance(node, Project) or not isinstance(node.input, Project):
        return node
    inner = node.input
    return Project(inner.input, tuple(substitute(e, inner.exprs) for e in node.exprs), node.names)
