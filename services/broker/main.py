"""Broker process wiring: discovery view, the scatter/gather executor, gRPC, Arrow Flight, HTTP."""

from __future__ import annotations

import threading

from services.broker.broker_node import BrokerNode
from services.broker.catalog_cache import CatalogCache
from services.broker.overlay_catalog import OverlayCatalog
from services.broker.flight import BrokerFlightServer
from services.broker.query_executor import QueryExecutor
from services.broker.server import BrokerServicer, add_to_server
from services.broker.sql_service import BrokerCatalog, SqlService
from services.discovery import discovery_from_config
from services.grpc_server import GrpcServer
from services.http_endpoint import HttpEndpoint
from services.metrics import Metrics
from services.node_process import NodeProcess


class BrokerProcess(NodeProcess):
    role = "broker"

    def __init__(self, config) -> None:
        super().__init__(config)
        self.metrics = Metrics(self.role)
        self.discovery = discovery_from_config(config)
        self.grpc = GrpcServer(config.node.host, config.node.grpc_port)
        self.http = HttpEndpoint(config.node.host, config.node.http_port, self.metrics, self.health)
        timeout_s = config.broker.query_timeout_ms / 1000
        self.sql = None
        self.flight = BrokerFlightServer(f"grpc://{config.node.host}:{config.node.flight_port}",
                                         lambda q: self.executor.execute(q, timeout_s).table,
                                         sql_backend=_LateBound(lambda: self.sql), auth=flight_auth(config))
        self.id = self.node_id(self.grpc.port)
        info = self.server_info(self.id, self.grpc.port, self.http.port, self.flight.port)
        self.node = BrokerNode(self.id, info, self.discovery, config.discovery.lease_ttl_s)
        credentials = (config.auth.admin_user, config.auth.admin_password) if config.auth.enabled else None
        self.catalog_cache = CatalogCache(self.discovery, self.node.coordinator_http, credentials)
        self.catalog = OverlayCatalog(BrokerCatalog(self.node, self.node.coordinator_client), self.catalog_cache)
        self.executor = QueryExecutor(self.node.view, self.node.stub_for, self.metrics, self.node.lock,
                                      schema_for=self.catalog.datasource_schema)
        self.sql = SqlService(self.catalog, self.executor, timeout_s)
        self.servicer = BrokerServicer(self.executor, self.metrics, config.broker.query_timeout_ms,
                                       sql=self._run_sql)
        add_to_server(self.grpc, self.servicer)
        self._flight_thread = threading.Thread(target=self.flight.serve, name="strata-flight", daemon=True)

    def _run_sql(self, sql: str, context: dict, timeout_s: float, is_active):
        context = dict(context)
        context.setdefault("timeout", int(timeout_s * 1000))
        return self.sql.execute(sql, (), context, None, is_active)

    def health(self) -> dict:
        with self.node.lock:
            segments = len(self.node.view.descriptors)
            historicals = len(self.node.historicals)
        return {"healthy": True, "role": self.role, "id": self.id, "segments": segments, "historicals": historicals}

    def endpoints(self) -> dict:
        host = self.config.advertise_host
        return {"grpc": f"{host}:{self.grpc.port}", "flight": f"grpc://{host}:{self.flight.port}",
                "http": f"http://{host}:{self.http.port}"}

    def start(self) -> BrokerProcess:
        self.grpc.start()
        self.http.start()
        self._flight_thread.start()
        self.node.start()
        self.catalog_cache.start()
        return self

    def stop(self) -> None:
        super().stop()
        self.catalog_cache.stop()
        self.node.stop()
        self.flight.shutdown()
        self.http.stop()
        self.grpc.stop()
        self.discovery.close()


class _LateBound:
    """Forwards to an object built after the Flight server (the SQL service needs the node)."""

    def __init__(self, get) -> None:
        self._get = get

    def __getattr__(self, name):
        return getattr(self._get(), name)


def flight_auth(config):
    """Basic credentials against the configured admin when [auth] enabled; None leaves it off."""
    if not config.auth.enabled:
        return None
    import hmac

    user, password = config.auth.admin_user, config.auth.admin_password
    if not password:
        from common.errors import ValidationError

        raise ValidationError("config [auth] enabled needs admin_password (env STRATA_AUTH_ADMIN_PASSWORD)")
    return lambda u, p: hmac.compare_digest(u, user) and hmac.compare_digest(p, password)
