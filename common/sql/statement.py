"""Statement: one SQL request split into its SET statements, an optional ``EXPLAIN PLAN FOR`` and
the query, parsed by sqlglot's Druid dialect.

sqlglot has no grammar for ``EXPLAIN PLAN FOR``; the three leading tokens are blanked out (spaces,
so line and column numbers of syntax errors stay right) before the rest is parsed. Positional
``?`` parameters carry no position in sqlglot's tree, so once the text is known to parse, each is
renamed ``:__pN`` in token order and the text parsed again: the tree then says which is which.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from common.errors import UnsupportedError, ValidationError

DIALECT = "druid"
_PLAN_FOR = re.compile(r"\s*PLAN\s+FOR\b", re.IGNORECASE)
PARAMETER_PREFIX = "__p"


@dataclass
class Statement:
    query: exp.Expression
    explain: bool = False
    settings: dict = field(default_factory=dict)
    parameter_count: int = 0


def _tokenize(sql: str):
    try:
        return sqlglot.tokenize(sql, read=DIALECT)
    except TokenError as e:
        raise ValidationError(f"SQL syntax error: {e}") from None


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


def _blank(sql: str, start: int, end: int) -> str:
    return sql[:start] + "".join(ch if ch == "\n" else " " for ch in sql[start:end + 1]) + sql[end + 1:]


def _setting_value(node: exp.Expression):
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -_setting_value(node.this)
    if isinstance(node, (exp.Column, exp.Identifier, exp.Var)):
        return node.name
    raise ValidationError(f"SET value must be a literal, got '{node.sql(dialect=DIALECT)}'")


def _settings(node: exp.Set) -> dict:
    out = {}
    for item in node.expressions:
        assignment = item.this if isinstance(item, exp.SetItem) else item
        if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, (exp.Column, exp.Identifier)):
            raise ValidationError(f"expected SET key = value, got '{node.sql(dialect=DIALECT)}'")
        out[assignment.this.name] = _setting_value(assignment.expression)
    return out


_QUERY_TYPES = (exp.Select, exp.Union, exp.Subquery)


def parse_statement(sql: str) -> Statement:
    if not isinstance(sql, str) or not sql.strip():
        raise ValidationError("empty SQL statement; expected a query such as SELECT ... FROM ...")
    tokens = _tokenize(sql)
    text = sql
    explain = False
    starts = [0] + [i + 1 for i, t in enumerate(tokens) if t.token_type == TokenType.SEMICOLON]
    for s in starts:
        if s < len(tokens) and tokens[s].text.upper() == "EXPLAIN":
            # sqlglot reads EXPLAIN as a command swallowing the rest, so look at the raw text.
            m = _PLAN_FOR.match(sql, tokens[s].end + 1)
            if m is None:
                raise UnsupportedError("only EXPLAIN PLAN FOR <query> is supported")
            explain = True
            text = _blank(text, tokens[s].start, m.end() - 1)
    if explain:
        tokens = _tokenize(text)
    placeholders = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    statements = [s for s in _parse(text) if s is not None]
    if placeholders:
        # Rewrite back to front so earlier offsets stay valid.
        for i in range(len(placeholders) - 1, -1, -1):
            tok = placeholders[i]
            text = text[:tok.start] + f":{PARAMETER_PREFIX}{i}" + text[tok.end + 1:]
        statements = [s for s in _parse(text) if s is not None]
    if not statements:
        raise ValidationError("empty SQL statement; expected a query such as SELECT ... FROM ...")
    settings: dict = {}
    for stmt in statements[:-1]:
        if not isinstance(stmt, exp.Set):
            raise ValidationError("only SET statements may come before the query; send one query per request")
        settings.update(_settings(stmt))
    query = statements[-1]
    if isinstance(query, exp.Set):
        raise ValidationError("SET statements must be followed by a query")
    if isinstance(query, exp.Command) and query.name.upper() == "EXPLAIN":
        raise UnsupportedError("only EXPLAIN PLAN FOR <query> is supported")
    if isinstance(query, (exp.Insert, exp.Delete, exp.Update, exp.Create, exp.Drop, exp.Merge, exp.Command)):
        kind = query.key.upper() if not isinstance(query, exp.Command) else query.name.upper()
        raise UnsupportedError(f"{kind} statements are not supported; strata SQL runs queries only")
    if not isinstance(query, _QUERY_TYPES):
        if isinstance(query, (exp.Intersect, exp.Except)):
            raise UnsupportedError(f"{query.key.upper()} is not supported; only UNION ALL and UNION combine queries")
        raise UnsupportedError(f"'{query.key.upper()}' statements are not supported; expected a SELECT query")
    return Statement(query, explain, settings, len(placeholders))
