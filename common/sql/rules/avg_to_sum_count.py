"""Rule: AVG(x) is SUM(x) / COUNT(x), computed in DOUBLE above the aggregate.

Native aggregators have no average (it does not merge); a sum and a count do, and the division
runs once on the merged result. Division by a zero count yields NULL, as AVG of no rows must.
Existing identical SUM/COUNT calls are reused.
"""

from __future__ import annotations

from common.sql.logical_plan import AggCall, Aggregate, Project, RelNode
from common.sql.scalar import Call, Ref
from common.sql.sql_types import BIGINT, DOUBLE


def avg_to_sum_count(node: RelNode) -> RelNode:
    if not isinstance(node, Aggregate) or not any(c.func == "AVG" for c in node.calls):
        return node
    k = len(node.group)
    calls: list[AggCall] = [c for c in node.calls if c.func != "AVG"]

    def index_of(call: AggCall) -> int:
        if call not in calls:
            calls.append(call)
        return calls.index(call)

    outputs = []
    for c in node.calls:
        if c.func != "AVG":
            outputs.append(("ref", calls.index(c), c.type))
            continue
        arg_type = c.args[0].type
        s = index_of(AggCall("SUM", c.args, DOUBLE if not arg_type.is_exact else arg_type, c.distinct, c.filter))
        n = index_of(AggCall("COUNT", c.args, BIGINT, c.distinct, c.filter))
        outputs.append(("avg", s, n))
    names = node.names[:k] + tuple(f"$avg{i}" for i in range(len(calls)))
    inner = Aggregate(node.input, node.group, tuple(calls), names)
    fields = inner.fields
    exprs = [Ref(i, fields[i].type) for i in range(k)]
    for kind, a, b in outputs:
        if kind == "ref":
            exprs.append(Ref(k + a, fields[k + a].type))
        else:
            total = Ref(k + a, fields[k + a].type)
            num = total if total.type == DOUBLE else Call("CAST", (total,), DOUBLE)
            exprs.append(Call("/", (num, Ref(k + b, BIGINT)), DOUBLE))
    return Project(inner, tuple(exprs), node.names)
