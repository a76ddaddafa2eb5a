"""The supervisor's decisions (core/supervisor_machine.py): facts in, exact commands out."""

from __future__ import annotations

import pytest

from common.ingest.supervisor_spec import SupervisorSpecError, parse_supervisor_spec
from services.coordinator.core.supervisor_machine import (CancelTask, StartTask, SupervisorFacts, TaskFacts,
                                                          assign_partitions, decide, group_of)

NOW = 1_700_000_000_000


def sup(task_count=1, replicas=1, partitions=(0, 1, 2), committed=None, desired="RUNNING") -> SupervisorFacts:
    return SupervisorFacts("wiki", desired, task_count, replicas, tuple(partitions) if partitions is not None else None,
                           committed or {}, NOW, 5_000)


def task(tid, group=0, partitions=(0, 1, 2), state="RUNNING", finished_ms=0, **kw) -> TaskFacts:
    active = state in ("PENDING", "RUNNING")
    return TaskFacts(tid, group, tuple(partitions) if partitions is not None else None, active, state, finished_ms, **kw)


def test_partitions_go_to_groups_by_modulo():
    assert [group_of(p, 3) for p in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert assign_partitions([4, 0, 1, 2, 3], 2) == {0: (0, 2, 4), 1: (1, 3)}
    assert assign_partitions([0, 1], 4) == {0: (0,), 1: (1,)}  # groups without a partition run nothing
    assert assign_partitions([], 2) == {}


def test_task_count_times_replicas_tasks_start_from_the_groups_committed_offsets():
    got = decide(sup(task_count=2, replicas=2, partitions=(0, 1, 2), committed={0: 10, 1: 20}), [])
    assert got == [StartTask(0, (0, 2), {0: 10}), StartTask(0, (0, 2), {0: 10}),
                   StartTask(1, (1,), {1: 20}), StartTask(1, (1,), {1: 20})]


def test_a_full_group_gets_nothing_and_a_short_one_gets_what_it_lacks():
    tasks = [task("a", 0, (0, 2)), task("b", 0, (0, 2)), task("c", 1, (1,))]
    assert decide(sup(task_count=2, replicas=2, committed={1: 5}), tasks) == [StartTask(1, (1,), {1: 5})]


def test_a_superseded_or_finished_replica_is_replaced_at_once_a_failed_one_after_the_pause():
    done = [task("a", 0, (0, 1, 2)), task("b", 0, (0, 1, 2), state="SUCCESS", finished_ms=NOW - 10)]
    assert decide(sup(replicas=2, committed={0: 3}), done) == [StartTask(0, (0, 1, 2), {0: 3})]
    failed = [task("a", 0, (0, 1, 2)), task("b", 0, (0, 1, 2), state="FAILED", finished_ms=NOW - 4_999)]
    assert decide(sup(replicas=2), failed) == []
    failed = [task("a", 0, (0, 1, 2)), task("b", 0, (0, 1, 2), state="FAILED", finished_ms=NOW - 5_000)]
    assert decide(sup(replicas=2), failed) == [StartTask(0, (0, 1, 2), {})]
    # Only the group's latest final task counts: a success after a failure clears the pause.
    healed = [task("b", state="FAILED", finished_ms=NOW - 100), task("c", state="SUCCESS", finished_ms=NOW - 50)]
    assert decide(sup(), healed) == [StartTask(0, (0, 1, 2), {})]
    # A failure in one group does not hold back another.
    other = [task("x", 1, (1,), state="FAILED", finished_ms=NOW - 1)]
    assert decide(sup(task_count=2), other) == [StartTask(0, (0, 2), {})]


def test_suspended_or_terminated_cancels_every_active_task_once():
    tasks = [task("a"), task("b", state="PENDING"), task("c", state="CANCELED", finished_ms=NOW),
             task("d", cancelling=True)]
    assert decide(sup(desired="SUSPENDED"), tasks) == [CancelTask("a", "the supervisor is suspended"),
                                                       CancelTask("b", "the supervisor is suspended")]
    assert decide(sup(desired="TERMINATED", partitions=None), [task("a")]) == [
        CancelTask("a", "the supervisor is terminated")]


def test_unknown_partitions_one_group_reads_everything_more_groups_wait():
    assert decide(sup(partitions=None, committed={0: 7, 1: 3}), []) == [StartTask(0, None, {0: 7, 1: 3})]
    assert decide(sup(task_count=2, partitions=None), []) == []
    # Running tasks are left alone while the broker does not answer.
    assert decide(sup(task_count=2, partitions=None), [task("a", 0, (0, 2))]) == []


def test_a_task_reading_everything_is_kept_with_one_group_and_replaced_when_split():
    assert decide(sup(partitions=(0, 1)), [task("a", 0, None)]) == []
    assert decide(sup(task_count=2, partitions=(0, 1)), [task("a", 0, None)]) == [
        CancelTask("a", "the partitions were split among task groups"), StartTask(0, (0,), {}), StartTask(1, (1,), {})]


def test_new_partitions_and_spec_changes_restart_the_tasks_they_touch():
    tasks = [task("a", 0, (0, 2)), task("b", 1, (1,))]
    # A fourth partition appeared: group 1 now reads 1 and 3; group 0 is unchanged.
    assert decide(sup(task_count=2, partitions=(0, 1, 2, 3), committed={1: 4}), tasks) == [
        CancelTask("b", "task group 1 now reads partitions [1, 3], not [1]"), StartTask(1, (1, 3), {1: 4})]
    stale = [task("a", 0, (0, 1, 2), spec_current=False)]
    assert decide(sup(), stale) == [CancelTask("a", "the supervisor's spec changed"), StartTask(0, (0, 1, 2), {})]
    # taskCount lowered from 3 to 1: group 1 and 2 tasks go, group 0's reads new partitions.
    three = [task("a", 0, (0,)), task("b", 1, (1,)), task("c", 2, (2,))]
    assert decide(sup(task_count=1), three) == [
        CancelTask("a", "task group 0 now reads partitions [0, 1, 2], not [0]"),
        CancelTask("b", "task group 1 has no partitions now"), CancelTask("c", "task group 2 has no partitions now"),
        StartTask(0, (0, 1, 2), {})]


def test_replicas_lowered_cancels_the_newest_extra_and_cancelling_tasks_do_not_count():
    tasks = [task("old"), task("new")]
    assert decide(sup(replicas=1), tasks) == [CancelTask("new", "task group 0 has more than replicas=1 tasks")]
    leaving = [task("old", cancelling=True)]
    assert decide(sup(replicas=1), leaving) == [StartTask(0, (0, 1, 2), {})]


def test_spec_accepts_task_count_and_replicas():
    spec = {"type": "kafka", "spec": {"dataSchema": {"dataSource": "d"},
                                      "ioConfig": {"topic": "t", "consumerProperties": {"bootstrap.servers": "h:1"},
                                                   "taskCount": 3, "replicas": 2}}}
    parsed = parse_supervisor_spec(spec)
    assert (parsed.task_count, parsed.replicas) == (3, 2)
    spec["spec"]["ioConfig"]["taskCount"] = 0
    with pytest.raises(SupervisorSpecError, match="spec.ioConfig.taskCount must be an integer >= 1"):
        parse_supervisor_spec(spec)
