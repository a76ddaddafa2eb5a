"""The broker's Flight SQL server driven by the real, unmodified ADBC Flight SQL driver (Go),
over the DuckDB-backed SqlBackend: queries, ? parameters, large results, catalog calls,
statement/session lifecycle, errors and authentication."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as adbc
import adbc_driver_manager
import pyarrow as pa
import pytest

from common.errors import QueryTimeoutError, StrataError, UnsupportedError
from services.broker.flight import MAX_BATCH_ROWS
from tests.component.flight_sql.conftest import uri
from tests.component.flight_sql.duckdb_backend import NUMBERS_ROWS

Status = adbc_driver_manager.AdbcStatusCode


@pytest.fixture
def conn(server):
    # autocommit: strata has no transactions, and the driver warns when asked to turn it off.
    with adbc.connect(uri(server), autocommit=True) as connection:
        yield connection


def test_execute_fetch_arrow_table_and_df(conn, backend):
    sql = "SELECT * FROM wiki ORDER BY __time"
    with conn.cursor() as cur:
        cur.execute(sql)
        table = cur.fetch_arrow_table()
        cur.execute(sql)
        df = cur.fetch_df()
    expected = backend.execute(sql)
    assert table.equals(expected)
    assert list(df.columns) == ["__time", "channel", "page", "added", "delta"]
    assert df["page"].tolist() == ["Main_Page", "Accueil", "Talk:Main", "é漢字"]
    assert df["added"].sum() == 21


def test_question_mark_parameters_int_string_and_null(conn, backend):
    with conn.cursor() as cur:
        cur.execute("SELECT page FROM wiki WHERE added > ? AND channel = ? ORDER BY page", (2, "#en.wikipedia"))
        assert cur.fetchall() == [("Main_Page",), ("Talk:Main",)]
        assert backend.last("execute")["parameters"] == [2, "#en.wikipedia"]
        # Same SQL again: the driver reuses its prepared statement and only rebinds.
        cur.execute("SELECT page FROM wiki WHERE added > ? AND channel = ? ORDER BY page", (5, "#fr.wikipedia"))
        assert cur.fetchall() == []
        cur.execute("SELECT ? IS NULL AS missing, ? AS echoed", (None, "é"))
        assert cur.fetchall() == [(True, "é")]


def test_several_bound_rows_run_as_one_statement(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT n, label FROM numbers WHERE n = ?", pa.record_batch({"0": [7, 70_000, 299_999]}))
        assert cur.fetchall() == [(7, "row-7"), (70_000, "row-70000"), (299_999, "row-299999")]


def test_large_result_streams_in_bounded_batches_with_one_schema(conn):
    sql = "SELECT * FROM numbers ORDER BY n"
    with conn.cursor() as cur:
        announced = cur.adbc_execute_schema(sql)
        cur.execute(sql)
        reader = cur.fetch_record_batch()
        batches = list(reader)
    assert sum(b.num_rows for b in batches) == NUMBERS_ROWS
    assert len(batches) >= NUMBERS_ROWS // MAX_BATCH_ROWS
    assert max(b.num_rows for b in batches) <= MAX_BATCH_ROWS
    assert all(b.schema.equals(reader.schema) for b in batches)
    assert announced.equals(reader.schema)
    assert batches[-1].column("n")[-1].as_py() == NUMBERS_ROWS - 1


def test_set_prefix_reaches_the_backend_as_query_context(conn, backend):
    with conn.cursor() as cur:
        cur.execute("SET sqlTimeZone = 'Asia/Tokyo'; SET useCache = false; SELECT COUNT(*) AS c FROM wiki")
        assert cur.fetchall() == [(4,)]
    assert backend.last("execute")["context"] == {"sqlTimeZone": "Asia/Tokyo", "useCache": False}


def test_get_info_reports_strata(conn):
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "strata"
    assert info["vendor_version"]
    assert info["vendor_arrow_version"] == pa.__version__
    assert "Flight SQL" in info["driver_name"]


def test_table_types(conn):
    assert conn.adbc_get_table_types() == ["SYSTEM_TABLE", "TABLE"]


def test_get_objects_all_depths_with_column_types(conn):
    objects = conn.adbc_get_objects(depth="all").read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["druid"]
    schemas = {s["db_schema_name"]: s for s in objects[0]["catalog_db_schemas"]}
    assert set(schemas) == {"druid", "INFORMATION_SCHEMA"}
    tables = {t["table_name"]: t for t in schemas["druid"]["db_schema_tables"]}
    assert set(tables) == {"numbers", "wiki"} and tables["wiki"]["table_type"] == "TABLE"
    columns = [(c["column_name"], c["ordinal_position"], c["xdbc_type_name"]) for c in tables["wiki"]["table_columns"]]
    assert columns == [("__time", 1, "TIMESTAMP"), ("channel", 2, "VARCHAR"), ("page", 3, "VARCHAR"),
                       ("added", 4, "BIGINT"), ("delta", 5, "DOUBLE")]
    system = {t["table_name"]: t["table_type"] for t in schemas["INFORMATION_SCHEMA"]["db_schema_tables"]}
    assert system == {"COLUMNS": "SYSTEM_TABLE", "TABLES": "SYSTEM_TABLE"}


def test_get_objects_filters(conn):
    objects = conn.adbc_get_objects(depth="tables", db_schema_filter="dru%", table_name_filter="w_ki").read_all()
    schemas = objects.to_pylist()[0]["catalog_db_schemas"]
    assert [(s["db_schema_name"], [t["table_name"] for t in s["db_schema_tables"]]) for s in schemas] == \
        [("druid", ["wiki"])]


def test_get_table_schema(conn, backend):
    schema = conn.adbc_get_table_schema("wiki", catalog_filter="druid", db_schema_filter="druid")
    assert schema.equals(backend.execute("SELECT * FROM wiki LIMIT 0").schema)
    assert schema.field("page").metadata[b"ARROW:FLIGHT:SQL:TYPE_NAME"] == b"VARCHAR"


def test_closing_a_cursor_closes_its_prepared_statement(conn, server):
    before = len(server.statements)
    cur = conn.cursor()
    cur.execute("SELECT 1 AS one")
    assert cur.fetchall() == [(1,)]
    assert len(server.statements) == before + 1
    cur.close()
    assert len(server.statements) == before


def test_bad_sql_is_invalid_argument_naming_the_problem(conn):
    with conn.cursor() as cur:
        with pytest.raises(adbc.ProgrammingError, match=r"INVALID_ARGUMENT.*syntax error at or near \"SELEC\"") as err:
            cur.execute("SELEC 1")
        assert err.value.status_code == Status.INVALID_ARGUMENT
        with pytest.raises(adbc.ProgrammingError, match="INVALID_ARGUMENT.*nope") as err:
            cur.execute("SELECT * FROM nope")
        assert err.value.status_code == Status.INVALID_ARGUMENT


@pytest.mark.parametrize("error, status, text", [
    (UnsupportedError("JOIN on a lookup is not supported"), Status.NOT_IMPLEMENTED, "JOIN on a lookup"),
    (QueryTimeoutError("query timed out after 10 ms"), Status.TIMEOUT, "timed out after 10 ms"),
    (PermissionError("user may not read datasource 'wiki'"), Status.UNAUTHORIZED, "may not read"),
    (StrataError("historical h1 vanished"), Status.INTERNAL, r"internal error [0-9a-f]{12} on the broker: historical h1"),
    (RuntimeError("boom in /srv/x.py"), Status.INTERNAL, r"internal error [0-9a-f]{12} on the broker: RuntimeError \("),
])
def test_backend_errors_map_to_status_codes(conn, backend, error, status, text):
    backend.fail_next = error  # the statement is planned at execute and runs at fetch
    with conn.cursor() as cur:
        with pytest.raises(adbc.Error, match=text) as err:
            cur.execute("SELECT 1")
            cur.fetch_arrow_table()
    assert err.value.status_code == status
    assert "Traceback" not in str(err.value) and ".py" not in str(err.value), str(err.value)


def test_updates_are_refused_as_read_only(conn):
    with conn.cursor() as cur:
        with pytest.raises(adbc.NotSupportedError, match="read-only"):
            cur.executemany("SELECT ?", [(1,), (2,)])


def test_auth_refuses_a_wrong_password(auth_server):
    with pytest.raises(adbc.Error, match="UNAUTHENTICATED.*invalid user name or password for 'alice'"):
        adbc.connect(uri(auth_server), db_kwargs={"username": "alice", "password": "nope"}, autocommit=True)


def test_auth_refuses_calls_without_credentials(auth_server):
    with adbc.connect(uri(auth_server), autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(adbc.Error, match="UNAUTHENTICATED.*authentication required"):
            cur.execute("SELECT 1")


def test_auth_passes_the_user_to_the_backend(auth_server, backend):
    kwargs = {"username": "alice", "password": "s3cret"}
    with adbc.connect(uri(auth_server), db_kwargs=kwargs, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM wiki WHERE added > ?", (1,))
        assert cur.fetchall() == [(3,)]
        assert backend.last("execute")["user"] == "alice"
        assert backend.last("describe")["user"] == "alice"
        conn.adbc_get_objects(depth="tables").read_all()
        assert backend.last("tables")["user"] == "alice"


def test_closing_the_connection_closes_the_session(auth_server, monkeypatch):
    revoked = []
    real_revoke = auth_server.tokens.revoke
    monkeypatch.setattr(auth_server.tokens, "revoke", lambda token: (revoked.append(token), real_revoke(token)))
    before = len(auth_server.statements)
    conn = adbc.connect(uri(auth_server), db_kwargs={"username": "bob", "password": "hunter2"}, autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT 2 AS two")
    assert cur.fetchall() == [(2,)]
    assert len(auth_server.statements) == before + 1
    conn.close()  # CloseSession: the session's statements and its bearer token go away
    assert len(revoked) == 1
    assert auth_server.tokens.user_of(revoked[0]) == (False, None)
    assert len(auth_server.statements) == before
