"""Statement: one SQL request as the planner takes it: the query, whether ``EXPLAIN PLAN FOR``
wraps it, the SET settings before it and its ``?`` parameter count.

``statement_kind.classify`` splits the request (SET prefixes, EXPLAIN PLAN FOR, the statement)
from its tokens; only the statement proper, with everything else blanked out (spaces, so line and
column numbers of syntax errors stay right), is parsed here by sqlglot's Druid dialect. Positional
``?`` parameters carry no position in sqlglot's tree, so once the text is known to parse, each is
renamed ``:__pN`` in token order and the text parsed again: the tree then says which is which.

Long IN lists of literals (``x IN (1, 2, ..., 20000)``) are read from the tokens the classifier
already made, not by sqlglot's parser, which takes time per item that a 20,000-value list turns
into seconds: the list is replaced in the text by one ``:__inlistN`` marker (the rest of its span
blanked, so positions after it stay right), and the parsed IN gets the literal nodes back.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.dialects.druid import Druid
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from common.errors import UnsupportedError, ValidationError
from common.expr.nesting import MAX_NESTING, nesting_error
from common.sql.sql_literals import unicode_string
from common.sql.planning_deadline import NO_DEADLINE, DeadlineParser, DeadlineTokenizer, PlanningDeadline
from common.sql.statement_kind import EMPTY_MESSAGE, StatementKind, classify

DIALECT = "druid"
PARAMETER_PREFIX = "__p"
LIST_PREFIX = "__inlist"
# Lists shorter than this are parsed as usual; longer ones skip sqlglot's per-item parsing.
FOLD_LIST_ITEMS = 32


@dataclass
class Statement:
    query: exp.Expression
    explain: bool = False
    settings: dict = field(default_factory=dict)
    parameter_count: int = 0


def _parse(sql: str, deadline: PlanningDeadline, tokens: list | None = None) -> list[exp.Expression | None]:
    """sqlglot.parse(sql, read="druid"), with the planning deadline checked as it goes; ``tokens``:
    the Druid dialect's tokens of ``sql`` when the caller has them already."""
    try:
        if tokens is None:
            tokens = DeadlineTokenizer(dialect=Druid, deadline=deadline).tokenize(sql)
        return DeadlineParser(dialect=Druid, deadline=deadline).parse(tokens, sql)
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


def _list_item(tokens, i: int):
    """(literal node, index after it) when tokens[i:] starts with a literal, else None."""
    tok = tokens[i] if i < len(tokens) else None
    if tok is None:
        return None
    kind = tok.token_type
    if kind == TokenType.NUMBER:
        return exp.Literal.number(tok.text), i + 1
    if kind == TokenType.STRING:
        return exp.Literal.string(tok.text), i + 1
    if kind == TokenType.NULL:
        return exp.Null(), i + 1
    if kind == TokenType.DASH and i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.NUMBER:
        return exp.Neg(this=exp.Literal.number(tokens[i + 1].text)), i + 2
    return None


def _fold_literal_lists(text: str, tokens, deadline: PlanningDeadline) -> tuple[str, dict[str, list]]:
    """``text`` with each long ``IN (literal, ...)`` list replaced by a marker, and the lists."""
    lists: dict[str, list] = {}
    spans = []
    i, n = 0, len(tokens)
    while i < n:
        if tokens[i].token_type == TokenType.IN and i + 1 < n and tokens[i + 1].token_type == TokenType.L_PAREN:
            items, j = [], i + 2
            while True:
                deadline.check()
                found = _list_item(tokens, j)
                if found is None:
                    break
                items.append(found[0])
                j = found[1]
                if j < n and tokens[j].token_type == TokenType.COMMA:
                    j += 1
                    continue
                break
            if len(items) >= FOLD_LIST_ITEMS and j < n and tokens[j].token_type == TokenType.R_PAREN:
                name = f"{LIST_PREFIX}{len(lists)}"
                lists[name] = items
                spans.append((tokens[i + 2].start, tokens[j - 1].end + 1, name))
                i = j
                continue
        i += 1
    if not spans:
        return text, lists
    out, at = [], 0
    for start, end, name in spans:
        marker = f":{name}"
        blank = "".join(ch if ch == "\n" else " " for ch in text[start + len(marker):end])
        out += [text[at:start], marker, blank]
        at = end
    out.append(text[at:])
    return "".join(out), lists


def _unfold_literal_lists(statements: list, lists: dict[str, list], deadline: PlanningDeadline) -> None:
    for statement in statements:
        deadline.check()
        for node in list(statement.find_all(exp.Placeholder)):
            items = lists.get(node.name)
            parent = node.parent
            if items is None:
                continue
            if not isinstance(parent, exp.In) or parent.expressions != [node]:
                raise ValidationError("SQL syntax error: a list of values can only follow IN")
            parent.set("expressions", items)


_OPENERS = (TokenType.L_PAREN, TokenType.CASE)
_CLOSERS = (TokenType.R_PAREN, TokenType.END)


def _check_nesting(sql: str, tokens) -> None:
    """Refuse statements nested deeper than MAX_NESTING (parentheses, calls and CASE) before
    sqlglot's recursive parser meets them, naming where the limit was passed."""
    depth = 0
    for tok in tokens:
        kind = tok.token_type
        if kind in _OPENERS:
            depth += 1
            if depth > MAX_NESTING:
                line = sql.count("\n", 0, tok.start) + 1
                column = tok.start - (sql.rfind("\n", 0, tok.start) + 1) + 1
                raise nesting_error("the statement", where=f" (line {line}, column {column})")
        elif kind in _CLOSERS:
            depth = max(0, depth - 1)


def _keep_written_calls(statements: list, sql: str, tokens, placeholders) -> None:
    """Record on each function call node the name and text the user wrote (``meta['written_name']``,
    ``meta['written']``): sqlglot parses aliases into one class and renders it under its own name
    (ARRAY_LENGTH as ARRAY_SIZE, LEN as LENGTH, CEILING as CEIL), and messages must use the
    user's. Node positions are in the parsed text, where each ``?`` became a longer ``:__pN``;
    they are mapped back onto ``sql``, whose tokens give the call's closing parenthesis."""
    shifts, grown = [], 0  # (start of each placeholder in the parsed text, growth up to and with it)
    for i, tok in enumerate(placeholders):
        shifts.append((tok.start + grown, grown + len(f":{PARAMETER_PREFIX}{i}") - 1))
        grown = shifts[-1][1]
    at = {tok.start: k for k, tok in enumerate(tokens)}
    closing, stack = {}, []
    for k, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            stack.append(k)
        elif tok.token_type == TokenType.R_PAREN and stack:
            closing[stack.pop()] = k
    for statement in statements:
        for node in statement.find_all(exp.Func):
            meta = node._meta
            if not meta or "start" not in meta:
                continue
            start = meta["start"]
            k = bisect.bisect_left(shifts, (start, -1))
            start -= shifts[k - 1][1] if k else 0
            name = at.get(start)
            if name is None or name + 1 >= len(tokens) or name + 1 not in closing:
                continue
            if tokens[name + 1].token_type != TokenType.L_PAREN:
                continue
            meta["written_name"] = sql[start:tokens[name].end + 1]
            meta["written"] = sql[start:tokens[closing[name + 1]].end + 1]


def _decode_unicode_strings(tree: exp.Expression) -> None:
    """``U&'..'`` literals become plain string literals, so the planner sees one kind of string."""
    for node in list(tree.find_all(exp.UnicodeString)):
        escape = node.args.get("escape")
        text = unicode_string(node.this, escape.this if isinstance(escape, exp.Literal) else "\\")
        node.replace(exp.Literal.string(text))


def _reusable_tokens(classified, lists: dict, placeholders: list) -> list | None:
    """The statement's tokens from ``classify`` when the parser may take them as they are, so
    the text is not tokenized a second time (a tenth of planning a query not seen before): the
    text unchanged (no list folded, no placeholder to rewrite), no comment (the parser hands a
    token's comment list to its expression, and these tokens are shared by every plan of the
    text) and no EXPLAIN word (classify's tokenizer reads it as a plain word). Else None."""
    if lists or placeholders:
        return None
    for tok in classified.tokens:
        if tok.comments or tok.text.upper() == "EXPLAIN":
            return None
    return list(classified.tokens)


def parse_statement(sql: str, deadline: PlanningDeadline = NO_DEADLINE) -> Statement:
    if not isinstance(sql, str) or not sql.strip():
        raise ValidationError(EMPTY_MESSAGE)
    classified = classify(sql)
    _refuse(classified.kind, classified.head, classified.explain)
    _check_nesting(sql, classified.tokens)
    text, lists = _fold_literal_lists(classified.body, classified.tokens, deadline)
    placeholders = [t for t in classified.tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    statements = [s for s in _parse(text, deadline, _reusable_tokens(classified, lists, placeholders)) if s is not None]
    if placeholders:
        # Rewrite back to front so earlier offsets stay valid.
        for i in range(len(placeholders) - 1, -1, -1):
            tok = placeholders[i]
            text = text[:tok.start] + f":{PARAMETER_PREFIX}{i}" + text[tok.end + 1:]
        statements = [s for s in _parse(text, deadline) if s is not None]
    _unfold_literal_lists(statements, lists, deadline)
    _keep_written_calls(statements, sql, classified.tokens, placeholders)
    if any(t.token_type == TokenType.UNICODE_STRING for t in classified.tokens):
        for statement in statements:
            _decode_unicode_strings(statement)
    if len(statements) != 1:  # classify saw one statement; a parser disagreeing is a syntax problem
        raise ValidationError(EMPTY_MESSAGE if not statements else "SQL syntax error: send one statement per request")
    query = statements[0]
    if not isinstance(query, _QUERY_TYPES):
        if isinstance(query, (exp.Intersect, exp.Except)):
            raise UnsupportedError(f"{query.key.upper()} is not supported; only UNION ALL and UNION combine queries")
        raise UnsupportedError(f"'{query.key.upper()}' statements are not supported; expected a SELECT query")
    return Statement(query, classified.explain, dict(classified.settings), len(placeholders))
