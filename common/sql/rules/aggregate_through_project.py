"""Rule: an Aggregate over a Project aggregates the Project's input directly, its group keys and
call arguments rewritten over the projected expressions (they become virtual columns)."""

from __future__ import annotations

from common.sql.logical_plan import Aggregate, Project, RelNode
from common.sql.scalar import substitute


def aggregate_through_project(node: RelNode) -> RelNode:
    if not isinstance(node, Aggregate) or not isinstance(node.input, Project):
        return node
    project = node.input
    rewritten = node.map_scalars(lambda e: substitute(e, project.exprs))
    return Aggregate(project.input, rewritten.group, rewritten.calls, node.names)
