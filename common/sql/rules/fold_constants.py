"""Rule: evaluate constant sub-expressions at planning time, and simplify boolean logic around
constants (``x AND FALSE`` is FALSE, ``x OR FALSE`` is x, comparisons with NULL are NULL).

Constants are evaluated by the native expression engine itself, on a one-row batch with no
columns, so a folded value is exactly what the query would have computed. This is what turns
``TIMESTAMP '2015-09-12' + INTERVAL '1' DAY`` into a literal that can become a query interval.
"""

from __future__ import annotations

import datetime as dt

from common.sql.logical_plan import RelNode
from common.sql.scalar import FALSE, TRUE, Call, Literal, Scalar, transform
from common.sql.sql_types import BOOLEAN, NULL, TIMESTAMP

# Operators whose result is NULL whenever an argument is NULL.
_NULL_STRICT = frozenset({"+", "-", "*", "/", "MOD", "NEG", "=", "<>", "<", "<=", ">", ">=", "LIKE", "LOWER",
                          "UPPER", "CHAR_LENGTH", "REVERSE", "CONCAT"})


def evaluate_constant(call: Call) -> Literal:
    from common.expr import evaluate
    from common.sql.druid_expression import to_druid

    value = evaluate(to_druid(call, ()), {}, 1)[0].as_py()
    t = call.type
    if value is None:
        return Literal(None, t)
    if t == TIMESTAMP:
        if isinstance(value, dt.datetime):
            value = (value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)
        return Literal(int(value), t)
    if t == BOOLEAN:
        return Literal(bool(value), t)
    if t.name == "BIGINT":
        return Literal(int(value), t)
    if t.name in ("DOUBLE", "FLOAT"):
        return Literal(float(value), t)
    if t.name == "VARCHAR":
        return Literal(str(value), t)
    return Literal(value, t)


def _is(e: Scalar, value: bool) -> bool:
    return isinstance(e, Literal) and isinstance(e.value, bool) and e.value == value


def _boolean(e: Scalar) -> Scalar:
    # What remains of AND/OR is still a BOOLEAN, even when it is a bare NULL literal.
    return Literal(None, BOOLEAN) if isinstance(e, Literal) and e.value is None else e


def _fold(e: Scalar) -> Scalar:
    if not isinstance(e, Call):
        return e
    if e.op == "AND":
        if any(_is(a, False) for a in e.args):
            return FALSE
        args = tuple(a for a in e.args if not _is(a, True))
        if not args:
            return TRUE
        return _boolean(args[0]) if len(args) == 1 else Call("AND", args, BOOLEAN) if args != e.args else e
    if e.op == "OR":
        if any(_is(a, True) for a in e.args):
            return TRUE
        args = tuple(a for a in e.args if not _is(a, False))
        if not args:
            return FALSE
        return _boolean(args[0]) if len(args) == 1 else Call("OR", args, BOOLEAN) if args != e.args else e
    if e.op == "NOT" and isinstance(e.args[0], Literal):
        v = e.args[0].value
        return Literal(None if v is None else not v, BOOLEAN)
    if e.op == "NOT" and isinstance(e.args[0], Call) and e.args[0].op == "NOT":
        return e.args[0].args[0]
    if e.op in _NULL_STRICT and any(isinstance(a, Literal) and a.value is None for a in e.args):
        return Literal(None, e.type if e.type != NULL else BOOLEAN)
    if all(isinstance(a, Literal) for a in e.args) and not any(isinstance(a.value, tuple) for a in e.args) \
            and not _is_json(e):
        return evaluate_constant(e)
    return e


def _is_json(e: Scalar) -> bool:
    """COMPLEX<json> values stay calls: a literal would be plain text to the functions around it,
    so TO_JSON_STRING(PARSE_JSON('{"x":"y"}')) would quote the text instead of the object."""
    column_type = e.type.column_type
    return column_type is not None and column_type.complex_name == "json"


def fold_scalar(e: Scalar) -> Scalar:
    return transform(e, _fold)


def fold_constants(node: RelNode) -> RelNode:
    return node.map_scalars(fold_scalar)
