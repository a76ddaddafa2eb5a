"""SqlPlan: a planned SQL statement, and ``plan_sql`` / ``execute_sql``, the layer's entry points.

Planning is pure: parse (sqlglot, Druid dialect) -> translate to a logical plan (names and types
checked against the catalog) -> rewrite with the rules -> choose native queries and broker stages.
Running needs a ``run_native`` callable, which the broker backs with its scatter/gather and tests
back with the in-process engine. Timeouts are the caller's: the plan only carries the context.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import pyarrow as pa

from common.errors import ValidationError
from common.expr.nesting import depth_guard
from common.query.model import Query, ScanQuery
from common.sql.catalog import SqlCatalog
from common.sql.logical_plan import RelNode, TableScan
from common.sql.native_planner import plan_stages
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.rules import optimize
from common.sql.scalar_translator import Session
from common.sql import broker_ops
from common.sql.multi_value_text import multi_value_text
from common.sql.sql_types import is_multi_value
from common.sql.stages import (DEFAULT_MAX_JOIN_ROWS, ExecContext, JoinStage, NativeStage, SelectStage, SortStage,
                               Stage, TableStage, UnionStage, ValuesStage)
from common.sql.statement import parse_statement
from common.sql.translator import translate
from common.types.granularity import Granularity, Period
from common.types.interval import parse_instant

EXPLAIN_SCHEMA = pa.schema([pa.field("PLAN", pa.string()), pa.field("RESOURCES", pa.string()),
                            pa.field("ATTRIBUTES", pa.string())])


class SqlPlan:
    """``kind`` is "query" or "explain". ``output_schema`` is exactly the schema ``execute``
    returns; for "explain" that is one row of PLAN, RESOURCES and ATTRIBUTES (JSON text)."""

    def __init__(self, kind: str, context: dict, parameter_count: int, logical: RelNode, stage: Stage,
                 bound: bool, catalog: SqlCatalog, fetched: dict | None = None,
                 session_reads: frozenset = frozenset()) -> None:
        self.kind = kind
        self.context = context
        self.parameter_count = parameter_count
        self.logical = logical
        self.stage = stage
        self._bound = bound
        self._catalog = catalog
        self._fetched = dict(fetched or {})
        fields = logical.fields
        self.result_schema = pa.schema([result_field(f.name, f.type) for f in fields])
        self.output_schema = EXPLAIN_SCHEMA if kind == "explain" else self.result_schema
        self.volatile_reasons = _volatile_reasons(logical, session_reads)
        # A statement that reads no table (SELECT 1, constant rows) gives the same rows on every
        # run: the first run's table (immutable) answers the later ones without the engine.
        self._constant = kind == "query" and bound and not self.volatile_reasons and _reads_nothing(stage)
        self._constant_result: pa.Table | None = None
        # The one scan a streamed run sends, and how its rows become the statement's (or None),
        # worked out here once: a cached plan runs many times.
        self.streamed = self._streamed_scan()
        # Datasource -> the schema planning saw, set by whoever planned it (the broker): the plan
        # runs with these, not with the schemas current when it runs.
        self.planned_schemas: dict | None = None

    @property
    def reusable(self) -> bool:
        """Whether running this plan again later gives what planning the text again would: not
        when it read the clock (CURRENT_TIMESTAMP, NOW, CURRENT_DATE however spelled) or holds
        tables that are snapshots (sys, INFORMATION_SCHEMA) or files (ext). Decided from what
        translation did, never from the text."""
        return not self.volatile_reasons

    def native_queries(self) -> list[dict]:
        """The native queries pushed to the cluster, in the order they run (Druid's JSON)."""
        return [q.to_json() for q in self.stage.pushed_queries()]

    def explain(self) -> dict:
        attributes: dict = {"statementType": "SELECT"}
        projections = self._projection_choices()
        if projections:
            attributes["projections"] = projections
        return {"PLAN": self.stage.explain(), "RESOURCES": self.stage.resources(), "ATTRIBUTES": attributes}

    def _projection_choices(self) -> list[dict]:
        """Per pushed native query with projection candidates: the table each group of segments
        would read, and each refused projection's reason."""
        from common.query.projection_report import explain_projections

        out = []
        for i, q in enumerate(self.stage.pushed_queries()):
            if not isinstance(q.datasource, str):
                continue
            manifests = self._catalog.segment_manifests(q.datasource)
            groups = explain_projections(q, manifests)
            if any(g.get("projection") != "base" or g.get("rejected") for g in groups):
                out.append({"query": i, "datasource": q.datasource, "segmentGroups": groups})
        return out

    def execute(self, run_native: Callable[[Query], pa.Table]) -> pa.Table:
        if self.kind == "explain":
            info = self.explain()
            return pa.table({k: pa.array([json.dumps(v)], pa.string()) for k, v in info.items()},
                            schema=EXPLAIN_SCHEMA)
        if not self._bound:
            raise ValidationError(f"the statement has {self.parameter_count} ? parameters but no values were given")
        if self._constant_result is not None:
            return self._constant_result
        # sys tables read while planning serve the first run; later runs read them afresh.
        ctx = ExecContext(run_native, self._catalog, _max_join_rows(self.context), self._fetched)
        self._fetched = {}
        table = self.stage.execute(ctx)
        arrays = _result_arrays([table.column(c) for c in self.stage.columns], self.logical.fields)
        table = pa.Table.from_arrays(arrays, schema=self.result_schema)
        if self._constant:
            self._constant_result = table
        return table


    def _streamed_scan(self) -> tuple[Query, Callable[[pa.Table], pa.Table]] | None:
        """When the statement is one scan pushed to the cluster (in no order or by time; under
        renames and column choices only): that scan, and what turns each piece of its rows into rows of this
        statement, so the broker can send rows as they come instead of holding them all; else None."""
        if self.kind != "query" or not self._bound:
            return None
        selects = []
        stage = self.stage
        while isinstance(stage, SelectStage):
            selects.append(stage)
            stage = stage.input
        if not (isinstance(stage, NativeStage) and stage.input is None and isinstance(stage.query, ScanQuery)):
            return None
        native, top = stage, self.stage

        def shape(table: pa.Table) -> pa.Table:
            table = broker_ops.shape(table, native.sources, native.fields, native.columns)
            inner = native
            for select in reversed(selects):
                table = broker_ops.shape(table, [inner.columns[p] for p in select.positions], select.fields,
                                         select.columns)
                inner = select
            arrays = _result_arrays([table.column(c) for c in top.columns], self.logical.fields)
            return pa.Table.from_arrays(arrays, schema=self.result_schema)

        return native.query, shape


def _reads_nothing(stage: Stage) -> bool:
    """Whether the stages compute their rows from the plan alone: constant rows and broker
    operations over them, no native query pushed to the cluster, no system or catalog table."""
    if isinstance(stage, TableStage) or (isinstance(stage, NativeStage) and stage.input is None):
        return False
    if not isinstance(stage, (ValuesStage, NativeStage, SelectStage, SortStage, JoinStage, UnionStage)):
        return False  # a stage kind this does not know: run it every time
    return all(_reads_nothing(child) for child in stage.children())


def _volatile_reasons(logical: RelNode, session_reads: frozenset) -> frozenset:
    reasons = set(session_reads)
    stack = [logical]
    while stack:
        node = stack.pop()
        if isinstance(node, TableScan) and node.table.kind != "datasource":
            reasons.add(f"{node.table.kind} table {node.table.schema}.{node.table.name}")
        stack.extend(node.inputs())
    return frozenset(reasons)


# Arrow's canonical JSON extension type, as field metadata: COMPLEX<json> results are JSON text,
# and clients that know the extension read them as JSON.
JSON_FIELD_METADATA = {b"ARROW:extension:name": b"arrow.json", b"ARROW:extension:metadata": b""}


def _result_arrays(arrays: list, fields) -> list:
    """Result columns as the result schema types them: multi-value strings become Druid's text."""
    return [multi_value_text(a) if is_multi_value(f.type) else a for a, f in zip(arrays, fields)]


def result_field(name: str, sql_type) -> pa.Field:
    ctype = sql_type.column_type
    if ctype is not None and ctype.multi_value:
        return pa.field(name, pa.string())  # as Druid shows it: see multi_value_text.py
    if ctype is not None and ctype.complex_name == "json":
        return pa.field(name, pa.string(), metadata=JSON_FIELD_METADATA)
    if ctype is not None and ctype.is_array and ctype.element.complex_name == "json":
        # ARRAY<COMPLEX<json>>: a list of JSON texts, each marked as JSON as a COMPLEX<json> column is
        return pa.field(name, pa.list_(pa.field("item", pa.string(), metadata=JSON_FIELD_METADATA)))
    return pa.field(name, sql_type.to_arrow())


def _max_join_rows(context: dict) -> int:
    value = context.get("maxJoinRows", DEFAULT_MAX_JOIN_ROWS)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValidationError(f"context maxJoinRows must be an integer, got {value!r}") from None
    if value < 0:
        raise ValidationError(f"context maxJoinRows must be >= 0, got {value}")
    return value


def _session(context: dict, parameters: tuple | None, deadline: PlanningDeadline = NO_DEADLINE) -> Session:
    tz = context.get("sqlTimeZone") or "UTC"
    if not isinstance(tz, str):
        raise ValidationError(f"context sqlTimeZone must be a time zone name, got {tz!r}")
    if tz not in ("UTC", "Z", "Etc/UTC"):
        Granularity.of_period(Period.parse("P1D"), tz)  # validates the zone with a clear message
    else:
        tz = "UTC"
    now = context.get("sqlCurrentTimestamp")
    if now is None:
        now_ms = int(time.time() * 1000)
    elif isinstance(now, (int, float)) and not isinstance(now, bool):
        now_ms = int(now)
    else:
        now_ms = parse_instant(str(now))
    return Session(tz, now_ms, parameters, deadline=deadline)


def plan_sql(sql: str, catalog: SqlCatalog, parameters: Sequence = (), context: dict | None = None,
             deadline: PlanningDeadline = NO_DEADLINE) -> SqlPlan:
    """Plan one statement (SET statements may precede the query; EXPLAIN PLAN FOR is allowed).
    With no ``parameters`` for a statement that has ``?`` placeholders, the plan describes the
    statement (parameter_count, output_schema with unknown parameters read as NULL) and refuses
    to execute. ``deadline``: the statement's planning deadline, checked all through planning
    (see planning_deadline.py)."""
    with depth_guard("the statement"):
        return _plan(sql, catalog, parameters, context, deadline)


def _plan(sql: str, catalog: SqlCatalog, parameters: Sequence, context: dict | None,
          deadline: PlanningDeadline) -> SqlPlan:
    statement = parse_statement(sql, deadline)
    merged = dict(context or {})
    merged.update(statement.settings)
    params = tuple(parameters or ())
    bound = True
    if statement.parameter_count and not params:
        bound = False
    elif len(params) != statement.parameter_count:
        raise ValidationError(f"the statement has {statement.parameter_count} ? parameters but {len(params)} "
                              "values were given")
    session = _session(merged, params if bound else None, deadline)
    fetched: dict = {}
    logical = optimize(translate(statement.query, catalog, session, fetched), deadline=deadline)
    stage = plan_stages(logical, merged, deadline)
    return SqlPlan("explain" if statement.explain else "query", merged, statement.parameter_count, logical, stage,
                   bound, catalog, fetched, frozenset(session.reads))


def execute_sql(sql: str, catalog: SqlCatalog, run_native: Callable[[Query], pa.Table], parameters: Sequence = (),
                context: dict | None = None) -> pa.Table:
    return plan_sql(sql, catalog, parameters, context).execute(run_native)
