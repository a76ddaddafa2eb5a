"""SQL DDL to catalog operations: a pure translator the broker calls before planning a query.

    CREATE [OR REPLACE] TABLE [IF NOT EXISTS] [druid.]name [(col [type], ...)]
        [PARTITIONED BY DAY | HOUR | ALL [TIME] | 'PT15M' ...]
        [CLUSTERED BY col [ASC | DESC], ...]
        [WITH (targetSegmentRows = 5000000, sealed = TRUE, description = '...', ...)]
    CREATE [OR REPLACE] EXTERNAL TABLE [IF NOT EXISTS] [ext.]name (col type, ...)
        WITH (source = 'inline' | 'local' | 'http', format = 'csv', baseDir = '/data', ...)
    ALTER TABLE [schema.]name action [, action ...]
        action: ADD [COLUMN] col [type] | DROP [COLUMN] col | HIDE COLUMN col | UNHIDE COLUMN col
              | MOVE COLUMN col FIRST | LAST | BEFORE other | AFTER other
              | SET (property = value | NULL, ...)
              | ADD PROJECTION name AS SELECT ... GROUP BY ... | DROP PROJECTION name
    DROP TABLE [IF EXISTS] [schema.]name [PURGE]

Druid's dialect in sqlglot has no grammar for PARTITIONED BY in CREATE, EXTERNAL tables, HIDE or
MOVE, so statements are read from sqlglot's tokens by a small recursive-descent parser: sqlglot
still decides what is an identifier, a string or a keyword, and positions in errors are its.
OR REPLACE maps to action Force, IF NOT EXISTS to IfNew. Column types are stored in their
canonical spelling (``varchar`` -> VARCHAR, ``VARCHAR ARRAY`` -> ARRAY<VARCHAR>). List
properties (hiddenColumns, files, uris) take ARRAY['a', 'b'] or one comma-separated string.
"""

from __future__ import annotations

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from common.catalog.operations import (
    AddColumns,
    AddProjection,
    DropProjection,
    CatalogOperation,
    CreateTable,
    DropColumns,
    DropTable,
    EditTable,
    HideColumns,
    MoveColumn,
    SetProperties,
    TableEdit,
)
from common.catalog.table_spec import DATASOURCE, DRUID_SCHEMA, EXT_SCHEMA, INPUT_TYPES, ColumnSpec, TableId, TableSpec
from common.catalog.validation import (
    SQL_TYPES,
    canonical_granularity,
    validate_sql_type,
    validate_table,
    validate_table_id,
)
from common.errors import ValidationError

DIALECT = "druid"
_DDL_HEADS = (TokenType.CREATE, TokenType.ALTER, TokenType.DROP)
_NOT_WORDS = {TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA,
              TokenType.DOT, TokenType.EQ, TokenType.SEMICOLON, TokenType.LT, TokenType.GT, TokenType.L_BRACKET,
              TokenType.R_BRACKET, TokenType.DASH, TokenType.PLUS, TokenType.STAR, TokenType.SLASH}
_LIST_PROPERTIES = ("hiddenColumns", "files", "uris")
_ALTER_ACTIONS = ("ADD", "DROP", "HIDE", "UNHIDE", "MOVE", "SET")
_SYNTAX = {
    "CREATE": "CREATE [OR REPLACE] [EXTERNAL] TABLE [IF NOT EXISTS] name (col type, ...) [PARTITIONED BY DAY] "
              "[CLUSTERED BY col [DESC], ...] [WITH (property = value, ...)]",
    "ALTER": "ALTER TABLE name ADD [COLUMN] col type | DROP [COLUMN] col | HIDE COLUMN col | UNHIDE COLUMN col "
             "| MOVE COLUMN col FIRST|LAST|BEFORE other|AFTER other | SET (property = value, ...) "
             "| ADD PROJECTION name AS SELECT ... | DROP PROJECTION name",
    "DROP": "DROP TABLE [IF EXISTS] name [PURGE]",
}


def _tokens(sql: str) -> list[Token]:
    try:
        return sqlglot.tokenize(sql, read=DIALECT)
    except TokenError as exc:
        raise ValidationError(f"SQL syntax error: {exc}") from None


def translate_ddl(sql: str) -> CatalogOperation:
    """The catalog operation a DDL statement asks for, validated like a REST request would be."""
    tokens = _tokens(sql)
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens or tokens[0].token_type not in _DDL_HEADS:
        raise ValidationError("not a DDL statement; expected CREATE TABLE, CREATE EXTERNAL TABLE, ALTER TABLE or "
                              "DROP TABLE")
    return _Parser(sql, tokens).statement()


class _Parser:
    def __init__(self, sql: str, tokens: list[Token]) -> None:
        self.sql = sql
        self.toks = tokens
        self.i = 0
        self.head = tokens[0].text.upper()

    # ---- token helpers --------------------------------------------------------------------------
    def at(self, tok: Token | None = None) -> str:
        if tok is None:
            if self.i < len(self.toks):
                tok = self.toks[self.i]
            else:
                return "at the end of the statement"
        line = self.sql.count("\n", 0, tok.start) + 1
        col = tok.start - (self.sql.rfind("\n", 0, tok.start) + 1) + 1
        return f"at line {line}, column {col}"

    def error(self, message: str) -> ValidationError:
        return ValidationError(f"{message} {self.at()}; syntax: {_SYNTAX[self.head]}")

    def peek(self, offset: int = 0) -> Token | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def done(self) -> bool:
        return self.i >= len(self.toks)

    @staticmethod
    def is_word(tok: Token | None, *words: str) -> bool:
        if tok is None or tok.token_type in _NOT_WORDS or tok.token_type == TokenType.IDENTIFIER:
            return False
        return not words or tok.text.upper() in words

    def accept(self, *words: str) -> bool:
        if self.is_word(self.peek(), *words):
            self.i += 1
            return True
        return False

    def expect(self, *words: str) -> str:
        tok = self.peek()
        if not self.is_word(tok, *words):
            got = f"'{tok.text}'" if tok is not None else "nothing"
            raise self.error(f"expected {' or '.join(words)}, got {got}")
        self.i += 1
        return tok.text.upper()

    def accept_type(self, token_type: TokenType) -> bool:
        tok = self.peek()
        if tok is not None and tok.token_type == token_type:
            self.i += 1
            return True
        return False

    def expect_type(self, token_type: TokenType, what: str) -> Token:
        tok = self.peek()
        if tok is None or tok.token_type != token_type:
            got = f"'{tok.text}'" if tok is not None else "nothing"
            raise self.error(f"expected {what}, got {got}")
        self.i += 1
        return tok

    def identifier(self, what: str) -> str:
        tok = self.peek()
        if tok is None or (tok.token_type != TokenType.IDENTIFIER and tok.token_type in _NOT_WORDS):
            got = f"'{tok.text}'" if tok is not None else "nothing"
            raise self.error(f"expected {what}, got {got}")
        self.i += 1
        return tok.text

    def table_name(self, default_schema: str) -> TableId:
        first = self.identifier("a table name")
        if self.accept_type(TokenType.DOT):
            return TableId(first, self.identifier("a table name after the schema"))
        return TableId(default_schema, first)

    def end(self) -> None:
        if not self.done():
            raise self.error(f"unexpected '{self.peek().text}'")

    # ---- statements -----------------------------------------------------------------------------
    def statement(self) -> CatalogOperation:
        head = self.toks[0].token_type
        self.i = 1
        if head == TokenType.CREATE:
            return self.create()
        if head == TokenType.ALTER:
            return self.alter()
        return self.drop()

    def create(self) -> CreateTable:
        replace = False
        if self.accept("OR"):
            self.expect("REPLACE")
            replace = True
        external = self.accept("EXTERNAL")
        self.expect("TABLE")
        if_not_exists = False
        if self.accept("IF"):
            self.expect("NOT")
            self.expect("EXISTS")
            if_not_exists = True
        if replace and if_not_exists:
            raise self.error("OR REPLACE and IF NOT EXISTS contradict each other; use one")
        table = self.table_name(EXT_SCHEMA if external else DRUID_SCHEMA)
        wanted = EXT_SCHEMA if external else DRUID_SCHEMA
        if table.schema != wanted:
            kind = "an EXTERNAL table" if external else "a datasource"
            hint = "" if external else "; input tables are CREATE EXTERNAL TABLE ext.name"
            raise ValidationError(f"{kind} is created in schema '{wanted}', not '{table.schema}'{hint}")
        columns: list[ColumnSpec] = []
        if self.accept_type(TokenType.L_PAREN):
            columns = self.column_defs()
        properties: dict = {}
        seen: set[str] = set()
        while not self.done():
            tok = self.peek()
            if tok.token_type == TokenType.PARTITION_BY:
                self.once(seen, "PARTITIONED BY", external)
                self.i += 1
                properties["segmentGranularity"] = self.granularity()
            elif self.is_word(tok, "CLUSTERED"):
                self.once(seen, "CLUSTERED BY", external)
                self.i += 1
                self.expect("BY")
                properties["clusterKeys"] = self.cluster_keys()
            elif tok.token_type == TokenType.WITH:
                self.once(seen, "WITH", False)
                self.i += 1
                for key, value in self.property_list(allow_null=False).items():
                    if key in properties:
                        raise ValidationError(f"property '{key}' is given twice (a clause and WITH); keep one")
                    properties[key] = value
            elif self.is_word(tok, "AS") or tok.token_type == TokenType.SELECT:
                raise self.error("CREATE TABLE ... AS SELECT is not supported; create the table, then INSERT INTO it")
            else:
                raise self.error(f"unexpected '{tok.text}'")
        if external:
            source = properties.pop("source", None)
            if source not in INPUT_TYPES:
                raise ValidationError(f"CREATE EXTERNAL TABLE {table} needs WITH (source = ...) naming the input "
                                      f"source; valid sources: {', '.join(INPUT_TYPES)}, got {source!r}")
            spec = TableSpec(source, properties, tuple(columns))
        else:
            spec = TableSpec(DATASOURCE, properties, tuple(columns))
        validate_table(table, spec)
        action = "Force" if replace else "IfNew" if if_not_exists else "New"
        return CreateTable(table, spec, action)

    def once(self, seen: set[str], clause: str, forbidden: bool) -> None:
        if forbidden:
            raise self.error(f"{clause} applies to datasources; an EXTERNAL table has no segments")
        if clause in seen:
            raise self.error(f"{clause} is given twice")
        seen.add(clause)

    def column_defs(self) -> list[ColumnSpec]:
        columns = []
        while True:
            columns.append(self.column_def())
            if self.accept_type(TokenType.R_PAREN):
                return columns
            self.expect_type(TokenType.COMMA, "',' or ')' after a column")

    def column_def(self) -> ColumnSpec:
        name = self.identifier("a column name")
        start = self.i
        depth = 0
        while not self.done():
            tok = self.peek()
            if depth == 0 and tok.token_type in (TokenType.COMMA, TokenType.R_PAREN):
                break
            if tok.token_type in (TokenType.LT, TokenType.L_PAREN):
                depth += 1
            elif tok.token_type in (TokenType.GT, TokenType.R_PAREN):
                depth -= 1
            self.i += 1
        type_toks = self.toks[start:self.i]
        if not type_toks:
            return ColumnSpec(name)  # untyped: the segments (or VARCHAR) decide
        words = [t.text.upper() for t in type_toks]
        if "NOT" in words or "NULL" in words or "DEFAULT" in words:
            raise ValidationError(f"column '{name}' {self.at(type_toks[0])}: constraints (NOT NULL, DEFAULT) are "
                                  "not supported; give just the type")
        return ColumnSpec(name, self.sql_type(name, type_toks))

    def sql_type(self, column: str, toks: list[Token]) -> str:
        texts = [t.text for t in toks]
        if len(texts) == 2 and texts[1].upper() == "ARRAY":
            text = f"ARRAY<{texts[0]}>"  # Druid SQL also spells arrays as VARCHAR ARRAY
        else:
            text = "".join(texts)
        try:
            ctype = validate_sql_type(text, column)
        except ValidationError as exc:
            raise ValidationError(f"{exc} ({self.at(toks[0])})") from None
        return next(t for t in SQL_TYPES if t.upper() == ctype.sql_name.upper())

    def granularity(self) -> str:
        tok = self.peek()
        if tok is None:
            raise self.error("PARTITIONED BY needs a granularity such as DAY")
        if self.accept("ALL"):
            self.accept("TIME")
            return "ALL"
        self.i += 1
        if tok.token_type not in (TokenType.STRING,) and not self.is_word(tok):
            raise self.error(f"PARTITIONED BY needs a granularity such as DAY, got '{tok.text}'")
        try:
            return canonical_granularity(tok.text)
        except ValidationError as exc:
            raise ValidationError(f"PARTITIONED BY {tok.text} {self.at(tok)}: {exc}") from None

    def cluster_keys(self) -> list[dict]:
        keys = []
        while True:
            column = self.identifier("a column to cluster by")
            key: dict = {"column": column}
            if self.accept_type(TokenType.DESC):
                key["desc"] = True
            else:
                self.accept_type(TokenType.ASC)
            keys.append(key)
            if not self.accept_type(TokenType.COMMA):
                return keys

    def property_list(self, allow_null: bool) -> dict:
        self.expect_type(TokenType.L_PAREN, "'(' starting the property list")
        out: dict = {}
        while True:
            key_tok = self.peek()
            key = self.identifier("a property name")
            self.expect_type(TokenType.EQ, f"'=' after property '{key}'")
            value = self.literal(key)
            if value is None and not allow_null:
                raise ValidationError(f"property '{key}' {self.at(key_tok)} is NULL; leave it out instead")
            if key in out:
                raise ValidationError(f"property '{key}' {self.at(key_tok)} is given twice")
            if key in _LIST_PROPERTIES and isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            out[key] = value
            if self.accept_type(TokenType.R_PAREN):
                return out
            self.expect_type(TokenType.COMMA, "',' or ')' in the property list")

    def literal(self, key: str):
        tok = self.peek()
        if tok is None:
            raise self.error(f"property '{key}' needs a value")
        negative = self.accept_type(TokenType.DASH)
        tok = self.peek()
        if tok is not None and tok.token_type == TokenType.NUMBER:
            self.i += 1
            value = float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text)
            return -value if negative else value
        if negative:
            raise self.error(f"property '{key}': '-' must be followed by a number")
        if tok.token_type == TokenType.STRING:
            self.i += 1
            return tok.text
        if tok.token_type in (TokenType.TRUE, TokenType.FALSE):
            self.i += 1
            return tok.token_type == TokenType.TRUE
        if tok.token_type == TokenType.NULL:
            self.i += 1
            return None
        if tok.token_type == TokenType.ARRAY:
            self.i += 1
            self.expect_type(TokenType.L_BRACKET, "'[' after ARRAY")
            items = []
            if self.accept_type(TokenType.R_BRACKET):
                return items
            while True:
                items.append(self.literal(key))
                if self.accept_type(TokenType.R_BRACKET):
                    return items
                self.expect_type(TokenType.COMMA, "',' or ']' in the ARRAY")
        raise self.error(f"property '{key}' needs a literal value ('text', 123, TRUE, FALSE, NULL or "
                         f"ARRAY['a', ...]), got '{tok.text}'")

    # ---- ALTER ----------------------------------------------------------------------------------
    def alter(self) -> EditTable:
        self.expect("TABLE")
        table = self.table_name(DRUID_SCHEMA)
        edits: list[TableEdit] = []
        while True:
            edits.append(self.alter_action())
            if self.done():
                break
            self.expect_type(TokenType.COMMA, "',' between ALTER actions")
        validate_table_id(table)
        return EditTable(table, tuple(_coalesce(edits)))

    def name_list(self, what: str) -> tuple[str, ...]:
        names = [self.identifier(what)]
        # "HIDE COLUMN a, b": a comma followed by another action word starts the next action.
        while self.peek() is not None and self.peek().token_type == TokenType.COMMA and not self.is_word(
                self.peek(1), *_ALTER_ACTIONS):
            self.i += 1
            names.append(self.identifier(what))
        return tuple(names)

    def alter_action(self) -> TableEdit:
        word = self.expect(*_ALTER_ACTIONS)
        if word == "ADD" and self.accept("PROJECTION"):
            return self.add_projection()
        if word == "ADD":
            self.accept("COLUMN")
            return AddColumns((self.column_def(),))
        if word == "DROP" and self.accept("PROJECTION"):
            return DropProjection(self.identifier("the projection to drop"))
        if word == "DROP":
            self.accept("COLUMN", "COLUMNS")
            return DropColumns(self.name_list("a column to drop"))
        if word in ("HIDE", "UNHIDE"):
            self.expect("COLUMN", "COLUMNS")
            names = self.name_list(f"a column to {word.lower()}")
            return HideColumns(hide=names) if word == "HIDE" else HideColumns(unhide=names)
        if word == "MOVE":
            self.expect("COLUMN")
            column = self.identifier("the column to move")
            where = self.expect("FIRST", "LAST", "BEFORE", "AFTER").lower()
            anchor = self.identifier(f"the column to move {where}") if where in ("before", "after") else None
            return MoveColumn(column, where, anchor)
        return SetProperties(self.property_list(allow_null=True))

    def add_projection(self) -> AddProjection:
        """ADD PROJECTION name AS SELECT ...: the SELECT is the rest of the statement, kept as text
        for the broker to plan against the table (only it knows the table's columns)."""
        name = self.identifier("the projection's name")
        self.expect("AS")
        tok = self.peek()
        if tok is None or tok.token_type != TokenType.SELECT:
            raise self.error("expected SELECT after ADD PROJECTION name AS")
        select_sql = self.sql[tok.start:].strip().rstrip(";").strip()
        self.i = len(self.toks)
        return AddProjection(None, name, select_sql)

    # ---- DROP -----------------------------------------------------------------------------------
    def drop(self) -> DropTable:
        self.expect("TABLE")
        if_exists = False
        if self.accept("IF"):
            self.expect("EXISTS")
            if_exists = True
        table = self.table_name(DRUID_SCHEMA)
        purge = self.accept("PURGE")
        self.end()
        validate_table_id(table)
        if purge and table.schema != DRUID_SCHEMA:
            raise ValidationError(f"DROP TABLE {table} PURGE: only datasources (schema druid) have segments to purge")
        return DropTable(table, if_exists, purge)


def _coalesce(edits: list[TableEdit]) -> list[TableEdit]:
    """Adjacent ADD COLUMN actions become one edit, so their error names every clash at once."""
    out: list[TableEdit] = []
    for edit in edits:
        if out and isinstance(edit, AddColumns) and isinstance(out[-1], AddColumns):
            out[-1] = AddColumns(out[-1].columns + edit.columns)
        else:
            out.append(edit)
    return out
