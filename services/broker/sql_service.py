"""SqlService: the broker's SqlBackend. SQL is planned by ``common.sql`` against the broker's view
of the cluster (BrokerCatalog) and its native queries run through the scatter/gather executor.

System tables come from two places: what the broker sees (served segments and their replicas)
and what the coordinator knows (published segments, servers), fetched per query.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence

import pyarrow as pa

from common.bounded_cache import BoundedCache
from common.catalog.catalog_errors import TableExistsError, TableNotFoundError
from common.errors import QueryTimeoutError, UnsupportedError, ValidationError
from common.sql import plan_sql
from common.sql.sql_plan import SqlPlan
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.planning_deadline import timeout_error as planning_timeout
from common.sql.statement_kind import classify
from common.ingest.discovered_schema import explain_ingestion
from services.broker.core.sql_backend import StatementInfo, TableInfo
from services.query_errors import QueryCancelledError
from services.security.authorizer import ALLOW_ALL
from services.broker.core.segment_facts import manifest_facts, projections_table
from services.broker.core.druid_sys_columns import (SEGMENT_FIELDS, SERVER_FIELDS, SUPERVISORS_SCHEMA,
                                                    add_segment_columns, server_columns, server_properties_table)
from services.broker.core.task_table import tasks_table
from services.rpc.convert import segment_id_from_proto
from services.broker.overlay_catalog import OverlayCatalog
from services.broker.submitted_catalog import SubmittedCatalog
from services.security.secure_catalog import (IngestionCatalog, SecureSqlCatalog, require_all, require_ingestion,
                                              source_requirements)

CATALOG = "druid"
SYS_TABLES = ("segments", "servers", "server_segments", "tasks", "projections", "queries", "projection_advice",
              "schema_decisions", "supervisors", "server_properties", "rules")


def _like(pattern: str | None) -> re.Pattern | None:
    if pattern is None:
        return None
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("^" + "".join(out) + "$", re.IGNORECASE)


class BrokerCatalog:
    """The SqlCatalog of a broker: datasources and their schemas from served segments."""

    def __init__(self, node, coordinator=None, catalog_cache=None, merge_policy: str | None = None) -> None:
        self.node = node
        # A CoordinatorClient (list_segments(), servers(), tasks()), or a callable returning one per use.
        self._coordinator = coordinator
        # The broker's CatalogCache (spec(schema, name), names(schema)), for what the catalog defines.
        self._catalog_cache = catalog_cache
        # A statement's columnTypeMergePolicy (None: the broker's default), given to the view a
        # statement plans with (``under_policy``) rather than read from ambient state.
        self.merge_policy = merge_policy

    def under_policy(self, policy: str | None) -> BrokerCatalog:
        """This catalog as a statement with ``columnTypeMergePolicy = policy`` sees it."""
        if policy == self.merge_policy:
            return self
        return BrokerCatalog(self.node, self._coordinator, self._catalog_cache, policy)

    @property
    def coordinator(self):
        c = self._coordinator
        return c() if callable(c) else c

    def datasource_names(self) -> list[str]:
        with self.node.lock:
            return self.node.view.datasources()

    def datasource_schema(self, name: str):
        policy = self.merge_policy
        with self.node.lock:
            if name not in self.node.view.datasources():
                return None
            merged = self.node.view.merged(name, policy)
            policy = policy or self.node.view.merge_policy
        if policy == "fail" and merged.conflicts:
            from services.broker.core.schema_merge import conflict_error

            declared = {c["name"] for c in (self._spec(name).get("columns") or []) if c.get("sqlType")}
            for column, types in merged.conflicts.items():
                if column not in declared:
                    raise conflict_error(name, column, types)
        return dict(merged.schema)

    def _spec(self, name: str) -> dict:
        if self._catalog_cache is None:
            return {}
        return self._catalog_cache.spec("druid", name) or {}

    def segment_manifests(self, name: str) -> list[str]:
        with self.node.lock:
            return [d.manifest_json for sid, d in self.node.view.descriptors.items() if sid.datasource == name]

    def segment_datasources(self) -> dict[str, str]:
        with self.node.lock:
            return {str(sid): sid.datasource for sid in self.node.view.replicas}

    def system_table_names(self) -> list[str]:
        return list(SYS_TABLES)

    # sys.queries and sys.projection_advice: name -> () -> pa.Table, set by the broker's wiring
    # (services/broker/query_tables.py); without it they are empty.
    system_providers: dict = {}

    def system_table(self, schema: str, name: str) -> pa.Table | None:
        if schema.lower() != "sys" or name.lower() not in SYS_TABLES:
            return None
        if name.lower() in ("queries", "projection_advice"):
            from services.broker.query_tables import provided_table

            return provided_table(self.system_providers, name.lower())
        return getattr(self, f"_sys_{name.lower()}")()

    # ---- sys tables ----------------------------------------------------------------------------
    def _served(self) -> dict:
        with self.node.lock:
            return {sid: sorted(servers) for sid, servers in self.node.view.replicas.items()}

    def _sys_segments(self) -> pa.Table:
        served = self._served()
        records = self.coordinator.list_segments() if self.coordinator is not None else []
        rows = {}
        for r in records:
            rows[r.id] = dict(segment_id=str(r.id), datasource=r.id.datasource, start=_iso(r.id.interval.start),
                              end=_iso(r.id.interval.end), version=r.id.version, partition_num=r.id.partition,
                              size=r.size, num_rows=r.num_rows, is_published=1 if r.used else 0,
                              is_available=1 if r.id in served else 0, replication=len(served.get(r.id, ())),
                              **_inside(getattr(r, "descriptor", None)))
        with self.node.lock:
            descriptors = dict(self.node.view.descriptors)
        for sid, d in descriptors.items():
            if sid not in rows:
                rows[sid] = dict(segment_id=str(sid), datasource=sid.datasource, start=_iso(sid.interval.start),
                                 end=_iso(sid.interval.end), version=sid.version, partition_num=sid.partition,
                                 size=d.size, num_rows=d.num_rows, is_published=0, is_available=1,
                                 replication=len(served.get(sid, ())), **_inside(d))
        known = {r.id: r.descriptor for r in records if getattr(r, "descriptor", None) is not None}
        wanted = {r.id: 0 for r in records if not r.used}  # no rule loads an unused segment
        if self.coordinator is not None:
            wanted.update((segment_id_from_proto(s.id), s.wanted_replicas) for s in self.coordinator.load_status())
        realtime = {r.id for r in records if getattr(r, "realtime", False)}
        # Druid's columns (num_replicas, shard_spec, ...)
        add_segment_columns(rows, {**known, **descriptors}, wanted, realtime)
        return pa.Table.from_pylist(list(rows.values()), schema=pa.schema([
            ("segment_id", pa.string()), ("datasource", pa.string()), ("start", pa.string()), ("end", pa.string()),
            ("version", pa.string()), ("partition_num", pa.int64()), ("size", pa.int64()), ("num_rows", pa.int64()),
            ("is_published", pa.int64()), ("is_available", pa.int64()), ("replication", pa.int64()),
            ("projections", pa.string()), ("json_columns", pa.string()), *SEGMENT_FIELDS]))

    def _sys_projections(self) -> pa.Table:
        with self.node.lock:
            descriptors = dict(self.node.view.descriptors)
        segments = [(sid.datasource, str(sid), d.num_rows, d.manifest_json) for sid, d in descriptors.items()]
        defined = {}
        if self._catalog_cache is not None:
            for ds in {sid.datasource for sid in descriptors} | set(self._catalog_cache.names("druid")):
                spec = self._catalog_cache.spec("druid", ds) or {}
                if (spec.get("properties") or {}).get("projections"):
                    defined[ds] = list(spec["properties"]["projections"])
        return projections_table(segments, defined)

    def _sys_servers(self) -> pa.Table:
        rows = []
        servers = self.coordinator.servers().servers if self.coordinator is not None else []
        for s in servers:
            i = s.info
            rows.append(dict(server=f"{i.host}:{i.grpc_port}", server_id=i.id, host=i.host, grpc_port=i.grpc_port,
                             http_port=i.http_port, flight_port=i.flight_port or None, server_type=i.role,
                             curr_size=s.served_bytes, max_size=i.max_cache_bytes or None,
                             start_time=_iso(i.started_ms), **server_columns(i.role, i.http_port, _version(), i.tier)))
        return pa.Table.from_pylist(rows, schema=pa.schema([
            ("server", pa.string()), ("server_id", pa.string()), ("host", pa.string()), ("grpc_port", pa.int64()),
            ("http_port", pa.int64()), ("flight_port", pa.int64()), ("server_type", pa.string()),
            ("curr_size", pa.int64()), ("max_size", pa.int64()), ("start_time", pa.string()), *SERVER_FIELDS]))

    def _sys_supervisors(self) -> pa.Table:
        rows = self.coordinator.supervisors() if self.coordinator is not None else []
        return pa.Table.from_pylist(rows, schema=SUPERVISORS_SCHEMA)

    def _sys_server_properties(self) -> pa.Table:
        servers = self.coordinator.servers().servers if self.coordinator is not None else []
        return server_properties_table([
            (f"{s.info.host}:{s.info.grpc_port}", s.info.role,
             {"druid.host": s.info.host, "druid.plaintextPort": s.info.http_port, "strata.grpcPort": s.info.grpc_port,
              **({"strata.flightPort": s.info.flight_port} if s.info.flight_port else {})}) for s in servers])

    def _sys_rules(self) -> pa.Table:
        """Retention rules, one row per rule in the order they apply (the _default ones too)."""
        rules = self.coordinator.rules() if self.coordinator is not None else {}
        rows = [dict(datasource=ds, rule_order=i, rule_type=r["type"], period=r.get("period"),
                     interval=r.get("interval"), include_future=r.get("includeFuture"),
                     tiered_replicants=json.dumps(r["tieredReplicants"]) if "tieredReplicants" in r else None,
                     rule=json.dumps(r))
                for ds, listed in sorted(rules.items()) for i, r in enumerate(listed)]
        return pa.Table.from_pylist(rows, schema=pa.schema([
            ("datasource", pa.string()), ("rule_order", pa.int64()), ("rule_type", pa.string()),
            ("period", pa.string()), ("interval", pa.string()), ("include_future", pa.bool_()),
            ("tiered_replicants", pa.string()), ("rule", pa.string())]))

    def _sys_server_segments(self) -> pa.Table:
        # Servers are named host:port, as in sys.servers, so the two tables join.
        with self.node.lock:
            address = {sid: f"{info['host']}:{info['grpc_port']}" for sid, info in self.node.historicals.items()}
        rows = [dict(server=address.get(server, server), segment_id=str(sid))
                for sid, servers in self._served().items() for server in servers]
        return pa.Table.from_pylist(rows, schema=pa.schema([("server", pa.string()), ("segment_id", pa.string())]))

    def _sys_schema_decisions(self) -> pa.Table:
        """Every column type the system chose: at ingestion (from each task's report: discovered
        columns) and at query time (columns whose segments disagree, under the broker's policy)."""
        rows = []
        for t in (self.coordinator.tasks() if self.coordinator is not None else []):
            report = json.loads(t.report_json or "{}")
            for d in report.get("schemaDecisions") or []:
                rows.append(dict(datasource=t.datasource, column_name=d.get("column"), scope="task", source=t.id,
                                 types_seen=", ".join(d.get("typesSeen") or []), type_chosen=d.get("chosen"),
                                 rule=d.get("rule"), example=d.get("example") or None))
        with self.node.lock:
            names = self.node.view.datasources()
            merged = {ds: self.node.view.merged(ds) for ds in names}
            policy = self.node.view.merge_policy
        for ds, m in merged.items():
            declared = {c["name"]: c["sqlType"] for c in (self._spec(ds).get("columns") or []) if c.get("sqlType")}
            for d in m.decisions:
                rule = "declared type (catalog)" if d["column"] in declared else d["rule"]
                chosen = declared.get(d["column"], d["chosen"])
                rows.append(dict(datasource=ds, column_name=d["column"], scope=f"query ({policy})",
                                 source=", ".join(d["segments"]), types_seen=", ".join(d["typesSeen"]),
                                 type_chosen=chosen, rule=rule, example=None))
        return pa.Table.from_pylist(rows, schema=pa.schema([
            ("datasource", pa.string()), ("column_name", pa.string()), ("scope", pa.string()), ("source", pa.string()),
            ("types_seen", pa.string()), ("type_chosen", pa.string()), ("rule", pa.string()),
            ("example", pa.string())]))

    def _sys_tasks(self) -> pa.Table:
        return tasks_table(self.coordinator.tasks() if self.coordinator is not None else [])


def _inside(descriptor) -> dict:
    """sys.segments' columns about what a segment holds: projections and nested JSON columns."""
    if descriptor is None:
        return {"projections": None, "json_columns": None}
    facts = manifest_facts(descriptor.manifest_json)
    return {"projections": json.dumps(facts["projections"]),
            "json_columns": json.dumps(facts["json_columns"], sort_keys=True) if facts["json_columns"] else None}


def _in_sql_terms(exc, op):
    """The catalog's error with the SQL way out (its own message speaks of the REST API)."""
    from common.catalog.operations import CreateTable, DropTable

    if isinstance(exc, TableExistsError) and isinstance(op, CreateTable):
        exc.args = (f"table {exc.table} already exists; use CREATE TABLE IF NOT EXISTS to keep it or "
                    f"CREATE OR REPLACE TABLE to overwrite its definition",)
    elif isinstance(exc, TableNotFoundError):
        if isinstance(op, DropTable):
            exc.args = (f"table {exc.table} does not exist; use DROP TABLE IF EXISTS to ignore a missing table",)
        else:
            exc.args = (f"table {exc.table} has no catalog entry; create it first with CREATE TABLE",)
    return exc


def _context_key(context) -> str:
    """The query context as part of a plan-cache key. Most statements come with none (Flight SQL
    has no per-call context): the empty key skips a JSON encoding per lookup."""
    if not context:
        return ""
    return json.dumps(dict(context), sort_keys=True, default=str)


def _info(plan: SqlPlan) -> StatementInfo:
    return StatementInfo(plan.parameter_count, plan.output_schema, plan)


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("strata")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def _iso(ms: int) -> str:
    from common.types.interval import format_instant

    return format_instant(ms)


class SqlService:
    def __init__(self, catalog: BrokerCatalog, executor, default_timeout_s: float, authorizer=ALLOW_ALL,
                 ingestion_defaults: dict | None = None) -> None:
        self.catalog = catalog
        # Cluster defaults of ingestion settings (schemaConflicts); the statement's context wins.
        self.ingestion_defaults = dict(ingestion_defaults or {})
        # Statements plan against SecureSqlCatalog(catalog, authorizer, user): a user sees
        # (INFORMATION_SCHEMA, listings, sys rows) and reads only what it may READ.
        self.authorizer = authorizer
        self.executor = executor
        self._plans = BoundedCache(self.PLAN_CACHE_SIZE)  # see _plan
        self.default_timeout_s = default_timeout_s

    def _timeout(self, context: dict) -> float:
        value = context.get("timeout")
        if value in (None, ""):
            return self.default_timeout_s
        try:
            millis = float(value)
        except (TypeError, ValueError):
            raise ValidationError(f"context 'timeout' must be milliseconds, got {value!r}; e.g. SET timeout = 30000") from None
        if millis <= 0:
            raise ValidationError(f"context 'timeout' must be positive milliseconds, got {value!r}")
        return millis / 1000

    ddl_client = None  # () -> CatalogClient on the coordinator; set by the broker
    PLAN_CACHE_SIZE = 256

    def _generation(self) -> tuple:
        """Changes whenever what plans depend on changes: served segments, catalog definitions."""
        node = getattr(getattr(self.catalog, "base", self.catalog), "node", None)
        view_gen = node.view.generation if node is not None else 0
        cache = getattr(self.catalog, "cache", None)
        return view_gen, getattr(cache, "loads", 0)

    def _cached(self, sql: str, user, context) -> SqlPlan | None:
        """The cached plan of a statement without parameters, or None. A hit skips everything
        planning would check again: the text, the timeout (a cached plan's were valid when it was
        planned), the user's grants (as planning checked them)."""
        try:
            key = (sql, user, _context_key(context), self._generation())
        except TypeError:
            return None
        return self._plans.get(key)

    def _plan(self, sql: str, user, parameters, context: dict, deadline: PlanningDeadline = NO_DEADLINE):
        """Plans are reused while nothing they depend on changed: a Flight SQL client prepares
        (plans) and then executes (plans again) the same text, and dashboards repeat queries.
        Plans holding system-table snapshots, the current time or parameters are not cached."""
        try:
            key = (sql, user, _context_key(context), self._generation())
        except TypeError:
            key = None
        if key is not None and not parameters:
            plan = self._plans.get(key)
            if plan is not None:
                return plan
        policy = {**context, **classify(sql).settings}.get("columnTypeMergePolicy")
        if policy is not None:
            from services.broker.core.schema_merge import check_policy

            check_policy(policy)
        # The policy travels in the catalog view the statement plans with (see BrokerCatalog.under_policy).
        catalog = SecureSqlCatalog(self.catalog.under_policy(policy) if policy is not None else self.catalog,
                                   self.authorizer, user)
        plan = plan_sql(sql, catalog, parameters, context, deadline)
        # The schemas the plan was made with run it too (see SecureSqlCatalog.schemas).
        plan.planned_schemas = catalog.schemas
        if key is not None and not parameters and plan.reusable:
            self._plans.put(key, plan)
        return plan

    def _ddl(self, sql: str, user: str | None) -> pa.Table:
        """CREATE/ALTER/DROP TABLE: the same catalog operations as the REST API, checked here
        for the user and run on the coordinator with the broker's own credentials."""
        from common.catalog import translate_ddl
        from common.sql.projection_select import resolve_projection_edits

        op = translate_ddl(sql)
        kind = "EXTERNAL" if op.table.schema == "ext" else "DATASOURCE"
        self.authorizer.require(user, "WRITE", kind, op.table.name)
        if self.ddl_client is None:
            raise UnsupportedError("no coordinator is reachable to change the catalog; is one running?")
        # ADD PROJECTION .. AS SELECT is planned against the table as this user sees it.
        op = resolve_projection_edits(op, SecureSqlCatalog(self.catalog, self.authorizer, user))
        try:
            result = self.ddl_client().execute(op)
        except (TableExistsError, TableNotFoundError) as exc:
            raise _in_sql_terms(exc, op) from None
        flush = getattr(getattr(self.catalog, "cache", None), "flush", None)
        if flush is not None:
            flush()  # the statement's own effect is visible to the next query at once
        return pa.table({"result": [result.message]})

    def streams(self, sql: str, parameters: Sequence = (), context: dict | None = None,
                user: str | None = None, plan: SqlPlan | None = None) -> bool:
        """Whether ``execute`` with ``emit`` would stream the statement's rows (one scan,
        unordered or by time): asked from the plan GetFlightInfo cached, so it costs a lookup. A statement with
        parameters, or whose plan is not cached, is run the ordinary way."""
        if parameters:
            return False
        if plan is None:
            plan = self._cached(sql, user, context)
        scan = plan.streamed if plan is not None else None
        return scan is not None and self.executor.streams(scan[0])

    def execute(self, sql: str, parameters: Sequence = (), context: dict | None = None,
                user: str | None = None, is_active=lambda: True, emit=None, plan: SqlPlan | None = None,
                tracked=None, origin=None, query_id: str | None = None) -> pa.Table:
        """The statement's result; with ``emit``, a scan's rows go to ``emit`` a piece at
        a time as historicals send them and the table returned is empty (see ``streams``).
        ``plan``: the statement's plan as ``describe`` gave it (run as it is, not looked up).
        ``tracked``: the query log's ``RunningQuery`` of the statement, or None: its kill check
        (``stop_if_killed``, a flag read) runs wherever planning checks its deadline, and the
        native queries the statement runs report to it. ``origin`` and ``query_id`` are the query
        log's (``LoggedSql`` records them; a front door without the log passes them here)."""
        started = time.monotonic()
        # Only statements that plan (no DDL, ingestion or parameters) are ever cached.
        if plan is None and not parameters:
            plan = self._cached(sql, user, context)
        if plan is None:
            head = classify(sql)
            if head.is_ddl:
                return self._ddl(head.body, user)
            if head.is_ingestion:
                return self._submit(sql, {**self.ingestion_defaults, **dict(context or {})}, user)
            if head.kind.is_ingestion:  # EXPLAIN PLAN FOR INSERT/REPLACE
                return self._explain_ingestion(head, dict(context or {}), user)
            # The timeout covers planning too (a huge IN list or a deep expression takes planning
            # time): the planner checks the deadline in its loops and stops there.
            stop = tracked.stop_if_killed if tracked is not None else None
            planning = PlanningDeadline(self._timeout({**dict(context or {}), **head.settings}), started, stop)
            plan = self._plan(sql, user, parameters, dict(context or {}), planning)
        timeout_s = self._timeout(plan.context)
        deadline = started + timeout_s
        if time.monotonic() > deadline:
            raise planning_timeout(timeout_s)

        def run_native(query):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise QueryTimeoutError(f"query timed out after {timeout_s:.1f}s (context timeout)")
            return self.executor.execute(query, remaining, None, is_active, schemas=schemas, tracked=tracked).table

        schemas = plan.planned_schemas

        scan = plan.streamed if emit is not None else None
        if scan is not None and self.executor.streams(scan[0]):
            query, shape = scan
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise QueryTimeoutError(f"query timed out after {timeout_s:.1f}s (context timeout)")
            self.executor.execute_stream(query, remaining, lambda table: emit(shape(table)), None, is_active,
                                         schemas=schemas, tracked=tracked)
            return plan.result_schema.empty_table()
        return plan.execute(run_native)

    def _submit(self, sql: str, context: dict, user: str | None = None) -> pa.Table:
        """INSERT/REPLACE: validate and authorize here (errors reach the user at once and no task
        is created), run as a coordinator task."""
        from services.broker.ingestion_submit import prepare_ingestion

        written = sql
        require_all(self.authorizer, user, source_requirements(written))  # before the catalog is consulted
        sql, statement, spec = prepare_ingestion(sql, context, IngestionCatalog(self._submitted_catalog(),
                                                                                self.authorizer, user))
        require_ingestion(self.authorizer, user, statement, written)  # WRITE on the target, READ on its sources
        coordinator = self.catalog.coordinator
        if coordinator is None:
            raise UnsupportedError("no coordinator is reachable to run the ingestion task; is one running?")
        # The task runs the statement parsed here (typed JSON); the SQL text is for people reading the task.
        task = coordinator.submit_task(statement.datasource, statement.mode.lower(), sql,
                                       {**spec, "statement": statement.to_json()})
        return pa.table({"task_id": [task.id]})

    def _submitted_catalog(self):
        """The catalog an INSERT/REPLACE is prepared from: the broker's, with each catalog entry it
        reads asked of the coordinator now rather than taken from the synced copy, which can lag
        a table defined a moment ago (services/broker/submitted_catalog.py)."""
        client = self.ddl_client() if self.ddl_client is not None else None
        if client is None or not isinstance(self.catalog, OverlayCatalog):
            return self.catalog
        return OverlayCatalog(self.catalog.base, SubmittedCatalog(client, self.catalog.cache))

    def _explain_ingestion(self, head, context: dict, user: str | None) -> pa.Table:
        """What an INSERT/REPLACE would run, checked and authorized as if submitted; a source whose
        schema is discovered shows its undeclared columns as ``__dynamic``."""
        from common.sql.sql_plan import EXPLAIN_SCHEMA
        from services.broker.ingestion_submit import prepare_ingestion

        body = head.body
        require_all(self.authorizer, user, source_requirements(body))
        _, statement, _ = prepare_ingestion(body, {**context, **head.settings},
                                            IngestionCatalog(self.catalog, self.authorizer, user))
        require_ingestion(self.authorizer, user, statement, body)
        row = explain_ingestion(statement)
        return pa.Table.from_pylist([row], schema=EXPLAIN_SCHEMA)

    def describe(self, sql: str, context: dict | None = None, user: str | None = None,
                 parameters: Sequence | None = None, stop: Callable[[], None] | None = None, origin=None,
                 query_id: str | None = None) -> StatementInfo:
        """``origin`` and ``query_id``: the query log's, as for ``execute``."""
        plan = self._cached(sql, user, context) if not parameters else None
        if plan is not None:  # a statement without parameters, planned before: what it said then
            return _info(plan)
        head = classify(sql)
        if head.is_ddl:
            return StatementInfo(0, pa.schema([("result", pa.string())]))
        if head.is_ingestion:
            self._authorize_ingestion(sql, context, user)
            return StatementInfo(0, pa.schema([("task_id", pa.string())]))
        if head.kind.is_ingestion:
            from common.sql.sql_plan import EXPLAIN_SCHEMA

            return StatementInfo(0, EXPLAIN_SCHEMA)
        catalog = SecureSqlCatalog(self.catalog, self.authorizer, user)
        count = head.parameter_count
        # Preparing plans too, so the query timeout bounds it as it bounds execute.
        deadline = PlanningDeadline(self._timeout({**dict(context or {}), **head.settings}), stop=stop)
        if count == 0 or parameters is not None:
            plan = self._plan(sql, user, tuple(parameters or ()), dict(context or {}), deadline)
            if count == 0 and plan.reusable:
                return _info(plan)
            return StatementInfo(plan.parameter_count, plan.output_schema)
        try:
            plan = plan_sql(sql, catalog, [None] * count, dict(context or {}), deadline)
            return StatementInfo(plan.parameter_count, None)
        except (PermissionError, QueryTimeoutError, QueryCancelledError):  # killed while it planned
            raise
        except Exception:  # planning may need the parameters' types: decide when they are bound
            return StatementInfo(count, None)

    def _authorize_ingestion(self, sql: str, context: dict | None, user: str | None) -> None:
        """Refuse preparing an INSERT/REPLACE the user may not run; other errors wait for execute."""
        if not self.authorizer.enabled:
            return
        from services.broker.ingestion_submit import prepare_ingestion

        require_all(self.authorizer, user, source_requirements(sql))
        try:
            _, statement, _ = prepare_ingestion(sql, dict(context or {}),
                                                IngestionCatalog(self.catalog, self.authorizer, user))
        except PermissionError:
            raise
        except Exception:  # reported when the statement runs
            return
        require_ingestion(self.authorizer, user, statement, sql)

    def catalogs(self) -> list[str]:
        return [CATALOG]

    def db_schemas(self, catalog: str | None = None, schema_pattern: str | None = None) -> list[tuple[str, str]]:
        pattern = _like(schema_pattern)
        return [(CATALOG, s) for s in ("INFORMATION_SCHEMA", "druid", "ext", "sys") if pattern is None or pattern.match(s)]

    def tables(self, catalog: str | None = None, schema_pattern: str | None = None, table_pattern: str | None = None,
               table_types: Sequence[str] = (), user: str | None = None) -> list[TableInfo]:
        if catalog not in (None, "", CATALOG):
            return []
        s_pat, t_pat = _like(schema_pattern), _like(table_pattern)
        out = []
        visible = SecureSqlCatalog(self.catalog, self.authorizer, user)  # lists only what the user may READ
        candidates = [("druid", name, "TABLE") for name in visible.datasource_names()]
        candidates += [("sys", name, "SYSTEM_TABLE") for name in SYS_TABLES]
        candidates += [("INFORMATION_SCHEMA", name, "SYSTEM_TABLE")
                       for name in ("SCHEMATA", "TABLES", "COLUMNS", "ROUTINES")]
        candidates += [("ext", name, "EXTERNAL") for name in visible.external_table_names()]
        for schema, name, kind in candidates:
            if (s_pat and not s_pat.match(schema)) or (t_pat and not t_pat.match(name)):
                continue
            if table_types and kind not in table_types:
                continue
            out.append(TableInfo(CATALOG, schema, name, kind, self._arrow_schema(schema, name)))
        return out

    def _arrow_schema(self, schema: str, name: str) -> pa.Schema:
        quoted = f'"{schema}"."{name}"'
        try:
            return plan_sql(f"SELECT * FROM {quoted}", self.catalog).output_schema
        except Exception:  # a table that cannot be described still lists
            return pa.schema([])

    def table_types(self) -> list[str]:
        return ["EXTERNAL", "SYSTEM_TABLE", "TABLE"]


__all__ = ["BrokerCatalog", "SqlService"]
