"""The expression tree: immutable nodes that print back to Druid expression syntax.

Nodes are frozen dataclasses so trees compare by value (the parser round-trip tests rely on it)
and can be used as cache keys. ``to_string()`` prints only the parentheses precedence needs, except
where strata's precedence differs from Druid's (``!`` and mixed ``&&``/``||``): there it always
parenthesizes, so the text means the same thing to both parsers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from common.errors import ValidationError
from common.types.column_type import DOUBLE, FLOAT, LONG, STRING, ColumnType

# Binding power of each binary operator; higher binds tighter. Shared with the parser so printing
# and parsing can never disagree.
BINARY_PRECEDENCE = {
    # Druid's grammar puts && and || on one level (left to right) and unary ops above everything.
    "||": 1,
    "&&": 1,
    "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "+": 5, "-": 5,
    "*": 6, "/": 6, "%": 6,
    "^": 7,
}
NOT_PRECEDENCE = 8  # as in Druid: `!a == b` is `(!a) == b`
NEGATE_PRECEDENCE = 8  # unary minus binds tighter than everything, including ^
RIGHT_ASSOCIATIVE = frozenset({"^"})
COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "^"})
LOGICAL = frozenset({"&&", "||"})

# Words the tokenizer reads as literals, so columns with these names must be quoted.
KEYWORDS = frozenset({"null", "NaN", "Infinity"})
_BARE_IDENTIFIER = re.compile(r"^[_$a-zA-Z][_$a-zA-Z0-9]*$")
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def quote(text: str, quote_char: str) -> str:
    out = []
    for ch in text:
        if ch == quote_char:
            out.append("\\" + ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return quote_char + "".join(out) + quote_char


def quote_identifier(name: str) -> str:
    if _BARE_IDENTIFIER.match(name) and name not in KEYWORDS:
        return name
    return quote(name, '"')


class Expr:
    """Base of every node."""

    def to_string(self) -> str:
        raise NotImplementedError

    def columns(self) -> frozenset[str]:
        raise NotImplementedError

    def children(self) -> tuple[Expr, ...]:
        return ()

    @property
    def precedence(self) -> int:
        return 100  # atoms never need parentheses

    def __str__(self) -> str:
        return self.to_string()


_LITERAL_TYPES = (LONG, DOUBLE, FLOAT, STRING)


@dataclass(frozen=True)
class Literal(Expr):
    """A constant. ``type`` is inferred from ``value`` when omitted; ``null`` has type None."""

    value: object
    type: ColumnType | None = None

    def __post_init__(self) -> None:
        value = self.value
        if isinstance(value, bool):  # Druid has no boolean literals; true is 1
            value = int(value)
            object.__setattr__(self, "value", value)
        if self.type is None and value is not None:
            if isinstance(value, int):
                object.__setattr__(self, "type", LONG)
            elif isinstance(value, float):
                object.__setattr__(self, "type", DOUBLE)
            elif isinstance(value, str):
                object.__setattr__(self, "type", STRING)
            else:
                raise ValidationError(f"cannot make an expression literal from {type(value).__name__} {value!r}")
        if self.type is not None and self.type not in _LITERAL_TYPES:
            raise ValidationError(f"literals may be LONG, DOUBLE or STRING, not {self.type}")
        if value is None and self.type is not None:
            raise ValidationError("a null literal has no type")

    def to_string(self) -> str:
        v = self.value
        if v is None:
            return "null"
        if self.type == STRING:
            return quote(str(v), "'")
        if self.type == LONG:
            return str(int(v))
        f = float(v)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        # Druid's grammar spells exponents without '+' (1e20, not 1e+20).
        return repr(f).replace("e+", "e")

    def columns(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True)
class Identifier(Expr):
    name: str

    def to_string(self) -> str:
        return quote_identifier(self.name)

    def columns(self) -> frozenset[str]:
        return frozenset((self.name,))


@dataclass(frozen=True)
class Call(Expr):
    name: str
    args: tuple[Expr, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(self.args))

    def to_string(self) -> str:
        return f"{self.name}({', '.join(a.to_string() for a in self.args)})"

    def columns(self) -> frozenset[str]:
        return frozenset().union(*(a.columns() for a in self.args))

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str  # '-' or '!'
    operand: Expr

    def __post_init__(self) -> None:
        if self.op not in ("-", "!"):
            raise ValidationError(f"unknown unary operator '{self.op}'; valid: '-', '!'")

    @property
    def precedence(self) -> int:
        return NEGATE_PRECEDENCE if self.op == "-" else NOT_PRECEDENCE

    def to_string(self) -> str:
        operand = self.operand
        if self.op == "-":
            # '-5' would re-parse as one negative literal, so a negated number keeps its parentheses.
            atomic = isinstance(operand, (Identifier, Call)) or (
                isinstance(operand, Literal) and operand.type not in (LONG, DOUBLE, FLOAT)
            ) or (isinstance(operand, UnaryOp) and operand.op == "-")
        else:
            atomic = isinstance(operand, (Identifier, Call, Literal, UnaryOp))
        inner = operand.to_string()
        return f"{self.op}{inner}" if atomic else f"{self.op}({inner})"

    def columns(self) -> frozenset[str]:
        return self.operand.columns()

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class BinaryOp(Expr):
    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in BINARY_PRECEDENCE:
            raise ValidationError(
                f"unknown operator '{self.op}'; valid: {', '.join(BINARY_PRECEDENCE)}"
            )

    @property
    def precedence(self) -> int:
        return BINARY_PRECEDENCE[self.op]

    def to_string(self) -> str:
        return f"{self._side(self.left, True)} {self.op} {self._side(self.right, False)}"

    def _side(self, child: Expr, is_left: bool) -> str:
        text = child.to_string()
        mine = self.precedence
        theirs = child.precedence
        if self.op in RIGHT_ASSOCIATIVE:
            needs = theirs < mine or (theirs == mine and is_left)
        else:
            needs = theirs < mine or (theirs == mine and not is_left)
        # Druid gives && and || one shared precedence, so mixing them always gets parentheses.
        if isinstance(child, BinaryOp) and {child.op, self.op} == {"&&", "||"}:
            needs = True
        return f"({text})" if needs else text

    def columns(self) -> frozenset[str]:
        return self.left.columns() | self.right.columns()

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)
