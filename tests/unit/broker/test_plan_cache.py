"""The broker's plan cache reuses a plan only when planning the text again would give the same
plan: what is time-dependent or a snapshot is decided from the parsed plan, so no spelling of
NOW/CURRENT_TIMESTAMP or of a sys/INFORMATION_SCHEMA table (spacing, case, quoting, comments)
gets a stale plan."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.sql import plan_sql
from common.types.column_type import ColumnType
from services.broker.sql_service import SqlService
from tests.unit.sql.fake_catalog import FakeCatalog


class _Executor:
    def execute(self, query, remaining, _, is_active, schemas=None, tracked=None):
        raise AssertionError("these statements run on the broker alone")


def _catalog() -> FakeCatalog:
    return FakeCatalog({"t": {"__time": ColumnType.parse("TIMESTAMP"), "x": ColumnType.parse("LONG")}},
                       {"segments": pa.table({"segment_id": ["a"]})})


def _service() -> SqlService:
    return SqlService(_catalog(), _Executor(), default_timeout_s=30)


def test_now_with_a_space_is_not_served_stale():
    # Regression: the cache looked for the substring "now(", so "NOW ()" was cached forever.
    service = _service()
    first = service.execute("SELECT NOW () AS t").column("t")[0].value
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        later = service.execute("SELECT NOW () AS t").column("t")[0].value
        if later != first:
            break
        time.sleep(0.005)  # waits for the clock to move a millisecond; bounded by the deadline
    assert later > first
    assert not service._plans


def test_a_plain_query_is_cached_once():
    service = _service()
    service.execute("SELECT 1 + 1 AS v")
    service.execute("SELECT 1 + 1 AS v")
    assert len(service._plans) == 1


# ---- generated spellings ------------------------------------------------------------------------
def _case(draw, word: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in word)


def _space(draw) -> str:
    return draw(st.sampled_from([" ", "  ", "\n", "\t", " /* c */ ", "\n-- note\n"]))


@st.composite
def clock_expressions(draw) -> str:
    kind = draw(st.sampled_from(["now", "current_timestamp", "current_timestamp()", "current_date"]))
    if kind == "now":
        return _case(draw, "now") + draw(st.sampled_from(["", " ", "  ", "/**/", "\n"])) + "()"
    if kind == "current_timestamp()":
        return _case(draw, "current_timestamp") + draw(st.sampled_from(["", " "])) + "()"
    return _case(draw, kind)


@st.composite
def volatile_statements(draw) -> str:
    s = lambda: _space(draw)  # noqa: E731
    choice = draw(st.sampled_from(["clock-select", "clock-where", "sys", "info"]))
    if choice == "clock-select":
        return f"{_case(draw, 'select')}{s()}{draw(clock_expressions())}{s()}AS{s()}v"
    if choice == "clock-where":
        return (f"SELECT x FROM t WHERE __time{s()}>={s()}{draw(clock_expressions())}{s()}-{s()}"
                f"INTERVAL '1' DAY")
    if choice == "sys":
        schema = draw(st.sampled_from(["sys", '"sys"', "SYS", "Sys"]))
        table = draw(st.sampled_from(["segments", '"segments"', "SEGMENTS"]))
        return f"SELECT{s()}*{s()}FROM{s()}{schema}{draw(st.sampled_from(['.', ' . ', ' .']))}{table}"
    schema = draw(st.sampled_from(["INFORMATION_SCHEMA", "information_schema", '"INFORMATION_SCHEMA"']))
    return f"SELECT * FROM {schema}.{draw(st.sampled_from(['TABLES', 'tables', 'SCHEMATA']))}"


@settings(max_examples=200, deadline=None)
@given(sql=volatile_statements())
def test_every_spelling_of_a_volatile_statement_is_not_reusable(sql):
    plan = plan_sql(sql, _catalog(), (), {"sqlCurrentTimestamp": "2020-01-01T00:00:00Z"})
    assert not plan.reusable, sql


@settings(max_examples=100, deadline=None)
@given(space=st.sampled_from([" ", "  ", "\n", " /* now() sys.segments */ "]),
       name=st.sampled_from(["x", '"x"', "x + 1"]), alias=st.sampled_from(["now_col", '"sys.x"', "current_ts"]))
def test_stable_statements_stay_reusable_whatever_they_mention(space, name, alias):
    # Text that merely mentions the words (comments, aliases) is no reason to plan again.
    sql = f"SELECT{space}{name} AS {alias}{space}FROM t WHERE x > 1"
    assert plan_sql(sql, _catalog(), (), {}).reusable


@pytest.mark.parametrize("sql", ["SELECT x FROM t", "SELECT COUNT(*) FROM t WHERE __time >= TIMESTAMP '2020-01-01'"])
def test_plain_queries_are_reusable(sql):
    assert plan_sql(sql, _catalog(), (), {}).reusable


# ---- constant plans ------------------------------------------------------------------------------
CONSTANT = ["SELECT 1", "SELECT 1 + 1 AS v, 'x' AS s, NULL AS n", "SELECT 2 AS a UNION ALL SELECT 1 ORDER BY 1",
            "SELECT UPPER(s) FROM (SELECT 'a' AS s UNION ALL SELECT 'b') WHERE s <> 'b'",
            "SELECT TIMESTAMP '2020-01-01 00:00:00' AS t, CAST('3' AS BIGINT) * 2 AS n"]


@pytest.mark.parametrize("sql", CONSTANT)
def test_a_constant_plan_answers_later_runs_with_its_first_result(sql):
    service = _service()
    first = service.execute(sql)
    plan = next(plan for _, plan in service._plans.items())
    assert plan._constant
    # Every later run is the same table, equal to what a fresh plan of the text computes.
    assert service.execute(sql) is first
    assert first.equals(plan_sql(sql, _catalog(), (), {}).execute(lambda q: None))


@pytest.mark.parametrize("sql", ["SELECT x FROM t", "SELECT * FROM sys.segments", "SELECT NOW() AS n",
                                 "EXPLAIN PLAN FOR SELECT 1", "SELECT ? + 1 AS v"])
def test_plans_that_read_a_table_or_the_clock_or_lack_parameters_are_not_constant(sql):
    assert not plan_sql(sql, _catalog(), (), {})._constant


def test_a_constant_statement_that_fails_fails_every_time():
    service = _service()
    sql = "SET maxJoinRows = -1; SELECT 1"
    for _ in range(2):
        with pytest.raises(Exception, match="maxJoinRows"):
            service.execute(sql)


# ---- what GetFlightInfo described is what DoGet runs ------------------------------------------------
class _NoRows:
    """A cluster with no rows: every native query answers an empty table (columns read as NULL)."""

    def execute(self, query, remaining, _, is_active, schemas=None, tracked=None):
        class Result:
            table = pa.table({})
        return Result()

    @staticmethod
    def streams(query):
        return False


def test_a_described_plan_runs_as_described_after_the_table_changed():
    from services.broker.front_door import QueryFrontDoor, QueryRequest

    catalog = FakeCatalog({"t": {"__time": ColumnType.parse("TIMESTAMP"), "x": ColumnType.parse("LONG")}})
    service = SqlService(catalog, _NoRows(), default_timeout_s=30)
    door = QueryFrontDoor(sql=service)
    schema, request = door.planned(QueryRequest(None, sql="SELECT * FROM t"))
    assert request.plan is not None and schema.names == ["__time", "x"]
    # A new column, and the plans made before it dropped (as a catalog or segment change does).
    catalog.schemas["t"] = {**catalog.schemas["t"], "y": ColumnType.parse("DOUBLE")}
    service._plans.clear()
    assert door.run(request, expected_schema=schema).table.schema == schema  # was: a "planner bug" error
    assert door.run(QueryRequest(None, sql="SELECT * FROM t")).table.schema.names == ["__time", "x", "y"]


@pytest.mark.parametrize("sql", ["SELECT * FROM sys.segments", "SELECT NOW() AS n", "SELECT ? + 1 AS v"])
def test_statements_planned_afresh_each_run_are_not_pinned(sql):
    from services.broker.front_door import QueryFrontDoor, QueryRequest

    door = QueryFrontDoor(sql=_service())
    _, request = door.planned(QueryRequest(None, sql=sql, parameter_rows=((1,),) if "?" in sql else ()))
    assert request.plan is None


class _RecordingSchemas(_NoRows):
    """Answers no rows and remembers the schemas each native query was run with."""

    def __init__(self) -> None:
        self.seen: list = []

    def execute(self, query, remaining, _, is_active, schemas=None, tracked=None):
        self.seen.append(schemas)
        return super().execute(query, remaining, _, is_active)


def test_a_described_plan_runs_with_the_schema_it_was_planned_with_after_a_column_was_dropped():
    """GetFlightInfo plans with the catalog as it is then; a catalog change before DoGet must not
    make the executor validate the plan against another schema (a dropped column would be an
    unknown-column error for a statement the client saw planned)."""
    from services.broker.front_door import QueryFrontDoor, QueryRequest

    long, double = ColumnType.parse("LONG"), ColumnType.parse("DOUBLE")
    catalog = FakeCatalog({"t": {"__time": ColumnType.parse("TIMESTAMP"), "x": long, "y": double}})
    executor = _RecordingSchemas()
    service = SqlService(catalog, executor, default_timeout_s=30)
    door = QueryFrontDoor(sql=service)
    schema, request = door.planned(QueryRequest(None, sql="SELECT x, y FROM t"))
    catalog.schemas["t"] = {"__time": ColumnType.parse("TIMESTAMP"), "x": long}  # y dropped meanwhile
    service._plans.clear()
    assert door.run(request, expected_schema=schema).table.schema == schema
    assert executor.seen and all(s is not None and s["t"]["y"] == double for s in executor.seen)
