"""The query log's wrappers of the SQL and native backends write out every method the front doors
call (no ``__getattr__``): a backend method they do not know cannot be reached around the log and
KILL."""

from __future__ import annotations

import inspect

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
