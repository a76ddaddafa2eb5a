import math

import pytest

from common.errors import ValidationError
from common.expr import BinaryOp, Call, Identifier, Literal, UnaryOp, parse
from common.types.column_type import DOUBLE, LONG, STRING

ROUND_TRIP = [
    "added",
    "__time",
    '"page name"',
    '"with \\"quote\\""',
    '"null"',
    "'hello'",
    "'it\\'s'",
    "'tab\\tnew\\nline\\\\'",
    "'caf\u00e9'",
    "''",
    "null",
    "0",
    "42",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "1.5",
    "-0.25",
    "1e20",
    "2.5e-7",
    "NaN",
    "Infinity",
    "-Infinity",
    "a + b",
    "a - b - c",
    "a - (b - c)",
    "a * b + c",
    "a * (b + c)",
    "a / b % c",
    "a ^ b ^ c",
    "(a ^ b) ^ c",
    "-a",
    "-(5)",
    "-(-5)",
    "--a",
    "-a ^ 2",
    "-2 ^ 2",
    "-(a + b)",
    "!a",
    "!(a == b)",
    "!!a",
    "(!a) == b",
    "a == b",
    "a != b",
    "a < b",
    "a <= b",
    "a > b",
    "a >= b",
    "a && b",
    "a || b",
    "a && b && c",
    "a || (b && c)",
    "(a || b) && c",
    "!a && b",
    "a > 1 && b < 2 || c == 'x'",
    "concat()",
    "lower(page)",
    "concat(page, '-', \"user name\", 1, 2.5, null)",
    "if(a > 0, 'pos', 'neg')",
    "timestamp_floor(__time, 'PT1H', null, 'America/Los_Angeles')",
    "nvl(lower(concat(a, b)), 'x') == 'y'",
    "f(g(h(x)))",
    "a + -1",
    "a - -1.5",
    "$weird_name1",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip(text):
    tree = parse(text)
    printed = tree.to_string()
    again = parse(printed)
    if "NaN" in text:  # NaN != NaN, so compare the printed forms
        assert again.to_string() == printed
    else:
        assert again == tree
        assert parse(again.to_string()) == tree


@pytest.mark.parametrize(
    "text,printed",
    [
        ("a+b*c", "a + b * c"),
        ("(a+b)*c", "(a + b) * c"),
        ("((a))", "a"),
        ("a-(b-c)", "a - (b - c)"),
        ("(a-b)-c", "a - b - c"),
        ("2^3^2", "2 ^ 3 ^ 2"),
        ("(2^3)^2", "(2 ^ 3) ^ 2"),
        ("! a == b", "!a == b"),
        ("!(a == b)", "!(a == b)"),
        ("a || b && c", "(a || b) && c"),
        ("a || (b && c)", "a || (b && c)"),
        ("a&&b||c", "(a && b) || c"),
        ("- 5", "-5"),
        ("1.0", "1.0"),
        ("1e+20", "1e20"),
        ('"ok"', "ok"),
        ("'\\u0041\\/'", "'A/'"),
    ],
)
def test_to_string_is_minimal_and_druid_safe(text, printed):
    assert parse(text).to_string() == printed


def test_precedence_tree_shapes():
    assert parse("a + b * c") == BinaryOp("+", Identifier("a"), BinaryOp("*", Identifier("b"), Identifier("c")))
    # As in Druid's grammar, && and || share one level, evaluated left to right ...
    assert parse("a || b && c") == BinaryOp("&&", BinaryOp("||", Identifier("a"), Identifier("b")), Identifier("c"))
    # ... and unary operators bind tightest: !a == b is (!a) == b
    assert parse("!a == b") == BinaryOp("==", UnaryOp("!", Identifier("a")), Identifier("b"))
    assert parse("!a && b") == BinaryOp("&&", UnaryOp("!", Identifier("a")), Identifier("b"))
    # comparisons bind looser than arithmetic
    assert parse("a + 1 > b * 2") == BinaryOp(
        ">", BinaryOp("+", Identifier("a"), Literal(1)), BinaryOp("*", Identifier("b"), Literal(2))
    )
    # ^ is right associative; unary minus binds tighter than ^
    assert parse("2 ^ 3 ^ 2") == BinaryOp("^", Literal(2), BinaryOp("^", Literal(3), Literal(2)))
    assert parse("-x ^ 2") == BinaryOp("^", UnaryOp("-", Identifier("x")), Literal(2))
    assert parse("a - b - c") == BinaryOp("-", BinaryOp("-", Identifier("a"), Identifier("b")), Identifier("c"))
    assert parse("a / b % c") == BinaryOp("%", BinaryOp("/", Identifier("a"), Identifier("b")), Identifier("c"))


def test_literals_and_types():
    assert parse("12") == Literal(12, LONG)
    assert parse("-12") == Literal(-12, LONG)
    assert parse("1.") == Literal(1.0, DOUBLE)
    assert parse(".5") == Literal(0.5, DOUBLE)
    assert parse("3e2") == Literal(300.0, DOUBLE)
    assert parse("'x'") == Literal("x", STRING)
    assert parse("null") == Literal(None)
    assert parse("null").type is None
    assert math.isinf(parse("-Infinity").value) and parse("-Infinity").value < 0
    assert parse("-(5)") == UnaryOp("-", Literal(5))
    assert parse('"a b"') == Identifier("a b")
    assert parse("f()") == Call("f", ())
    assert Literal(True) == Literal(1, LONG)


def test_columns():
    assert parse("a + b * lower(\"c d\")").columns() == {"a", "b", "c d"}
    assert parse("concat('x', 1)").columns() == frozenset()
    assert parse("if(a, a, __time)").columns() == {"a", "__time"}


@pytest.mark.parametrize(
    "text,position,fragment",
    [
        ("a +", 3, "expected a column, literal, function call or '(', found end of expression"),
        ("(a + b", 6, "expected ')' to close the '(' at position 0"),
        ("a b", 2, "expected an operator or end of expression, found 'b'"),
        ("f(a b)", 4, "expected ',' or ')' in the arguments of f()"),
        ("a = b", 2, "use == for equality"),
        ("a & b", 2, "use && and || for AND and OR"),
        ("'abc", 0, "unterminated string literal"),
        ('"abc', 0, "unterminated quoted identifier"),
        ("'a\\qb'", 2, "invalid escape"),
        ("", 0, "empty expression"),
        ("a + )", 4, "found ')'"),
        ("1 + 99999999999999999999", 4, "out of the LONG range"),
        ("x # y", 2, "unexpected character '#'"),
    ],
)
def test_syntax_errors_name_position(text, position, fragment):
    with pytest.raises(ValidationError) as info:
        parse(text)
    message = str(info.value)
    assert f"at position {position} in '{text}'" in message
    assert fragment in message


def test_node_validation():
    with pytest.raises(ValidationError):
        BinaryOp("**", Identifier("a"), Identifier("b"))
    with pytest.raises(ValidationError):
        UnaryOp("~", Identifier("a"))
    with pytest.raises(ValidationError):
        Literal(object())
    assert Call("f", [Identifier("a")]).args == (Identifier("a"),)
    assert str(parse("a+1")) == "a + 1"
