"""Rule: sums of an integer expression shifted or scaled by a constant are computed from one sum
and one count of the expression, and identical aggregate calls are computed once.

- ``SUM(e + c)`` is ``SUM(e) + c * COUNT(e)``, ``SUM(e - c)`` is ``SUM(e) - c * COUNT(e)``,
  ``SUM(c - e)`` is ``c * COUNT(e) - SUM(e)`` and ``SUM(c * e)`` is ``c * SUM(e)``, computed above
  the aggregate (so ``SUM(x), SUM(x + 1), ..., SUM(x + 89)`` reads ``x`` once, into two
  aggregators, instead of evaluating 89 expressions over every row).
- ``COUNT(e + c)``, ``COUNT(e - c)``, ``COUNT(c * e)`` are ``COUNT(e)``: with ``c`` a non-null
  constant the expression is null exactly when ``e`` is.
- an aggregate call made twice (the same function, arguments, DISTINCT and FILTER) is one
  aggregator whose value is used twice.

Only BIGINT (Druid's long): its arithmetic wraps modulo 2^64 row by row, as the engine's long sum
does, and wrapping addition and multiplication are exact modulo 2^64 in any order, so the
rewritten result is bit for bit what summing every row's ``e + c`` gives, overflow included.
Floating-point sums are not rewritten: ``SUM(x) + c * COUNT(x)`` rounds differently from adding
each ``x + c``. A NULL sum (no non-null ``e`` in the group) stays NULL: NULL plus anything is NULL.
"""

from __future__ import annotations

from common.sql.logical_plan import AggCall, Aggregate, Project, RelNode
from common.sql.scalar import Call, Literal, Ref, Scalar
from common.sql.sql_types import BIGINT


def _constant(e: Scalar) -> bool:
    return isinstance(e, Literal) and e.type == BIGINT and isinstance(e.value, int) and not isinstance(e.value, bool)


def _split(e: Scalar) -> tuple[str, Scalar, Literal] | None:
    """(shape, e, c) when ``e`` is ``e' + c``, ``c + e'``, ``e' - c``, ``c - e'``, ``c * e'`` or
    ``e' * c`` over BIGINT, with ``c`` a constant: shape is "+", "-" (e' - c), "c-" (c - e') or "*"."""
    if not (isinstance(e, Call) and e.op in ("+", "-", "*") and len(e.args) == 2 and e.type == BIGINT):
        return None
    a, b = e.args
    if a.type != BIGINT or b.type != BIGINT:
        return None
    if _constant(b) and not _constant(a):
        return ("-" if e.op == "-" else e.op), a, b
    if _constant(a) and not _constant(b):
        return ("c-" if e.op == "-" else e.op), b, a
    return None


def _plain(call: AggCall) -> bool:
    return not call.distinct and len(call.args) == 1


def _count_argument(e: Scalar) -> Scalar:
    """The expression whose nulls ``e``'s are: shifts and scalings by constants removed."""
    while (split := _split(e)) is not None:
        e = split[1]
    return e


def _rewritable(call: AggCall) -> bool:
    if not _plain(call):
        return False
    if call.func == "SUM":
        return call.type == BIGINT and _split(call.args[0]) is not None
    if call.func == "COUNT":
        return _count_argument(call.args[0]) is not call.args[0]
    return False


def _repeats(calls: tuple[AggCall, ...]) -> bool:
    try:
        return len(set(calls)) != len(calls)
    except TypeError:  # an unhashable constant inside (a folded array)
        return any(c in calls[:i] for i, c in enumerate(calls))


def distribute_sums(node: RelNode) -> RelNode:
    if not isinstance(node, Aggregate):
        return node
    if not any(_rewritable(c) for c in node.calls) and not _repeats(node.calls):
        return node
    k = len(node.group)
    calls: list[AggCall] = []
    index: dict[AggCall, int] = {}

    def ref(call: AggCall) -> Ref:
        try:
            at = index.get(call)
        except TypeError:  # an unhashable constant inside (a folded array)
            at = calls.index(call) if call in calls else None
        if at is None:
            at = len(calls)
            calls.append(call)
            try:
                index[call] = at
            except TypeError:
                pass
        return Ref(k + at, call.type)

    outputs: list[Scalar] = []
    for c in node.calls:
        if c.func == "COUNT" and _rewritable(c):
            outputs.append(ref(AggCall("COUNT", (_count_argument(c.args[0]),), c.type, False, c.filter)))
            continue
        split = _split(c.args[0]) if c.func == "SUM" and _rewritable(c) else None
        if split is None:
            outputs.append(ref(c))
            continue
        shape, e, constant = split
        total = ref(AggCall("SUM", (e,), BIGINT, False, c.filter))
        if shape == "*":
            outputs.append(Call("*", (constant, total), BIGINT))
            continue
        count = ref(AggCall("COUNT", (_count_argument(e),), BIGINT, False, c.filter))
        shift = Call("*", (constant, count), BIGINT)
        if shape == "+":
            outputs.append(Call("+", (total, shift), BIGINT))
        elif shape == "-":
            outputs.append(Call("-", (total, shift), BIGINT))
        else:
            outputs.append(Call("-", (shift, total), BIGINT))
    names = node.names[:k] + tuple(f"$sum{i}" for i in range(len(calls)))
    inner = Aggregate(node.input, node.group, tuple(calls), names)
    keys = tuple(Ref(i, g.type) for i, g in enumerate(node.group))
    return Project(inner, keys + tuple(outputs), node.names)
