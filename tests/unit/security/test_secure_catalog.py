"""SecureSqlCatalog: what one user's SQL sees: listings, INFORMATION_SCHEMA, SELECT, sys rows and
input tables; and what INSERT/REPLACE needs."""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlglot

from common.errors import ValidationError
from common.segment import SegmentId
from common.sql import plan_sql
from common.sql.catalog import SegmentsOnlyCatalog, SqlCatalog
from common.types import Interval
from common.types.column_type import LONG, STRING, TIMESTAMP
from services.broker.overlay_catalog import OverlayCatalog
from services.security import ALLOW_ALL
from services.security.basic_authorizer import BasicAuthorizer, Grant, UserSpec
from common.ingest.statement import statement_sources
from services.security.secure_catalog import (IngestionCatalog, SecureSqlCatalog, ingestion_requirements,
                                              native_query_datasources, source_requirements)
from tests.unit.sql.fake_catalog import FakeCatalog

SCHEMA = {"__time": TIMESTAMP, "page": STRING, "added": LONG}
NAMES = ["wiki", "wikipedia", "wiki_2", "sales"]


def segment(ds: str, day: int = 1, version: str = "v1_x") -> SegmentId:
    return SegmentId(ds, Interval.parse(f"2020-01-0{day}/2020-01-0{day + 1}"), version, 0)


def sid(ds: str, day: int = 1, version: str = "v1_x") -> str:
    return str(segment(ds, day, version))


# A datasource whose name looks like the middle of another one's segment id: its id's text starts
# like one of datasource "a" (no regex can tell them apart; the typed id can).
TRICKY = "a_2020-01-01T00:00:00.000Z_2020-01-02T00:00:00.000Z"
SERVED = [segment(n) for n in NAMES] + [segment("wiki_2", 2, "a_b"), segment(TRICKY)]


class Catalog(FakeCatalog):
    """FakeCatalog plus the optional lookups of the broker's OverlayCatalog."""

    def __init__(self):
        segments = pa.table({"segment_id": [sid(n) for n in NAMES], "datasource": NAMES})
        server_segments = pa.table({"server": ["h1"] * 4 + ["h2"] * 3,
                                    "segment_id": [str(s) for s in SERVED] + ["not-a-served-segment"]})
        tasks = pa.table({"task_id": ["t1", "t2", "t3"], "datasource": ["sales", "wiki", None]})
        servers = pa.table({"server": ["h1", "h2"]})
        super().__init__({n: dict(SCHEMA) for n in NAMES},
                         {"segments": segments, "server_segments": server_segments, "tasks": tasks,
                          "servers": servers})
        self.ext = {"files": {"x": STRING}, "secret_files": {"y": STRING}}

    def table_properties(self, name):
        return {"description": f"about {name}"}

    def declared_order(self, name):
        return False

    def external_table_names(self):
        return list(self.ext)

    def external_table_schema(self, name):
        return self.ext[name]

    def external_table(self, name, args):
        return pa.table({c: pa.array([], pa.string()) for c in self.ext[name]})

    def segment_datasources(self):
        return {str(s): s.datasource for s in SERVED}

    def something_else(self):
        return "passed through"


AUTH = BasicAuthorizer("admin", "pw", [
    UserSpec("reader", password="x", grants=(Grant("READ", "DATASOURCE", "wiki"),)),
    UserSpec("regex", password="x", grants=(Grant("READ", "DATASOURCE", "wi.*"), Grant("READ", "EXTERNAL", "files"))),
    UserSpec("writer", password="x", grants=(Grant("WRITE", "DATASOURCE", "wiki"),)),
    UserSpec("nobody", password="x"),
])
READABLE = {"admin": NAMES, "reader": ["wiki"], "regex": ["wiki", "wikipedia", "wiki_2"], "writer": [], "nobody": []}


def sql(user, text):
    plan = plan_sql(text, SecureSqlCatalog(Catalog(), AUTH, user))
    return plan.execute(lambda q: pytest.fail(f"no native query expected: {q}"))


@pytest.mark.parametrize("user", list(READABLE))
def test_listings_and_information_schema_show_only_readable_tables(user):
    catalog = SecureSqlCatalog(Catalog(), AUTH, user)
    assert catalog.datasource_names() == READABLE[user]
    tables = sql(user, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'")
    assert sorted(tables.column(0).to_pylist()) == sorted(READABLE[user])
    columns = sql(user, "SELECT DISTINCT TABLE_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid'")
    assert sorted(columns.column(0).to_pylist()) == sorted(READABLE[user])


@pytest.mark.parametrize("user", list(READABLE))
@pytest.mark.parametrize("table", NAMES + ["no_such_table"])
def test_select_is_allowed_exactly_on_readable_datasources(user, table):
    catalog = SecureSqlCatalog(Catalog(), AUTH, user)
    if table in READABLE[user]:
        plan_sql(f'SELECT page FROM "{table}"', catalog)
    elif user == "admin":
        with pytest.raises(ValidationError, match="unknown table"):
            plan_sql(f'SELECT page FROM "{table}"', catalog)
    else:  # unreadable, existing or not: the same refusal, so existence does not leak
        with pytest.raises(PermissionError, match=f"user '{user}' may not READ on DATASOURCE '{table}'"):
            plan_sql(f'SELECT page FROM "{table}"', catalog)


def test_a_readable_table_joined_with_an_unreadable_one_is_refused():
    with pytest.raises(PermissionError, match="DATASOURCE 'sales'"):
        plan_sql("SELECT w.page FROM wiki w JOIN sales s ON w.page = s.page", SecureSqlCatalog(Catalog(), AUTH, "reader"))
    with pytest.raises(PermissionError, match="DATASOURCE 'sales'"):
        plan_sql("SELECT page FROM wiki WHERE page IN (SELECT page FROM druid.sales)",
                 SecureSqlCatalog(Catalog(), AUTH, "reader"))


def test_unknown_table_hints_only_name_readable_tables():
    with pytest.raises(PermissionError):
        plan_sql("SELECT * FROM wikk", SecureSqlCatalog(Catalog(), AUTH, "reader"))
    with pytest.raises(ValidationError) as err:
        plan_sql("SELECT * FROM wikk", SecureSqlCatalog(Catalog(), AUTH, "admin"))
    assert "wiki" in str(err.value)


@pytest.mark.parametrize("user", list(READABLE))
def test_sys_rows_are_limited_to_readable_datasources(user):
    segments = sql(user, "SELECT datasource FROM sys.segments")
    assert sorted(segments.column(0).to_pylist()) == sorted(READABLE[user])
    served = sql(user, "SELECT segment_id FROM sys.server_segments").column(0).to_pylist()
    datasource_of = {str(s): s.datasource for s in SERVED}
    seen = sorted({datasource_of.get(s, "?") for s in served})
    # TRICKY and an id no catalog knows are rows only the admin (who may read any name) sees.
    assert seen == sorted(READABLE[user] + [TRICKY, "?"] if user == "admin" else READABLE[user])
    tasks = sql(user, "SELECT task_id FROM sys.tasks").column(0).to_pylist()
    expected = {"admin": ["t1", "t2", "t3"], "reader": ["t2"], "regex": ["t2"]}.get(user, [])
    assert sorted(tasks) == expected
    assert sql(user, "SELECT COUNT(*) FROM sys.servers").column(0).to_pylist() == [2]


def test_server_segments_rows_follow_the_typed_segment_id_not_its_text():
    # "a_2020-01-01T..._2020-01-02T..." segments belong to TRICKY, although their text also reads
    # as datasource "a"; a user who may read "a" (and not TRICKY) must not see them.
    only_a = BasicAuthorizer("admin", "pw", [UserSpec("a_reader", password="x",
                                                      grants=(Grant("READ", "DATASOURCE", "a"),))])
    catalog = SecureSqlCatalog(Catalog(), only_a, "a_reader")
    assert catalog.system_table("sys", "server_segments").num_rows == 0
    assert catalog.segment_datasources() == {}
    tricky = BasicAuthorizer("admin", "pw", [UserSpec("t", password="x", grants=(Grant("READ", "DATASOURCE", TRICKY),))])
    rows = SecureSqlCatalog(Catalog(), tricky, "t").system_table("sys", "server_segments")
    assert rows.column("segment_id").to_pylist() == [str(segment(TRICKY))]


def test_input_tables_need_read_on_external():
    assert SecureSqlCatalog(Catalog(), AUTH, "regex").external_table_names() == ["files"]
    assert SecureSqlCatalog(Catalog(), AUTH, "admin").external_table_names() == ["files", "secret_files"]
    assert SecureSqlCatalog(Catalog(), AUTH, "reader").external_table_names() == []
    regex = SecureSqlCatalog(Catalog(), AUTH, "regex")
    assert regex.external_table_schema("files") == {"x": STRING}
    with pytest.raises(PermissionError, match="user 'regex' may not READ on EXTERNAL 'secret_files'"):
        regex.external_table_schema("secret_files")
    with pytest.raises(PermissionError):
        regex.external_table("secret_files", {})
    got = sql("regex", "SELECT TABLE_SCHEMA, TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'ext'")
    assert got.to_pylist() == [{"TABLE_SCHEMA": "ext", "TABLE_NAME": "files"}]


def test_other_lookups_are_checked_and_nothing_is_forwarded():
    catalog = SecureSqlCatalog(Catalog(), AUTH, "reader")
    assert catalog.table_properties("wiki") == {"description": "about wiki"}
    with pytest.raises(PermissionError):
        catalog.table_properties("sales")
    with pytest.raises(PermissionError):
        catalog.declared_order("sales")
    with pytest.raises(PermissionError):
        catalog.datasource_spec("sales")
    assert catalog.datasource_spec("wiki") is None  # a catalog without a table catalog has no entries
    with pytest.raises(AttributeError):
        catalog.something_else()  # the inner catalog has it, but it is not a checked SqlCatalog method
    with pytest.raises(AttributeError):
        catalog.inner_secret  # noqa: B018
    bare = SecureSqlCatalog(FakeCatalog({}), AUTH, "reader")
    assert bare.external_table_names() == [] and bare.table_properties("wiki") is None


def _protocol_methods() -> list[str]:
    return sorted(name for name, value in vars(SqlCatalog).items() if callable(value) and not name.startswith("_"))


def test_every_protocol_method_is_written_out_with_its_check():
    methods = _protocol_methods()
    assert {"datasource_names", "datasource_schema", "declared_order", "table_properties", "datasource_spec",
            "system_table_names", "system_table", "external_table_names", "external_table_schema",
            "external_source", "external_table"} <= set(methods)
    for name in methods:
        assert name in vars(SecureSqlCatalog), f"SecureSqlCatalog must define {name} itself"
        assert name in vars(OverlayCatalog), f"the broker's OverlayCatalog must implement {name}"
        assert callable(getattr(SegmentsOnlyCatalog, name, None)) or name in (
            "datasource_names", "datasource_schema", "system_table_names", "system_table")
    assert not hasattr(SecureSqlCatalog, "__getattr__")


@pytest.mark.parametrize("method", _protocol_methods())
def test_each_protocol_method_asks_the_authorizer_or_filters(method):
    """No method reaches the inner catalog for a name the user may not read."""
    nobody = SecureSqlCatalog(Catalog(), AUTH, "nobody")
    args = {"datasource_names": (), "system_table_names": (), "external_table_names": (), "segment_datasources": (),
            "system_table": ("sys", "segments"), "external_table_schema": ("files",),
            "external_source": ("files", {}), "external_table": ("files", {})}.get(method, ("wiki",))
    if method in ("datasource_names", "external_table_names"):
        assert getattr(nobody, method)(*args) == []
    elif method == "segment_datasources":
        assert nobody.segment_datasources() == {}
    elif method == "system_table_names":
        assert getattr(nobody, method)() == Catalog().system_table_names()
    elif method == "system_table":
        assert nobody.system_table(*args).num_rows == 0
    else:
        with pytest.raises(PermissionError, match="user 'nobody' may not READ"):
            getattr(nobody, method)(*args)


def test_ingestion_catalog_needs_write_for_the_target_entry():
    writer = IngestionCatalog(Catalog(), AUTH, "writer")
    assert writer.datasource_spec("wiki") is None
    with pytest.raises(PermissionError, match="user 'writer' may not WRITE on DATASOURCE 'sales'"):
        writer.datasource_spec("sales")
    with pytest.raises(PermissionError, match="may not READ"):
        writer.datasource_schema("wiki")  # WRITE does not let it read the rows


def test_allow_all_changes_nothing():
    catalog = SecureSqlCatalog(Catalog(), ALLOW_ALL, None)
    assert catalog.datasource_names() == NAMES
    assert catalog.system_table("sys", "tasks").num_rows == 3


# ---- ingestion ---------------------------------------------------------------------------------------
class Stmt:
    def __init__(self, datasource, select, sources=(), sql=""):
        self.datasource = datasource
        self.select = sqlglot.parse_one(select, read="druid")
        self.sources = {s: None for s in sources}
        self.sql = sql


def test_statement_sources_from_the_text():
    assert statement_sources("INSERT INTO a SELECT * FROM ext.files PARTITIONED BY DAY") == ("a", ["files"], False)
    assert statement_sources("SET x = 1; REPLACE INTO druid.\"my ds\" OVERWRITE ALL SELECT * FROM "
                             "TABLE(ext.files(x => 1)) UNION ALL SELECT * FROM \"ext\".\"other\"") \
        == ("my ds", ["files", "other"], False)
    assert statement_sources("INSERT INTO a SELECT * FROM TABLE(EXTERN('{}', '{}', '[]'))") == ("a", [], True)
    assert statement_sources("INSERT INTO a SELECT * FROM TABLE(localfiles(files => 'a')) EXTEND (x VARCHAR)") \
        == ("a", [], True)
    assert statement_sources("REPLACE INTO a OVERWRITE ALL SELECT 'ext.files' AS s FROM t") == ("a", [], False)
    assert statement_sources("INSERT INTO x.y.z SELECT 1") == (None, [], False)  # the parser will refuse it
    assert source_requirements("INSERT INTO a SELECT * FROM ext.f, TABLE(EXTERN('', '', ''))") == [
        ("WRITE", "DATASOURCE", "a"), ("READ", "EXTERNAL", "f"), ("READ", "EXTERNAL", "EXTERNAL")]


def test_ingestion_requirements():
    rewritten = Stmt("wiki", "SELECT * FROM __extern0", ["__extern0"])
    assert ingestion_requirements(rewritten, "INSERT INTO wiki SELECT * FROM ext.files") == [
        ("WRITE", "DATASOURCE", "wiki"), ("READ", "EXTERNAL", "files")]
    assert ingestion_requirements(rewritten, "INSERT INTO wiki SELECT * FROM TABLE(EXTERN('a', 'b', 'c'))") == [
        ("WRITE", "DATASOURCE", "wiki"), ("READ", "EXTERNAL", "EXTERNAL")]
    # A SELECT that still names tables (not something the parser accepts today) needs READ on them.
    other = Stmt("wiki", "WITH c AS (SELECT * FROM __extern0) SELECT * FROM c JOIN sales ON 1=1 "
                         "JOIN ext.more ON 1=1 JOIN druid.wiki ON 1=1", ["__extern0"])
    assert ingestion_requirements(other, "") == [
        ("WRITE", "DATASOURCE", "wiki"), ("READ", "DATASOURCE", "sales"), ("READ", "EXTERNAL", "more"),
        ("READ", "DATASOURCE", "wiki")]


# ---- native queries ----------------------------------------------------------------------------------
def test_native_query_datasources():
    assert native_query_datasources({"queryType": "scan", "dataSource": "wiki"}) == {"wiki"}
    assert native_query_datasources({"queryType": "groupBy", "dataSource": {
        "type": "join", "left": {"type": "table", "name": "a"},
        "right": {"type": "query", "query": {"dataSource": {"type": "union", "dataSources": ["b", "c"]}}}}}) \
        == {"a", "b", "c"}
    assert native_query_datasources({"queryType": "scan", "dataSource": {"type": "inline"}}) == set()


def test_a_statement_sees_one_schema_per_datasource_however_often_it_asks():
    """The catalog may change while one statement is planned (several looks at a table) and run;
    the statement keeps the schema it first saw, and records it for the executor."""
    inner = FakeCatalog({"wiki": dict(SCHEMA)})
    catalog = SecureSqlCatalog(inner, ALLOW_ALL, None)
    first = catalog.datasource_schema("wiki")
    inner.schemas["wiki"] = {"__time": TIMESTAMP, "page": STRING}  # "added" dropped meanwhile
    assert catalog.datasource_schema("wiki") == SCHEMA
    assert catalog.schemas == {"wiki": first}
    assert SecureSqlCatalog(inner, ALLOW_ALL, None).datasource_schema("wiki") == inner.schemas["wiki"]
