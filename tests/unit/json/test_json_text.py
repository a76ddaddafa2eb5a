"""loads_json: every way client JSON can be bad is a ValidationError naming what was sent."""

from __future__ import annotations

import pytest

from common.errors import ValidationError
from common.json.json_text import MAX_JSON_DEPTH, loads_json


@pytest.mark.parametrize("text,message", [
    (b"[" * 100_000 + b"]" * 100_000, "deeper than"),
    ('{"a": ' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1), "deeper than"),
    ('{"n": ' + "9" * 5000 + "}", "number too long"),
    (b'{"a": "\xff"}', "not UTF-8"),
    ("[1, 2", "not valid JSON"),
    ("", "not valid JSON"),
])
def test_bad_json_is_a_user_error_naming_the_payload(text, message):
    with pytest.raises(ValidationError, match=message) as err:
        loads_json(text, "spec under test")
    assert "spec under test" in str(err.value)


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '{"a": "' + "[" * 10_000 + '", "b": "\\"[[[["}'
    assert loads_json(text, "x") == {"a": "[" * 10_000, "b": '"[[[['}


def test_nesting_up_to_the_limit_parses():
    depth = MAX_JSON_DEPTH
    assert loads_json("[" * depth + "]" * depth, "x") is not None
