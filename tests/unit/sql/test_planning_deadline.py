"""The query timeout interrupts planning: statements that take seconds to plan (a huge IN list,
thousands of terms, a CASE with thousands of branches, nesting near the limit) stop with the
timeout error once the deadline passes, instead of planning to the end and failing afterwards."""

from __future__ import annotations

import gc
import time

import pytest

from common.errors import QueryTimeoutError
from common.sql import plan_sql
from common.sql.planning_deadline import NO_DEADLINE, PlanningDeadline
from common.sql.statement_kind import classify
from common.types import ColumnType
from services.broker.sql_service import SqlService
from tests.unit.sql.fake_catalog import FakeCatalog

SCHEMA = {"__time": ColumnType.parse("TIMESTAMP"), "x": ColumnType.parse("LONG"), "s": ColumnType.parse("STRING"),
          "d": ColumnType.parse("DOUBLE")}
CATALOG = FakeCatalog({"t": SCHEMA}, {})

# Each takes from a fraction of a second to over a second (in_list, case_branches) to plan on an
# idle machine, and each spends its time in a different part of the planner (folding and
# translating a list, sqlglot's parser, translation and rewriting of a wide tree, rendering
# native expressions).
SLOW = {
    "in_list": "SELECT COUNT(*) FROM t WHERE x IN (" + ", ".join(str(i) for i in range(60_000)) + ")",
    "plus_chain": "SELECT " + " + ".join("x" for _ in range(3_000)) + " AS y FROM t",
    "case_branches": "SELECT CASE " + " ".join(f"WHEN x = {i} THEN {i}" for i in range(10_000)) + " END AS y FROM t",
    "many_lists": "SELECT COUNT(*) FROM t WHERE " + " OR ".join(
        "s IN (" + ", ".join(f"'{i}-{j}'" for j in range(100)) + ")" for i in range(300)),
    "deep_and_wide": "SELECT " + ", ".join("ABS(" * 150 + f"x + {i}" + ")" * 150 + f" AS c{i}" for i in range(40))
                     + " FROM t",
}


class _FakeClock:
    """Advances one second per reading: the deadline passes after a fixed number of checks,
    whatever the machine's load."""

    def __init__(self) -> None:
        self.now = 0

    def monotonic(self) -> int:
        self.now += 1
        return self.now


_CHECKS: dict[str, int] = {}


def _clock_readings(name: str, timeout: float, monkeypatch) -> int:
    import common.sql.planning_deadline as module

    classify(SLOW[name])  # kept per text, as after the front door: every run checks the same steps
    clock = _FakeClock()
    monkeypatch.setattr(module, "time", clock)
    plan_sql(SLOW[name], CATALOG, deadline=PlanningDeadline(timeout))
    return clock.now


@pytest.mark.parametrize("where", [0.0, 0.5, 0.999])
@pytest.mark.parametrize("name", sorted(SLOW))
def test_planning_checks_the_deadline_as_it_goes(name, where, monkeypatch):
    # Count the checks of a whole planning, then let the deadline pass at the start, half way and
    # near the end: each time planning stops at the very next check, so the checks run all
    # through it (tokenizer, parser, folding, translation, rewriting, native expressions).
    if name not in _CHECKS:
        _CHECKS[name] = _clock_readings(name, 1e12, monkeypatch) - 1
    passing = int(_CHECKS[name] * where)
    with pytest.raises(QueryTimeoutError, match="while planning") as info:
        # The clock is read once to start, then ``passing`` checks pass and the next one fails.
        _clock_readings(name, passing + 0.5, monkeypatch)
    assert "SET timeout" in str(info.value)  # says how to fix it
    import common.sql.planning_deadline as module

    assert module.time.now == passing + 2


@pytest.mark.parametrize("name", ["case_branches", "in_list"])  # the two that plan longest
def test_a_slow_statement_stops_at_the_timeout_through_the_broker(name):
    class NoExecutor:
        def execute(self, *_, **__):
            raise AssertionError("planning must time out before anything runs")

    service = SqlService(CATALOG, NoExecutor(), default_timeout_s=300)
    sql = f"SET timeout = 50; {SLOW[name]}"
    classify(sql)  # what the front door does with every request before its timeout starts
    gc.collect()  # the previous plan's tree is not collected inside either measurement
    started = time.process_time()
    plan_sql(sql, CATALOG)  # no deadline in-process: the whole planning
    whole = time.process_time() - started
    gc.collect()
    started = time.process_time()
    with pytest.raises(QueryTimeoutError, match="while planning"):
        service.execute(sql)
    stopped = time.process_time() - started
    # CPU time, not wall time: a load spike during one of the two measurements (a full test run
    # shares 2 cores with Spark and servers) must not decide the comparison. The deadline is
    # wall-clock, so load only makes the stopped run shorter in CPU. Stopping at 50 ms takes a
    # small part of the whole planning (a second or more of CPU), not all of it.
    assert stopped < whole / 2, (stopped, whole)


def test_without_a_deadline_the_check_is_a_no_op():
    NO_DEADLINE.check()
    PlanningDeadline(300).check()
    with pytest.raises(QueryTimeoutError):
        PlanningDeadline(-1).check()


def test_two_statements_planning_at_once_each_check_only_their_own_deadline_and_stop():
    # No ambient state: one thread's passed deadline and stop check never reach the other's planning.
    import threading

    inside, release = threading.Event(), threading.Event()
    calls = {"a": 0, "b": 0}
    outcome: dict = {}

    def stop_a():
        calls["a"] += 1
        if calls["a"] == 1:
            inside.set()  # a is planning: b plans now, with its own deadline passed
            assert release.wait(30)

    def stop_b():
        calls["b"] += 1

    def plan_a():
        try:
            outcome["a"] = plan_sql(SLOW["plus_chain"], CATALOG, deadline=PlanningDeadline(300, stop=stop_a))
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["a"] = exc

    t = threading.Thread(target=plan_a)
    t.start()
    try:
        assert inside.wait(30)
        with pytest.raises(QueryTimeoutError, match="while planning"):
            plan_sql(SLOW["plus_chain"], CATALOG, deadline=PlanningDeadline(-1, stop=stop_b))
        assert calls["b"] == 0  # the time check fired first; a's stop was never called by b
        plan_sql("SELECT x FROM t", CATALOG)  # and a third, with none, plans while a is stopped
    finally:
        release.set()
        t.join(60)
    assert not isinstance(outcome["a"], Exception), outcome["a"]
    assert [f.name for f in outcome["a"].output_schema] == ["y"]
    assert calls["a"] > 1  # a's own check ran all through its planning


def test_a_fast_statement_plans_under_a_deadline():
    plan = plan_sql("SELECT s, COUNT(*) AS c FROM t WHERE x IN (1, 2.5, NULL) GROUP BY s", CATALOG,
                    deadline=PlanningDeadline(300))
    assert [f.name for f in plan.output_schema] == ["s", "c"]
