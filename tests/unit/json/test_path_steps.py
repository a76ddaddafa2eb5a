"""JSON paths: Druid's JSONPath subset, the wildcards beyond it ([*], ..name), the jq-style form,
and errors that quote the path and point at the offending character."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.json.path_steps import json_values, parse_path, path_text, walk
from common.types.column_type import DOUBLE, LONG, STRING, ColumnType

DOC = {"a": [{"b": 1}, {"b": "x"}, {"c": {"b": [1, 2]}}, {"b": None}], "b": 3, "k.d": {"q'": 7},
       "o": {"x": 1.5, "y": {"z": True}}}


@pytest.mark.parametrize("text, canonical", [
    ("$", "$"), ("$.", "$"), (".", "$"),
    ("$.a.b", "$.a.b"), ("$['k.d']", "$['k.d']"), ('$["k.d"]', "$['k.d']"), ("$.a[0]", "$.a[0]"),
    ("$.a[-1]", "$.a[-1]"), ("$.a[*].b", "$.a[*].b"), ("$.a.*", "$.a[*]"), ("$..b", "$..b"),
    (".a.b", "$.a.b"), ('."k.d"', "$['k.d']"), (".a[0].b", "$.a[0].b"), (".a.[0]", "$.a[0]"), (".a[]", "$.a[*]"),
    ("$.a-b", "$['a-b']"), ("$.é", "$['é']"), ("$['q\\'']", "$['q\\'']"),
])
def test_forms_and_canonical_text(text, canonical):
    parts = parse_path(text)
    assert path_text(parts) == canonical
    assert parse_path(path_text(parts)) == parts  # canonical text parses back to the same steps


def test_jq_and_jsonpath_forms_reach_the_same_values():
    for jq, jp in [(".o.x", "$.o.x"), (".a[1].b", "$.a[1].b"), ('."k.d"', "$['k.d']"), (".a[]", "$.a[*]")]:
        assert walk(DOC, parse_path(jq)) == walk(DOC, parse_path(jp))


def test_wildcards_return_every_value_they_reach():
    assert walk(DOC, parse_path("$.a[*].b")) == [1, "x"]  # missing and null ones are skipped
    assert walk(DOC, parse_path("$..b")) == [3, 1, "x", [1, 2]]  # document order, any depth
    assert walk(DOC, parse_path("$.o.*")) == [1.5, {"z": True}]  # every value of an object
    assert walk(DOC, parse_path("$.a[*].nope")) is None  # nothing reached: null, like a missing path
    assert walk(DOC, parse_path("$.a[*].c.b[-1]")) == [2]


def test_json_value_over_a_wildcard_is_an_array_of_literals():
    texts = pa.array([json.dumps(DOC), None, json.dumps({"a": []})])
    got = json_values(texts, "$..b", STRING)
    assert got.type == pa.list_(pa.string())
    assert got.to_pylist() == [["3", "1", "x"], None, None]  # the array [1, 2] is not a literal
    assert json_values(texts, "$.a[*].b", LONG).to_pylist() == [[1, None], None, None]  # 'x' is no number
    assert json_values(texts, "$.o.x", DOUBLE).to_pylist() == [1.5, None, None]
    assert json_values(texts, "$.a[*].b", ColumnType.parse("ARRAY<STRING>")).to_pylist() == [["1", "x"], None, None]


@pytest.mark.parametrize("text, position, caret_under", [
    ("a.b", 1, "a"),
    ("$a", 2, "a"),
    ("$.a..", 6, None),
    ("$.a[x]", 5, "x"),
    ("$.a[0", 5, "0"),
    ("$.a.[0]", 5, "["),
    ("$ .a", 2, " "),
    ("$['a]", 3, "'"),
    (".a..b", 4, "."),
    (".a[x]", 4, "x"),
])
def test_invalid_paths_quote_the_path_and_point_at_the_character(text, position, caret_under):
    with pytest.raises(ValidationError) as info:
        parse_path(text)
    message = str(info.value)
    assert f"'{text}'" in message and f"position {position}" in message
    lines = message.splitlines()
    path_line = next(i for i, line in enumerate(lines) if line == f"  {text}")
    caret = lines[path_line + 1].index("^") - 2
    assert caret == position - 1
    if caret_under is not None:
        assert text[caret] == caret_under
    else:
        assert caret == len(text)  # the path ended where more was needed


def test_not_text_is_an_error():
    with pytest.raises(ValidationError, match="must start with"):
        parse_path("")
