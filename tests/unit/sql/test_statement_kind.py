"""classify() and parse_set(): the one statement classifier and the one SET parser, over text
written to fool a classifier that looks at raw characters."""

from __future__ import annotations

import pytest

from common.errors import UnsupportedError, ValidationError
from common.sql.set_statement import parse_set
from common.sql.statement_kind import StatementKind, classify, tokenize

Q, I, R = StatementKind.QUERY, StatementKind.INSERT, StatementKind.REPLACE


@pytest.mark.parametrize("sql, kind, explain", [
    ("SELECT 1", Q, False),
    ("select 1", Q, False),
    ("   \n\t  SELECT 1", Q, False),
    ("/* INSERT INTO x */ SELECT 1", Q, False),
    ("-- INSERT INTO x\nSELECT 1", Q, False),
    ("SELECT 'INSERT INTO x SELECT 1' AS s", Q, False),
    ("SELECT 'a; INSERT INTO x' AS s; ", Q, False),
    ('SELECT "insert", "set" FROM "select"', Q, False),
    ("WITH t AS (SELECT 1) SELECT * FROM t", Q, False),
    ("(SELECT 1) UNION ALL (SELECT 2)", Q, False),
    ("VALUES (1)", Q, False),
    ("/* SELECT */ insert into x select 1", I, False),
    ("  -- comment\n  Replace INTO \"x\" OVERWRITE ALL SELECT 1", R, False),
    ("SET x = 'INSERT'; SELECT 1", Q, False),
    ("SET a = 1; /* c */ set \"b\" = 'x;y';\n INSERT INTO x SELECT 1", I, False),
    ("EXPLAIN PLAN FOR SELECT 1", Q, True),
    ("explain plan for insert into x select 1", I, True),
    ("/* c */ EXPLAIN /* d */ PLAN\n  FOR REPLACE INTO x OVERWRITE ALL SELECT 1", R, True),
    ("SET timeout = 5; EXPLAIN PLAN FOR SELECT 1", Q, True),
    ("create table t (a varchar)", StatementKind.CREATE, False),
    ("  ALTER TABLE t DROP COLUMN a", StatementKind.ALTER, False),
    ("DROP TABLE t;", StatementKind.DROP, False),
    ("update x set a = 1", StatementKind.OTHER, False),
    ("DELETE FROM x", StatementKind.OTHER, False),
    ('"INSERT" INTO x SELECT 1', StatementKind.OTHER, False),  # a quoted name is not the keyword
])
def test_kinds(sql, kind, explain):
    got = classify(sql)
    assert (got.kind, got.explain) == (kind, explain)
    assert got.is_ingestion == (kind.is_ingestion and not explain)
    assert got.is_ddl == (kind.is_ddl and not explain)


def test_settings_body_and_parameters():
    sql = "SET a = 1;\nset \"my key\" = 'x;y'; SET a = 2;\nSELECT ? /* ? */, '?' FROM t WHERE b = ?; -- ?"
    got = classify(sql)
    assert dict(got.settings) == {"a": 2, "my key": "x;y"}  # later SETs win
    assert got.parameter_count == 2
    assert got.body.strip() == "SELECT ? /* ? */, '?' FROM t WHERE b = ?"
    assert len(got.body) == len(sql) and got.body.count("\n") == sql.count("\n")  # positions are the user's
    assert got.head == "SELECT"


@pytest.mark.parametrize("sql, error, match", [
    ("", ValidationError, "empty SQL statement"),
    ("  -- only a comment\n", ValidationError, "empty SQL statement"),
    (";;", ValidationError, "empty SQL statement"),
    ("SET a = 1;", ValidationError, "SET statements must be followed by the statement to run"),
    ("SELECT 1; SELECT 2", ValidationError,
     "only SET statements may come before the SELECT statement; found 'SELECT' after it at line 1, column 11"),
    ("INSERT INTO x SELECT 1; SET a = 1", ValidationError, "only SET statements may come before the INSERT"),
    ("SELECT 'unterminated", ValidationError, "SQL syntax error: .*unterminated"),
    ("SELECT 1 /* open comment", ValidationError, "SQL syntax error"),
    ("EXPLAIN SELECT 1", UnsupportedError, "only EXPLAIN PLAN FOR <query> is supported"),
    ("EXPLAIN PLAN SELECT 1", UnsupportedError, "only EXPLAIN PLAN FOR"),
    ("EXPLAIN PLAN FOR", ValidationError, "EXPLAIN PLAN FOR needs a query"),
    ("EXPLAIN PLAN FOR SET a = 1", UnsupportedError, "only EXPLAIN PLAN FOR"),
    ("SET a = abc; SELECT 1", ValidationError, "SET a at line 1, column 9: the value must be a string, number"),
])
def test_refusals(sql, error, match):
    with pytest.raises(error, match=match):
        classify(sql)


def _set(text: str):
    tokens = [t for t in tokenize(text) if t.token_type.name != "SEMICOLON"]
    return parse_set(text, tokens)


@pytest.mark.parametrize("text, expected", [
    ("SET timeout = 100", ("timeout", 100)),
    ("set useCache = false", ("useCache", False)),
    ("SET x = TRUE", ("x", True)),
    ("SET x = NULL", ("x", None)),
    ("SET sqlTimeZone = 'Asia/Tokyo'", ("sqlTimeZone", "Asia/Tokyo")),
    ("SET s = 'it''s'", ("s", "it's")),
    ("SET n = -1", ("n", -1)),
    ("SET n = +2", ("n", 2)),
    ("SET n = 1.5", ("n", 1.5)),
    ("SET n = -2.5e3", ("n", -2500.0)),
    ('SET "my key" = 1', ("my key", 1)),
    ("SET limit = 3", ("limit", 3)),  # a keyword is a fine key
    ("SET\n  maxParseExceptions\n  =\n  -1", ("maxParseExceptions", -1)),
])
def test_set_accepted_forms(text, expected):
    assert _set(text) == expected


@pytest.mark.parametrize("text, match", [
    ("SET", "SET at line 1, column 1 needs a key and a value"),
    ("SET x", "SET x at line 1, column 1: expected '=' after the key, found nothing"),
    ("SET x TO 1", "expected '=' after the key, found 'TO'"),
    ("SET x = ", "SET x at line 1, column 8: the value must be .* got ''"),
    ("SET x = abc", "the value must be a string, number, TRUE, FALSE or NULL literal, got 'abc'"),
    ("SET x = 1 + 1", "got '1 \\+ 1'"),
    ("SET x = 'a' || 'b'", "got ''a' \\|\\| 'b''"),
    ("SET x = 1, y = 2", "one key = value per SET statement"),
    ("SET 'x' = 1", "'x' is not a key name"),
    ("SET 1 = 1", "'1' is not a key name"),
    ("\n\nSET x = (1)", "SET x at line 3, column 9"),
])
def test_set_errors_name_the_statement_and_position(text, match):
    with pytest.raises(ValidationError, match=match):
        _set(text)
