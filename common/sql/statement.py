"""Statement: one SQL request as the planner takes it: the query, whether ``EXPLAIN PLAN FOR``
wraps it, the SET settings before it and its ``?`` parameter count.

``statement_kind.classify`` splits the request (SET prefixes, EXPLAIN PLAN FOR, the statement)
from its tokens; only the statement proper, with everything else blanked out (spaces, so line and
column numbers of syntax errors stay right), is parsed here by sqlglot's Druid dialect. Positional
``?`` parameters carry no position in sqlglot's tree, so once the text is known to parse, each is
renamed ``:__pN`` in token order and the text parsed again: the tree then says which is which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from common.errors import UnsupportedError, ValidationError
from common.sql.statement_kind import EMPTY_MESSAGE, StatementKind, classify

DIALECT = "druid"
PARAMETER_PREFIX = "__p"


@dataclass
class Statement:
    query: exp.Expression
    explain: bool = False
    settings: dict = field(default_factory=dict)
    parameter_count: int = 0


def _parse(sql: str) -> list[exp.Expression | None]:
    try:
        return sqlglot.parse(sql, read=DIALECT)
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        line, col = first.get("line"), first.get("col")
        where = f" at line {line}, column {col}" if line is not None else ""
        description = first.get("description") or str(e).splitlines()[0]
        if description.startswith("Required keyword"):
            description = "incomplete expression"  # sqlglot names its own classes here
        near = first.get("highlight")
        near_text = f" near '{near}'" if near else ""
        raise ValidationError(f"SQL syntax error: {description}{near_text}{where}") from None
    except TokenError as e:
        raise ValidationError(f"SQL syntax error: {e}") from None


_QUERY_TYPES = (exp.Select, exp.Union, exp.Subquery)


def _refuse(kind: StatementKind, head: str, explain: bool) -> None:
    word = head.upper()
    if explain and kind is not StatementKind.QUERY:
        raise UnsupportedError(f"EXPLAIN PLAN FOR {word} is not supported; strata explains queries only")
    if kind is not StatementKind.QUERY:
        raise UnsupportedError(f"{word} statements are not supported; strata SQL runs queries only")


def parse_statement(sql: str) -> Statement:
    if not isinstance(sql, str) or not sql.strip():
        raise ValidationError(EMPTY_MESSAGE)
    classified = classify(sql)
    _refuse(classified.kind, classified.head, classified.explain)
    text = classified.body
    placeholders = [t for t in classified.tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    statements = [s for s in _parse(text) if s is not None]
    if placeholders:
        # Rewrite back to front so earlier offsets stay valid.
        for i in range(len(placeholders) - 1, -1, -1):
            tok = placeholders[i]
            text = text[:tok.start] + f":{PARAMETER_PREFIX}{i}" + text[tok.end + 1:]
        statements = [s for s in _parse(text) if s is not None]
    if len(statements) != 1:  # classify saw one statement; a parser disagreeing is a syntax problem
        raise ValidationError(EMPTY_MESSAGE if not statements else "SQL syntax error: send one statement per request")
    query = statements[0]
    if not isinstance(query, _QUERY_TYPES):
        if isinstance(query, (exp.Intersect, exp.Except)):
            raise UnsupportedError(f"{query.key.upper()} is not supported; only UNION ALL and UNION combine queries")
        raise UnsupportedError(f"'{query.key.upper()}' statements are not supported; expected a SELECT query")
    return Statement(query, classified.explain, dict(classified.settings), len(placeholders))
