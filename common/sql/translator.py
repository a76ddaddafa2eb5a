"""Translator: a parsed query (sqlglot tree) to a logical plan, validating names and types against
the catalog on the way.

A SELECT becomes, bottom up: its FROM relation (tables, subqueries, CTEs, joins), a Filter for
WHERE, an Aggregate when it groups or aggregates (with a Filter above it for HAVING), a Project for
the select list (plus hidden columns ORDER BY needs), an Aggregate for DISTINCT, a Sort for ORDER
BY/LIMIT/OFFSET and a final Project dropping the hidden columns. Select-list names follow Druid:
the alias, else the column name, else ``EXPR$<position>``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from common.errors import UnsupportedError, ValidationError, unknown_name_message
from common.sql import functions
from common.sql.broker_ops import unique_names
from common.sql.catalog import SqlCatalog, resolve_table
from common.sql.logical_plan import (AGGREGATE_FUNCTIONS, AggCall, Aggregate, Field, Filter, Join, Project, RelNode,
                                     Sort, SortKey, TableScan, Union, Unnest, Values)
from common.sql.mv_grouping import explode_mv_groups
from common.sql.scalar import Call, Literal, Ref, Scalar, remap
from common.sql.scalar_translator import (ScalarTranslator, Scope, Session, contains_aggregate, is_aggregate,
                                          literal_value, sql_text, unify_types)
from common.sql.sql_text import LazySqlText, written_name
from common.sql.sql_types import BIGINT, BOOLEAN, DOUBLE, NULL, TIMESTAMP, VARCHAR, is_multi_value

_UNSUPPORTED_CLAUSES = {"qualify": "QUALIFY", "windows": "WINDOW", "distribute": "DISTRIBUTE BY", "sort": "SORT BY",
                        "cluster": "CLUSTER BY", "laterals": "LATERAL", "pivots": "PIVOT", "connect": "CONNECT BY",
                        "prewhere": "PREWHERE", "locks": "FOR UPDATE", "sample": "TABLESAMPLE"}


@dataclass(frozen=True)
class ScopeColumn:
    qualifier: str | None
    name: str
    index: int
    type: object
    merged: bool = False  # the second copy of a JOIN ... USING column: reachable only qualified
    json_fields: object = None  # a nested JSON column of a datasource: path -> stored types (json_field_types)


class RelationScope(Scope):
    """The columns of a FROM clause, addressed as ``name`` or ``qualifier.name``."""

    def __init__(self, columns: list[ScopeColumn], clause: str = "expression") -> None:
        self.columns = columns
        self.clause = clause

    def with_clause(self, clause: str) -> RelationScope:
        return RelationScope(self.columns, clause)

    def names(self) -> set[str]:
        return {c.name for c in self.columns}

    def resolve(self, node: exp.Column) -> Scalar:
        name, table = node.name, node.table
        hits = [c for c in self.columns if c.name == name and (c.qualifier == table if table else not c.merged)]
        if len(hits) == 1:
            return Ref(hits[0].index, hits[0].type)
        if len(hits) > 1:
            quals = sorted({str(c.qualifier) for c in hits})
            raise ValidationError(f"column '{name}' is ambiguous; qualify it with one of: {', '.join(quals)}")
        if table and not any(c.qualifier == table for c in self.columns):
            quals = sorted({c.qualifier for c in self.columns if c.qualifier})
            raise ValidationError(unknown_name_message("table alias", table, quals))
        pool = [c.name for c in self.columns if not table or c.qualifier == table]
        raise ValidationError(unknown_name_message("column", name, pool))

    def json_field_types(self, node: exp.Column, path: str):
        """The stored types of ``path`` in the nested JSON column ``node``; None when unknown."""
        name, table = node.name, node.table
        hits = [c for c in self.columns if c.name == name and (c.qualifier == table if table else not c.merged)]
        if len(hits) != 1 or hits[0].json_fields is None:
            return None
        return hits[0].json_fields.get(path)


class AggregateScope(Scope):
    """Expressions above an aggregation: group keys and aggregate calls become references to the
    Aggregate's outputs; any other column use is an error."""

    def __init__(self, owner: Translator, input_scope: RelationScope, groups: list[Scalar], clause: str) -> None:
        self.owner = owner
        self.input = ScalarTranslator(owner.session, input_scope)
        self.groups = groups
        self.calls: list[AggCall] = []
        self._positions: dict[AggCall, int] = {}  # call -> its index in ``calls``
        self.clause = clause

    def intercept(self, node: exp.Expression, translator: ScalarTranslator) -> Scalar | None:
        if isinstance(node, exp.Grouping):
            return self._grouping(node)
        if is_aggregate(node):
            call = self.owner.aggregate_call(node, self.input)
            try:
                at = self._positions.get(call)
            except TypeError:  # an unhashable constant inside (a folded array): compare one by one
                at = self.calls.index(call) if call in self.calls else None
            if at is None:
                at = len(self.calls)
                self.calls.append(call)
                try:
                    self._positions[call] = at
                except TypeError:
                    pass
            return Ref(len(self.groups) + at, call.type)
        if isinstance(node, exp.Paren) or contains_aggregate(node) or isinstance(node, exp.Window):
            return None
        value = self.input.translate(node)
        for i, g in enumerate(self.groups):
            if value == g:
                return Ref(i, g.type)
        if isinstance(node, exp.Column):
            raise ValidationError(f"column '{sql_text(node)}' must appear in GROUP BY or be used in an aggregate "
                                  f"function ({self.clause})")
        if not any(isinstance(n, exp.Column) for n in node.find_all(exp.Column)):
            return value  # constants
        return None


    def _grouping(self, node: exp.Grouping) -> Scalar:
        """GROUPING(key, ..): the bits of the keys a row's group leaves out. Without GROUPING SETS,
        ROLLUP or CUBE every group has all its keys, so it is 0; its arguments must be keys."""
        if not node.expressions:
            raise ValidationError(f"GROUPING takes one or more GROUP BY expressions: '{sql_text(node)}'")
        for arg in node.expressions:
            if self.input.translate(arg) not in self.groups:
                raise ValidationError(f"GROUPING takes GROUP BY expressions, but '{sql_text(arg)}' is not one "
                                      f"in '{sql_text(node)}'")
        return Literal(0, BIGINT)


def _name_of(node: exp.Expression, position: int) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return node.name
    return f"EXPR${position}"


def _unwrap_alias(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


class Translator:
    def __init__(self, catalog: SqlCatalog, session: Session) -> None:
        self.catalog = catalog
        self.session = session
        self.ctes: list[dict[str, exp.Expression]] = []
        self.fetched: dict = {}  # sys tables materialized while planning

    # ---- queries -------------------------------------------------------------------------------
    def query(self, node: exp.Expression) -> RelNode:
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise UnsupportedError("WITH RECURSIVE is not supported")
            self.ctes.append({cte.alias: cte.this for cte in with_.expressions})
        try:
            if isinstance(node, exp.Select):
                return self.select(node)
            if isinstance(node, exp.Union):
                return self._ordered(node, self.union(node))
            if isinstance(node, exp.Subquery):
                return self._ordered(node, self.query(node.this))
            if isinstance(node, (exp.Intersect, exp.Except)):
                raise UnsupportedError(f"{node.key.upper()} is not supported; only UNION ALL and UNION combine queries")
            if isinstance(node, exp.Values):
                raise UnsupportedError("VALUES lists are not supported; use SELECT ... UNION ALL SELECT ...")
            raise UnsupportedError(f"'{node.key.upper()}' is not supported where a query is expected")
        finally:
            if with_ is not None:
                self.ctes.pop()

    def _ordered(self, node: exp.Expression, rel: RelNode) -> RelNode:
        """ORDER BY / LIMIT / OFFSET on a UNION or parenthesized query: by output name or ordinal."""
        order = node.args.get("order")
        limit, offset = self._limit_offset(node)
        if order is None and limit is None and not offset:
            return rel
        keys = []
        names = [f.name for f in rel.fields]
        for item in order.expressions if order is not None else []:
            target = item.this
            pos = literal_value(target)
            if isinstance(pos, int) and isinstance(target, exp.Literal):
                if not 1 <= pos <= len(names):
                    raise ValidationError(f"ORDER BY position {pos} is not in the select list (1..{len(names)})")
                index = pos - 1
            elif isinstance(target, exp.Column) and target.name in names:
                index = names.index(target.name)
            else:
                raise ValidationError(f"ORDER BY of a UNION must name an output column or position, got "
                                      f"'{sql_text(target)}'")
            keys.append(SortKey(index, bool(item.args.get("desc")), item.args.get("nulls_first")))
        return Sort(rel, tuple(keys), limit, offset)

    def union(self, node: exp.Union) -> RelNode:
        inputs = []
        for side in (node.this, node.expression):
            rel = self.query(side)
            if isinstance(rel, Union) and not isinstance(side, exp.Subquery):
                inputs.extend(rel.union_inputs)
            else:
                inputs.append(rel)
        width = len(inputs[0].fields)
        for i, rel in enumerate(inputs[1:], start=2):
            if len(rel.fields) != width:
                raise ValidationError(f"UNION inputs have different numbers of columns: {width} and "
                                      f"{len(rel.fields)} (input {i})")
        types = [unify_types([r.fields[c].type for r in inputs], f"UNION column {c + 1} '{inputs[0].fields[c].name}'")
                 for c in range(width)]
        types = [VARCHAR if t == NULL else t for t in types]
        fields = tuple(Field(inputs[0].fields[c].name, types[c]) for c in range(width))
        aligned = []
        for rel in inputs:
            if any(f.type != t for f, t in zip(rel.fields, types)):
                exprs = tuple(Ref(c, f.type) if f.type == types[c] else Call("CAST", (Ref(c, f.type),), types[c])
                              for c, f in enumerate(rel.fields))
                rel = Project(rel, exprs, tuple(f.name for f in rel.fields))
            aligned.append(rel)
        out: RelNode = Union(tuple(aligned), fields)
        if node.args.get("distinct"):
            out = Aggregate(out, tuple(Ref(i, f.type) for i, f in enumerate(fields)), (),
                            tuple(f.name for f in fields))
        return out

    # ---- FROM ----------------------------------------------------------------------------------
    def relation(self, node: exp.Expression) -> tuple[RelNode, list[ScopeColumn]]:
        alias = node.args.get("alias")
        alias_name = alias.name if alias is not None and alias.name else None
        column_aliases = [c.name for c in alias.args.get("columns") or []] if alias is not None else []
        if isinstance(node, exp.Table) and _is_table_function(node):
            parts, args = _input_table_call(node)
            rel = TableScan(resolve_table(self.catalog, parts, self.fetched, args))
            qualifier = alias_name or parts[-1]
        elif isinstance(node, exp.Table):
            if isinstance(node.this, (exp.Anonymous, exp.Func)) or node.this is None:
                raise UnsupportedError(f"table functions are not supported: '{sql_text(node)}'")
            for key, label in (("sample", "TABLESAMPLE"), ("version", "FOR SYSTEM_TIME"), ("pivots", "PIVOT"),
                               ("changes", "CHANGES"), ("hints", "table hints")):
                if node.args.get(key):
                    raise UnsupportedError(f"{label} is not supported")
            parts = [p for p in (node.catalog, node.db, node.name) if p]
            cte = self._cte(parts)
            if cte is not None:
                rel = self.query(cte)
            else:
                rel = TableScan(resolve_table(self.catalog, parts, self.fetched))
            qualifier = alias_name or node.name
        elif isinstance(node, exp.Subquery):
            rel = self.query(node.this)
            rel = self._ordered(node, rel)
            qualifier = alias_name
        elif isinstance(node, exp.Unnest):
            return self._unnest(Values(((),)), [], node)
        elif isinstance(node, exp.Lateral):
            raise UnsupportedError("LATERAL is not supported; use CROSS JOIN UNNEST(array) AS t(x)")
        elif isinstance(node, exp.Values):
            raise UnsupportedError("VALUES lists are not supported; use SELECT ... UNION ALL SELECT ...")
        else:
            raise UnsupportedError(f"'{sql_text(node)}' is not supported in FROM")
        if column_aliases:
            if len(column_aliases) != len(rel.fields):
                raise ValidationError(f"alias '{alias_name}' names {len(column_aliases)} columns, but the table has "
                                      f"{len(rel.fields)}")
            rel = Project(rel, tuple(Ref(i, f.type) for i, f in enumerate(rel.fields)), tuple(column_aliases))
        json_fields = self._json_fields(rel) if isinstance(rel, TableScan) else {}
        return rel, [ScopeColumn(qualifier, f.name, i, f.type, json_fields=json_fields.get(f.name))
                     for i, f in enumerate(rel.fields)]

    def _unnest(self, left: RelNode, lcols: list[ScopeColumn], node: exp.Unnest) -> tuple[RelNode, list[ScopeColumn]]:
        """UNNEST(array) AS t(x) beside ``left``: the array is an expression over left's columns; a
        VARCHAR reads as a one-element array (a single-valued string, as Druid unnests it)."""
        from common.sql.array_translator import as_array  # a cycle: array_translator is part of translation

        if len(node.expressions) != 1 or node.args.get("offset"):
            raise UnsupportedError(f"UNNEST takes one array (WITH ORDINALITY/OFFSET is not supported): "
                                   f"'{sql_text(node)}'")
        tr = ScalarTranslator(self.session, RelationScope(lcols, "UNNEST"))
        value = as_array(tr.translate(node.expressions[0]), node)
        if value.type.column_type is None:  # UNNEST(NULL): no rows
            raise ValidationError(f"UNNEST needs an array, got {value.type} in '{sql_text(node)}'")
        alias = node.args.get("alias")
        qualifier = alias.name if alias is not None and alias.name else None
        names = [c.name for c in alias.args.get("columns") or []] if alias is not None else []
        if len(names) > 1:
            raise ValidationError(f"UNNEST gives one column, but '{sql_text(alias)}' names {len(names)}")
        name = names[0] if names else "EXPR$0"
        rel = Unnest(left, value, name)
        return rel, lcols + [ScopeColumn(qualifier, name, len(left.fields), rel.fields[-1].type)]

    def _json_fields(self, scan: TableScan) -> dict:
        """Stored field types of the datasource's nested JSON columns, from its segment manifests."""
        from common.sql.json_field_types import field_types

        table = scan.table
        json_columns = [f.name for f in table.fields
                        if f.type.column_type is not None and f.type.column_type.complex_name == "json"]
        if table.kind != "datasource" or not json_columns:
            return {}
        return field_types(self.catalog.segment_manifests(table.name), json_columns)

    def _cte(self, parts: list[str]) -> exp.Expression | None:
        if len(parts) != 1:
            return None
        for scope in reversed(self.ctes):
            if parts[0] in scope:
                return scope[parts[0]]
        return None

    def _multi_value_columns(self, select: exp.Select) -> frozenset[str]:
        """Multi-value string columns of the datasource a GROUP BY reads (its FROM table), which
        group value by value (see mv_grouping.py)."""
        from_ = select.args.get("from_") or select.args.get("from")
        if select.args.get("group") is None or from_ is None or not isinstance(from_.this, exp.Table) \
                or _is_table_function(from_.this) or not isinstance(from_.this.this, exp.Identifier):
            return frozenset()
        parts = [p for p in (from_.this.catalog, from_.this.db, from_.this.name) if p]
        if self._cte(parts) is not None:
            return frozenset()
        table = resolve_table(self.catalog, parts, self.fetched)
        return frozenset(f.name for f in table.fields if is_multi_value(f.type))

    def from_clause(self, select: exp.Select) -> tuple[RelNode, RelationScope]:
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            if select.args.get("joins"):
                raise ValidationError("JOIN needs a FROM clause")
            return Values(((),)), RelationScope([])
        rel, cols = self.relation(from_.this)
        for join in select.args.get("joins") or []:
            rel, cols = self._join(rel, cols, join)
        return rel, RelationScope(cols)

    def _join(self, left: RelNode, lcols: list[ScopeColumn], join: exp.Join) -> tuple[RelNode, list[ScopeColumn]]:
        side = str(join.args.get("side") or "").upper()
        kind = str(join.args.get("kind") or "").upper()
        if side == "FULL" or kind == "FULL":
            raise UnsupportedError("FULL OUTER JOIN is not supported; use LEFT JOIN or INNER JOIN")
        if str(join.args.get("method") or "").upper() == "NATURAL":
            raise UnsupportedError("NATURAL JOIN is not supported; use JOIN ... USING (columns) or JOIN ... ON")
        if kind in ("SEMI", "ANTI", "ASOF") or join.args.get("match_condition") is not None:
            raise UnsupportedError(f"{kind or 'this'} JOIN is not supported")
        if isinstance(join.this, exp.Unnest):
            if side or kind not in ("", "CROSS", "INNER") or join.args.get("on") is not None:
                raise UnsupportedError("UNNEST joins only as CROSS JOIN UNNEST(array) AS t(x) (or a comma join)")
            return self._unnest(left, lcols, join.this)
        right, rcols_raw = self.relation(join.this)
        n = len(left.fields)
        rcols = [ScopeColumn(c.qualifier, c.name, c.index + n, c.type) for c in rcols_raw]
        scope = RelationScope(lcols + rcols, "the JOIN condition")
        tr = ScalarTranslator(self.session, scope)
        condition = None
        if join.args.get("on") is not None:
            condition = tr.condition(join.args["on"])
        elif join.args.get("using"):
            parts = []
            names = [ident.name for ident in join.args["using"]]
            for name in names:
                lref = RelationScope(lcols).resolve(exp.column(name))
                rref = RelationScope(rcols).resolve(exp.column(name))
                a, b = tr.coerce_pair(lref, rref, join)
                parts.append(Call("=", (a, b), BOOLEAN))
            condition = parts[0] if len(parts) == 1 else Call("AND", tuple(parts), BOOLEAN)
            # A USING column is one column: unqualified it means the side that keeps every row.
            if side == "RIGHT":
                lcols = [replace(c, merged=True) if c.name in names else c for c in lcols]
            else:
                rcols = [replace(c, merged=True) if c.name in names else c for c in rcols]
        left_name = (lcols[0].qualifier if lcols else None) or "subquery"
        right_name = (rcols[0].qualifier if rcols else None) or "subquery"
        if kind == "CROSS" or (condition is None and side not in ("LEFT", "RIGHT")):
            description = f"CROSS JOIN of {left_name} and {right_name}"
            return Join(left, right, "INNER", None, description=description), lcols + rcols
        if condition is None:
            raise ValidationError(f"{side} JOIN needs an ON or USING condition")
        if side == "RIGHT":
            # b RIGHT JOIN a is a LEFT JOIN with the sides swapped; a Project restores the column order.
            m = len(right.fields)
            mapping = {i: i + m for i in range(n)} | {n + j: j for j in range(m)}
            swapped = Join(right, left, "LEFT", remap(condition, mapping),
                           description=f"RIGHT JOIN of {left_name} and {right_name}")
            fields = left.fields + right.fields
            order = [m + i for i in range(n)] + list(range(m))
            rel = Project(swapped, tuple(Ref(order[i], f.type) for i, f in enumerate(fields)),
                          tuple(f.name for f in fields))
            return rel, lcols + rcols
        kind_name = "LEFT" if side == "LEFT" else "INNER"
        return Join(left, right, kind_name, condition,
                    description=f"{kind_name} JOIN of {left_name} and {right_name}"), lcols + rcols

    # ---- SELECT --------------------------------------------------------------------------------
    def select(self, select: exp.Select) -> RelNode:
        for key, label in _UNSUPPORTED_CLAUSES.items():
            if select.args.get(key):
                raise UnsupportedError(f"{label} is not supported")
        if select.find(exp.Window) is not None:
            raise UnsupportedError("window functions (OVER) are not supported")
        distinct = select.args.get("distinct")
        if distinct is not None and distinct.args.get("on") is not None:
            raise UnsupportedError("DISTINCT ON is not supported")
        select = explode_mv_groups(select, self._multi_value_columns(select))
        rel, scope = self.from_clause(select)
        where = select.args.get("where")
        if where is not None:
            rel = self._where(rel, scope, where.this)
        items = self._expand_star(select.expressions, scope)
        group = select.args.get("group")
        having = select.args.get("having")
        order = select.args.get("order")
        order_items = list(order.expressions) if order is not None else []
        aggregating = group is not None or having is not None or any(
            contains_aggregate(i) for i in items) or any(contains_aggregate(o.this) for o in order_items)
        # Output names are made distinct as Calcite does (page, page0, ...): clients address
        # result columns by name.
        names = list(unique_names([_name_of(item, i) for i, item in enumerate(items)]))
        if aggregating:
            groups = self._groups(group, items, names, scope)
            agg_scope = AggregateScope(self, scope, groups, "SELECT")
            tr = ScalarTranslator(self.session, agg_scope)
            exprs = [tr.translate(_unwrap_alias(i)) for i in items]
            having_expr = None
            if having is not None:
                agg_scope.clause = "HAVING"
                having_node = self._resolve_aliases(having.this, items, names, scope)
                having_expr = tr.condition(having_node)
            agg_scope.clause = "ORDER BY"
            keys, hidden = self._order_keys(order_items, items, names, exprs, tr, bool(distinct))
            group_names = tuple(f"$g{i}" for i in range(len(groups)))
            call_names = tuple(f"$a{j}" for j in range(len(agg_scope.calls)))
            rel = Aggregate(rel, tuple(groups), tuple(agg_scope.calls), group_names + call_names)
            if having_expr is not None:
                rel = Filter(rel, having_expr)
        else:
            tr = ScalarTranslator(self.session, scope.with_clause("SELECT"))
            exprs = [tr.translate(_unwrap_alias(i)) for i in items]
            tr.scope = scope.with_clause("ORDER BY")
            keys, hidden = self._order_keys(order_items, items, names, exprs, tr, bool(distinct))
        all_exprs = exprs + hidden
        all_names = names + [f"$order{i}" for i in range(len(hidden))]
        rel = Project(rel, tuple(all_exprs), tuple(all_names))
        if distinct is not None:
            rel = Aggregate(rel, tuple(Ref(i, e.type) for i, e in enumerate(exprs)), (), tuple(names))
        limit, offset = self._limit_offset(select)
        if keys or limit is not None or offset:
            rel = Sort(rel, tuple(keys), limit, offset)
        if hidden:
            rel = Project(rel, tuple(Ref(i, e.type) for i, e in enumerate(exprs)), tuple(names))
        return rel

    def _where(self, rel: RelNode, scope: RelationScope, condition: exp.Expression) -> RelNode:
        """WHERE, with top-level ``x IN (SELECT ...)`` conjuncts turned into joins with the
        subquery's distinct values (the subquery runs first; its values must fit maxJoinRows)."""
        tr = ScalarTranslator(self.session, scope.with_clause("WHERE"))
        parts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
        rest = []
        for part in parts:
            node = part.unnest() if isinstance(part, exp.Paren) else part
            if isinstance(node, exp.In) and node.args.get("query") is not None:
                rel = self._semi_join(rel, tr, node)
            else:
                rest.append(part)
        if rest:
            cond = rest[0] if len(rest) == 1 else exp.and_(*rest)
            rel = Filter(rel, tr.condition(cond))
        return rel

    def _semi_join(self, rel: RelNode, tr: ScalarTranslator, node: exp.In) -> RelNode:
        sub = self.query(node.args["query"].this if isinstance(node.args["query"], exp.Subquery)
                         else node.args["query"])
        if len(sub.fields) != 1:
            raise ValidationError(f"the subquery of IN must return one column, it returns {len(sub.fields)}: "
                                  f"'{sql_text(node)}'")
        values = Aggregate(sub, (Ref(0, sub.fields[0].type),), (), (sub.fields[0].name,))
        key, value = tr.coerce_pair(tr.translate(node.this), Ref(len(rel.fields), sub.fields[0].type), node)
        return Join(rel, values, "INNER", Call("=", (key, value), BOOLEAN),
                    description=f"IN (SELECT ...) subquery join of '{sql_text(node.this)}'")

    def _expand_star(self, items: list[exp.Expression], scope: RelationScope) -> list[exp.Expression]:
        out = []
        for item in items:
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                table = item.table if isinstance(item, exp.Column) else None
                cols = [c for c in scope.columns if (c.qualifier == table if table else not c.merged)]
                if table and not cols:
                    raise ValidationError(unknown_name_message("table alias", table,
                                                               sorted({str(c.qualifier) for c in scope.columns})))
                if not scope.columns:
                    raise ValidationError("SELECT * needs a FROM clause")
                qualify = len({c.name for c in cols}) != len(cols) or any(c.merged for c in scope.columns)
                for c in cols:
                    col = exp.column(c.name, table=c.qualifier if qualify and c.qualifier else None, quoted=True)
                    out.append(exp.alias_(col, c.name, quoted=True) if qualify else col)
            else:
                out.append(item)
        return out

    def _resolve_aliases(self, node: exp.Expression, items, names, scope: RelationScope) -> exp.Expression:
        """HAVING may name select-list aliases that are not input columns."""
        aliases = {n: _unwrap_alias(i) for n, i in zip(names, items) if isinstance(i, exp.Alias)}
        if not aliases:
            return node

        def swap(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and not n.table and n.name in aliases and n.name not in scope.names():
                return aliases[n.name].copy()
            return n

        return node.copy().transform(swap)

    def _groups(self, group: exp.Group | None, items, names, scope: RelationScope) -> list[Scalar]:
        if group is None:
            return []
        for key in ("rollup", "cube", "grouping_sets"):
            if group.args.get(key):
                raise UnsupportedError("GROUPING SETS, ROLLUP and CUBE are not supported")
        tr = ScalarTranslator(self.session, scope.with_clause("GROUP BY"))
        out: list[Scalar] = []
        for node in group.expressions:
            if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise UnsupportedError("GROUPING SETS, ROLLUP and CUBE are not supported")
            target = node
            pos = literal_value(node)
            if isinstance(node, exp.Literal) and isinstance(pos, int):
                if not 1 <= pos <= len(items):
                    raise ValidationError(f"GROUP BY position {pos} is not in the select list (1..{len(items)})")
                target = _unwrap_alias(items[pos - 1])
            elif isinstance(node, exp.Column) and not node.table and node.name not in scope.names() \
                    and node.name in names:
                target = _unwrap_alias(items[names.index(node.name)])
            if contains_aggregate(target):
                raise ValidationError(f"aggregate functions are not allowed in GROUP BY: '{sql_text(target)}'")
            value = tr.translate(target)
            if value not in out:
                out.append(value)
        return out

    def _order_keys(self, order_items, items, names, exprs, tr: ScalarTranslator, distinct: bool):
        keys: list[SortKey] = []
        hidden: list[Scalar] = []
        for item in order_items:
            target = item.this
            pos = literal_value(target)
            if isinstance(target, exp.Literal) and isinstance(pos, int):
                if not 1 <= pos <= len(items):
                    raise ValidationError(f"ORDER BY position {pos} is not in the select list (1..{len(items)})")
                index = pos - 1
            elif isinstance(target, exp.Column) and not target.table and target.name in names:
                index = names.index(target.name)
            else:
                value = tr.translate(target)
                if value in exprs:
                    index = exprs.index(value)
                elif value in hidden:
                    index = len(exprs) + hidden.index(value)
                else:
                    if distinct:
                        raise ValidationError(f"with SELECT DISTINCT, ORDER BY expressions must appear in the select "
                                              f"list: '{sql_text(target)}'")
                    hidden.append(value)
                    index = len(exprs) + len(hidden) - 1
            keys.append(SortKey(index, bool(item.args.get("desc")), item.args.get("nulls_first")))
        return keys, hidden

    def _limit_offset(self, node: exp.Expression) -> tuple[int | None, int]:
        limit = None
        offset = 0
        lim = node.args.get("limit")
        if lim is not None:
            value_node = lim.args.get("count") if isinstance(lim, exp.Fetch) else lim.expression
            limit = self._count(value_node, "LIMIT")
        off = node.args.get("offset")
        if off is not None:
            offset = self._count(off.expression, "OFFSET") or 0
        return limit, offset

    def _count(self, node: exp.Expression, what: str) -> int | None:
        value = ScalarTranslator(self.session, Scope()).translate(node)
        if isinstance(value, Literal) and value.value is None:
            return None  # LIMIT NULL (or a parameter not bound yet) does not limit
        if isinstance(value, Literal) and isinstance(value.value, float) and value.value.is_integer() \
                and value.value >= 2**63:
            raise ValidationError(f"{what} {sql_text(node)} is beyond the largest 64-bit integer "
                                  f"(9223372036854775807); use a smaller {what}, or leave {what} out")
        if not isinstance(value, Literal) or not isinstance(value.value, int) or isinstance(value.value, bool) \
                or value.value < 0:
            raise ValidationError(f"{what} must be a non-negative integer, got '{sql_text(node)}'")
        if value.value > 2**63 - 1:
            raise ValidationError(f"{what} {value.value} is beyond the largest 64-bit integer (9223372036854775807); "
                                  f"use a smaller {what}, or leave {what} out")
        return value.value

    # ---- aggregate calls ---------------------------------------------------------------------
    def aggregate_call(self, node: exp.Expression, tr: ScalarTranslator) -> AggCall:
        text = LazySqlText(node)  # for messages: generating it for every call is most of a wide SELECT's planning
        filter_expr = None
        if isinstance(node, exp.Filter):
            cond = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
            filter_expr = tr.condition(cond)
            node = node.this
        distinct = False
        if isinstance(node, exp.Anonymous):
            name = str(node.this).upper()
            arg_nodes = list(node.expressions)
        else:
            name = node.key.upper()
            inner = node.this
            if isinstance(inner, exp.Distinct):
                distinct = True
                arg_nodes = list(inner.expressions)
            else:
                arg_nodes = [inner] if inner is not None else []
                arg_nodes += list(node.expressions) if isinstance(node, exp.Count) else []
        name = {"APPROXDISTINCT": "APPROX_COUNT_DISTINCT", "APPROX_COUNT_DISTINCT_DS_HLL": "APPROX_COUNT_DISTINCT",
                "ANYVALUE": "ANY_VALUE", "ARRAYCONCATAGG": "ARRAY_CONCAT_AGG", "ARRAYAGG": "ARRAY_AGG"}.get(name, name)
        shown = written_name(node, name)  # messages name the function as the user wrote it
        if name in ("EARLIEST_BY", "LATEST_BY"):
            return self._earliest_by(tr, name, shown, arg_nodes, filter_expr, text)
        if name not in AGGREGATE_FUNCTIONS:
            raise UnsupportedError(f"aggregate function {shown} is not supported; supported: COUNT, SUM, MIN, MAX, AVG, "
                                   "APPROX_COUNT_DISTINCT, ANY_VALUE, EARLIEST, LATEST, EARLIEST_BY, LATEST_BY, ARRAY_AGG, "
                                   "ARRAY_CONCAT_AGG")
        for a in arg_nodes:
            if contains_aggregate(a):
                raise ValidationError(f"aggregate functions cannot be nested: '{text}'")
        if name == "COUNT":
            if not arg_nodes or isinstance(arg_nodes[0], exp.Star):
                return AggCall("COUNT", (), BIGINT, False, filter_expr)
            if len(arg_nodes) > 1:
                raise UnsupportedError(f"COUNT over several expressions is not supported: '{text}'")
            arg = tr.translate(arg_nodes[0])
            if distinct and is_multi_value(arg.type):
                raise _multi_value_aggregate(shown, LazySqlText(arg_nodes[0]), text)
            if isinstance(arg, Literal) and arg.value is not None and not distinct:
                return AggCall("COUNT", (), BIGINT, False, filter_expr)
            return AggCall("COUNT", (arg,), BIGINT, distinct, filter_expr)
        if name in ("EARLIEST", "LATEST", "ANY_VALUE"):
            arg_nodes = arg_nodes[:1]  # Druid's optional maxBytesPerString does not apply here
        if len(arg_nodes) != 1:
            raise ValidationError(f"{shown} takes one argument, got {len(arg_nodes)} in '{text}'")
        arg = tr.translate(arg_nodes[0])
        t = arg.type
        arg_text = LazySqlText(arg_nodes[0])
        if is_multi_value(t):
            raise _multi_value_aggregate(shown, arg_text, text)
        if name in ("SUM", "AVG"):
            if not (t.is_numeric or t == NULL):
                raise ValidationError(f"cannot apply {shown} to {t} expression '{arg_text}' in '{text}'")
            out_type = DOUBLE if name == "AVG" or t == NULL else t
            return AggCall(name, (arg,), out_type, distinct, filter_expr)
        if name in ("MIN", "MAX"):
            if t == VARCHAR:
                return AggCall(name, (arg,), VARCHAR, False, filter_expr)
            if not (t.is_numeric or t in (TIMESTAMP, NULL)):
                raise ValidationError(f"cannot apply {shown} to {t} expression '{arg_text}' in '{text}'; "
                                      "MIN and MAX take numbers, timestamps and text")
            return AggCall(name, (arg,), DOUBLE if t == NULL else t, False, filter_expr)
        if name == "ARRAY_CONCAT_AGG":
            if t.column_type is None or not t.column_type.is_array:
                raise ValidationError(f"{shown} needs an array, but '{arg_text}' is {t} in '{text}'")
            # DISTINCT is a set kept by the aggregator itself, not a regrouping on the argument.
            return AggCall("ARRAY_CONCAT_AGG_DISTINCT" if distinct else name, (arg,), t, False, filter_expr)
        if name == "ARRAY_AGG":
            if not (t.is_scalar or t == NULL):
                raise ValidationError(f"ARRAY_AGG needs a single value, but '{arg_text}' is {t} in '{text}'; "
                                      "use ARRAY_CONCAT_AGG to join arrays")
            out_type = functions.result_type("ARRAY", [t], text)
            # DISTINCT is a set kept by the aggregator itself, not a regrouping on the argument.
            return AggCall("ARRAY_AGG_DISTINCT" if distinct else name, (arg,), out_type, False, filter_expr)
        if name == "APPROX_COUNT_DISTINCT":
            if not t.is_scalar:
                raise ValidationError(f"cannot apply {shown} to {t} expression '{arg_text}'")
            return AggCall(name, (arg,), BIGINT, False, filter_expr)
        if name in ("EARLIEST", "LATEST", "ANY_VALUE") and t.column_type is not None and t.column_type.is_array:
            return AggCall(name, (arg,), t, False, filter_expr)  # the whole array of the first (last) row
        if not (t.is_numeric or t in (TIMESTAMP, VARCHAR, NULL)):
            raise ValidationError(f"cannot apply {shown} to {t} expression '{arg_text}' in '{text}'")
        return AggCall(name, (arg,), VARCHAR if t == NULL else t, False, filter_expr)

    @staticmethod
    def _earliest_by(tr: ScalarTranslator, name: str, shown: str, arg_nodes: list, filter_expr, text) -> AggCall:
        """EARLIEST_BY(expr, timestampExpr [, maxBytesPerValue]): EARLIEST with the order taken from
        the timestamp expression instead of __time (the byte limit does not apply here)."""
        if len(arg_nodes) not in (2, 3):
            raise ValidationError(f"{shown} takes a value and a timestamp (and an optional size), "
                                  f"got {len(arg_nodes)} arguments in '{text}'")
        if any(contains_aggregate(a) for a in arg_nodes):
            raise ValidationError(f"aggregate functions cannot be nested: '{text}'")
        arg, by = tr.translate(arg_nodes[0]), tr.translate(arg_nodes[1])
        if by.type not in (TIMESTAMP, BIGINT, NULL):
            raise ValidationError(f"{shown} orders by a TIMESTAMP, but '{LazySqlText(arg_nodes[1])}' is {by.type} "
                                  f"in '{text}'")
        t = arg.type
        array = t.column_type is not None and t.column_type.is_array
        if not (t.is_numeric or t in (TIMESTAMP, VARCHAR, NULL) or array):
            raise ValidationError(f"cannot apply {shown} to {t} expression '{LazySqlText(arg_nodes[0])}' in '{text}'")
        func = "EARLIEST" if name == "EARLIEST_BY" else "LATEST"
        return AggCall(func, (arg, by), VARCHAR if t == NULL else t, False, filter_expr)


def translate(query: exp.Expression, catalog: SqlCatalog, session: Session,
              fetched: dict | None = None) -> RelNode:
    """The logical plan of ``query``; sys tables read while planning are added to ``fetched``."""
    translator = Translator(catalog, session)
    rel = translator.query(query)
    if fetched is not None:
        fetched.update(translator.fetched)
    return rel



def _multi_value_aggregate(shown: str, arg_text, text) -> ValidationError:
    # Druid aggregates a multi-value string's values one by one; the rows here would be wrong.
    return ValidationError(f"{shown} of the multi-value string '{arg_text}' is not supported in '{text}'; aggregate "
                           f"its values from CROSS JOIN UNNEST(MV_TO_ARRAY({arg_text})) AS u(v), or its arrays with "
                           f"ARRAY_CONCAT_AGG(MV_TO_ARRAY({arg_text}))")

def _is_table_function(node: exp.Table) -> bool:
    """TABLE(schema.name(arg => value, ...)): an input table used as a table function."""
    this = node.this
    return isinstance(this, exp.Anonymous) and str(this.this).upper() == "TABLE" and len(this.expressions) == 1 \
        and isinstance(this.expressions[0], (exp.Dot, exp.Anonymous))


def _input_table_call(node: exp.Table) -> tuple[list[str], tuple]:
    call = node.this.expressions[0]
    parts: list[str] = []
    if isinstance(call, exp.Dot):
        parts.append(call.this.name)
        call = call.expression
    if not isinstance(call, exp.Anonymous):
        raise UnsupportedError(f"table functions are not supported: '{sql_text(node)}'")
    parts.append(str(call.this))
    if len(parts) == 1 or parts[0].lower() != "ext":
        raise UnsupportedError(
            f"table function '{sql_text(node)}' is not supported in queries; input tables are called as "
            "TABLE(ext.name(arg => value)), and EXTERN/localfiles/http/inline belong to INSERT/REPLACE")
    args = []
    for arg in call.expressions:
        if not isinstance(arg, exp.Kwarg):
            raise ValidationError(f"input table '{'.'.join(parts)}' takes named arguments (name => value), "
                                  f"got '{sql_text(arg)}'")
        value = arg.expression
        if isinstance(value, exp.Array):
            v = [e.this if isinstance(e, exp.Literal) and e.is_string else e.sql() for e in value.expressions]
        elif isinstance(value, exp.Literal):
            v = value.this if value.is_string else (float(value.this) if "." in value.this else int(value.this))
        elif isinstance(value, exp.Boolean):
            v = value.this
        else:
            raise ValidationError(f"argument '{arg.this.name}' of input table '{'.'.join(parts)}' must be a literal, "
                                  f"got '{sql_text(value)}'")
        args.append((arg.this.name, v))
    return parts, tuple(args)
