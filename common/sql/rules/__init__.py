"""Rewrite rules over the logical plan: each a pure function from a node to an equivalent node
(or the same node when it does not apply), applied bottom-up until nothing changes.

Each pass applies every rule, in this order, to the whole tree. The decompositions come first so
the shapes they create are cleaned up by the merging rules in the same pass, and
``split_distinct_aggregates`` must precede ``exact_count_distinct``, which handles one distinct
argument per aggregation and refuses more.
"""

from __future__ import annotations

from common.sql.logical_plan import RelNode, transform_plan
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.rules.aggregate_through_project import aggregate_through_project
from common.sql.rules.avg_to_sum_count import avg_to_sum_count
from common.sql.rules.derived_group_keys import derived_group_keys
from common.sql.rules.distribute_sums import distribute_sums
from common.sql.rules.equi_join import equi_join
from common.sql.rules.exact_count_distinct import exact_count_distinct
from common.sql.rules.filter_through_project import filter_through_project
from common.sql.rules.filter_through_unnest import filter_through_unnest
from common.sql.rules.fold_constants import fold_constants
from common.sql.rules.merge_filters import merge_filters
from common.sql.rules.merge_projects import merge_projects
from common.sql.rules.prune_join_columns import prune_join_columns
from common.sql.rules.prune_unnest_columns import prune_unnest_columns
from common.sql.rules.push_filter_into_join import push_filter_into_join
from common.sql.rules.remove_identity_project import remove_identity_project
from common.sql.rules.split_distinct_aggregates import split_distinct_aggregates
from common.sql.rules.unnest_table import unnest_table

RULES = (
    avg_to_sum_count,
    distribute_sums,
    split_distinct_aggregates,
    exact_count_distinct,
    fold_constants,
    merge_filters,
    filter_through_project,
    filter_through_unnest,
    push_filter_into_join,
    equi_join,
    prune_join_columns,
    prune_unnest_columns,
    unnest_table,
    merge_projects,
    aggregate_through_project,
    derived_group_keys,
    remove_identity_project,
)

MAX_PASSES = 50


def optimize(plan: RelNode, rules=RULES, deadline: PlanningDeadline = NO_DEADLINE) -> RelNode:
    """``plan`` rewritten by ``rules`` until none changes it; ``deadline`` checked before each
    rule's application to each plan node."""
    for _ in range(MAX_PASSES):
        before = plan
        for rule in rules:
            deadline.check()
            plan = transform_plan(plan, rule if not deadline.checks else _checked(rule, deadline))
        if plan == before:
            return plan
    return plan


def _checked(rule, deadline: PlanningDeadline):
    def checked(node: RelNode) -> RelNode:
        deadline.check()
        return rule(node)

    return checked


__all__ = ["RULES", "optimize"]
