"""SQL conditions to native filters.

Shapes the segment indexes answer (a column against constants: equals, in, range, like, regex,
null, and and/or/not of those) become the matching native filters; anything else becomes an
expression filter over the same columns. Three-valued logic is the engine's: a NOT over a filter
excludes rows where the inner condition is unknown, as SQL requires, so no special casing of
nulls is needed here except for NULL inside IN lists (where the list itself makes the result
unknown, which only an expression states exactly).
"""

from __future__ import annotations

from collections.abc import Sequence

from common.query.filters import (And, ArrayContainsElement, Equals, ExpressionFilter, FalseFilter, Filter, In, Like,
                                  Not, NullFilter, Or, Range, Regex, TrueFilter)
from common.sql.druid_expression import druid_text
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.scalar import Call, Literal, Ref, Scalar
from common.sql.sql_types import BIGINT, DOUBLE, FLOAT, TIMESTAMP, VARCHAR, SqlType, is_multi_value

_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _match_type(column_type: SqlType, value) -> str | None:
    """matchValueType for comparing a column of ``column_type`` with ``value``; None when the
    pair is not something a native filter compares exactly."""
    if (column_type == VARCHAR or is_multi_value(column_type)) and isinstance(value, str):
        return "STRING"
    if isinstance(value, bool):
        return None
    if column_type in (BIGINT, TIMESTAMP) and isinstance(value, int):
        return "LONG"
    if column_type in (BIGINT, DOUBLE, FLOAT) and isinstance(value, (int, float)):
        return "DOUBLE" if isinstance(value, float) or column_type != BIGINT else "LONG"
    return None


def _is_column(e: Scalar, virtual) -> bool:
    """A column reference, or (when virtual columns can be made) a JSON path of a JSON column, whose
    nested-field virtual column has the field's own index."""
    return isinstance(e, Ref) or (virtual is not None and isinstance(e, Call) and e.op == "JSON_VALUE")


def _column_name(e: Scalar, columns: Sequence[str], virtual) -> str:
    return columns[e.index] if isinstance(e, Ref) else virtual.column_for(e)


def _column_literal(call: Call, virtual=None) -> tuple[Scalar, Literal, str] | None:
    a, b = call.args
    if _is_column(a, virtual) and isinstance(b, Literal):
        return a, b, call.op
    if _is_column(b, virtual) and isinstance(a, Literal):
        return b, a, _FLIP[call.op]
    return None


def _comparison(call: Call, columns: Sequence[str], virtual=None) -> Filter | None:
    found = _column_literal(call, virtual)
    if found is None:
        return None
    ref, lit, op = found
    if lit.value is None:
        return FalseFilter()  # comparing with NULL is never true
    value_type = _match_type(ref.type, lit.value)
    if value_type is None:
        return None
    column = _column_name(ref, columns, virtual)
    value = lit.value
    if op == "=":
        return Equals(column, value, value_type)
    if op == "<>":
        return Not(Equals(column, value, value_type))
    if op in (">", ">="):
        return Range(column, lower=value, lower_open=op == ">", value_type=value_type)
    return Range(column, upper=value, upper_open=op == "<", value_type=value_type)


def _array_membership(call: Call, columns: Sequence[str], virtual=None) -> Filter | None:
    """ARRAY_CONTAINS(col, constant) and ARRAY_OVERLAP(col, constant array) as Druid plans them:
    one arrayContainsElement per element, all of them (contains) or any (overlap)."""
    ref, value = call.args
    ref = _multi_value_ref(ref) or ref
    ctype = ref.type.column_type
    if ctype is None or not ctype.is_array or not isinstance(value, Literal) or value.value is None:
        return None
    elements = value.value if isinstance(value.value, list) else [value.value]
    if call.op == "ARRAY_OVERLAP" and not isinstance(value.value, list):
        return None
    if not elements or any(v is None or isinstance(v, (bool, list)) for v in elements):
        return None  # empty or null-holding constants keep the expression's exact rules
    kind = {"LONG": "LONG", "DOUBLE": "DOUBLE", "STRING": "STRING"}.get(ctype.element.native_name, "STRING")
    if kind == "STRING" and not all(isinstance(v, str) for v in elements):
        return None
    if kind != "STRING" and not all(isinstance(v, (int, float)) for v in elements):
        return None
    column = _column_name(ref, columns, virtual)
    parts = tuple(ArrayContainsElement(column, v, kind) for v in dict.fromkeys(elements))
    if len(parts) == 1:
        return parts[0]
    return And(parts) if call.op == "ARRAY_CONTAINS" else Or(parts)


def _multi_value_ref(e: Scalar) -> Ref | None:
    """The multi-value column under MV_TO_ARRAY (a CAST to ARRAY<VARCHAR>), whose values the
    column's index answers for directly."""
    if isinstance(e, Call) and e.op == "CAST" and len(e.args) == 1 and isinstance(e.args[0], Ref) \
            and is_multi_value(e.args[0].type):
        return e.args[0]
    return None


def to_filter(expr: Scalar, columns: Sequence[str], virtual=None, deadline: PlanningDeadline = NO_DEADLINE) -> Filter:
    """A native filter equivalent to ``expr`` over the input columns named ``columns``. With
    ``virtual`` (the planner's virtual columns), JSON paths filter through nested-field columns.
    ``deadline``: checked per node of an expression rendered as a native expression."""
    if isinstance(expr, Literal):
        return TrueFilter() if expr.value is True else FalseFilter()
    if isinstance(expr, Call):
        op = expr.op
        if op == "AND":
            return And(tuple(to_filter(a, columns, virtual, deadline) for a in expr.args))
        if op == "OR":
            return Or(tuple(to_filter(a, columns, virtual, deadline) for a in expr.args))
        if op == "NOT":
            return Not(to_filter(expr.args[0], columns, virtual, deadline))
        if op in _FLIP:
            out = _comparison(expr, columns, virtual)
            if out is not None:
                return out
        arg = expr.args[0] if expr.args else None
        # (a JSON path read as an array filters through its nested-field column, and so through
        # the field's element index where the segment keeps one)
        if op in ("ARRAY_CONTAINS", "ARRAY_OVERLAP") and arg is not None \
                and (_is_column(arg, virtual) or _multi_value_ref(arg)):
            out = _array_membership(expr, columns, virtual)
            if out is not None:
                return out
        if arg is not None and _is_column(arg, virtual):
            column = _column_name(arg, columns, virtual)
            if op == "IS_NULL":
                return NullFilter(column)
            if op == "IS_NOT_NULL":
                return Not(NullFilter(column))
            if op == "LIKE" and (arg.type == VARCHAR or is_multi_value(arg.type)) and all(isinstance(a, Literal) for a in expr.args[1:]):
                pattern = expr.args[1].value
                if pattern is None:
                    return FalseFilter()
                escape = expr.args[2].value if len(expr.args) > 2 else None
                # The native like filter reads a backslash as an escape even without ESCAPE; SQL
                # does not, so such patterns take the expression route, which is exact.
                if escape is not None or "\\" not in pattern:
                    return Like(column, pattern, escape)
            if op == "REGEXP_LIKE" and (arg.type == VARCHAR or is_multi_value(arg.type)) and isinstance(expr.args[1], Literal) \
                    and isinstance(expr.args[1].value, str):
                return Regex(column, expr.args[1].value)
            if op == "IN" and all(isinstance(a, Literal) for a in expr.args[1:]):
                values = [a.value for a in expr.args[1:]]
                known = [v for v in values if v is not None]
                if all(_match_type(arg.type, v) for v in known):
                    if len(known) == len(values):
                        return In(column, tuple(values))
                    # x IN (.., NULL) is true or unknown, never false: the list's matches OR an
                    # always-unknown condition (NOT of it is never true). A native IN's null means
                    # "or IS NULL" (Druid's legacy in-filter), so the null stays out of it.
                    unknown = ExpressionFilter("null")
                    return Or((In(column, tuple(known)), unknown)) if known else unknown
    return ExpressionFilter(druid_text(expr, columns, deadline))
