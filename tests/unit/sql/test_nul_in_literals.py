"""U+0000 in SQL string literals: as the character itself (Flight SQL carries it byte for byte) and
as Calcite's ``U&'\\0000'`` (for clients that pass the text as a C string, where it would end the
statement), through planning and the native engine, compared with DuckDB."""

from __future__ import annotations

import re

import pytest

from common.errors import ValidationError
from common.sql.sql_literals import unicode_string


@pytest.mark.parametrize("text, escape, want", [
    ("a\\0000b", "\\", "a\x00b"), ("\\00e9", "\\", "é"), ("\\+01F600", "\\", "😀"), ("\\\\", "\\", "\\"),
    ("!0000!!x", "!", "\x00!x"), ("plain", "\\", "plain"), ("", "\\", ""),
])
def test_unicode_string_escapes(text, escape, want):
    assert unicode_string(text, escape) == want


@pytest.mark.parametrize("text, escape, message", [
    ("\\00zz", "\\", "bad escape '\\\\00zz' at character 1"), ("ab\\12", "\\", "at character 3"),
    ("\\D800", "\\", "not a Unicode character"), ("\\+110000", "\\", "not a Unicode character"),
    ("x", "a", "UESCAPE must be one character"), ("x", "+", "UESCAPE"),
])
def test_bad_unicode_escapes_name_the_escape(text, escape, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        unicode_string(text, escape)


@pytest.mark.parametrize("literal", ["'a\x00b'", "U&'a\\0000b'", "u&'a!0000b' UESCAPE '!'"])
def test_nul_literal_in_select_filter_and_computed_columns(sql_env, literal):
    assert sql_env.sql(f"SELECT {literal} AS s, LENGTH({literal}) AS n").to_pylist() == [{"s": "a\x00b", "n": 3}]
    sql = (f"SELECT CONCAT(channel, {literal}) AS s FROM wiki WHERE CONCAT(channel, {literal}) <> {literal} "
           "ORDER BY s LIMIT 3")
    duck = sql_env.duck.execute("SELECT channel || 'a' || chr(0) || 'b' AS s FROM wiki ORDER BY s LIMIT 3").fetchall()
    assert [r["s"] for r in sql_env.sql(sql).to_pylist()] == [r[0] for r in duck]
    [row] = sql_env.sql(f"SELECT COUNT(*) AS c FROM wiki WHERE channel = {literal} OR {literal} = 'a'").to_pylist()
    assert row == {"c": 0}


def test_nul_in_a_group_key(sql_env):
    rows = sql_env.sql("SELECT CONCAT(channel, U&'\\0000') AS k, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY 1").to_pylist()
    duck = sql_env.duck.execute("SELECT channel || chr(0) AS k, COUNT(*) AS c FROM wiki GROUP BY 1 ORDER BY 1").fetchall()
    assert [(r["k"], r["c"]) for r in rows] == duck


def test_a_truncated_statement_says_how_to_write_nul(sql_env):
    with pytest.raises(ValidationError, match=r"U\+0000 character: write that one as U&'\\0000'"):
        sql_env.sql("SELECT 'a")
