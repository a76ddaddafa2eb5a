"""EmbeddedCluster: a whole strata cluster in this process, every server on 127.0.0.1 port 0.

The one harness component tests use (as Druid's embedded-cluster tests do): real gRPC, HTTP and
Flight servers and real discovery, metadata store and deep storage, without subprocesses.
"""

from __future__ import annotations

import os
import time

from services.broker.main import BrokerProcess
from services.cli.cluster_client import ClusterClient
from services.coordinator.main import CoordinatorProcess
from services.historical.main import HistoricalProcess
from services.deep_storage import deep_storage_from_url
from services.node_config import load_config


def _env(section_values: dict) -> dict:
    env = {}
    for section, values in section_values.items():
        for key, value in values.items():
            env[f"STRATA_{section.upper()}_{key.upper()}"] = str(value)
    return env


class EmbeddedCluster:
    def __init__(self, directory: str, historicals: int = 2, *, etcd: str | None = None,
                 metadata_url: str | None = None, deep_storage: str | None = None, deep_storage_endpoint: str = "",
                 max_cache_bytes: int = 1 << 30, replication: int = 0, duty_period_ms: int = 100,
                 lease_ttl_s: int = 2, auth: dict | None = None, coordinator: dict | None = None,
                 broker: dict | None = None, tls: dict | None = None, tiers: list[str] | None = None) -> None:
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.deep_storage_url = deep_storage or os.path.join(directory, "deep-storage")
        self.deep_storage_endpoint = deep_storage_endpoint
        self.common = {
            "node": {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0, "flight_port": 0},
            "discovery": {"mode": "etcd", "etcd": etcd, "lease_ttl_s": lease_ttl_s} if etcd
            else {"mode": "embedded", "lease_ttl_s": lease_ttl_s},
            "metadata": {"url": metadata_url or f"sqlite:///{os.path.join(directory, 'metadata.db')}"},
            "deep_storage": {"url": self.deep_storage_url, "endpoint": deep_storage_endpoint},
            "coordinator": {"replication": replication, "duty_period_ms": duty_period_ms,
                            "state_dir": os.path.join(directory, "coordinator"), **(coordinator or {})},
        }
        if auth:  # [auth] for every role, e.g. {"enabled": True, "admin_password": ..., "users_file": ...}
            self.common["auth"] = dict(auth)
        if tls:  # [tls] for every role: {"cert": PEM, "key": PEM, "ca": PEM}
            self.common["tls"] = dict(tls)
        self.max_cache_bytes = max_cache_bytes
        self.tiers = list(tiers or [])  # [historical] tier of historical i (default tier when unlisted)
        self.coordinator: CoordinatorProcess | None = None
        self.broker: BrokerProcess | None = None
        self.historicals: list[HistoricalProcess] = []
        self._client: ClusterClient | None = None
        self.router = None
        self.start_coordinator()
        for i in range(historicals):
            self.add_historical(i)
        self.broker = BrokerProcess(self._config("broker", {"node": {"id": "broker"}, "broker": broker or {}})).start()

    def _config(self, role: str, extra: dict):
        sections = {k: dict(v) for k, v in self.common.items()}
        for k, v in extra.items():
            sections.setdefault(k, {}).update(v)
        if self.common["discovery"]["mode"] == "embedded" and self.coordinator is not None:
            sections["discovery"]["coordinator"] = f"127.0.0.1:{self.coordinator.grpc.port}"
        return load_config(role, None, env=_env(sections))

    def start_router(self):
        """A router (the web console and Druid's proxy paths) over this cluster, stopped by stop()."""
        from services.router.main import RouterProcess

        self.router = RouterProcess(self._config("router", {"node": {"id": "router"}})).start()
        return self.router

    def start_coordinator(self, grpc_port: int = 0) -> CoordinatorProcess:
        self.coordinator = None
        config = self._config("coordinator", {"node": {"id": "coordinator", "grpc_port": grpc_port}})
        self.coordinator = CoordinatorProcess(config).start()
        return self.coordinator

    def add_historical(self, index: int | None = None) -> HistoricalProcess:
        index = len(self.historicals) if index is None else index
        section = {"cache_dir": os.path.join(self.dir, f"cache-{index + 1}"), "max_cache_bytes": self.max_cache_bytes}
        if index < len(self.tiers):
            section["tier"] = self.tiers[index]
        config = self._config("historical", {"node": {"id": f"historical-{index + 1}"}, "historical": section})
        node = HistoricalProcess(config).start()
        if index < len(self.historicals):
            self.historicals[index] = node
        else:
            self.historicals.append(node)
        return node

    # ---- clients -----------------------------------------------------------------------------
    @property
    def client(self) -> ClusterClient:
        if self._client is None:
            # The cluster's own view (TLS, the internal credential): the harness acts as a node
            # when it publishes; the broker still wants a user's credentials when auth is on.
            self._client = ClusterClient(f"127.0.0.1:{self.coordinator.grpc.port}", f"127.0.0.1:{self.broker.grpc.port}",
                                         security=self.coordinator.security)
        return self._client

    def reset_client(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None

    def storage(self):
        return deep_storage_from_url(self.deep_storage_url, self.deep_storage_endpoint)

    def publish(self, table, datasource: str, **kwargs):
        return self.client.build_and_publish(table, datasource, self.storage(), **kwargs)

    def wait_queryable(self, datasource: str, segments: int, timeout_s: float = 30.0, replicas: int = 1) -> None:
        """Until the coordinator reports the segments loaded and the broker sees all of them."""
        self.client.wait_loaded(datasource, segments, timeout_s, replicas)
        deadline = time.monotonic() + timeout_s
        while True:
            with self.broker.node.lock:
                seen = sum(1 for s in self.broker.node.view.descriptors if s.datasource == datasource)
            if seen >= segments:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker sees {seen} of {segments} segments of '{datasource}'")
            time.sleep(0.05)

    def wait_until(self, predicate, timeout_s: float = 30.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout_s}s")
            time.sleep(0.05)

    def stop(self) -> None:
        self.reset_client()
        for node in [self.router, self.broker, *self.historicals, self.coordinator]:
            if node is not None:
                try:
                    node.stop()
                except Exception:  # keep stopping the rest
                    pass
