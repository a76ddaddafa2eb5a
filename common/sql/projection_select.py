"""``ALTER TABLE ds ADD PROJECTION p AS SELECT ...``: the SELECT planned into a projection spec.

The SELECT is planned like any query against the table; its one native aggregation becomes the
projection: dimensions are the grouping columns (expressions become virtual columns, named
after their SELECT aliases), a query granularity becomes a ``timestamp_floor`` grouping column,
aggregators are stored as they are, and WHERE becomes the projection's filter. What a projection
cannot hold (post-aggregation such as AVG, HAVING, ORDER BY/LIMIT, joins, subqueries) is refused
with the reason.
"""

from __future__ import annotations

from common.catalog.operations import AddProjection, CatalogOperation, EditTable
from common.errors import ValidationError
from common.query.projection import ProjectionSpec
from common.sql.catalog import SqlCatalog
from common.sql.sql_plan import plan_sql
from common.types.granularity import Granularity

_REFERENCE_KEYS = ("column", "dimension", "fieldName")


def projection_from_select(name: str, select_sql: str, catalog: SqlCatalog, datasource: str) -> dict:
    where = f"projection '{name}'"
    plan = plan_sql(select_sql, catalog)
    queries = plan.native_queries()
    if len(queries) != 1 or plan.kind != "query":
        raise ValidationError(f"{where}: the SELECT must be one aggregation over {datasource} "
                              "(no joins, unions or subqueries)")
    q = queries[0]
    if q.get("dataSource") != datasource:
        raise ValidationError(f"{where}: the SELECT must read table {datasource}, not {q.get('dataSource')!r}")
    kind = q.get("queryType")
    if kind not in ("groupBy", "timeseries"):
        raise ValidationError(f"{where}: the SELECT must aggregate (GROUP BY, or aggregates only); "
                              f"it plans as a {kind} query")
    if q.get("postAggregations"):
        raise ValidationError(f"{where}: an expression over aggregates (such as AVG) cannot be stored; store its "
                              "parts (SUM and COUNT) and queries will combine them")
    if q.get("having"):
        raise ValidationError(f"{where}: HAVING cannot be stored in a projection; use WHERE on grouping columns")
    limit = q.get("limitSpec") or {}
    if limit.get("limit") is not None or q.get("limit") is not None:
        raise ValidationError(f"{where}: LIMIT cannot be stored in a projection")

    vcs = {vc["name"]: dict(vc) for vc in q.get("virtualColumns", [])}
    dims = list(q.get("dimensions", []))
    aggs = list(q.get("aggregations", []))
    outputs = [f.name for f in plan.logical.fields]
    granularity = Granularity.parse(q.get("granularity", "all"))
    internal = ([] if granularity.is_all else ["__time"]) + [d["outputName"] for d in dims] + [a["name"] for a in aggs]
    # The SELECT's aliases name what they alias when the plan keeps the SELECT's order.
    alias = dict(zip(internal, outputs)) if len(internal) == len(outputs) else {}

    renames: dict[str, str] = {}
    grouping: list[str] = []
    virtual: list[dict] = []
    if not granularity.is_all:
        if granularity.is_none or granularity.period is None:
            raise ValidationError(f"{where}: a projection keeps time only in buckets; use TIME_FLOOR(__time, ...)")
        tname = alias.get("__time", "__time_floor")
        expr = f"timestamp_floor(__time, '{granularity.period}'"
        expr += f", null, '{granularity.time_zone}')" if granularity.time_zone else ")"
        virtual.append({"type": "expression", "name": tname, "expression": expr, "outputType": "LONG"})
        grouping.append(tname)
    for d in dims:
        col = d["dimension"]
        if col in vcs:
            new = alias.get(d["outputName"], col)
            renames[col] = new
            grouping.append(new)
        else:
            grouping.append(col)
    for old, new in renames.items():
        vc = vcs[old]
        vc["name"] = new
        virtual.append(vc)
    for old, vc in vcs.items():
        if old not in renames:  # read by an aggregator or the filter only
            virtual.append(vc)
    stored_aggs = []
    for a in aggs:
        a = _renamed(dict(a), renames)
        a["name"] = alias.get(a["name"], a["name"])
        stored_aggs.append(a)
    out = {"type": "aggregate", "name": name, "groupingColumns": [{"type": "auto", "name": g} for g in grouping],
           "aggregators": stored_aggs}
    if virtual:
        out["virtualColumns"] = [_renamed(vc, renames) for vc in virtual]
    if q.get("filter"):
        out["filter"] = _renamed(q["filter"], renames)
    spec = ProjectionSpec.from_json(out)
    schema = catalog.datasource_schema(datasource) or {}
    spec.validate(dict(schema))
    return out


def _renamed(obj, renames: dict[str, str]):
    """A copy of native JSON with references to renamed virtual columns following the new names."""
    if isinstance(obj, list):
        return [_renamed(x, renames) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        if key in _REFERENCE_KEYS and isinstance(value, str) and value in renames:
            out[key] = renames[value]
        else:
            out[key] = _renamed(value, renames)
    return out


def resolve_projection_edits(op: CatalogOperation, catalog: SqlCatalog) -> CatalogOperation:
    """The operation with every ``ADD PROJECTION .. AS SELECT`` planned into its definition."""
    if not isinstance(op, EditTable):
        return op
    edits = []
    for edit in op.edits:
        if isinstance(edit, AddProjection) and edit.projection is None:
            spec = projection_from_select(edit.name, edit.select_sql or "", catalog, op.table.name)
            edit = AddProjection(spec, edit.name)
        edits.append(edit)
    return EditTable(op.table, tuple(edits))


__all__ = ["projection_from_select", "resolve_projection_edits"]
