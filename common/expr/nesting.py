"""How deep expressions may nest, for SQL and native expressions alike.

Parsing, translating and evaluating expression trees is recursive (sqlglot's parser takes about
twenty frames per nested call or parenthesis; a chain ``a + b + c ...`` is a tree as deep as it
is long), and Python's default limit of 1,000 frames gave a RecursionError at about 45 nested
calls or 330 ``+`` terms. The interpreter limit is raised once to ``RECURSION_LIMIT``, which
needs no bigger thread stacks on Python 3.11+ (Python-to-Python calls do not grow the C stack);
nesting is limited to ``MAX_NESTING`` levels up front with a message that says so, and anything
still too deep for the raised limit (chains of tens of thousands of terms) becomes the same user
error instead of an internal one.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from common.errors import ValidationError

MAX_NESTING = 200  # levels of parentheses, function calls and CASE
RECURSION_LIMIT = 20_000


def allow_deep_recursion() -> None:
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def nesting_error(what: str, depth: int | None = None, where: str = "") -> ValidationError:
    deep = f"{depth} levels deep" if depth is not None else "too deeply"
    return ValidationError(f"{what} is nested {deep}{where}; the limit is {MAX_NESTING} levels of parentheses, "
                           "function calls and CASE, and very long operator chains count too: simplify it "
                           "(e.g. use IN (...) instead of many ORs, or split the expression)")


@contextmanager
def depth_guard(what: str):
    """Runs the block with the raised limit; a RecursionError in it becomes a user error."""
    allow_deep_recursion()
    try:
        yield
    except RecursionError:
        raise nesting_error(what) from None


__all__ = ["MAX_NESTING", "RECURSION_LIMIT", "allow_deep_recursion", "depth_guard", "nesting_error"]
