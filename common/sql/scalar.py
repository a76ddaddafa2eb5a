"""Scalar expressions of the logical plan: typed, immutable trees over the fields of a node's input.

``Ref`` points at an input field by position (names can repeat after a join, positions cannot),
``Literal`` holds a constant already converted to its SQL type (TIMESTAMP as epoch millis, INTERVAL
as an ISO-8601 period), and ``Call`` applies an operator or function named in SQL spelling
(``=``, ``AND``, ``LOWER``, ``TIME_FLOOR``...). The translator builds them, rules rewrite them and
the native planner prints them as Druid expressions or native filters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.sql.sql_types import BOOLEAN, SqlType


class Scalar:
    type: SqlType

    def children(self) -> tuple[Scalar, ...]:
        return ()


@dataclass(frozen=True)
class Ref(Scalar):
    index: int
    type: SqlType


@dataclass(frozen=True)
class Literal(Scalar):
    value: Any
    type: SqlType


@dataclass(frozen=True)
class Call(Scalar):
    op: str
    args: tuple[Scalar, ...]
    type: SqlType

    def children(self) -> tuple[Scalar, ...]:
        return self.args


TRUE = Literal(True, BOOLEAN)
FALSE = Literal(False, BOOLEAN)


def transform(expr: Scalar, fn: Callable[[Scalar], Scalar]) -> Scalar:
    """Rebuild bottom-up, applying ``fn`` to every node after its children. (Not checked against
    the planning deadline: a rule rewrites one plan node's expressions, and ``optimize`` checks
    between plan nodes.)"""
    if isinstance(expr, Call):
        args = tuple(transform(a, fn) for a in expr.args)
        if args != expr.args:
            expr = Call(expr.op, args, expr.type)
    return fn(expr)


def refs(expr: Scalar) -> set[int]:
    out: set[int] = set()

    def visit(e: Scalar) -> None:
        if isinstance(e, Ref):
            out.add(e.index)
        for c in e.children():
            visit(c)

    visit(expr)
    return out


def substitute(expr: Scalar, exprs: tuple[Scalar, ...] | list[Scalar]) -> Scalar:
    """Replace each Ref(i) with exprs[i]: how an expression over a projection's output is moved
    below the projection."""
    return transform(expr, lambda e: exprs[e.index] if isinstance(e, Ref) else e)


def shift(expr: Scalar, offset: int) -> Scalar:
    return transform(expr, lambda e: Ref(e.index + offset, e.type) if isinstance(e, Ref) else e)


def remap(expr: Scalar, mapping: dict[int, int]) -> Scalar:
    return transform(expr, lambda e: Ref(mapping[e.index], e.type) if isinstance(e, Ref) else e)


def conjuncts(expr: Scalar | None) -> list[Scalar]:
    if expr is None:
        return []
    if isinstance(expr, Call) and expr.op == "AND":
        out = []
        for a in expr.args:
            out.extend(conjuncts(a))
        return out
    return [expr]


def and_all(parts: list[Scalar]) -> Scalar | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Call("AND", tuple(parts), BOOLEAN)
