"""The planning deadline: the query timeout interrupts planning, not only execution.

A statement can take long to plan (a huge IN list, an expression with thousands of terms, nesting
near the limit), and a timeout that is only compared after planning lets it run on for seconds or
minutes past the deadline. The broker makes a ``PlanningDeadline`` per statement (its timeout, and
a ``stop`` check: raise if KILL QUERY flagged the statement) and passes it to ``plan_sql``, which
hands it on explicitly: to the tokenizer and parser instances it makes (``DeadlineTokenizer``,
``DeadlineParser``: the Druid dialect's, checking at every token they make and consume), to the
literal-list folding (per item), to the translator (in its ``Session``, per expression node), to
the rewrite rules (``optimize``: per rule and plan node) and to the native planner (per native
expression node rendered). Each calls ``deadline.check()``, which raises QueryTimeoutError once
it has passed (or what ``stop`` raises). ``NO_DEADLINE`` (an in-process caller, a unit test, the
front door's classifying pass) checks nothing.

No per-statement state is ambient (issue 24): two statements planning at once on two threads
each check only the deadline they were given. The front door tokenizes a request once to classify
it before the timeout starts; that first pass is linear in the text and its result is kept, so
planning does not repeat it. ``stop`` must be cheap (a flag read): it runs per token.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.druid import Druid
from sqlglot.errors import TokenError

from common.errors import QueryTimeoutError, StrataError


class PlanningDeadline:
    """One statement's planning deadline: ``timeout_s`` seconds after ``started`` (a
    ``time.monotonic()`` value; now by default), or none; and ``stop``, called at every check."""

    __slots__ = ("at", "timeout_s", "stop")

    def __init__(self, timeout_s: float | None = None, started: float | None = None,
                 stop: Callable[[], None] | None = None) -> None:
        self.timeout_s = timeout_s
        self.at = None if timeout_s is None else (time.monotonic() if started is None else started) + timeout_s
        self.stop = stop

    def check(self) -> None:
        """Raise QueryTimeoutError if the deadline has passed (or what ``stop`` raises)."""
        if self.at is not None and time.monotonic() > self.at:
            raise timeout_error(self.timeout_s)
        if self.stop is not None:
            self.stop()

    @property
    def checks(self) -> bool:
        return self.at is not None or self.stop is not None


NO_DEADLINE = PlanningDeadline()


def _checking_core(cls: type, deadline: PlanningDeadline) -> type:
    # sqlglot's core has fixed slots, so the deadline cannot be an attribute of the object: it is
    # one of a class made for this tokenizer (a few microseconds, only when a deadline is set).
    class Checking(cls):
        __slots__ = ()

        def _add(self, *args, **kwargs):
            deadline.check()
            return super()._add(*args, **kwargs)

    return Checking


class DeadlineTokenizer(Druid.tokenizer_class):
    """Druid's tokenizer, checking the deadline at every token it adds. sqlglot keeps the scanning
    loop in a ``TokenizerCore`` object (since 27); its class is swapped for a subclass that checks.
    A sqlglot without that split scans in the tokenizer itself, where ``_add`` below checks."""

    # Calcite's U&'..' strings with \XXXX escapes (and UESCAPE); the Druid dialect lacks them.
    UNICODE_STRINGS: ClassVar[list] = [("U&'", "'"), ("u&'", "'")]

    def __init__(self, *args, deadline: PlanningDeadline = NO_DEADLINE, **kwargs) -> None:
        self.deadline = deadline  # before sqlglot's __init__, which makes the core
        super().__init__(*args, **kwargs)

    def _init_core(self):
        core = super()._init_core()
        if self.deadline.checks:
            try:
                core.__class__ = _checking_core(type(core), self.deadline)
            except TypeError:
                pass  # a compiled core: tokenizing is then fast, and planning still checks after it
        return core

    def _add(self, *args, **kwargs):
        self.deadline.check()
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

    def __init__(self, *args, deadline: PlanningDeadline = NO_DEADLINE, **kwargs) -> None:
        self.deadline = deadline
        super().__init__(*args, **kwargs)

    def _advance(self, *args, **kwargs) -> None:
        super()._advance(*args, **kwargs)
        self.deadline.check()

    def _parse_json_key_value(self):
        # Druid's JSON_OBJECT takes any expression as a key (KEY 'a' || 'b' VALUE ..); sqlglot
        # reads only a column or literal there, so the rest of the key was a syntax error.
        self._match_text_seq("KEY")
        key = self._parse_bitwise()
        self._match_set(self.JSON_KEY_VALUE_SEPARATOR_TOKENS)
        self._match_text_seq("VALUE")
        value = self._parse_bitwise()
        if not key and not value:
            return None
        return self.expression(exp.JSONKeyValue(this=key, expression=value))


def timeout_error(timeout_s: float) -> QueryTimeoutError:
    return QueryTimeoutError(f"query timed out after {timeout_s:.1f}s while planning (context timeout); raise "
                             "the timeout (SET timeout = <milliseconds>) or simplify the statement (e.g. a shorter "
                             "IN list or fewer terms)")


__all__ = ["NO_DEADLINE", "DeadlineParser", "DeadlineTokenizer", "PlanningDeadline", "timeout_error"]
