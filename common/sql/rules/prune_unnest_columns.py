"""Rule: a Project or Aggregate above an UNNEST that reads only some of the unnested table's
columns makes the UNNEST repeat just those (and what its array reads), so the scan below reads
no more."""

from __future__ import annotations

from common.sql.logical_plan import Aggregate, Project, RelNode, Unnest
from common.sql.scalar import Ref, refs, remap


def _used(node: RelNode) -> set[int]:
    used: set[int] = set()

    def note(e):
        used.update(refs(e))
        return e

    node.map_scalars(note)
    return used


def prune_unnest_columns(node: RelNode) -> RelNode:
    if not isinstance(node, (Project, Aggregate)) or not isinstance(node.input, Unnest):
        return node
    unnest = node.input
    fields = unnest.input.fields
    n = len(fields)
    keep = sorted({i for i in _used(node) if i < n} | refs(unnest.expr)) or [0]  # a relation keeps a column
    if len(keep) >= n:
        return node
    mapping = {old: new for new, old in enumerate(keep)}
    pruned = Project(unnest.input, tuple(Ref(i, fields[i].type) for i in keep), tuple(fields[i].name for i in keep))
    inner = Unnest(pruned, remap(unnest.expr, mapping), unnest.name)
    mapping[n] = len(keep)  # the element
    return node.with_inputs((inner,)).map_scalars(lambda e: remap(e, mapping))
