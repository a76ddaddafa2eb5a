"""The pure parts of a supervisor's status: partition lag, its stats, state and health, the bounded
recentErrors and a task's /stats entry."""

from __future__ import annotations

import random

import pytest

from services.coordinator.core.supervisor_status import (MAX_RECENT_ERRORS, LagStats, StreamContact, TaskView,
                                                         next_offsets, partition_lag, recent_errors,
                                                         supervisor_state, task_row_stats, time_lag_ms)


def fmt(ms: int) -> str:
    return f"t{ms}"


def test_lag_from_committed_earliest_or_latest():
    latest = {0: 100, 1: 50, 2: 7, 3: 0}
    earliest = {0: 10, 1: 0, 2: 7, 3: 0}
    # 0: committed; 1: never committed, earliest; 2: committed past latest (a broker that reports
    # the latest wrongly, or a recreated topic) is 0, not negative; 3: empty partition.
    assert partition_lag(latest, {0: 40, 2: 9}, earliest, use_earliest=True) == {0: 60, 1: 50, 2: 0, 3: 0}
    # Not useEarliestOffset: a partition never committed starts at the latest, so no lag.
    assert partition_lag(latest, {0: 40}, earliest, use_earliest=False) == {0: 60, 1: 0, 2: 0, 3: 0}
    # Partitions the broker did not report are not guessed at.
    assert partition_lag({}, {0: 5}, {}, True) == {}


def test_next_offsets_and_lag_in_time():
    latest, earliest = {0: 100, 1: 50, 2: 7}, {0: 10, 1: 3, 2: 7}
    assert next_offsets(latest, {0: 40}, earliest, True) == {0: 40, 1: 3, 2: 7}
    assert next_offsets(latest, {0: 40}, earliest, False) == {0: 40, 1: 50, 2: 7}
    # 0: oldest unread written 1.5 s before now; 1: nothing to read; 2: lag but no timestamp read
    # (left out, not 0); 3: a clock behind the producer's is 0, not negative.
    assert time_lag_ms({0: 3, 1: 0, 2: 4, 3: 1}, {0: 8_500, 3: 10_200}, 10_000) == {0: 1_500, 1: 0, 3: 0}


def test_lag_matches_a_direct_count_on_generated_offsets():
    rng = random.Random(26)
    for _ in range(200):
        n = rng.randint(0, 6)
        earliest = {p: rng.randint(0, 50) for p in range(n)}
        latest = {p: earliest[p] + rng.randint(0, 500) for p in range(n)}
        committed = {p: rng.randint(earliest[p], latest[p] + 5) for p in range(n) if rng.random() < 0.7}
        use_earliest = rng.random() < 0.5
        got = partition_lag(latest, committed, earliest, use_earliest)
        for p in range(n):
            start = committed.get(p, earliest[p] if use_earliest else latest[p])
            # the messages left are offsets start .. latest-1, counted (none when start is past latest)
            assert got[p] == len(range(start, latest[p]))
        stats = LagStats.of(got)
        assert stats.aggregate == sum(got.values()) and stats.aggregate >= 0
        assert stats.maximum == (max(got.values()) if got else 0)
        assert stats.average == pytest.approx(sum(got.values()) / len(got) if got else 0.0)


def test_state_and_health():
    ok = StreamContact()
    assert supervisor_state("SUSPENDED", 0, ["FAILED"] * 5, ok) == ("SUSPENDED", "SUSPENDED", True)
    assert supervisor_state("TERMINATED", 0, [], ok) == ("STOPPING", "STOPPING", True)
    assert supervisor_state("RUNNING", 0, [], ok) == ("PENDING", "PENDING", True)
    assert supervisor_state("RUNNING", 1, ["SUCCESS"], ok) == ("RUNNING", "RUNNING", True)
    # Three failed tasks in a row (cancelled ones do not count either way) make it unhealthy ...
    assert supervisor_state("RUNNING", 1, ["FAILED", "CANCELED", "FAILED", "FAILED"], ok) == (
        "UNHEALTHY_TASKS", "UNHEALTHY_TASKS", False)
    # ... two do not, and a success in between resets the count.
    assert supervisor_state("RUNNING", 1, ["FAILED", "FAILED"], ok)[2] is True
    assert supervisor_state("RUNNING", 1, ["FAILED", "FAILED", "SUCCESS", "FAILED"], ok)[2] is True
    # The broker not answering three times: Druid's detailed states tell never-connected from lost.
    never = StreamContact(3, False, "down", 5)
    lost = StreamContact(4, True, "down", 5)
    assert supervisor_state("RUNNING", 1, [], never) == ("UNHEALTHY_SUPERVISOR", "UNABLE_TO_CONNECT_TO_STREAM", False)
    assert supervisor_state("RUNNING", 1, [], lost) == ("UNHEALTHY_SUPERVISOR", "LOST_CONTACT_WITH_STREAM", False)
    assert supervisor_state("RUNNING", 1, [], StreamContact(2, True, "down", 5))[2] is True
    assert supervisor_state("SUSPENDED", 0, [], lost)[0] == "SUSPENDED"


def sample(p: int, o: int, reason: str, at: int) -> dict:
    return {"partition": p, "offset": o, "reason": reason, "seenMs": at}


def test_recent_errors_name_partition_offset_reason_in_time_order():
    tasks = [
        TaskView("t1", "FAILED", "supervisor 'wiki': 3 unparseable messages exceed tuningConfig.maxParseExceptions (2)",
                 {"parseExceptionSamples": [sample(0, 4, "not JSON: x", 100), sample(1, 9, "no timestamp", 100)]},
                 150),
        TaskView("t2", "RUNNING", "", {"parseExceptionSamples": [sample(2, 1, "empty message (no value)", 300)]}, 0),
    ]
    contact = StreamContact(1, True, "cannot read the offsets of topic 'edits'", 200)
    got = recent_errors(tasks, contact, fmt)
    assert [(e["exceptionClass"], e["timestamp"]) for e in got] == [
        ("ParseException", "t100"), ("ParseException", "t100"), ("TaskFailure", "t150"), ("StreamException", "t200"),
        ("ParseException", "t300")]
    first = got[0]
    assert (first["partition"], first["offset"], first["reason"], first["taskId"]) == (0, 4, "not JSON: x", "t1")
    assert first["message"] == "partition 0, offset 4: not JSON: x" and first["streamException"] is False
    assert got[2]["message"].startswith("supervisor 'wiki': 3 unparseable") and got[3]["streamException"] is True
    # Without the stream error, the two newest are the task failure and the running task's sample.
    assert [e["exceptionClass"] for e in recent_errors(tasks, StreamContact(), fmt, limit=2)] == [
        "TaskFailure", "ParseException"]
    assert [e["timestamp"] for e in recent_errors(tasks, contact, fmt, limit=2)] == ["t200", "t300"]


def test_recent_errors_are_bounded():
    many = [TaskView(f"t{i}", "FAILED", f"boom {i}",
                     {"parseExceptionSamples": [sample(0, i * 10 + j, "bad", i * 10 + j) for j in range(10)]},
                     i * 10 + 9)
            for i in range(20)]
    got = recent_errors(many, StreamContact(), fmt)
    assert len(got) == MAX_RECENT_ERRORS
    assert got[-1]["message"] == "boom 19"  # the newest kept, the oldest dropped
    assert recent_errors(many, StreamContact(), fmt, limit=0) == []


def test_task_row_stats():
    assert task_row_stats({"rowsWritten": 90, "parseExceptions": 3, "microBatches": 2}) == {
        "totals": {"buildSegments": {"processed": 90, "processedWithError": 0, "thrownAway": 0, "unparseable": 3}},
        "microBatches": 2}
    assert task_row_stats({})["totals"]["buildSegments"]["processed"] == 0
