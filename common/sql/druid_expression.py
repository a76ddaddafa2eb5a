"""SQL scalars to Druid native expressions (the text virtual columns, expression filters and
expression post-aggregators carry).

Trees are built from ``common.expr`` nodes and printed by them, so quoting and precedence are
the expression package's business. SQL semantics that differ from the native functions are
bridged here: 1-based string positions, STRPOS returning 0 when absent, BOOLEAN as LONG 1/0,
TIMESTAMP literals as epoch millis (as Druid writes them).
"""

from __future__ import annotations

from collections.abc import Sequence

from common.errors import UnsupportedError, ValidationError
from common.expr.node import BinaryOp, Expr, Identifier, UnaryOp
from common.expr.node import Call as ECall
from common.expr.node import Literal as ELiteral
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.scalar import Call, Literal, Ref, Scalar
from common.sql.sql_types import BIGINT, BOOLEAN, DOUBLE, FLOAT, TIMESTAMP, VARCHAR, from_column_type, is_multi_value
from common.types.column_type import DOUBLE as NATIVE_DOUBLE
from common.types.column_type import LONG as NATIVE_LONG

_BINARY = {"+": "+", "-": "-", "*": "*", "/": "/", "=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">",
           ">=": ">="}
_RENAMED = {
    "LOWER": "lower", "UPPER": "upper", "REVERSE": "reverse", "CHAR_LENGTH": "strlen", "REPLACE": "replace",
    "LEFT": "left", "RIGHT": "right", "LPAD": "lpad", "RPAD": "rpad", "REPEAT": "repeat",
    "REGEXP_LIKE": "regexp_like", "REGEXP_EXTRACT": "regexp_extract", "REGEXP_REPLACE": "regexp_replace",
    "CONTAINS_STRING": "contains_string", "ICONTAINS_STRING": "icontains_string", "CONCAT": "concat",
    "COALESCE": "coalesce", "NULLIF": "nullif", "GREATEST": "greatest", "LEAST": "least", "ABS": "abs",
    "ROUND": "round", "SQRT": "sqrt", "EXP": "exp", "LN": "log", "LOG10": "log10", "POWER": "pow", "SIN": "sin",
    "COS": "cos", "TAN": "tan", "ASIN": "asin", "ACOS": "acos", "ATAN": "atan", "ATAN2": "atan2", "CBRT": "cbrt",
    "SIGN": "signum", "MOD": "mod", "TIME_FLOOR": "timestamp_floor", "TIME_CEIL": "timestamp_ceil",
    "TIME_SHIFT": "timestamp_shift", "TIME_EXTRACT": "timestamp_extract", "TIME_PARSE": "timestamp_parse",
    "TIME_FORMAT": "timestamp_format", "MILLIS_TO_TIMESTAMP": "millis_to_timestamp",
    "TIMESTAMP_TO_MILLIS": "timestamp_to_millis", "LIKE": "like", "TRIM": "trim", "LTRIM": "ltrim", "RTRIM": "rtrim",
    "JSON_VALUE": "json_value", "JSON_QUERY": "json_query", "JSON_QUERY_ARRAY": "json_query_array",
    "JSON_KEYS": "json_keys", "JSON_PATHS": "json_paths", "JSON_OBJECT": "json_object", "JSON_MERGE": "json_merge",
    "PARSE_JSON": "parse_json", "TRY_PARSE_JSON": "try_parse_json", "TO_JSON_STRING": "to_json_string",
    "ARRAY": "array", "ARRAY_LENGTH": "array_length", "ARRAY_OFFSET": "array_offset", "ARRAY_ORDINAL": "array_ordinal",
    "ARRAY_CONTAINS": "array_contains", "ARRAY_OVERLAP": "array_overlap", "ARRAY_OFFSET_OF": "array_offset_of",
    "ARRAY_ORDINAL_OF": "array_ordinal_of", "ARRAY_APPEND": "array_append", "ARRAY_PREPEND": "array_prepend",
    "ARRAY_CONCAT": "array_concat", "ARRAY_SLICE": "array_slice", "ARRAY_TO_STRING": "array_to_string",
    "STRING_TO_ARRAY": "string_to_array", "MV_FILTER_ONLY": "mv_filter_only", "MV_FILTER_NONE": "mv_filter_none",
}


def literal(value, sql_type) -> ELiteral:
    if value is None:
        if sql_type is not None and sql_type.column_type is not None and sql_type.column_type.is_array:
            return ECall("cast", (ELiteral(None), ELiteral(sql_type.native.native_name)))  # a typed null array
        return ELiteral(None)
    if isinstance(value, list):  # a folded ARRAY[..]: the constructor again, typed by a cast
        native = sql_type.native if sql_type is not None and sql_type.column_type is not None else None
        element = from_column_type(native.element) if native is not None and native.is_array else None
        built = ECall("array", tuple(literal(x, element) for x in value))
        return ECall("cast", (built, ELiteral(native.native_name))) if element is not None else built
    if sql_type == BOOLEAN or isinstance(value, bool):
        return ELiteral(1 if value else 0)
    if sql_type in (BIGINT, TIMESTAMP):
        return ELiteral(int(value), NATIVE_LONG)
    if sql_type in (DOUBLE, FLOAT):
        return ELiteral(float(value), NATIVE_DOUBLE)
    if isinstance(value, str):
        return ELiteral(value)
    return ELiteral(value)


def _chain(op: str, parts: list[Expr]) -> Expr:
    out = parts[0]
    for p in parts[1:]:
        out = BinaryOp(op, out, p)
    return out


_MULTI_VALUE_TESTS = frozenset({"=", "<>", "<", "<=", ">", ">=", "IN", "LIKE", "REGEXP_LIKE"})


def _shown(e: Scalar, columns: Sequence[str]) -> str:
    return f"'{columns[e.index]}'" if isinstance(e, Ref) else "value"


def to_druid(expr: Scalar, columns: Sequence[str], deadline: PlanningDeadline = NO_DEADLINE) -> Expr:
    """``expr`` as a native expression tree; Ref(i) reads column ``columns[i]``; ``deadline``
    checked per node."""
    deadline.check()
    if isinstance(expr, Ref):
        return Identifier(columns[expr.index])
    if isinstance(expr, Literal):
        if isinstance(expr.value, tuple):
            raise UnsupportedError("an INTERVAL can only be added to or subtracted from a TIMESTAMP")
        return literal(expr.value, expr.type)
    if not isinstance(expr, Call):
        raise UnsupportedError(f"cannot translate {expr!r} to a native expression")
    op = expr.op
    if op in _MULTI_VALUE_TESTS:
        for a in expr.args:
            if is_multi_value(a.type):
                # Only a filter against constants (a native column filter) compares value by value.
                raise ValidationError(
                    f"the multi-value string {_shown(a, columns)} compares with {op} only in a filter against "
                    f"constants (WHERE x = 'a'); here use MV_CONTAINS / MV_OVERLAP, or MV_TO_ARRAY for its values")
    args = [to_druid(a, columns, deadline) for a in expr.args]
    if op in _BINARY:
        return BinaryOp(_BINARY[op], args[0], args[1])
    if op == "NEG":
        return UnaryOp("-", args[0])
    if op == "AND":
        return _chain("&&", args)
    if op == "OR":
        return _chain("||", args)
    if op == "NOT":
        return UnaryOp("!", args[0])
    if op == "IS_NULL":
        return ECall("isnull", (args[0],))
    if op == "IS_NOT_NULL":
        return ECall("notnull", (args[0],))
    if op == "IN":
        return _chain("||", [BinaryOp("==", args[0], v) for v in args[1:]])
    if op == "CASE":
        return ECall("case_searched", tuple(args))
    if op == "CAST":
        return _cast(expr, args[0])
    if op in ("CEIL", "FLOOR"):
        # The native functions always return DOUBLE; integers are their own floor and ceiling.
        return args[0] if expr.args[0].type == BIGINT else ECall(op.lower(), (args[0],))
    if op == "SUBSTRING":
        return _substring(expr, args)
    if op == "STRPOS":
        if len(expr.args) > 2:
            args[2] = ELiteral(max(int(expr.args[2].value) - 1, 0), NATIVE_LONG)
        return BinaryOp("+", ECall("strpos", tuple(args)), ELiteral(1, NATIVE_LONG))
    if op in ("TRIM", "LTRIM", "RTRIM") and len(args) == 1:
        args.append(ELiteral(" "))
    if op in _RENAMED:
        return ECall(_RENAMED[op], tuple(args))
    raise UnsupportedError(f"function {op} cannot run as a native expression")


def _cast(expr: Call, arg: Expr) -> Expr:
    source, target = expr.args[0].type, expr.type
    if target == BOOLEAN:
        if source == VARCHAR:
            return BinaryOp("==", ECall("lower", (arg,)), ELiteral("true"))
        return BinaryOp("!=", arg, ELiteral(0, NATIVE_LONG))
    if source == BOOLEAN and target == VARCHAR:
        return ECall("case_searched", (ECall("isnull", (arg,)), ELiteral(None), arg, ELiteral("true"),
                                       ELiteral("false")))
    if target.column_type is not None and target.column_type.is_array:
        return ECall("cast", (arg, ELiteral(target.native.native_name)))
    names = {"BIGINT": "LONG", "DOUBLE": "DOUBLE", "FLOAT": "FLOAT", "VARCHAR": "STRING", "TIMESTAMP": "LONG"}
    name = names.get(target.name)
    if name is None:
        raise UnsupportedError(f"CAST to {target} is not supported")
    return ECall("cast", (arg, ELiteral(name)))


def _substring(expr: Call, args: list[Expr]) -> Expr:
    # SQL counts from 1 and lets the start fall before the string (the length then shrinks);
    # the native function counts from 0.
    start = int(expr.args[1].value) if expr.args[1].value is not None else None
    length = int(expr.args[2].value) if len(expr.args) > 2 and expr.args[2].value is not None else -1
    if start is None or (len(expr.args) > 2 and expr.args[2].value is None):
        return ELiteral(None)
    begin = start - 1
    if begin < 0:
        if length >= 0:
            length = max(length + begin, 0)
        begin = 0
    # The native function gives NULL past the end of the string; SQL gives ''.
    sliced = ECall("substring", (args[0], ELiteral(begin, NATIVE_LONG), ELiteral(length, NATIVE_LONG)))
    return ECall("if", (ECall("notnull", (args[0],)), ECall("nvl", (sliced, ELiteral(""))), ELiteral(None)))


def druid_text(expr: Scalar, columns: Sequence[str], deadline: PlanningDeadline = NO_DEADLINE) -> str:
    return to_druid(expr, columns, deadline).to_string()
