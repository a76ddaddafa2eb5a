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
from services.security.authorizer import Authorizer, authorizer_from_config


class BrokerProcess(NodeProcess):
    role = "broker"

    def __init__(self, config) -> None:
        super().__init__(config)
        self.metrics = Metrics(self.role)
        self.authorizer = authorizer_from_config(config)  # ALLOW_ALL unless [auth] enabled
        self.discovery = discovery_from_config(config)
        self.grpc = GrpcServer(config.node.host, config.node.grpc_port)
        self.http = HttpEndpoint(config.node.host, config.node.http_port, self.metrics, self.health, self.authorizer)
        timeout_s = config.broker.query_timeout_ms / 1000
        self.sql = None
        run_native = _flight_native(self.authorizer, lambda q: self.executor.execute(q, timeout_s).table)
        self.flight = BrokerFlightServer(f"grpc://{config.node.host}:{config.node.flight_port}", run_native,
                                         sql_backend=_LateBound(lambda: self.sql), auth=flight_auth(self.authorizer))
        self.id = self.node_id(self.grpc.port)
        info = self.server_info(self.id, self.grpc.port, self.http.port, self.flight.port)
        self.node = BrokerNode(self.id, info, self.discovery, config.discovery.lease_ttl_s)
        from services.broker.core.schema_merge import check_policy

        self.node.view.merge_policy = check_policy(config.broker.column_type_merge_policy)
        credentials = (config.auth.admin_user, config.auth.admin_password) if config.auth.enabled else None
        self.catalog_cache = CatalogCache(self.discovery, self.node.coordinator_http, credentials)
        self.catalog = OverlayCatalog(BrokerCatalog(self.node, self.node.coordinator_client, self.catalog_cache),
                                      self.catalog_cache)
        self.executor = QueryExecutor(self.node.view, self.node.stub_for, self.metrics, self.node.lock,
                                      schema_for=self.catalog.datasource_schema)
        from services.ingestion.schema_discovery import conflict_mode

        schema_conflicts = conflict_mode({"schemaConflicts": config.broker.schema_conflicts})
        self.sql = SqlService(self.catalog, self.executor, timeout_s, self.authorizer,
                              {"schemaConflicts": schema_conflicts})
        self._catalog_client = None  # (coordinator target, CatalogClient), rebuilt if it moves
        self.sql.ddl_client = self._ddl_client
        self.servicer = BrokerServicer(self.executor, self.metrics, config.broker.query_timeout_ms,
                                       sql=self._run_sql, authorizer=self.authorizer)
        add_to_server(self.grpc, self.servicer)
        self._flight_thread = threading.Thread(target=self.flight.serve, name="strata-flight", daemon=True)

    def _ddl_client(self):
        from services.coordinator.catalog_client import CatalogClient

        target = self.node.coordinator_target()
        if target is None:
            return None
        auth = None
        if self.config.auth.enabled:
            import base64

            raw = f"{self.config.auth.admin_user}:{self.config.auth.admin_password}".encode()
            auth = "Basic " + base64.b64encode(raw).decode()
        if self._catalog_client is None or self._catalog_client[0] != target:
            self._catalog_client = (target, CatalogClient(target, auth))
        return self._catalog_client[1]

    def _run_sql(self, sql: str, context: dict, timeout_s: float, is_active, user=None):
        context = dict(context)
        context.setdefault("timeout", int(timeout_s * 1000))
        return self.sql.execute(sql, (), context, user, is_active)

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


def flight_auth(authorizer: Authorizer):
    """Flight SQL logins (Basic in the Handshake, a bearer token after) checked by the authorizer:
    the admin and the users of [auth] users_file. None (everyone in as user None) when auth is off."""
    return authorizer.authenticate if authorizer.enabled else None


def _flight_native(authorizer: Authorizer, run):
    """Native JSON queries over Flight. The Flight server does not tell ``run_native`` who calls,
    so with authentication on they are refused (SQL is authorized per user); once it passes the
    user, ``services.security.secure_catalog.require_native`` checks READ on every datasource."""
    if not authorizer.enabled:
        return run

    def refuse(query):
        raise PermissionError("native JSON queries over Flight are not available while authentication is on; "
                              "send SQL, which is authorized per user")

    return refuse
