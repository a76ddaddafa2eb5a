"""The planning deadline: the query timeout interrupts planning, not only execution.

A statement can take long to plan (a huge IN list, an expression with thousands of terms, nesting
near the limit), and a timeout that is only compared after planning lets it run on for seconds or
minutes past the deadline. The broker sets the deadline with ``planning_deadline(timeout_s)`` around
planning; the planner's loops call ``check_deadline()`` (per token sqlglot's tokenizer makes and its
parser consumes, per expression node translated, rewritten or rendered, per list item folded, per
optimizer rule), which raises QueryTimeoutError once it has passed. Without a deadline set (an
in-process caller, a unit test) the check costs a context-variable read.

Plans run on the caller's thread, so the deadline lives in a ContextVar: concurrent statements on
other threads each see their own. (Issue #24 wants per-query state carried in an explicit context
object; the deadline is not, yet: its checks sit inside sqlglot's tokenizer and parser, which
sqlglot instantiates itself from the dialect's classes with no argument for per-statement state,
and in every translation and rewrite rule, so threading it means a planning-context parameter
through the whole of common/sql. Until then the ContextVar is set and reset around planning only,
by ``planning_deadline``/``planning_stop``, never read outside ``check_deadline``.) ``DeadlineTokenizer`` and ``DeadlineParser`` are the Druid
dialect's tokenizer and parser with the check added (they build the same tokens and trees). The
front door tokenizes a request once to classify it before the timeout starts; that first pass is
linear in the text and its result is kept, so planning does not repeat it.

The same checks also stop a statement that was killed while it plans: ``planning_stop(check)``
sets a callable that ``check_deadline`` calls too (the broker's: raise if KILL QUERY flagged the
statement). It must be cheap (a flag read): it runs per token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ClassVar

from sqlglot.dialects.druid import Druid
from sqlglot.errors import TokenError

from common.errors import QueryTimeoutError, StrataError

# (monotonic deadline, the timeout in seconds for the message), or None: no deadline.
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("strata_planning_deadline", default=None)
# Raises when the statement must stop planning for another reason than time (KILL QUERY), or None.
_STOP: ContextVar[Callable[[], None] | None] = ContextVar("strata_planning_stop", default=None)


@contextmanager
def planning_deadline(timeout_s: float, started: float | None = None) -> Iterator[None]:
    """Run the block with planning interrupted ``timeout_s`` seconds after ``started`` (a
    ``time.monotonic()`` value; now by default)."""
    start = time.monotonic() if started is None else started
    token = _DEADLINE.set((start + timeout_s, timeout_s))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


@contextmanager
def planning_stop(check: Callable[[], None]) -> Iterator[None]:
    """Run the block with ``check()`` called wherever planning checks its deadline; what it
    raises (a StrataError) stops planning."""
    token = _STOP.set(check)
    try:
        yield
    finally:
        _STOP.reset(token)


def check_deadline() -> None:
    """Raise QueryTimeoutError if the planning deadline has passed (or what the ``planning_stop``
    check raises)."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline[0]:
        raise timeout_error(deadline[1])
    stop = _STOP.get()
    if stop is not None:
        stop()


def _checking_core(cls: type) -> type:
    class Checking(cls):
        __slots__ = ()

        def _add(self, *args, **kwargs):
            check_deadline()
            return super()._add(*args, **kwargs)

    return Checking


class DeadlineTokenizer(Druid.tokenizer_class):
    """Druid's tokenizer, checking the deadline at every token it adds. sqlglot keeps the scanning
    loop in a ``TokenizerCore`` object (since 27); its class is swapped for a subclass that checks.
    A sqlglot without that split scans in the tokenizer itself, where ``_add`` below checks."""

    # Calcite's U&'..' strings with \XXXX escapes (and UESCAPE); the Druid dialect lacks them.
    UNICODE_STRINGS: ClassVar[list] = [("U&'", "'"), ("u&'", "'")]
    _CORES: dict = {}

    def _init_core(self):
        core = super()._init_core()
        cls = type(core)
        checking = self._CORES.get(cls)
        if checking is None:
            checking = self._CORES[cls] = _checking_core(cls)
        try:
            core.__class__ = checking
        except TypeError:
            pass  # a compiled core: tokenizing is then fast, and planning still checks after it
        return core

    def _add(self, *args, **kwargs):
        check_deadline()
        return super()._add(*args, **kwargs)

    def tokenize(self, sql: str):
        try:
            return super().tokenize(sql)
        except TokenError as exc:
            # The tokenizer reports any exception in its loop as a TokenError "from" it; the
            # deadline's and the stop check's are strata's own.
            if isinstance(exc.__cause__, StrataError):
                raise exc.__cause__ from None
            raise


class DeadlineParser(Druid.parser_class):
    """Druid's parser, checking the deadline at every token it takes."""

    def _advance(self, *args, **kwargs) -> None:
        super()._advance(*args, **kwargs)
        check_deadline()


def timeout_error(timeout_s: float) -> QueryTimeoutError:
    return QueryTimeoutError(f"query timed out after {timeout_s:.1f}s while planning (context timeout); raise "
                             "the timeout (SET timeout = <milliseconds>) or simplify the statement (e.g. a shorter "
                             "IN list or fewer terms)")


__all__ = ["DeadlineParser", "DeadlineTokenizer", "check_deadline", "planning_deadline", "planning_stop",
           "timeout_error"]
