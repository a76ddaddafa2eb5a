"""GROUP BY on ARRAY_TO_MV(..): Druid's multi-value string grouping, one group per value.

Druid groups a multi-value string by each of its values (an implicit UNNEST), where an ARRAY
groups by the whole array; ARRAY_TO_MV turns the one into the other. strata has no multi-value
column type, so a SELECT whose GROUP BY names ARRAY_TO_MV(arr) (directly, by alias or by position)
is rewritten before planning into the UNNEST it means:

    SELECT ARRAY_TO_MV(arr) AS k, COUNT(*) FROM t GROUP BY 1
    -> SELECT "$mv0".v AS k, COUNT(*) FROM t CROSS JOIN UNNEST(<arr as VARCHAR values>) AS "$mv0"(v) GROUP BY 1

Each element becomes text, as Druid's multi-value strings hold text ('999.0' for a double), and a
null or empty array still counts once, in the null group, as Druid groups a row with no values.
Two ARRAY_TO_MV keys give every pair of values, as two multi-value dimensions do in Druid.
A column declared multi-value (Druid's multi-value string dimension) groups the same way when
GROUP BY names it: ``multi_value`` lists such columns of the FROM table, and each grouped one is
treated as ARRAY_TO_MV of itself (a row without values counts once, in the null group).
Only the grouped values are unnested: WHERE and the arguments of aggregates see each row's whole
array, as Druid filters rows and evaluates aggregator inputs before grouping by each value.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from common.errors import ValidationError
from common.sql.scalar_translator import is_aggregate
from common.sql.sql_text import sql_text


def is_array_to_mv(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).upper() == "ARRAY_TO_MV"


def _is_mv_column(node: exp.Expression, multi_value: frozenset[str]) -> bool:
    return isinstance(node, exp.Column) and not node.table and node.name in multi_value


# Functions that make a multi-value string of one (Druid's MV_FILTER_ONLY/NONE keep some values):
# grouped, they group per value too, as the multi-value dimensions page suggests for keeping only
# the values a filter asked for.
_MV_RESULT_FUNCTIONS = ("MV_FILTER_ONLY", "MV_FILTER_NONE")


def _is_mv_of_column(node: exp.Expression, multi_value: frozenset[str]) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).upper() in _MV_RESULT_FUNCTIONS \
        and bool(node.expressions) and _is_mv_column(node.expressions[0], multi_value)


def _group_targets(select: exp.Select, multi_value: frozenset[str] = frozenset()) -> list[exp.Expression]:
    """The ARRAY_TO_MV calls and multi-value columns the GROUP BY names, each once."""
    group = select.args.get("group")
    if group is None:
        return []
    items = select.expressions
    aliases = {item.alias: item.this for item in items if isinstance(item, exp.Alias)}
    found: dict[str, exp.Expression] = {}
    for node in group.expressions:
        target = node
        if isinstance(node, exp.Literal) and node.is_int and 1 <= int(node.this) <= len(items):
            target = items[int(node.this) - 1]
            target = target.this if isinstance(target, exp.Alias) else target
        elif isinstance(node, exp.Column) and not node.table and node.name in aliases:
            target = aliases[node.name]
        if is_array_to_mv(target) or _is_mv_column(target, multi_value) or _is_mv_of_column(target, multi_value):
            found.setdefault(target.sql(dialect="druid"), target)
    return list(found.values())


def explode_mv_groups(select: exp.Select, multi_value: frozenset[str] = frozenset()) -> exp.Select:
    """``select`` with each grouped ARRAY_TO_MV(arr), and each grouped column of ``multi_value``,
    read from a CROSS JOIN UNNEST of its values (a copy; ``select`` itself when its GROUP BY names
    none)."""
    targets = _group_targets(select, multi_value)
    if not targets:
        return select
    if not isinstance(select.args.get("from_"), exp.From):
        raise ValidationError(f"GROUP BY ARRAY_TO_MV needs a FROM clause in '{sql_text(select)}'")
    columns = {}
    joins = []
    for i, target in enumerate(targets):
        if _is_mv_column(target, multi_value) or _is_mv_of_column(target, multi_value):
            name = f"$mv{i}"
            arg = target.sql(dialect="druid")
            text = f"MV_TO_ARRAY({arg})"
            joins.append(sqlglot.parse_one(
                f'SELECT 1 FROM t CROSS JOIN UNNEST(CASE WHEN ARRAY_LENGTH({text}) > 0 THEN {text} '
                f'ELSE ARRAY[CAST(NULL AS VARCHAR)] END) AS "{name}"(v)', read="druid").args["joins"][0])
            columns[arg] = exp.column("v", table=exp.to_identifier(name, quoted=True))
            continue
        if len(target.expressions) != 1:
            raise ValidationError(f"ARRAY_TO_MV takes 1 argument, got {len(target.expressions)} in "
                                  f"'{sql_text(target)}'")
        name = f"$mv{i}"
        arg = target.expressions[0].sql(dialect="druid")
        text = f"CAST({arg} AS VARCHAR ARRAY)"
        joins.append(sqlglot.parse_one(
            f'SELECT 1 FROM t CROSS JOIN UNNEST(CASE WHEN ARRAY_LENGTH({text}) > 0 THEN {text} '
            f'ELSE ARRAY[CAST(NULL AS VARCHAR)] END) AS "{name}"(v)', read="druid").args["joins"][0])
        columns[target.sql(dialect="druid")] = exp.column("v", table=exp.to_identifier(name, quoted=True))

    def swap(node: exp.Expression) -> exp.Expression:
        if is_aggregate(node):
            # An aggregate's argument is read per row, before the implicit unnest, as in Druid:
            # SUM(MV_LENGTH(ARRAY_TO_MV(a))) adds each row's whole length to each of its groups.
            # (A new node is not descended into, so the copy keeps the argument as written.)
            return node.copy()
        if is_array_to_mv(node) or _is_mv_column(node, multi_value) or _is_mv_of_column(node, multi_value):
            column = columns.get(node.sql(dialect="druid"))
            if column is not None:
                return column.copy()
        return node

    out = select.copy()
    # An unnamed ARRAY_TO_MV item keeps the name it had (EXPR$n), not the unnested column's.
    out.set("expressions", [exp.alias_(item, f"EXPR${i}") if is_array_to_mv(item) or _is_mv_of_column(item, multi_value) else
                            exp.alias_(item, item.name) if _is_mv_column(item, multi_value) else item
                            for i, item in enumerate(out.expressions)])
    for key in ("expressions", "group", "having", "order"):
        value = out.args.get(key)
        if isinstance(value, list):
            out.set(key, [v.transform(swap) for v in value])
        elif value is not None:
            out.set(key, value.transform(swap))
    out.set("joins", list(out.args.get("joins") or []) + joins)
    return out


__all__ = ["explode_mv_groups", "is_array_to_mv"]
