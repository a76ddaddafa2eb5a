"""``KILL QUERY 'id'``: end a running query (as ClickHouse's ``KILL QUERY WHERE query_id = ..``,
in the shorter form MySQL uses). Read from tokens, so comments and letter case do not matter."""

from __future__ import annotations

from sqlglot.tokens import TokenType

from common.errors import ValidationError
from common.sql.statement_kind import tokenize

KILL_FORM = "KILL QUERY 'query id' (the id is in sys.queries)"


def kill_target(sql: str) -> str | None:
    """The query id of a KILL QUERY statement, None for any other statement; a malformed KILL is
    a ValidationError showing the form."""
    if not isinstance(sql, str) or "kill" not in sql.lower():
        return None
    tokens = [t for t in tokenize(sql) if t.token_type != TokenType.SEMICOLON]
    if not tokens or tokens[0].token_type in (TokenType.STRING, TokenType.IDENTIFIER) or tokens[0].text.upper() != "KILL":
        return None
    words = [t.text.upper() for t in tokens[1:2]]
    if words != ["QUERY"] or len(tokens) != 3 or tokens[2].token_type != TokenType.STRING or not tokens[2].text:
        raise ValidationError(f"expected {KILL_FORM}")
    return tokens[2].text


__all__ = ["KILL_FORM", "kill_target"]
