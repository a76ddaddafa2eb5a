"""A real coordinator with the catalog installed (open, and one behind a test authorizer), and a
small JSON-over-HTTP helper for the REST scenarios."""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
import uuid

import pytest

from services.coordinator.catalog_server import install_catalog
from services.coordinator.main import CoordinatorProcess
from services.node_config import load_config
from services.security.basic_authorizer import BasicAuthorizer, Grant, UserSpec

BASE = "/druid/coordinator/v1/catalog"
HTTP_TIMEOUT_S = 20


def _env(sections: dict) -> dict:
    # As tests/harness/embedded_cluster.py builds its configs (not imported: it pulls in the broker).
    return {f"STRATA_{section.upper()}_{key.upper()}": str(value)
            for section, values in sections.items() for key, value in values.items()}


def start_coordinator(directory: str, authorizer=None) -> CoordinatorProcess:
    """As EmbeddedCluster starts its coordinator, plus install_catalog (until main wires it)."""
    sections = {
        "node": {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0, "flight_port": 0, "id": "coordinator"},
        "discovery": {"mode": "embedded", "lease_ttl_s": 2},
        "metadata": {"url": f"sqlite:///{os.path.join(directory, 'metadata.db')}"},
        "deep_storage": {"url": os.path.join(directory, "deep-storage")},
        "coordinator": {"replication": 0, "duty_period_ms": 100, "state_dir": os.path.join(directory, "coordinator")},
    }
    process = CoordinatorProcess(load_config("coordinator", None, env=_env(sections)))
    install_catalog(process, authorizer)
    return process.start()


def basic(user: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{user}".encode()).decode()}


class Rest:
    def __init__(self, port: int) -> None:
        self.root = f"http://127.0.0.1:{port}{BASE}"

    def __call__(self, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(f"{self.root}/{path.lstrip('/')}", data=data, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory):
    process = start_coordinator(str(tmp_path_factory.mktemp("catalog")))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def rest(coordinator) -> Rest:
    return Rest(coordinator.http.port)


def authorizer() -> BasicAuthorizer:
    """The real authorizer: admin holds everything; passwords equal the user names."""
    users = [
        UserSpec("reader", password="reader", grants=(Grant("READ", "DATASOURCE", "pub_.*"),)),
        UserSpec("writer", password="writer", grants=(Grant("READ", "DATASOURCE", "w_.*"),
                                                      Grant("WRITE", "DATASOURCE", "w_.*"),
                                                      Grant("WRITE", "EXTERNAL", "w_.*"))),
    ]
    return BasicAuthorizer("admin", "admin", users)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    process = start_coordinator(str(tmp_path_factory.mktemp("secured")), authorizer())
    yield process
    process.stop()


@pytest.fixture
def name() -> str:
    """A table name no other test in the module uses."""
    return f"t_{uuid.uuid4().hex[:10]}"
