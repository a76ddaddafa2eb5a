"""The query log's wrappers of the SQL and native backends write out every method the front doors
call (no ``__getattr__``): a backend method they do not know cannot be reached around the log and
KILL."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pyarrow as pa
import pytest

from services.broker.core.sql_backend import SqlBackend
from services.broker.front_door import NativeBackend
from services.broker.logged_backends import LoggedNative, LoggedSql
from services.broker.query_registry import QueryRegistry


def protocol_methods(protocol) -> list[str]:
    return sorted(n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_"))


class Recorder:
    """A backend that answers every call with its name and arguments, and has a method the wrappers
    do not know."""

    def __init__(self) -> None:
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            if name == "execute":
                return pa.table({"x": [1]})
            return name
        return call


@pytest.mark.parametrize("wrapper,protocol", [(LoggedSql, SqlBackend), (LoggedNative, NativeBackend)])
def test_every_backend_method_is_written_out(wrapper, protocol):
    assert "__getattr__" not in vars(wrapper)
    for name in protocol_methods(protocol):
        assert name in vars(wrapper), f"{wrapper.__name__} does not write out {name}"


def test_catalog_calls_forward_untracked_and_unknown_methods_are_not_reachable():
    inner, registry = Recorder(), QueryRegistry()
    sql = LoggedSql(inner, registry)
    assert sql.catalogs() == "catalogs" and sql.table_types() == "table_types"
    assert sql.db_schemas("strata", "d%") == "db_schemas"
    assert sql.tables("strata", None, "w%", ("TABLE",), "alice") == "tables"
    assert [c[0] for c in inner.calls] == ["catalogs", "table_types", "db_schemas", "tables"]
    assert inner.calls[-1][1] == ("strata", None, "w%", ("TABLE",), "alice")
    assert registry.running() == []
    with pytest.raises(AttributeError):
        sql.run_untracked  # noqa: B018 - a new backend method must be written out to be reachable
    native = LoggedNative(inner, registry)
    assert native.result_schema({"queryType": "scan"}) == "result_schema"
    with pytest.raises(AttributeError):
        native.run_untracked  # noqa: B018


def test_execute_is_tracked():
    inner, registry = Recorder(), QueryRegistry()
    table = LoggedSql(inner, registry).execute("SELECT 1", user="alice")
    assert table.num_rows == 1
    (record,) = registry.records()
    assert record.sql == "SELECT 1" and record.result_rows == 1


# ---- the call's origin travels with the request, explicitly (issue 24: no ContextVar) -----------------------
def test_the_front_doors_origin_reaches_the_log_on_the_request():
    from services.broker.core.call_origin import CallOrigin
    from services.broker.front_door import QueryFrontDoor, QueryRequest

    class Reply:
        query_id = None

    class Native:
        def execute(self, query, timeout_s, query_id=None, is_active=None, tracked=None):
            return SimpleNamespace(table=pa.table({"x": [1, 2]}), stats=None)

    registry = QueryRegistry()
    door = QueryFrontDoor(sql=LoggedSql(Recorder(), registry), native=LoggedNative(Native(), registry))
    reply = Reply()
    http = CallOrigin("http", "10.0.0.7", "erin")
    door.run(QueryRequest("erin", sql="SELECT 1", query_id="h1", origin=http))
    door.run(QueryRequest("erin", sql="SET sqlQueryId = 'own'; SELECT 1",
                          origin=CallOrigin("flight", "ipv4:10.0.0.8:9", "erin", reply)))
    door.run(QueryRequest(None, native={"queryType": "scan"}, query_id="n1",
                          origin=CallOrigin("grpc", "ipv4:10.0.0.9:1", "frank")))
    door.run(QueryRequest("gil", sql="SELECT 2"))  # a request nobody said the origin of
    got = {r.query_id: (r.protocol, r.remote_address, r.user, r.kind) for r in registry.records()}
    assert got["h1"] == ("http", "10.0.0.7", "erin", "sql")
    assert got["own"] == ("flight", "ipv4:10.0.0.8:9", "erin", "sql")  # the statement's own id, no fixed one
    assert reply.query_id == "own"  # the call's reply names the query it ran
    assert got["n1"] == ("grpc", "ipv4:10.0.0.9:1", "frank", "native")  # no user given: the origin's
    [other] = [v for k, v in got.items() if k not in ("h1", "own", "n1")]
    assert other == ("", None, "gil", "sql")


def test_a_query_run_on_another_thread_keeps_its_own_origin():
    """The stream's producer and the statements API run a query on a thread of their own; two at
    once each log their own caller (with a ContextVar, the thread saw whatever was copied in)."""
    import threading

    from services.broker.core.call_origin import CallOrigin
    from services.broker.front_door import QueryFrontDoor, QueryRequest

    registry = QueryRegistry()
    door = QueryFrontDoor(sql=LoggedSql(Recorder(), registry))
    started = threading.Barrier(4, timeout=30)

    def run(i: int) -> None:
        started.wait()
        door.run(QueryRequest(f"u{i}", sql=f"SELECT {i}", query_id=f"q{i}",
                              origin=CallOrigin("http", f"10.0.0.{i}", f"u{i}")))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted((r.query_id, r.remote_address, r.user) for r in registry.records()) == \
        [(f"q{i}", f"10.0.0.{i}", f"u{i}") for i in range(4)]


def test_a_statement_that_fails_while_prepared_is_logged_with_its_origin():
    from services.broker.core.call_origin import CallOrigin

    class Failing(Recorder):
        def describe(self, *args, **kwargs):
            raise ValueError("no such table")

    registry = QueryRegistry()
    sql = LoggedSql(Failing(), registry)
    with pytest.raises(ValueError):
        sql.describe("SELECT * FROM nope", origin=CallOrigin("flight", "ipv4:10.1.1.1:2", "hal"), query_id="p1")
    [record] = registry.records()
    assert (record.query_id, record.protocol, record.remote_address, record.user, record.status) == \
        ("p1", "flight", "ipv4:10.1.1.1:2", "hal", "error")
