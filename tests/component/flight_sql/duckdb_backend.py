"""A SqlBackend on an in-memory DuckDB: the test-only fake the Flight SQL server is driven against.

Catalog 'druid' holds schema 'druid' (datasources ``wiki`` and ``numbers``) and an
'INFORMATION_SCHEMA' listing, like the broker's. It records what the server passed (user, query
context from ``SET`` prefixes, parameters) so tests can check the plumbing, and ``fail_next`` makes
the next ``execute`` raise a chosen error.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from common.errors import ValidationError
from services.broker.core.sql_backend import StatementInfo, TableInfo

CATALOG = "druid"
NUMBERS_ROWS = 300_000
_SET = re.compile(r"^\s*SET\s+(\w+)\s*=\s*('(?:[^']|'')*'|[^;]+?)\s*;", re.IGNORECASE)
_SYSTEM_TABLES = {"TABLES": "information_schema.tables", "COLUMNS": "information_schema.columns"}


def split_set_statements(sql: str) -> tuple[dict, str]:
    """``SET k = v;`` prefixes as a context dict, and the statement after them."""
    context: dict = {}
    while m := _SET.match(sql):
        raw = m.group(2).strip()
        if raw.startswith("'"):
            value: object = raw[1:-1].replace("''", "'")
        elif raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            try:
                value = int(raw)
            except ValueError:
                value = raw
        context[m.group(1)] = value
        sql = sql[m.end():]
    return context, sql.strip()


def count_placeholders(sql: str) -> int:
    """'?' markers outside quotes and comments."""
    count, i, n = 0, 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            end = sql.find(c, i + 1)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        count += c == "?"
        i += 1
    return count


def like(pattern: str | None, value: str) -> bool:
    if pattern is None:
        return True
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


class DuckDbBackend:
    def __init__(self) -> None:
        self._con = duckdb.connect(":memory:")
        self._lock = threading.Lock()
        self.calls: list[dict] = []
        self.fail_next: Exception | None = None
        con = self._con
        con.execute("CREATE SCHEMA druid")
        con.execute("""CREATE TABLE druid.wiki (__time TIMESTAMP, channel VARCHAR, page VARCHAR,
                       added BIGINT, delta DOUBLE)""")
        con.execute("""INSERT INTO druid.wiki VALUES
            ('2015-09-12 00:46:58', '#en.wikipedia', 'Main_Page', 10, 1.5),
            ('2015-09-12 01:10:00', '#fr.wikipedia', 'Accueil', 3, -2.0),
            ('2015-09-12 02:00:00', '#en.wikipedia', 'Talk:Main', 7, 0.25),
            ('2015-09-12 03:30:00', NULL, 'é漢字', 1, NULL)""")
        con.execute(f"""CREATE TABLE druid.numbers AS
            SELECT range AS n, range % 7 AS bucket, 'row-' || range::VARCHAR AS label, range / 3.0 AS third
            FROM range({NUMBERS_ROWS})""")

    # ---- SqlBackend ----

    def execute(self, sql: str, parameters: Sequence = (), context: dict | None = None,
                user: str | None = None, is_active=lambda: True, *, origin=None, query_id=None) -> pa.Table:
        set_context, statement = split_set_statements(sql)
        merged = {**(context or {}), **set_context}
        self.calls.append({"op": "execute", "sql": statement, "parameters": list(parameters),
                           "context": merged, "user": user, "origin": origin, "query_id": query_id})
        self._maybe_fail()
        with self._lock:
            cur = self._cursor()
            try:
                return cur.sql(statement, params=list(parameters) or None).to_arrow_table()
            except duckdb.Error as exc:
                raise ValidationError(str(exc).split("\n")[0]) from None

    def describe(self, sql: str, context: dict | None = None, user: str | None = None,
                 parameters: Sequence | None = None, *, origin=None, query_id=None) -> StatementInfo:
        _, statement = split_set_statements(sql)
        self.calls.append({"op": "describe", "sql": statement, "user": user, "origin": origin, "query_id": query_id})
        count = count_placeholders(statement)
        with self._lock:
            cur = self._cursor()
            try:
                cur.execute(f"PREPARE strata_check AS {statement}")
                if count and parameters is None:
                    return StatementInfo(count, None)
                schema = cur.sql(f"SELECT * FROM ({statement}) AS q LIMIT 0",
                                 params=list(parameters or ()) or None).to_arrow_table().schema
            except duckdb.Error as exc:
                raise ValidationError(str(exc).split("\n")[0]) from None
        return StatementInfo(count, schema)

    def catalogs(self) -> list[str]:
        return [CATALOG]

    def db_schemas(self, catalog: str | None = None, schema_pattern: str | None = None) -> list[tuple[str, str]]:
        return [(CATALOG, s) for s in ("druid", "INFORMATION_SCHEMA")
                if catalog in (None, CATALOG) and like(schema_pattern, s)]

    def tables(self, catalog: str | None = None, schema_pattern: str | None = None,
               table_pattern: str | None = None, table_types: Sequence[str] = (),
               user: str | None = None) -> list[TableInfo]:
        self.calls.append({"op": "tables", "user": user})
        out = []
        with self._lock:
            cur = self._cursor()
            listing = [("druid", name, "TABLE", f"druid.{name}") for name in ("numbers", "wiki")]
            listing += [("INFORMATION_SCHEMA", name, "SYSTEM_TABLE", rel) for name, rel in _SYSTEM_TABLES.items()]
            for schema, name, kind, rel in listing:
                if catalog not in (None, CATALOG) or not like(schema_pattern, schema) or not like(table_pattern, name):
                    continue
                if table_types and kind not in table_types:
                    continue
                arrow_schema = cur.sql(f"SELECT * FROM {rel} LIMIT 0").to_arrow_table().schema
                out.append(TableInfo(CATALOG, schema, name, kind, arrow_schema))
        return out

    def table_types(self) -> list[str]:
        return ["SYSTEM_TABLE", "TABLE"]

    # ---- test hooks ----

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def last(self, op: str) -> dict:
        return [c for c in self.calls if c["op"] == op][-1]

    def _cursor(self):
        cur = self._con.cursor()
        cur.execute("SET search_path = 'druid'")
        return cur

    def _maybe_fail(self) -> None:
        exc, self.fail_next = self.fail_next, None
        if exc is not None:
            raise exc
