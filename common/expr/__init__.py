"""Druid's native expression language over Arrow: parse text into an expression tree, infer its
output type against a schema, and evaluate it vectorized over a batch of Arrow columns.

``node`` holds the tree (and prints it back as Druid syntax), ``parser`` the syntax, ``evaluator``
the value model, operators, type inference and evaluation entry points, and ``functions`` the
built-in function library, which registers itself with the evaluator when this package loads.
"""

from common.expr import functions as _builtin_functions  # noqa: F401  (fills the function registry)
from common.expr import json_functions as _json_functions  # noqa: F401  (the JSON functions)
from common.expr import array_functions as _array_functions  # noqa: F401  (the array functions)
from common.expr.evaluator import (
    FUNCTIONS,
    Function,
    evaluate,
    evaluate_column,
    evaluate_predicate,
    infer_type,
    lookup,
)
from common.expr.node import BinaryOp, Call, Expr, Identifier, Literal, UnaryOp
from common.expr.parser import parse

__all__ = [
    "FUNCTIONS", "BinaryOp", "Call", "Expr", "Function", "Identifier", "Literal", "UnaryOp", "evaluate",
    "evaluate_column", "evaluate_predicate", "infer_type", "lookup", "parse",
]
