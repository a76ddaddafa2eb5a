"""Rule: an aggregation with DISTINCT calls over several different arguments becomes one
aggregation per argument, joined on the grouping keys.

Each branch then has a single distinct argument, which ``exact_count_distinct`` knows how to
compute exactly. Every branch groups the same input by the same keys, so an inner join on the
keys pairs them one to one; keys are compared NULL-safely (an is-null flag plus the value with
NULL replaced), since a NULL key is a group like any other. The join runs on the broker, so the
usual maxJoinRows bound applies to the number of groups.
"""

from __future__ import annotations

from common.sql.logical_plan import AggCall, Aggregate, Join, Project, RelNode
from common.sql.scalar import Call, Literal, Ref
from common.sql.sql_types import BIGINT, BOOLEAN, SqlType

_DEFAULTS = {"VARCHAR": "", "BIGINT": 0, "DOUBLE": 0.0, "FLOAT": 0.0, "TIMESTAMP": 0, "BOOLEAN": False}


def _distinct_key(call: AggCall):
    if not call.distinct:
        return None
    return call.args[0] if call.filter is None else Call("CASE", (call.filter, call.args[0]), call.args[0].type)


def _key_columns(group_types: list[SqlType]) -> list:
    if not group_types:
        return [Literal(1, BIGINT)]
    out = []
    for i, t in enumerate(group_types):
        ref = Ref(i, t)
        default = _DEFAULTS.get(t.name)
        out.append(Call("IS_NULL", (ref,), BOOLEAN))
        out.append(ref if default is None else Call("COALESCE", (ref, Literal(default, t)), t))
    return out


def split_distinct_aggregates(node: RelNode) -> RelNode:
    if not isinstance(node, Aggregate):
        return node
    keys = []
    for c in node.calls:
        key = _distinct_key(c)
        if key is not None and key not in keys:
            keys.append(key)
    if len(keys) < 2:
        return node
    k = len(node.group)
    group_types = [g.type for g in node.group]
    buckets: list[list[int]] = []  # call positions per branch: the non-distinct calls, then one per key
    plain = [i for i, c in enumerate(node.calls) if not c.distinct]
    if plain:
        buckets.append(plain)
    for key in keys:
        buckets.append([i for i, c in enumerate(node.calls) if _distinct_key(c) == key])
    branches = []
    for bucket in buckets:
        calls = tuple(node.calls[i] for i in bucket)
        agg = Aggregate(node.input, node.group, calls, node.names[:k] + tuple(node.names[k + i] for i in bucket))
        fields = agg.fields
        key_cols = _key_columns(group_types)
        exprs = tuple(Ref(j, f.type) for j, f in enumerate(fields)) + tuple(key_cols)
        names = tuple(f.name for f in fields) + tuple(f"$key{j}" for j in range(len(key_cols)))
        branches.append(Project(agg, exprs, names))
    n_keys = len(_key_columns(group_types))
    first_keys = tuple(k + len(buckets[0]) + j for j in range(n_keys))
    joined: RelNode = branches[0]
    offsets = [0]
    for bucket, branch in zip(buckets[1:], branches[1:]):
        offsets.append(len(joined.fields))
        right_keys = tuple(k + len(bucket) + j for j in range(n_keys))
        joined = Join(joined, branch, "INNER", None, first_keys, right_keys,
                      "join of COUNT(DISTINCT ...) partial results")
    where = {}
    for b, bucket in enumerate(buckets):
        for pos, i in enumerate(bucket):
            where[i] = offsets[b] + k + pos
    fields = joined.fields
    exprs = [Ref(i, g.type) for i, g in enumerate(node.group)]
    exprs += [Ref(where[i], fields[where[i]].type) for i in range(len(node.calls))]
    return Project(joined, tuple(exprs), node.names)
