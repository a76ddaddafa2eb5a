"""Rule: an UNNEST whose input is a datasource's rows (through filters and projections) becomes an
UnnestScan at the bottom, the filters and projections above it, so the whole block is one native
query over an ``unnest`` data source that runs on the historicals instead of an explosion on the
broker of everything the table scan returned.

    Unnest(Project(exprs, Filter(c, TableScan)), e)
      -> Project(exprs + (element,), Filter(c, UnnestScan(TableScan, e over the table's columns)))

Filtering or projecting a row before repeating it per element gives the rows that repeating it
first and then filtering or projecting each copy gives; the element comes last in both, so the
conditions' field positions hold.
"""

from __future__ import annotations

from common.sql.logical_plan import Filter, Project, RelNode, TableScan, Unnest, UnnestScan
from common.sql.scalar import Ref, substitute


def _over_table(node: RelNode) -> bool:
    while isinstance(node, (Project, Filter)):
        node = node.input
    return isinstance(node, UnnestScan) or (isinstance(node, TableScan) and node.table.kind == "datasource")


def _lifted(node: RelNode, expr, name: str) -> RelNode:
    if isinstance(node, Filter):
        return Filter(_lifted(node.input, expr, name), node.condition)
    if isinstance(node, Project):
        inner = _lifted(node.input, substitute(expr, node.exprs), name)
        element = Ref(len(node.input.fields), inner.fields[-1].type)
        return Project(inner, node.exprs + (element,), node.names + (name,))
    return UnnestScan(node, expr, name)


def unnest_table(node: RelNode) -> RelNode:
    if not isinstance(node, Unnest) or not _over_table(node.input):
        return node
    return _lifted(node.input, node.expr, node.name)
