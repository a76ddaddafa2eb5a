"""Rule: a Project that passes its input through unchanged (same columns, same names) goes."""

from __future__ import annotations

from common.sql.logical_plan import Project, RelNode


def remove_identity_project(node: RelNode) -> RelNode:
    if isinstance(node, Project) and node.is_identity():
        return node.input
    return node
