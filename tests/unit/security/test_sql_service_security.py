"""SqlService with an authorizer: SELECT, listings (Flight SQL GetTables) and INSERT/REPLACE
refused before any task is created, over the broker's OverlayCatalog with input tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from common.errors import ValidationError
from common.types.column_type import LONG, STRING, TIMESTAMP
from services.broker.overlay_catalog import OverlayCatalog
from services.broker.sql_service import SqlService
from services.security import ALLOW_ALL
from services.security.basic_authorizer import BasicAuthorizer, Grant, UserSpec
from tests.unit.sql.fake_catalog import FakeCatalog

EXTERN = """TABLE(EXTERN('{"type": "inline", "data": "2020-01-01,a\\n"}', '{"type": "csv", "columns": ["ts", "s"]}',
    '[{"name": "ts", "type": "string"}, {"name": "s", "type": "string"}]'))"""
INLINE_INSERT = f"INSERT INTO wiki SELECT TIME_PARSE(ts) AS __time, s FROM {EXTERN} PARTITIONED BY DAY"
EXT_INSERT = "INSERT INTO wiki SELECT TIME_PARSE(ts) AS __time, s FROM ext.{name} PARTITIONED BY DAY"
INPUT = {"type": "inline", "properties": {"format": "json", "data": ['{"ts": "2020-01-01", "s": "a"}']},
         "columns": [{"name": "ts"}, {"name": "s"}]}


class Coordinator:
    def __init__(self):
        self.submitted = []

    def submit_task(self, datasource, type_, sql, spec):
        self.submitted.append((datasource, type_, sql, spec))
        return type("Task", (), {"id": f"task-{len(self.submitted)}"})()


class Base(FakeCatalog):
    def __init__(self):
        super().__init__({n: {"__time": TIMESTAMP, "page": STRING, "added": LONG} for n in ("wiki", "sales")})
        self.coordinator = Coordinator()


class Cache:
    """What OverlayCatalog asks of the broker's catalog cache."""

    specs = {("ext", "files"): INPUT, ("ext", "secret_files"): INPUT,
             ("druid", "wiki"): {"type": "datasource", "properties": {"segmentGranularity": "DAY"}}}

    def spec(self, schema, name):
        return self.specs.get((schema, name))

    def names(self, schema):
        return sorted(n for s, n in self.specs if s == schema)


AUTH = BasicAuthorizer("admin", "pw", [
    UserSpec("reader", password="x", grants=(Grant("READ", "DATASOURCE", "wiki"),)),
    UserSpec("writer", password="x", grants=(Grant("WRITE", "DATASOURCE", "wiki"),
                                             Grant("READ", "EXTERNAL", "EXTERNAL|files"))),
    UserSpec("blind_writer", password="x", grants=(Grant("WRITE", "DATASOURCE", "wiki"),)),
])


@pytest.fixture
def service():
    base = Base()
    return SqlService(OverlayCatalog(base, Cache()), executor=None, default_timeout_s=5, authorizer=AUTH), base


def test_insert_needs_write_and_read_on_its_sources(service):
    sql, base = service
    assert sql.execute(INLINE_INSERT, user="writer").column("task_id").to_pylist() == ["task-1"]
    assert sql.execute(EXT_INSERT.format(name="files"), user="writer").num_rows == 1
    # ext.files became an inline EXTERN for the task; the catalog default granularity applies too
    assert "EXTERN(" in base.coordinator.submitted[1][2] and "ext.files" not in base.coordinator.submitted[1][2]
    assert sql.execute(INLINE_INSERT, user="admin").num_rows == 1
    refusals = [
        ("reader", INLINE_INSERT, "user 'reader' may not WRITE on DATASOURCE 'wiki'"),
        ("blind_writer", INLINE_INSERT, "user 'blind_writer' may not READ on EXTERNAL 'EXTERNAL'"),
        ("blind_writer", EXT_INSERT.format(name="files"), "may not READ on EXTERNAL 'files'"),
        ("writer", EXT_INSERT.format(name="secret_files"), "user 'writer' may not READ on EXTERNAL 'secret_files'"),
        ("writer", EXT_INSERT.format(name="no_such"), "may not READ on EXTERNAL 'no_such'"),  # existence hidden
        ("writer", INLINE_INSERT.replace("INTO wiki", "INTO sales"), "may not WRITE on DATASOURCE 'sales'"),
        ("writer", INLINE_INSERT.replace("PARTITIONED BY DAY", "").replace("INTO wiki", "INTO sales"),
         "may not WRITE on DATASOURCE 'sales'"),  # before the catalog's defaults are looked up
        (None, INLINE_INSERT, "unauthenticated caller may not WRITE on DATASOURCE 'wiki'"),
    ]
    for user, statement, message in refusals:
        with pytest.raises(PermissionError, match=message):
            sql.execute(statement, user=user)
        with pytest.raises(PermissionError, match=message):
            sql.describe(statement, user=user)  # preparing it is refused as well
    assert len(base.coordinator.submitted) == 3  # no refused statement reached the coordinator


def test_write_without_read_still_uses_the_catalog_defaults(service):
    sql, base = service
    sql.execute(INLINE_INSERT.replace("PARTITIONED BY DAY", ""), user="writer")
    assert base.coordinator.submitted[0][3]["segmentGranularity"] == "DAY"


def test_select_and_describe(service):
    sql, _ = service
    assert sql.describe("SELECT page FROM wiki", user="reader").dataset_schema.names == ["page"]
    for call in (lambda: sql.describe("SELECT page FROM sales", user="reader"),
                 lambda: sql.describe("SELECT page FROM sales WHERE page = ?", user="reader"),
                 lambda: sql.execute("SELECT page FROM sales", user="reader"),
                 lambda: sql.execute("SELECT page FROM wiki", user=None)):
        with pytest.raises(PermissionError, match="may not READ on DATASOURCE"):
            call()
    # An input table the user may not read is not in its ext schema at all (the planner resolves
    # ext names from the filtered listing).
    with pytest.raises(ValidationError, match="unknown input table 'ext.files'"):
        sql.execute("SELECT * FROM ext.files", user="reader")
    got = sql.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM INFORMATION_SCHEMA.TABLES "
                      "WHERE TABLE_SCHEMA IN ('druid', 'ext') ORDER BY 1, 2", user="writer")
    assert got.to_pylist() == [{"TABLE_SCHEMA": "ext", "TABLE_NAME": "files"}]


@pytest.mark.parametrize("user, expected", [
    ("admin", {("druid", "sales"), ("druid", "wiki"), ("ext", "files"), ("ext", "secret_files")}),
    ("reader", {("druid", "wiki")}),
    ("writer", {("ext", "files")}),
    ("blind_writer", set()),
    (None, set()),
])
def test_table_listings_are_filtered(service, user, expected):
    sql, _ = service
    got = {(t.schema, t.name) for t in sql.tables(user=user) if t.schema in ("druid", "ext")}
    assert got == expected
    assert {t.name for t in sql.tables(user=user) if t.schema == "sys"} == {"segments", "servers",
                                                                                "server_segments", "tasks",
                                                                                "projections", "queries",
                                                                                "projection_advice", "schema_decisions",
                                                                                "supervisors", "server_properties", "rules"}


def test_without_an_authorizer_nothing_changes():
    base = Base()
    sql = SqlService(OverlayCatalog(base, Cache()), executor=None, default_timeout_s=5)
    assert sql.authorizer is ALLOW_ALL
    assert {t.name for t in sql.tables() if t.schema == "druid"} == {"wiki", "sales"}
    assert sql.execute(INLINE_INSERT.replace("INTO wiki", "INTO sales")).num_rows == 1
    assert isinstance(sql.describe("SELECT page FROM sales").dataset_schema, pa.Schema)
