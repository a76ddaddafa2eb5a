"""Error messages name functions as the user wrote them: sqlglot parses aliases into one class and
renders it under its own name (ARRAY_LENGTH as ARRAY_SIZE, LEN as LENGTH, CEILING as CEIL, POW as
POWER, SUBSTR as SUBSTRING), and strata maps others (STRLEN onto CHAR_LENGTH); the call is quoted as
written, ``?`` parameters included."""

from __future__ import annotations

import re

import pytest

from common.errors import UnsupportedError, ValidationError
from common.sql import plan_sql
from tests.unit.sql.test_golden import golden_catalog

CASES = [
    ("SELECT ARRAY_LENGTH(page) FROM wiki", "ARRAY_LENGTH needs an ARRAY for 'page'", "ARRAY_SIZE"),
    ("SELECT array_length(page) FROM wiki", "ARRAY_LENGTH needs an ARRAY for 'page'", "ARRAY_SIZE"),
    ("SELECT LEN(added) FROM wiki", "LEN needs VARCHAR for 'added', got BIGINT in 'LEN(added)'", "LENGTH"),
    ("SELECT SUBSTR(page) FROM wiki", "SUBSTR takes 2 to 3 arguments, got 1 in 'SUBSTR(page)'", "SUBSTRING"),
    ("SELECT STRLEN(page, page) FROM wiki", "STRLEN takes 1 argument, got 2 in 'STRLEN(page, page)'", "CHAR_LENGTH"),
    ("SELECT CEILING(page) FROM wiki", "CEILING needs a number for argument 1, got VARCHAR in 'CEILING(page)'", "CEIL("),
    ("SELECT CEILING(__time) FROM wiki", "CEILING of a TIMESTAMP needs a unit: CEILING(__time TO DAY)", "CEIL("),
    ("SELECT pow(page, 2) FROM wiki", "POW needs a number for 'page', got VARCHAR in 'pow(page, 2)'", "POWER"),
    ("SELECT ?, POW(?, page) FROM wiki", "POW needs a number for 'page', got VARCHAR in 'POW(?, page)'", "__p"),
    ("SELECT SUM(page) FROM wiki", "cannot apply SUM to VARCHAR expression 'page' in 'SUM(page)'", None),
    ("SELECT APPROX_COUNT_DISTINCT_DS_HLL(page, page) FROM wiki",
     "APPROX_COUNT_DISTINCT_DS_HLL takes one argument, got 2", "APPROXDISTINCT"),
]


@pytest.mark.parametrize("sql, message, absent", CASES)
def test_messages_use_the_written_function_name(sql, message, absent):
    params = (1, 2) if "?" in sql else ()
    with pytest.raises((ValidationError, UnsupportedError)) as info:
        plan_sql(sql, golden_catalog(), params, {})
    text = str(info.value)
    assert message in text, text
    if absent:
        assert absent not in text, text


def test_nested_calls_are_quoted_as_written():
    sql = "SELECT LOWER(  LEN(page)  ) FROM wiki"
    with pytest.raises(ValidationError, match=re.escape("LOWER needs VARCHAR for 'LEN(page)'")):
        plan_sql(sql, golden_catalog(), (), {})
