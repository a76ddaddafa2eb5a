"""Rule: move a Filter below a Project, rewriting its condition over the Project's input.

Filters then sit next to scans (where they become native filters and intervals) and next to
aggregates (where they become HAVING), whatever subqueries the SQL was written with.
"""

from __future__ import annotations

from common.sql.logical_plan import Filter, Project, RelNode
from common.sql.scalar import substitute


def filter_through_project(node: RelNode) -> RelNode:
    if not isinstance(node, Filter) or not isinstance(node.input, Project):
        return node
    project = node.input
    return Project(Filter(project.input, substitute(node.condition, project.exprs)), project.exprs, project.names)
