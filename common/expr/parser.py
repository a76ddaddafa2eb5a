"""Parser for Druid's native expression syntax: a hand-written tokenizer and a Pratt parser.

Precedence, loosest first: ``||``, ``&&``, ``!``, comparisons, ``+ -``, ``* / %``, ``^`` (right
associative), unary ``-``. A minus directly in front of a number literal is folded into the
literal, as Druid does, so ``-1`` is one LONG and ``-2^2`` is 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.errors import ValidationError
from common.expr.nesting import MAX_NESTING, depth_guard, nesting_error
from common.expr.node import (
    BINARY_PRECEDENCE,
    NEGATE_PRECEDENCE,
    NOT_PRECEDENCE,
    RIGHT_ASSOCIATIVE,
    BinaryOp,
    Call,
    Expr,
    Identifier,
    Literal,
    UnaryOp,
)
from common.types.column_type import DOUBLE, LONG

_LONG_MAX = 2**63 - 1
_OPERATORS = sorted(
    ["||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "^", "!", "(", ")", ","],
    key=len,
    reverse=True,
)
_SIMPLE_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


@dataclass(frozen=True)
class Token:
    kind: str  # NUMBER, STRING, IDENT, QIDENT, OP, EOF
    text: str  # operator text, identifier name, or decoded string
    pos: int
    value: object = None  # numbers: the int or float


def _error(source: str, pos: int, message: str) -> ValidationError:
    return ValidationError(f"{message} at position {pos} in '{source}'")


def _describe(tok: Token) -> str:
    if tok.kind == "EOF":
        return "end of expression"
    if tok.kind == "STRING":
        return f"string '{tok.text}'"
    return f"'{tok.text}'"


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch in " \t\r\n":
            i += 1
        elif ch.isdigit() or (ch == "." and i + 1 < n and source[i + 1].isdigit()):
            j = i
            while j < n and source[j].isdigit():
                j += 1
            is_double = False
            if j < n and source[j] == ".":
                is_double = True
                j += 1
                while j < n and source[j].isdigit():
                    j += 1
            if j < n and source[j] in "eE":
                k = j + 1
                if k < n and source[k] in "+-":
                    k += 1
                if k < n and source[k].isdigit():
                    is_double = True
                    j = k
                    while j < n and source[j].isdigit():
                        j += 1
            text = source[i:j]
            if is_double:
                value: object = float(text)
            else:
                value = int(text)
                if value > _LONG_MAX + 1:  # +1: '-9223372036854775808' is a valid LONG once negated
                    raise _error(source, i, f"integer {text} is out of the LONG range")
            tokens.append(Token("NUMBER", text, i, value))
            i = j
        elif ch.isalpha() or ch in "_$":
            j = i
            while j < n and (source[j].isalnum() or source[j] in "_$"):
                j += 1
            word = source[i:j]
            if word in ("NaN", "Infinity"):
                tokens.append(Token("NUMBER", word, i, float("nan") if word == "NaN" else float("inf")))
            else:
                tokens.append(Token("IDENT", word, i))
            i = j
        elif ch in "'\"":
            text, i_end = _read_quoted(source, i)
            tokens.append(Token("STRING" if ch == "'" else "QIDENT", text, i))
            i = i_end
        else:
            for op in _OPERATORS:
                if source.startswith(op, i):
                    tokens.append(Token("OP", op, i))
                    i += len(op)
                    break
            else:
                hint = "; use == for equality" if ch == "=" else ""
                hint = "; use && and || for AND and OR" if ch in "&|" else hint
                raise _error(source, i, f"unexpected character '{ch}'{hint}")
    tokens.append(Token("EOF", "", n))
    return tokens


def _read_quoted(source: str, start: int) -> tuple[str, int]:
    quote_char = source[start]
    out: list[str] = []
    i, n = start + 1, len(source)
    while i < n:
        ch = source[i]
        if ch == quote_char:
            return "".join(out), i + 1
        if ch == "\\":
            if i + 1 >= n:
                break
            esc = source[i + 1]
            if esc in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[esc])
                i += 2
                continue
            if esc == "u":
                digits = source[i + 2:i + 6]
                if len(digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in digits):
                    out.append(chr(int(digits, 16)))
                    i += 6
                    continue
            raise _error(source, i, f"invalid escape '\\{esc}'; valid: \\' \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX")
        out.append(ch)
        i += 1
    what = "string literal" if quote_char == "'" else "quoted identifier"
    raise _error(source, start, f"unterminated {what}; expected a closing {quote_char}")


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.i = 0
        self.depth = 0  # open parentheses, calls and unary operators around the current token

    def peek(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, text: str, context: str) -> Token:
        tok = self.peek()
        if tok.kind != "OP" or tok.text != text:
            raise _error(self.source, tok.pos, f"expected '{text}' {context}, found {_describe(tok)}")
        return self.advance()

    def parse(self) -> Expr:
        if self.peek().kind == "EOF":
            raise _error(self.source, 0, "empty expression; expected a column, literal or function call")
        expr = self.expression(0)
        tok = self.peek()
        if tok.kind != "EOF":
            raise _error(self.source, tok.pos, f"expected an operator or end of expression, found {_describe(tok)}")
        return expr

    def expression(self, min_prec: int) -> Expr:
        left = self.prefix()
        while True:
            tok = self.peek()
            if tok.kind != "OP" or tok.text not in BINARY_PRECEDENCE:
                return left
            prec = BINARY_PRECEDENCE[tok.text]
            if prec <= min_prec:
                return left
            self.advance()
            # Right-associative operators let an equal-precedence operator bind on their right.
            right = self.expression(prec - 1 if tok.text in RIGHT_ASSOCIATIVE else prec)
            left = BinaryOp(tok.text, left, right)

    def prefix(self) -> Expr:
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise nesting_error("the expression", where=f" at position {self.peek().pos} in '{self.source[:80]}'")
            return self._prefix()
        finally:
            self.depth -= 1

    def _prefix(self) -> Expr:
        tok = self.advance()
        if tok.kind == "NUMBER":
            return self._number(tok, negate=False)
        if tok.kind == "STRING":
            return Literal(tok.text)
        if tok.kind == "QIDENT":
            return Identifier(tok.text)
        if tok.kind == "IDENT":
            if tok.text == "null":
                return Literal(None)
            nxt = self.peek()
            if nxt.kind == "OP" and nxt.text == "(":
                return self._call(tok)
            return Identifier(tok.text)
        if tok.kind == "OP":
            if tok.text == "-":
                nxt = self.peek()
                if nxt.kind == "NUMBER":
                    self.advance()
                    return self._number(nxt, negate=True)
                return UnaryOp("-", self.expression(NEGATE_PRECEDENCE))
            if tok.text == "!":
                return UnaryOp("!", self.expression(NOT_PRECEDENCE))
            if tok.text == "(":
                inner = self.expression(0)
                self.expect(")", f"to close the '(' at position {tok.pos}")
                return inner
        raise _error(
            self.source, tok.pos,
            f"expected a column, literal, function call or '(', found {_describe(tok)}",
        )

    def _number(self, tok: Token, negate: bool) -> Literal:
        value = tok.value
        if isinstance(value, int):
            value = -value if negate else value
            if value > _LONG_MAX:
                raise _error(self.source, tok.pos, f"integer {tok.text} is out of the LONG range")
            return Literal(value, LONG)
        return Literal(-value if negate else value, DOUBLE)

    def _call(self, name_tok: Token) -> Call:
        self.advance()  # '('
        args: list[Expr] = []
        if not (self.peek().kind == "OP" and self.peek().text == ")"):
            while True:
                args.append(self.expression(0))
                tok = self.peek()
                if tok.kind == "OP" and tok.text == ",":
                    self.advance()
                    continue
                if tok.kind == "OP" and tok.text == ")":
                    break
                raise _error(
                    self.source, tok.pos,
                    f"expected ',' or ')' in the arguments of {name_tok.text}(), found {_describe(tok)}",
                )
        self.advance()  # ')'
        return Call(name_tok.text, tuple(args))


def parse(text: str) -> Expr:
    """Parse a Druid native expression. Syntax errors name the position and what was expected."""
    if not isinstance(text, str):
        raise ValidationError(f"an expression must be a string, got {type(text).__name__}")
    with depth_guard("the expression"):
        return _Parser(text).parse()
