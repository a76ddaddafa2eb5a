"""SecureSqlCatalog: the planner's catalog as one user may see it, and what INSERT/REPLACE needs.

SQL is authorized by planning against a per-statement view of the catalog (as Druid checks READ
on every datasource a statement resolves):
  - ``datasource_names()`` lists only datasources the user may READ, so INFORMATION_SCHEMA
    (built from the catalog), "did you mean" hints and Flight SQL's table listings show nothing
    else;
  - ``datasource_schema(name)`` (and every other per-datasource lookup) raises PermissionError
    for a datasource the user may not READ, whether or not it exists, so a SELECT naming it
    fails with a message saying who lacks what, and existence does not leak;
  - input tables (schema ``ext``) likewise, with READ on EXTERNAL ``name``;
  - sys.segments, sys.tasks (rows with a ``datasource``), sys.supervisors (by supervisor id, a
    Kafka supervisor's datasource) and sys.server_segments (by the
    segment id's datasource) keep only rows of readable datasources; sys.servers is not per
    datasource and stays whole; sys.queries keeps only the user's own queries unless they are the
    admin, and sys.projection_advice only rows of datasources they may READ.
Each method of the ``SqlCatalog`` protocol is written out here with its check, and nothing else
is forwarded: a method added to the protocol stays unavailable through this class (AttributeError)
until it is added here with its authorization.

INSERT/REPLACE needs, as in Druid: WRITE on its datasource, READ on each ``ext.`` input table
and datasource it reads, and READ on EXTERNAL ``EXTERNAL`` for inline external data
(TABLE(EXTERN(...)) and friends). The broker checks what the SQL text shows
(``source_requirements``) before consulting the catalog, prepares the statement against an
``IngestionCatalog`` (the target's catalog entry needs WRITE there, not READ), then checks the
parsed statement (``require_ingestion``), all before a task is submitted. ``require_native``
does the same for a native JSON query (READ on every table datasource it names).
"""

from __future__ import annotations

import pyarrow as pa

from common.errors import ValidationError
from common.ingest.statement import statement_sources
from services.security.authorizer import Authorizer, is_admin
from services.security.basic_authorizer import INLINE_EXTERNAL

DRUID, EXT = "druid", "ext"
class SecureSqlCatalog:
    """``inner`` (a SqlCatalog) as ``user`` may see it. Build one per statement."""

    def __init__(self, inner, authorizer: Authorizer, user: str | None) -> None:
        self.inner = inner
        self.authorizer = authorizer
        self.user = user
        self._memo: dict[tuple[str, str], bool] = {}
        # Each datasource's schema as this statement first saw it: the catalog cache or the served
        # segments may change while a statement is planned and run, and every step of it (the
        # planner's several looks, the schema GetFlightInfo announces, the executor's validation
        # and the types sent to historicals) must see one schema, not two.
        self.schemas: dict[str, dict] = {}

    def can_read(self, resource_type: str, name: str) -> bool:
        key = (resource_type, name)
        if key not in self._memo:
            self._memo[key] = self.authorizer.can(self.user, "READ", resource_type, name)
        return self._memo[key]

    def _require_read(self, resource_type: str, name: str) -> None:
        if not self.can_read(resource_type, name):
            self.authorizer.require(self.user, "READ", resource_type, name)  # raises, naming user and table

    def _require_write(self, resource_type: str, name: str) -> None:
        self.authorizer.require(self.user, "WRITE", resource_type, name)

    # ---- the SqlCatalog protocol: datasources ---------------------------------------------------------
    def datasource_names(self) -> list[str]:
        return [n for n in self.inner.datasource_names() if self.can_read("DATASOURCE", n)]

    def datasource_schema(self, name: str):
        self._require_read("DATASOURCE", name)
        schema = self.schemas.get(name)
        if schema is None:
            schema = self.inner.datasource_schema(name)
            if schema is not None:
                self.schemas[name] = schema
        return schema

    def declared_order(self, name: str) -> bool:
        self._require_read("DATASOURCE", name)
        return self.inner.declared_order(name)

    def table_properties(self, name: str) -> dict | None:
        self._require_read("DATASOURCE", name)
        return self.inner.table_properties(name)

    def datasource_spec(self, name: str) -> dict | None:
        self._require_read("DATASOURCE", name)
        return self.inner.datasource_spec(name)

    # ---- system tables ---------------------------------------------------------------------------------
    def segment_manifests(self, name: str) -> list[str]:
        self._require_read("DATASOURCE", name)
        return self.inner.segment_manifests(name)

    def segment_datasources(self) -> dict[str, str]:
        return {s: d for s, d in self.inner.segment_datasources().items() if self.can_read("DATASOURCE", d)}

    def system_table_names(self) -> list[str]:
        return self.inner.system_table_names()  # which sys tables exist is no secret; their rows are

    def system_table(self, schema: str, name: str) -> pa.Table | None:
        table = self.inner.system_table(schema, name)
        if table is None or not self.authorizer.enabled:
            return table
        if name.lower() == "queries" and not is_admin(self.authorizer, self.user):
            # The query log: a user sees only their own queries (their text may name anything).
            mask = [u is not None and u == self.user for u in table.column("user").to_pylist()]
            return table.filter(pa.array(mask, pa.bool_()))
        if "datasource" in table.column_names:
            return self._keep_rows(table, table.column("datasource").to_pylist())
        if name.lower() == "supervisors":  # a Kafka supervisor's id is its datasource
            return self._keep_rows(table, table.column("supervisor_id").to_pylist())
        if "segment_id" in table.column_names:
            # From the typed ids the inner catalog holds: a segment id's text cannot be split
            # reliably (datasource names may hold '_' and even what looks like an interval).
            datasource_of = self.inner.segment_datasources()
            return self._keep_rows(table, [datasource_of.get(s) if s is not None else None
                                           for s in table.column("segment_id").to_pylist()])
        return table

    def _keep_rows(self, table: pa.Table, datasources: list) -> pa.Table:
        # A row of no datasource (or an unparsable segment id) is seen by whoever may read any
        # name at all, the empty one included: the admin and grants such as '.*'.
        mask = [self.can_read("DATASOURCE", d if d is not None else "") for d in datasources]
        return table if all(mask) else table.filter(pa.array(mask, pa.bool_()))

    # ---- input tables (schema ext) ------------------------------------------------------------------
    def external_table_names(self) -> list[str]:
        return [n for n in self.inner.external_table_names() if self.can_read("EXTERNAL", n)]

    def external_table_schema(self, name: str):
        self._require_read("EXTERNAL", name)
        return self.inner.external_table_schema(name)

    def external_source(self, name: str, args: dict):
        self._require_read("EXTERNAL", name)
        return self.inner.external_source(name, args)

    def external_table(self, name: str, args: dict) -> pa.Table:
        self._require_read("EXTERNAL", name)
        return self.inner.external_table(name, args)


# ---- ingestion ------------------------------------------------------------------------------------------
class IngestionCatalog(SecureSqlCatalog):
    """The catalog an INSERT/REPLACE is prepared with: input tables need READ as in queries, but
    the target's catalog entry (defaults, sealed columns) needs WRITE, not READ, on it."""

    def datasource_spec(self, name: str) -> dict | None:
        self._require_write("DATASOURCE", name)
        return self.inner.datasource_spec(name)


def source_requirements(sql: str) -> list[tuple[str, str, str]]:
    """What the SQL text of an INSERT/REPLACE shows it needs before it is parsed: WRITE on its
    datasource, READ on each input table it names and on EXTERNAL 'EXTERNAL' for inline
    external data."""
    target, names, inline = statement_sources(sql)
    needs = [("WRITE", "DATASOURCE", target)] if target else []
    needs += [("READ", "EXTERNAL", n) for n in names]
    if inline:
        needs.append(("READ", "EXTERNAL", INLINE_EXTERNAL))
    return needs


def ingestion_requirements(statement, sql: str | None = None) -> list[tuple[str, str, str]]:
    """(action, resource type, name) an IngestionStatement needs, the write first: WRITE on its
    datasource; READ on what ``sql`` (the text as written, default ``statement.sql``) reads from
    outside (see source_requirements) and on any datasource or input table its SELECT still names."""
    from sqlglot import exp

    needs = [("WRITE", "DATASOURCE", statement.datasource)]
    text = sql if sql is not None else statement.sql or ""
    reads = [need for need in source_requirements(text) if need[0] == "READ"]
    sources = set(statement.sources or {})
    select = statement.select
    if select is not None:
        ctes = {cte.alias_or_name for cte in select.find_all(exp.CTE)}
        for table in select.find_all(exp.Table):
            name, db = table.name, (table.db or "").lower()
            if not name or (not db and (name in sources or name in ctes)):
                continue
            if db == EXT:
                reads.append(("READ", "EXTERNAL", name))
            elif db in ("", DRUID):
                reads.append(("READ", "DATASOURCE", name))
    for need in reads:
        if need not in needs:
            needs.append(need)
    return needs


def require_all(authorizer: Authorizer, user: str | None, needs) -> None:
    """PermissionError (naming user, action, resource) at the first need ``user`` lacks."""
    for action, resource_type, name in needs:
        authorizer.require(user, action, resource_type, name)


def require_ingestion(authorizer: Authorizer, user: str | None, statement, sql: str | None = None) -> None:
    require_all(authorizer, user, ingestion_requirements(statement, sql))


# ---- native queries ---------------------------------------------------------------------------------------
def native_query_datasources(query) -> set[str]:
    """Table datasources a native (JSON) query reads: ``"dataSource": "x"``, table, union, join
    and query datasources, nested at any depth."""
    found: set[str] = set()

    def datasource(ds) -> None:
        if isinstance(ds, str):
            found.add(ds)
        elif isinstance(ds, dict):
            kind = ds.get("type")
            if kind == "table" and isinstance(ds.get("name"), str):
                found.add(ds["name"])
            elif kind == "union":
                for d in ds.get("dataSources") or []:
                    datasource(d)
            elif kind == "join":
                datasource(ds.get("left"))
                datasource(ds.get("right"))
            elif kind == "query":
                query_(ds.get("query"))
            else:
                for key in ("base", "left", "right", "dataSource"):
                    if key in ds:
                        datasource(ds[key])

    def query_(q) -> None:
        if isinstance(q, dict):
            datasource(q.get("dataSource"))

    query_(query)
    return found


def require_native(authorizer: Authorizer, user: str | None, query) -> None:
    for name in sorted(native_query_datasources(query)):
        authorizer.require(user, "READ", "DATASOURCE", name)
