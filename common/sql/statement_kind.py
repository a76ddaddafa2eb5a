"""classify(): what one SQL request is, decided once from sqlglot's tokens, for every front end.

A request is ``[SET key = value; ...] [EXPLAIN PLAN FOR] <statement> [;]``. Working on tokens, not
on the raw text, means comments, leading blanks, letter case, quoted identifiers and keywords
inside string literals cannot change the answer: ``/* hi */ insert`` is an INSERT, while
``SELECT 'INSERT'`` and ``SELECT "set"`` are queries. The SET prefixes are read by
``set_statement.parse_set`` (the only SET parser), so the settings come with the answer.

sqlglot's tokenizer reads EXPLAIN as a command that swallows the rest of the statement as one
string; the tokenizer here treats it as a plain word so the statement behind ``EXPLAIN PLAN FOR``
is tokenized (and classified) like any other.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import ClassVar

from sqlglot.dialects.druid import Druid
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from common.errors import UnsupportedError, ValidationError
from common.sql.planning_deadline import DeadlineTokenizer
from common.sql.set_statement import SettingValue, location, parse_set

EMPTY_MESSAGE = "empty SQL statement; expected a query such as SELECT ... FROM ..."
EXPLAIN_FORM = "only EXPLAIN PLAN FOR <query> is supported"


class StatementKind(str, Enum):
    QUERY = "query"  # SELECT, WITH ..., VALUES, or a parenthesized query
    INSERT = "insert"
    REPLACE = "replace"
    CREATE = "create"
    ALTER = "alter"
    DROP = "drop"
    OTHER = "other"  # UPDATE, DELETE, SHOW, ...: refused by whoever receives it, naming the word

    @property
    def is_ddl(self) -> bool:
        return self in (StatementKind.CREATE, StatementKind.ALTER, StatementKind.DROP)

    @property
    def is_ingestion(self) -> bool:
        return self in (StatementKind.INSERT, StatementKind.REPLACE)


_HEADS = {
    TokenType.SELECT: StatementKind.QUERY, TokenType.WITH: StatementKind.QUERY, TokenType.VALUES: StatementKind.QUERY,
    TokenType.L_PAREN: StatementKind.QUERY, TokenType.INSERT: StatementKind.INSERT,
    TokenType.REPLACE: StatementKind.REPLACE, TokenType.CREATE: StatementKind.CREATE,
    TokenType.ALTER: StatementKind.ALTER, TokenType.DROP: StatementKind.DROP,
}


class _Tokenizer(DeadlineTokenizer):
    KEYWORDS: ClassVar[dict] = {word: kind for word, kind in Druid.tokenizer_class.KEYWORDS.items() if word != "EXPLAIN"}


def tokenize(sql: str) -> list[Token]:
    """The Druid dialect's tokens of ``sql`` (EXPLAIN being a plain word), or a ValidationError."""
    try:
        return _Tokenizer(dialect=Druid).tokenize(sql)
    except TokenError as exc:
        raise ValidationError(f"SQL syntax error: {exc} (an unterminated string, quoted name or comment? "
                              "A client that sends SQL as a C string, such as ADBC, ends it at a U+0000 "
                              "character: write that one as U&'\\0000')") from None


def blank_outside(sql: str, start: int, end: int) -> str:
    """``sql`` with everything outside [start, end) turned to spaces, newlines kept, so a parser
    given the result reports lines and columns of the text the user wrote."""
    def blank(text: str) -> str:
        return "".join(ch if ch == "\n" else " " for ch in text)

    return blank(sql[:start]) + sql[start:end] + blank(sql[end:])


@dataclass(frozen=True)
class ClassifiedStatement:
    """One request: its SET settings and the statement proper (``tokens``, from ``start`` to
    ``end`` in ``sql``), which ``EXPLAIN PLAN FOR`` may wrap."""

    sql: str
    kind: StatementKind
    head: str  # the statement's first word as written, for messages ("UPDATE")
    explain: bool
    settings: Mapping[str, SettingValue] = field(default_factory=dict)
    tokens: tuple[Token, ...] = ()
    start: int = 0
    end: int = 0

    @property
    def body(self) -> str:
        """The statement proper, everything else blanked (positions are the user's)."""
        return blank_outside(self.sql, self.start, self.end)

    @property
    def is_ddl(self) -> bool:
        """CREATE / ALTER / DROP, for the table catalog (an EXPLAIN of one is not)."""
        return self.kind.is_ddl and not self.explain

    @property
    def is_ingestion(self) -> bool:
        """INSERT / REPLACE, to run as an ingestion task (an EXPLAIN of one is not)."""
        return self.kind.is_ingestion and not self.explain

    @property
    def parameter_count(self) -> int:
        """``?`` placeholders in the statement proper."""
        return sum(1 for t in self.tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?")


def _split(tokens: list[Token]) -> list[list[Token]]:
    """Statements at top-level semicolons; a semicolon inside parentheses is left to the parser."""
    out: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth = max(0, depth - 1)
        if tok.token_type == TokenType.SEMICOLON and depth == 0:
            out.append([])
        else:
            out[-1].append(tok)
    return [s for s in out if s]


def _is_word(tok: Token, word: str) -> bool:
    return tok.token_type not in (TokenType.STRING, TokenType.IDENTIFIER) and tok.text.upper() == word


def classify(sql: str) -> ClassifiedStatement:
    """What ``sql`` is. Raises ValidationError for an empty request, an unreadable one (unterminated
    string or comment), a bad SET, SET with nothing after it, or a second statement after the
    first; UnsupportedError for EXPLAIN other than EXPLAIN PLAN FOR.

    One query passes through several front-door steps that each ask (query id, effects, DDL,
    planning); tokenizing costs about 0.2 ms a time, so answers are kept per text (they are
    immutable: read-only settings, tuple of tokens). Failures are not kept."""
    if not isinstance(sql, str):
        raise ValidationError(EMPTY_MESSAGE)
    return _classify(sql)


@functools.lru_cache(maxsize=512)
def _classify(sql: str) -> ClassifiedStatement:
    statements = _split(tokenize(sql))
    if not statements:
        raise ValidationError(EMPTY_MESSAGE)
    settings: dict[str, SettingValue] = {}
    i = 0
    while i < len(statements) and statements[i][0].token_type == TokenType.SET:
        key, value = parse_set(sql, statements[i])
        settings[key] = value
        i += 1
    if i == len(statements):
        raise ValidationError("SET statements must be followed by the statement to run, such as SELECT ... FROM ... "
                              "or INSERT INTO ...")
    main = statements[i]
    if i + 1 < len(statements):
        extra = statements[i + 1][0]
        raise ValidationError(f"only SET statements may come before the {main[0].text.upper()} statement; found "
                              f"'{extra.text}' after it at {location(sql, extra.start)}; send one statement per "
                              "request")
    explain = _is_word(main[0], "EXPLAIN")
    if explain:
        if len(main) < 3 or not (_is_word(main[1], "PLAN") and main[2].token_type == TokenType.FOR):
            raise UnsupportedError(EXPLAIN_FORM)
        main = main[3:]
        if not main:
            raise ValidationError("EXPLAIN PLAN FOR needs a query after it")
        if main[0].token_type == TokenType.SET or _is_word(main[0], "EXPLAIN"):
            raise UnsupportedError(EXPLAIN_FORM)
    head = main[0]
    kind = _HEADS.get(head.token_type, StatementKind.OTHER)
    return ClassifiedStatement(sql, kind, head.text, explain, MappingProxyType(settings), tuple(main), head.start, main[-1].end + 1)


__all__ = ["EMPTY_MESSAGE", "ClassifiedStatement", "StatementKind", "blank_outside", "classify", "tokenize"]
