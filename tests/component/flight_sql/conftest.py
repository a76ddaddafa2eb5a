"""Broker Flight servers on ephemeral ports over the DuckDB-backed SqlBackend: one open, one with
basic authentication (alice / s3cret), plus a fake ``run_native`` that records native queries."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pyarrow as pa
import pytest

from services.broker.flight import BrokerFlightServer
from tests.component.flight_sql.duckdb_backend import DuckDbBackend

USERS = {"alice": "s3cret", "bob": "hunter2"}


class FakeNative:
    """Stands in for the broker's native executor: remembers queries, returns a small table whose
    dictionary-encoded column changes dictionary between chunks, as engine results can."""

    def __init__(self) -> None:
        self.queries: list[dict] = []

    def __call__(self, query: dict) -> pa.Table:
        self.queries.append(query)
        channel = pa.chunked_array([pa.array(["#en", "#fr"]).dictionary_encode(),
                                    pa.array(["#de", "#en"]).dictionary_encode()])
        return pa.table({"channel": channel, "count": pa.array([len(self.queries)] * 4, pa.int64())})


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
    with running(BrokerFlightServer("grpc://127.0.0.1:0", native, sql_backend=backend)) as srv:
        yield srv


@pytest.fixture(scope="package")
def auth_server(backend, native):
    def authenticate(user: str, password: str) -> bool:
        return USERS.get(user) == password

    with running(BrokerFlightServer("grpc://127.0.0.1:0", native, sql_backend=backend, auth=authenticate)) as srv:
        yield srv


def uri(server: BrokerFlightServer) -> str:
    return f"grpc://127.0.0.1:{server.port}"
