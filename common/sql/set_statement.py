"""SET key = value: the one reading of Druid's SET statement, shared by queries, EXPLAIN and
INSERT/REPLACE (``statement_kind.classify`` hands each SET prefix here).

Accepted, as in Druid: ``SET key = literal`` with one assignment per statement. The key is a
name (``timeout``) or a quoted identifier (``"my key"``); the literal is a string, a number with
an optional sign, TRUE, FALSE or NULL. Anything else (an expression, a bare word, ``TO``, two
assignments) is refused with the statement's position, rather than being guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlglot.tokens import Token, TokenType

from common.errors import ValidationError

SettingValue = str | int | float | bool | None

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_FORM = "SET key = value, with a string, number, TRUE, FALSE or NULL value"


def location(sql: str, offset: int) -> str:
    """'line L, column C' (both from 1) of a character offset in ``sql``."""
    line = sql.count("\n", 0, offset) + 1
    column = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def _number(text: str) -> int | float:
    return int(text) if text.isdigit() else float(text)


def _value(sql: str, key: str, tokens: Sequence[Token], where: int) -> SettingValue:
    if len(tokens) == 1:
        tok = tokens[0]
        if tok.token_type == TokenType.STRING:
            return tok.text
        if tok.token_type == TokenType.NUMBER:
            return _number(tok.text)
        if tok.token_type in (TokenType.TRUE, TokenType.FALSE):
            return tok.token_type == TokenType.TRUE
        if tok.token_type == TokenType.NULL:
            return None
    if (len(tokens) == 2 and tokens[0].token_type in (TokenType.DASH, TokenType.PLUS)
            and tokens[1].token_type == TokenType.NUMBER):
        number = _number(tokens[1].text)
        return -number if tokens[0].token_type == TokenType.DASH else number
    got = sql[tokens[0].start:tokens[-1].end + 1] if tokens else ""
    at = location(sql, tokens[0].start if tokens else where)
    raise ValidationError(f"SET {key} at {at}: the value must be a string, number, TRUE, FALSE or NULL literal, "
                          f"got '{got}'")


def parse_set(sql: str, tokens: Sequence[Token]) -> tuple[str, SettingValue]:
    """(key, value) of one SET statement: ``tokens`` are its tokens in ``sql``, SET first, without
    the closing semicolon."""
    if not tokens or tokens[0].token_type != TokenType.SET:
        raise ValueError("parse_set needs the tokens of a SET statement")
    head = tokens[0]
    at = location(sql, head.start)
    if len(tokens) < 2:
        raise ValidationError(f"SET at {at} needs a key and a value: {_FORM}")
    key_token = tokens[1]
    is_name = key_token.token_type == TokenType.IDENTIFIER or (
        key_token.token_type not in (TokenType.STRING, TokenType.NUMBER) and _NAME.fullmatch(key_token.text))
    if not is_name or not key_token.text:
        raise ValidationError(f"SET at {at}: '{key_token.text}' is not a key name; write {_FORM}")
    key = key_token.text
    if len(tokens) < 3 or tokens[2].token_type != TokenType.EQ:
        found = f"'{tokens[2].text}'" if len(tokens) >= 3 else "nothing"
        raise ValidationError(f"SET {key} at {at}: expected '=' after the key, found {found}; write {_FORM}")
    value_tokens = list(tokens[3:])
    comma = next((t for t in value_tokens if t.token_type == TokenType.COMMA), None)
    if comma is not None:
        raise ValidationError(f"SET {key} at {at}: one key = value per SET statement; separate them with ';' "
                              f"(SET a = 1; SET b = 2), found ',' at {location(sql, comma.start)}")
    return key, _value(sql, key, value_tokens, tokens[2].end + 1)


__all__ = ["SettingValue", "location", "parse_set"]
