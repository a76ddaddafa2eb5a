"""The rewrite rules, one at a time, on logical plans translated from SQL: each is a pure function
of a node, and together they reach a fixpoint."""

from __future__ import annotations

import pytest

from common.sql.logical_plan import Aggregate, Filter, Join, Project, transform_plan, walk
from common.sql.rules import RULES, optimize
from common.sql.rules.avg_to_sum_count import avg_to_sum_count
from common.sql.rules.equi_join import equi_join
from common.sql.rules.exact_count_distinct import exact_count_distinct
from common.sql.rules.filter_through_project import filter_through_project
from common.sql.rules.fold_constants import fold_constants
from common.sql.rules.merge_filters import merge_filters
from common.sql.rules.prune_join_columns import prune_join_columns
from common.sql.rules.push_filter_into_join import push_filter_into_join
from common.sql.rules.split_distinct_aggregates import split_distinct_aggregates
from common.sql.scalar_translator import Session
from common.sql.statement import parse_statement
from common.sql.translator import translate
from tests.unit.sql.test_golden import golden_catalog


def logical(sql: str):
    return translate(parse_statement(sql).query, golden_catalog(), Session("UTC", 0, ()))


def apply(plan, *rules):
    for rule in rules:
        plan = transform_plan(plan, rule)
    return plan


def nodes(plan, cls):
    return [n for n in walk(plan) if isinstance(n, cls)]


def test_rules_are_listed_and_pure():
    assert len(RULES) >= 10 and all(callable(r) for r in RULES)
    plan = logical("SELECT channel, AVG(added) FROM (SELECT * FROM wiki WHERE 1 + 1 = 2) GROUP BY channel")
    before = plan.describe()
    for rule in RULES:
        transform_plan(plan, rule)
    assert plan.describe() == before


def test_fold_constants():
    plan = apply(logical("SELECT page FROM wiki WHERE added > 2 * 5 AND 1 = 1"), fold_constants, merge_filters)
    assert "Filter(>($16, 10))" in plan.describe()
    plan = apply(logical("SELECT page FROM wiki WHERE added = NULL OR FALSE"), fold_constants)
    assert "Filter(None)" in plan.describe()


def test_filter_moves_below_projects():
    plan = apply(logical("SELECT a FROM (SELECT added * 2 AS a FROM wiki) WHERE a > 4"), filter_through_project)
    filt = nodes(plan, Filter)[0]
    assert "*($16, 2)" in plan.describe() and filt.input.__class__.__name__ == "TableScan"


def test_avg_becomes_sum_over_count():
    plan = apply(logical("SELECT AVG(added) FROM wiki"), avg_to_sum_count)
    agg = nodes(plan, Aggregate)[0]
    assert [c.func for c in agg.calls] == ["SUM", "COUNT"]
    assert "/(CAST($0), $1)" in plan.describe()


def test_count_distinct_is_two_aggregations():
    plan = apply(logical("SELECT channel, COUNT(DISTINCT page), COUNT(*) FROM wiki GROUP BY channel"),
                 exact_count_distinct)
    outer, inner = nodes(plan, Aggregate)
    assert len(inner.group) == 2 and [c.func for c in inner.calls] == ["COUNT"]
    assert [c.func for c in outer.calls] == ["COUNT", "SUM"]
    assert "COALESCE" in plan.describe()  # a count of no rows is 0


def test_several_distinct_arguments_split_into_joined_branches():
    plan = apply(logical("SELECT COUNT(DISTINCT page), COUNT(DISTINCT channel) FROM wiki"), split_distinct_aggregates)
    assert len(nodes(plan, Join)) == 1
    assert len(nodes(plan, Aggregate)) == 2


def test_equi_join_keys_and_pushdown():
    plan = logical("SELECT w.page FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode AND c.population > 5 "
                   "AND w.added > c.population")
    plan = apply(plan, equi_join)
    join = nodes(plan, Join)[0]
    assert join.left_keys == (13,) and join.right_keys == (1,)
    assert isinstance(join.right, Filter)  # the right-only condition filters that side
    assert join.condition is None and isinstance(plan.input, Filter)  # the mixed one stays above


def test_left_join_keeps_where_on_the_right_above():
    plan = logical("SELECT w.page FROM wiki w LEFT JOIN countries c ON w.countryIsoCode = c.isoCode "
                   "WHERE c.population > 5 AND w.added > 1")
    plan = apply(plan, push_filter_into_join)
    join = nodes(plan, Join)[0]
    assert isinstance(join.left, Filter) and not isinstance(join.right, Filter)
    assert isinstance(plan.input, Filter)


def test_join_inputs_keep_only_used_columns():
    plan = apply(logical("SELECT w.page, c.name FROM wiki w JOIN countries c ON w.countryIsoCode = c.isoCode"),
                 equi_join, prune_join_columns)
    join = nodes(plan, Join)[0]
    assert [f.name for f in join.left.fields] == ["page", "countryIsoCode"]
    assert [f.name for f in join.right.fields] == ["isoCode", "name"]
    assert isinstance(join.left, Project)


@pytest.mark.parametrize("sql", [
    "SELECT channel, AVG(added), COUNT(DISTINCT page) FROM wiki WHERE added > 1 + 1 GROUP BY 1 HAVING COUNT(*) > 1",
    "SELECT a.page FROM (SELECT page, channel FROM wiki) a JOIN (SELECT name FROM countries) b ON a.channel = b.name",
    "SELECT x FROM (SELECT channel AS x FROM wiki UNION ALL SELECT name FROM countries) WHERE x LIKE 'a%'",
])
def test_optimize_reaches_a_fixpoint(sql):
    once = optimize(logical(sql))
    assert optimize(once) == once
