"""What the planner knows of an INSERT/REPLACE whose source schema is discovered when the task
reads its input: the ``__dynamic`` stand-in for the undeclared columns, ``*`` expanded over them,
the ``schemaConflicts`` mode, and the statement's EXPLAIN. The broker (planning, EXPLAIN) and the
ingestion (running it, services/ingestion/schema_discovery.py) share it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from sqlglot import exp

from common.errors import ValidationError
from common.ingest.external_source import ExternalSource
from common.types.column_type import ColumnType, TypeKind

DYNAMIC_COLUMN = "__dynamic"
CONFLICT_MODES = ("widen", "fail")
DEFAULT_CONFLICTS = "widen"


def conflict_mode(settings: Mapping) -> str:
    mode = str(settings.get("schemaConflicts", DEFAULT_CONFLICTS)).lower()
    if mode not in CONFLICT_MODES:
        raise ValidationError(f"context parameter 'schemaConflicts' must be 'widen' or 'fail', got "
                              f"{settings.get('schemaConflicts')!r}")
    return mode


def _is_star(e: exp.Expression) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))


def _source_of(select: exp.Select, sources: Mapping[str, ExternalSource]) -> str | None:
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None or select.args.get("joins") or not isinstance(from_.this, exp.Table):
        return None
    name = from_.this.name
    return name if name in sources else None


def expand_star(select: exp.Query, sources: Mapping[str, ExternalSource]) -> exp.Query:
    """``*`` over a discovered source -> the source columns not named elsewhere in the SELECT list
    (by reference or as an output name); in a rollup, one sorted struct ``__dynamic`` of them."""
    tree = select.copy()
    for node in list(tree.find_all(exp.Select)):
        name = _source_of(node, sources)
        if name is None or not sources[name].discover or not any(_is_star(e) for e in node.expressions):
            continue
        others = [e for e in node.expressions if not _is_star(e)]
        named = {c.name for e in others for c in e.find_all(exp.Column)} | {e.alias_or_name for e in others}
        columns = [n for n, _ in sources[name].signature if n not in named]
        rollup = node.args.get("group") is not None
        out: list[exp.Expression] = []
        for e in node.expressions:
            if not _is_star(e):
                out.append(e)
            elif rollup and columns:
                args: list[exp.Expression] = []
                for n in sorted(columns):
                    args += [exp.Literal.string(n), exp.column(n, quoted=True)]
                out.append(exp.alias_(exp.Anonymous(this="named_struct", expressions=args), DYNAMIC_COLUMN))
            else:
                out.extend(exp.column(n, quoted=True) for n in columns)
        node.set("expressions", out)
    return tree


def dynamic_columns(select: exp.Query) -> tuple[str, ...]:
    """The names ``__dynamic`` carries in ``select`` (after ``expand_star``)."""
    if not isinstance(select, exp.Select):
        return ()
    for e in select.expressions:
        if e.alias_or_name == DYNAMIC_COLUMN and isinstance(e.unalias(), exp.Anonymous):
            return tuple(a.name for a in e.unalias().expressions if isinstance(a, exp.Column))
    return ()


# ---- EXPLAIN -------------------------------------------------------------------------------------------


def explain_ingestion(statement) -> dict[str, str]:
    """PLAN / RESOURCES / ATTRIBUTES (JSON text) of an INSERT/REPLACE as the broker can know it: the
    columns the SELECT reads from each source with their types, where a discovered source's
    undeclared columns appear as one ``__dynamic`` COMPLEX<json> column (the columns to be named
    when the task reads the input), and the SELECT with ``*`` standing for them."""
    sources, signatures = {}, {}
    for name, src in statement.sources.items():
        if src.discover:
            cols = [{"name": n, "type": t.native_name, "declared": "PARTIAL"} for n, t in src.partial]
            cols.append({"name": DYNAMIC_COLUMN, "type": "COMPLEX<json>", "declared": "discovered at run time"})
            stand_in = (*src.partial, (DYNAMIC_COLUMN, ColumnType(TypeKind.COMPLEX, complex_name="json")))
            sources[name] = dataclasses.replace(src, signature=stand_in)
        else:
            cols = [{"name": n, "type": t.native_name, "declared": "EXTEND"} for n, t in src.signature]
            sources[name] = src
        signatures[name] = {"inputSource": src.input_source, "inputFormat": src.input_format, "columns": cols,
                            "exclude": list(src.exclude)}
    select = expand_star(statement.select, sources)
    if isinstance(select, exp.Select):  # the struct a rollup groups on is, to the planner, one column
        select.set("expressions", [exp.column(DYNAMIC_COLUMN) if e.alias_or_name == DYNAMIC_COLUMN else e
                                   for e in select.expressions])
    plan = {"mode": statement.mode, "dataSource": statement.datasource, "select": select.sql("druid"),
            "sources": signatures, "rollup": statement.is_rollup}
    resources = [{"name": statement.datasource, "type": "DATASOURCE"}]
    resources += [{"name": s.describe(), "type": "EXTERNAL"} for s in statement.sources.values()]
    attributes = {"statementType": statement.mode, "targetDataSource": statement.datasource,
                  "partitionedBy": statement.partitioned_by.to_json() if statement.partitioned_by else None,
                  "clusteredBy": list(statement.clustered_by) or None}
    return {"PLAN": json.dumps(plan), "RESOURCES": json.dumps(resources), "ATTRIBUTES": json.dumps(attributes)}


__all__ = ["CONFLICT_MODES", "DEFAULT_CONFLICTS", "DYNAMIC_COLUMN", "conflict_mode", "dynamic_columns", "expand_star",
           "explain_ingestion"]
