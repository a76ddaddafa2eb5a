"""The SQL function and operator catalog: arity, argument kinds and result type of every scalar
operation the planner accepts, in one table.

The translator calls ``result_type`` for each call it builds; errors quote the SQL text of the
call, so users see which expression is wrong. How each operation runs is the business of
``druid_expression`` (the native expression it becomes) and ``native_filter``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from common.errors import ValidationError
from common.sql.sql_types import (BIGINT, BOOLEAN, DOUBLE, INTERVAL, NULL, TIMESTAMP, VARCHAR, SqlType, common_type, is_multi_value,
                                  from_column_type)
from common.types.column_type import ColumnType, TypeKind

Rule = Callable[[list[SqlType], str], SqlType]


@dataclass(frozen=True)
class Signature:
    """``kinds``: one letter per argument, the last repeating: n number, s string, t timestamp,
    b boolean, a any scalar, k literal constant (checked by the translator), i interval."""

    min_args: int
    max_args: int | None
    kinds: str
    result: SqlType | Rule


def _numeric_result(types: list[SqlType], text: str) -> SqlType:
    known = [t for t in types if t != NULL]
    if all(t.is_exact for t in known):
        return BIGINT
    return DOUBLE


def _first(types: list[SqlType], text: str) -> SqlType:
    return types[0] if types[0] != NULL else VARCHAR


def _unified(positions: Callable[[int], list[int]]) -> Rule:
    def rule(types: list[SqlType], text: str) -> SqlType:
        out = NULL
        for i in positions(len(types)):
            unified = common_type(out, types[i])
            if unified is None:
                raise ValidationError(f"incompatible types {out} and {types[i]} in '{text}'; CAST one of them")
            out = unified
        return out
    return rule


def _case_values(n: int) -> list[int]:
    # CASE args: cond1, value1, cond2, value2, ..., [else]
    return list(range(1, n, 2)) + ([n - 1] if n % 2 else [])


def _extremum(types: list[SqlType], text: str) -> SqlType:
    if all(t == VARCHAR or t == NULL for t in types):
        return VARCHAR
    return _unified(lambda n: list(range(n)))(types, text)


def _array_of(element: SqlType) -> SqlType:
    native = element.native if element not in (NULL, BOOLEAN, TIMESTAMP) else (
        VARCHAR.native if element == NULL else BIGINT.native)
    if native.kind is TypeKind.FLOAT:
        native = DOUBLE.native
    return from_column_type(ColumnType(TypeKind.ARRAY, native))


def _element_of(t: SqlType) -> SqlType:
    if t.column_type is not None and t.column_type.is_array:
        return from_column_type(t.column_type.element)
    return t


def _array_constructor(types: list[SqlType], text: str) -> SqlType:
    out = NULL
    for t in types:
        if t.column_type is not None and t.column_type.is_array:
            raise ValidationError(f"ARRAY elements must be single values, got {t} in '{text}'; nested arrays are "
                                  "not supported (use ARRAY_CONCAT to join arrays)")
        unified = common_type(out, t)
        if unified is None:
            raise ValidationError(f"ARRAY elements must share a type, got {out} and {t} in '{text}'; CAST one of them")
        out = unified
    return _array_of(out)


def _element_result(types: list[SqlType], text: str) -> SqlType:
    return _element_of(types[0]) if types[0] != NULL else VARCHAR


def _array_arg(position: int) -> Rule:
    def rule(types: list[SqlType], text: str) -> SqlType:
        t = types[position]
        if t == NULL:
            other = types[1 - position] if len(types) == 2 else NULL
            if other.column_type is not None and other.column_type.is_array:
                return other
            return _array_constructor([other], text)
        return t
    return rule


SIGNATURES: dict[str, Signature] = {
    # arrays ('r' an array, 'a' anything: a scalar or an array)
    "ARRAY": Signature(1, None, "a", _array_constructor),  # ARRAY[] is an error in Druid too
    "ARRAY_LENGTH": Signature(1, 1, "r", BIGINT),
    "ARRAY_OFFSET": Signature(2, 2, "rn", _element_result), "ARRAY_ORDINAL": Signature(2, 2, "rn", _element_result),
    "ARRAY_CONTAINS": Signature(2, 2, "ra", BOOLEAN), "ARRAY_OVERLAP": Signature(2, 2, "r", BOOLEAN),
    "ARRAY_OFFSET_OF": Signature(2, 2, "ra", BIGINT), "ARRAY_ORDINAL_OF": Signature(2, 2, "ra", BIGINT),
    "ARRAY_APPEND": Signature(2, 2, "ra", _array_arg(0)), "ARRAY_PREPEND": Signature(2, 2, "ar", _array_arg(1)),
    "ARRAY_CONCAT": Signature(2, 2, "r", _array_arg(0)),
    "ARRAY_SLICE": Signature(2, 3, "rn", _array_arg(0)),
    "ARRAY_TO_STRING": Signature(2, 2, "rs", VARCHAR),
    "STRING_TO_ARRAY": Signature(2, 2, "sk", lambda types, text: _array_of(VARCHAR)),
    "MV_FILTER_ONLY": Signature(2, 2, "r", _array_arg(0)), "MV_FILTER_NONE": Signature(2, 2, "r", _array_arg(0)),
    # operators
    "+": Signature(2, 2, "n", _numeric_result),
    "-": Signature(2, 2, "n", _numeric_result),
    "*": Signature(2, 2, "n", _numeric_result),
    "/": Signature(2, 2, "n", _numeric_result),
    "MOD": Signature(2, 2, "n", _numeric_result),
    "NEG": Signature(1, 1, "n", _first),
    "=": Signature(2, 2, "a", BOOLEAN), "<>": Signature(2, 2, "a", BOOLEAN),
    "<": Signature(2, 2, "a", BOOLEAN), "<=": Signature(2, 2, "a", BOOLEAN),
    ">": Signature(2, 2, "a", BOOLEAN), ">=": Signature(2, 2, "a", BOOLEAN),
    "AND": Signature(2, None, "b", BOOLEAN), "OR": Signature(2, None, "b", BOOLEAN),
    "NOT": Signature(1, 1, "b", BOOLEAN),
    "IS_NULL": Signature(1, 1, "a", BOOLEAN), "IS_NOT_NULL": Signature(1, 1, "a", BOOLEAN),
    "LIKE": Signature(2, 3, "skk", BOOLEAN),
    "IN": Signature(2, None, "a", BOOLEAN),
    "CASE": Signature(2, None, "a", _unified(_case_values)),
    "CONCAT": Signature(1, None, "a", VARCHAR),
    # strings
    "LOWER": Signature(1, 1, "s", VARCHAR), "UPPER": Signature(1, 1, "s", VARCHAR),
    "REVERSE": Signature(1, 1, "s", VARCHAR), "CHAR_LENGTH": Signature(1, 1, "s", BIGINT),
    "SUBSTRING": Signature(2, 3, "skk", VARCHAR),
    "TRIM": Signature(1, 2, "sk", VARCHAR), "LTRIM": Signature(1, 2, "sk", VARCHAR),
    "RTRIM": Signature(1, 2, "sk", VARCHAR),
    "REPLACE": Signature(3, 3, "skk", VARCHAR),
    "STRPOS": Signature(2, 3, "skk", BIGINT),
    "LEFT": Signature(2, 2, "sk", VARCHAR), "RIGHT": Signature(2, 2, "sk", VARCHAR),
    "LPAD": Signature(2, 3, "skk", VARCHAR), "RPAD": Signature(2, 3, "skk", VARCHAR),
    "REPEAT": Signature(2, 2, "sk", VARCHAR),
    "REGEXP_LIKE": Signature(2, 2, "sk", BOOLEAN),
    "REGEXP_EXTRACT": Signature(2, 3, "skk", VARCHAR),
    "REGEXP_REPLACE": Signature(3, 3, "skk", VARCHAR),
    "CONTAINS_STRING": Signature(2, 2, "sk", BOOLEAN), "ICONTAINS_STRING": Signature(2, 2, "sk", BOOLEAN),
    # nulls and choices
    "COALESCE": Signature(1, None, "a", _unified(lambda n: list(range(n)))),
    "NULLIF": Signature(2, 2, "a", _first),
    "GREATEST": Signature(1, None, "a", _extremum), "LEAST": Signature(1, None, "a", _extremum),
    # math
    "ABS": Signature(1, 1, "n", _first), "CEIL": Signature(1, 1, "n", _first), "FLOOR": Signature(1, 1, "n", _first),
    "ROUND": Signature(1, 2, "nk", _first),
    "SQRT": Signature(1, 1, "n", DOUBLE), "EXP": Signature(1, 1, "n", DOUBLE), "LN": Signature(1, 1, "n", DOUBLE),
    "LOG10": Signature(1, 1, "n", DOUBLE), "POWER": Signature(2, 2, "n", DOUBLE),
    "SIN": Signature(1, 1, "n", DOUBLE), "COS": Signature(1, 1, "n", DOUBLE), "TAN": Signature(1, 1, "n", DOUBLE),
    "ASIN": Signature(1, 1, "n", DOUBLE), "ACOS": Signature(1, 1, "n", DOUBLE), "ATAN": Signature(1, 1, "n", DOUBLE),
    "ATAN2": Signature(2, 2, "n", DOUBLE), "CBRT": Signature(1, 1, "n", DOUBLE), "SIGN": Signature(1, 1, "n", DOUBLE),
    # time (time zone and origin arguments are filled in by the translator, so arity is exact here)
    "TIME_FLOOR": Signature(4, 4, "tkkk", TIMESTAMP), "TIME_CEIL": Signature(4, 4, "tkkk", TIMESTAMP),
    "TIME_SHIFT": Signature(4, 4, "tkkk", TIMESTAMP),
    "TIME_EXTRACT": Signature(3, 3, "tkk", BIGINT),
    "TIME_PARSE": Signature(3, 3, "skk", TIMESTAMP),
    "TIME_FORMAT": Signature(3, 3, "tkk", VARCHAR),
    "MILLIS_TO_TIMESTAMP": Signature(1, 1, "n", TIMESTAMP),
    "TIMESTAMP_TO_MILLIS": Signature(1, 1, "t", BIGINT),
}

_KIND_NAMES = {"r": "an ARRAY", "n": "a number", "s": "VARCHAR", "t": "a TIMESTAMP", "b": "a BOOLEAN",
               "i": "an INTERVAL"}


# Conditions that read a multi-value string value by value, as Druid's filters do.
MULTI_VALUE_FILTER_OPS = frozenset({"LIKE", "REGEXP_LIKE"})


def _accepts(kind: str, t: SqlType) -> bool:
    if kind == "r":
        return t == NULL or (t.column_type is not None and t.column_type.is_array)
    if t == NULL or kind in "ak":
        return t != INTERVAL or kind == "i"
    if t.column_type is not None and t.column_type.is_array:
        return False
    if kind == "n":
        return t.is_numeric
    if kind == "s":
        return t == VARCHAR
    if kind == "t":
        return t == TIMESTAMP
    if kind == "b":
        return t == BOOLEAN
    if kind == "i":
        return t == INTERVAL
    return False


def result_type(op: str, types: list[SqlType], text: str, arg_texts: list[str] | None = None,
                name: str | None = None) -> SqlType:
    """The result type of ``op`` over arguments of ``types``; ValidationError naming ``text``
    (the call as written) and ``name`` (the function as the user named it, default ``op``) for a
    wrong argument count or type."""
    sig = SIGNATURES.get(op)
    shown = name or op
    if sig is None:
        raise ValidationError(f"unknown function '{shown}' in '{text}'")
    n = len(types)
    if n < sig.min_args or (sig.max_args is not None and n > sig.max_args):
        if sig.max_args is None:
            want = f"at least {sig.min_args}"
        elif sig.min_args == sig.max_args:
            want = str(sig.min_args)
        else:
            want = f"{sig.min_args} to {sig.max_args}"
        raise ValidationError(f"{shown} takes {want} argument{'' if want == '1' else 's'}, got {n} in '{text}'")
    for i, t in enumerate(types):
        kind = sig.kinds[min(i, len(sig.kinds) - 1)]
        if is_multi_value(t) and op in MULTI_VALUE_FILTER_OPS and kind == "s":
            continue  # a filter on a multi-value string: matches when any value does
        if not _accepts(kind, t):
            if is_multi_value(t) and kind != "r":
                what = f"'{arg_texts[i]}'" if arg_texts else f"argument {i + 1}"
                raise ValidationError(f"{shown} does not take the multi-value string {what} in '{text}'; apply it "
                                      f"to each value with an UNNEST, or to the values as an array with MV_TO_ARRAY")
            what = f"'{arg_texts[i]}'" if arg_texts else f"argument {i + 1}"
            if op in ("+", "-", "*", "/", "MOD", "NEG") and t.name in ("VARCHAR", "TIMESTAMP", "BOOLEAN"):
                raise ValidationError(
                    f"cannot apply '{op}' to {t} expression {what} in '{text}'"
                    + ("; use CONCAT or || to join strings" if t == VARCHAR and op == "+" else "")
                    + ("; add or subtract an INTERVAL, or use TIMESTAMP_TO_MILLIS" if t == TIMESTAMP else ""))
            raise ValidationError(f"{shown} needs {_KIND_NAMES.get(kind, kind)} for {what}, got {t} in '{text}'")
    result = sig.result
    return result(types, text) if callable(result) else result
