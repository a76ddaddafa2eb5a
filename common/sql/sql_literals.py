"""SQL literals as values: LIMIT/OFFSET constants, ``?`` parameter values and TIMESTAMP literals in
the session time zone, each to the Python value or typed ``Literal`` the translator builds on."""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from common.errors import ValidationError
from common.sql.scalar import Literal
from common.sql.sql_types import BIGINT, BOOLEAN, DOUBLE, NULL, TIMESTAMP, VARCHAR


def literal_value(node: exp.Expression):
    """A Python constant, for LIMIT/OFFSET and the like."""
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return float(node.this) if any(c in node.this for c in ".eE") else int(node.this)
    if isinstance(node, exp.Neg):
        inner = literal_value(node.this)  # None: not a constant (-x), as anything else that is not
        return None if inner is None or isinstance(inner, str) else -inner
    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    return None


def parameter_literal(value, position: int) -> Literal:
    if value is None:
        return Literal(None, NULL)
    if isinstance(value, bool):
        return Literal(value, BOOLEAN)
    if isinstance(value, int):
        return Literal(value, BIGINT)
    if isinstance(value, float):
        return Literal(value, DOUBLE)
    if isinstance(value, str):
        return Literal(value, VARCHAR)
    if isinstance(value, dt.datetime):
        return Literal(_millis(value), TIMESTAMP)
    if isinstance(value, dt.date):
        return Literal(_millis(dt.datetime(value.year, value.month, value.day)), TIMESTAMP)
    if hasattr(value, "item"):  # numpy scalars
        return parameter_literal(value.item(), position)
    raise ValidationError(f"parameter {position + 1} has unsupported type {type(value).__name__}; "
                          "use a number, string, boolean, datetime or None")


def parse_timestamp(text: str, time_zone: str, what: str) -> int:
    """A TIMESTAMP literal in the session time zone, to epoch millis."""
    from common.expr import evaluate, parse

    if time_zone == "UTC":
        # The common case, in plain Python: the Arrow path below costs about a millisecond a literal.
        from common.types.interval import parse_instant

        try:
            return parse_instant(text)
        except ValidationError:
            pass  # the general parser knows more forms, and words the error for SQL
    tz = "null" if time_zone == "UTC" else f"'{time_zone}'"
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    value = evaluate(parse(f"timestamp_parse({quoted}, null, {tz})"), {}, 1)[0].as_py()
    if value is None:
        raise ValidationError(f"cannot parse '{text}' as a TIMESTAMP ({what}); use e.g. '2015-09-12 08:00:00'")
    return _millis(value) if isinstance(value, dt.datetime) else int(value)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _millis(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)


def unicode_string(text: str, escape: str = "\\") -> str:
    """The value of a ``U&'...'`` literal (``UESCAPE 'c'`` naming another escape character):
    ``\\XXXX`` (4 hex digits) or ``\\+XXXXXX`` (6) is that code point and a doubled escape is the
    character itself, as in Calcite's Druid SQL. It is how a client that passes the statement as a
    C string (ADBC, JDBC over a C driver), where U+0000 ends the text, writes that character."""
    if len(escape) != 1 or escape in "+'\" " or escape in "0123456789abcdefABCDEF":
        raise ValidationError(f"UESCAPE must be one character other than a hex digit, '+', a quote or a space, "
                              f"not {escape!r}")
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != escape:
            out.append(ch)
            i += 1
            continue
        if text[i + 1:i + 2] == escape:
            out.append(escape)
            i += 2
            continue
        digits = 6 if text[i + 1:i + 2] == "+" else 4
        start = i + 1 + (digits == 6)
        hexits = text[start:start + digits]
        if len(hexits) != digits or any(c not in "0123456789abcdefABCDEF" for c in hexits):
            raise ValidationError(f"bad escape {text[i:start + digits]!r} at character {i + 1} of U&'{text}': "
                                  f"write {escape}XXXX or {escape}+XXXXXX with hex digits, or {escape}{escape} for "
                                  f"{escape!r} itself")
        code = int(hexits, 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise ValidationError(f"escape {text[i:start + digits]!r} in U&'{text}' is not a Unicode character "
                                  "(surrogates and code points past U+10FFFF are not)")
        out.append(chr(code))
        i = start + digits
    return "".join(out)
