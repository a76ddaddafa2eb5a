"""Broker Flight servers on ephemeral ports over a QueryFrontDoor with the DuckDB-backed SqlBackend:
one open, one with basic authentication (alice / s3cret), plus a fake native backend that records
native queries."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from types import SimpleNamespace

import pyarrow as pa
import pytest

from services.broker.flight import BrokerFlightServer
from services.broker.front_door import QueryFrontDoor
from tests.component.flight_sql.duckdb_backend import DuckDbBackend

USERS = {"alice": "s3cret", "bob": "hunter2"}


class FakeNative:
    """Stands in for the broker's native executor: remembers queries, returns a small table whose
    dictionary-encoded column changes dictionary between chunks, as engine results can."""

    def __init__(self) -> None:
        self.queries: list[dict] = []
        self.origins: list = []  # the CallOrigin each query came with

    def execute(self, query: dict, timeout_s: float, query_id=None, is_active=lambda: True, schemas=None,
                tracked=None, origin=None):
        self.queries.append(query)
        self.origins.append(origin)
        channel = pa.chunked_array([pa.array(["#en", "#fr"]).dictionary_encode(),
                                    pa.array(["#de", "#en"]).dictionary_encode()])
        table = pa.table({"channel": channel, "count": pa.array([len(self.queries)] * 4, pa.int64())})
        return SimpleNamespace(table=table, stats=None)

    def result_schema(self, query: dict) -> pa.Schema:
        return pa.schema([("channel", pa.dictionary(pa.int32(), pa.string())), ("count", pa.int64())])


def front_door(backend, native=None) -> QueryFrontDoor:
    return QueryFrontDoor(sql=backend, native=native)


@contextmanager
def running(server: BrokerFlightServer):
    thread = threading.Thread(target=server.serve, name="flight-test-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(timeout=10)
        assert not thread.is_alive(), "Flight server did not stop within 10 s"


@pytest.fixture(scope="package")
def backend():
    db = DuckDbBackend()
    yield db
    db.close()


@pytest.fixture(scope="package")
def native():
    return FakeNative()


@pytest.fixture(scope="package")
def server(backend, native):
    with running(BrokerFlightServer("grpc://127.0.0.1:0", front_door(backend, native))) as srv:
        yield srv


@pytest.fixture(scope="package")
def auth_server(backend, native):
    def authenticate(user: str, password: str) -> bool:
        return USERS.get(user) == password

    with running(BrokerFlightServer("grpc://127.0.0.1:0", front_door(backend, native), auth=authenticate)) as srv:
        yield srv


def uri(server: BrokerFlightServer) -> str:
    return f"grpc://127.0.0.1:{server.port}"
