"""Broker process wiring: discovery view, the scatter/gather executor, gRPC, Arrow Flight, HTTP."""

from __future__ import annotations

import threading

from common.ingest.discovered_schema import conflict_mode
from services.broker.broker_node import BrokerNode
from services.broker.catalog_cache import CatalogCache
from services.broker.overlay_catalog import OverlayCatalog
from services.broker.flight import BrokerFlightServer
from services.broker.front_door import QueryFrontDoor
from services.broker.logged_backends import LoggedNative, LoggedSql
from services.broker.query_executor import QueryExecutor
from services.broker.query_registry import query_registry_from_config
from services.broker.query_tables import QueryTables
from services.broker.server import BrokerServicer, add_to_server
from services.broker.sql_service import BrokerCatalog, SqlService
from services.discovery import discovery_from_config
from services.grpc_server import GrpcServer
from services.http_endpoint import HttpEndpoint
from services.metrics import Metrics
from services.node_process import NodeProcess
from services.security.authorizer import Authorizer, authorizer_from_config
from services.broker.druid_http.druid_routes import DruidHttpApi


# Read queries Flight SQL may start at GetFlightInfo at once (more run at DoGet, as without prefetch).
PREFETCH_WORKERS = 8


class BrokerProcess(NodeProcess):
    role = "broker"

    def __init__(self, config) -> None:
        super().__init__(config)
        self.metrics = Metrics(self.role)
        self.authorizer = authorizer_from_config(config)  # ALLOW_ALL unless [auth] enabled
        self.discovery = discovery_from_config(config)
        security = self.security
        self.grpc = GrpcServer(config.node.host, config.node.grpc_port, security=security,
                               client_streams=("/strata.v1.BrokerService/Query",), role="broker")  # bounded per connection
        self.http = HttpEndpoint(config.node.host, config.node.http_port, self.metrics, self.health, self.authorizer,
                                 security.http_server_context() if security.serves_tls else None)
        timeout_s = config.broker.query_timeout_ms / 1000
        # The Flight server is built first (its port goes into the node's announcement); the
        # front door it serves through is completed once the node and SQL service exist.
        self.front_door = QueryFrontDoor(authorizer=self.authorizer, metrics=self.metrics, default_timeout_s=timeout_s)
        tls = {"tls_certificates": [(security.cert, security.key)]} if security.serves_tls else {}
        self.flight = BrokerFlightServer(security.flight_location(config.node.host, config.node.flight_port),
                                         self.front_door, auth=flight_auth(self.authorizer),
                                         prefetch_workers=PREFETCH_WORKERS if config.broker.prefetch_results else 0,
                                         **tls)
        self.id = self.node_id(self.grpc.port)
        info = self.server_info(self.id, self.grpc.port, self.http.port, self.flight.port)
        self.node = BrokerNode(self.id, info, self.discovery, config.discovery.lease_ttl_s, security=security)
        from services.broker.core.schema_merge import check_policy

        self.node.view.merge_policy = check_policy(config.broker.column_type_merge_policy)
        with self.node.lock:
            self.node.view.set_tier_preference(
                tuple(t.strip() for t in config.broker.tier_preference.split(",") if t.strip()))
        credentials = (config.auth.admin_user, config.auth.admin_password) if config.auth.enabled else None
        self.catalog_cache = CatalogCache(self.discovery, self.node.coordinator_http, credentials,
                                          tls_context=security.http_client_context())
        self.catalog = OverlayCatalog(BrokerCatalog(self.node, self.node.coordinator_client, self.catalog_cache),
                                      self.catalog_cache)
        self.executor = QueryExecutor(self.node.view, self.node.historical_client, self.metrics, self.node.lock,
                                      schema_for=lambda name, policy: (
                                          self.catalog.under_policy(policy).datasource_schema(name)),
                                      max_query_bytes=config.broker.max_query_bytes,
                                      used_states=self.node.used_states)
        schema_conflicts = conflict_mode({"schemaConflicts": config.broker.schema_conflicts})
        self.sql = SqlService(self.catalog, self.executor, timeout_s, self.authorizer,
                              {"schemaConflicts": schema_conflicts})
        self._catalog_client = None  # (coordinator target, CatalogClient), rebuilt if it moves
        self.sql.ddl_client = self._ddl_client
        # The query log: every statement from every front door is tracked (id, KILL, sys.queries).
        self.queries = query_registry_from_config(config.broker, self.authorizer, self.node)
        self.executor.watch = self.queries
        self.executor.tables = self.queries.tables  # rows a query reads, to gather small ones on few historicals
        self.front_door.sql = LoggedSql(self.sql, self.queries)
        self.front_door.native = LoggedNative(self.executor, self.queries)
        self.catalog.base.system_providers = QueryTables(self.queries, self.node, self.executor, timeout_s,
                                                         self._catalog_projections).providers()
        self.servicer = BrokerServicer(self.front_door, config.broker.query_timeout_ms, authorizer=self.authorizer)
        self.servicer.queries = self.queries
        add_to_server(self.grpc, self.servicer)
        # Druid's HTTP API (/druid/v2/sql, /druid/v2, /status, tasks) on the HTTP port, through the front door.
        self.druid_http = DruidHttpApi(self.front_door, self.catalog, self.authorizer, self.queries,
                                       config.advertise_host, self._status_properties(), self.node.coordinator_client)
        self.druid_http.install(self.http)
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
            self._catalog_client = (target, CatalogClient(target, auth, security=self.security))
        return self._catalog_client[1]

    def _status_properties(self) -> dict:
        """What Druid's /status/properties shows: where this broker listens (no credentials)."""
        return {"druid.service": "strata/broker", "druid.host": self.config.advertise_host,
                "druid.plaintextPort": self.http.port, "strata.grpcPort": self.grpc.port,
                "strata.flightPort": self.flight.port, "druid.sql.enable": "true"}

    def _catalog_projections(self, datasource: str) -> list[dict]:
        spec = self.catalog_cache.spec("druid", datasource) or {}
        return list((spec.get("properties") or {}).get("projections") or [])

    def health(self) -> dict:
        with self.node.lock:
            segments = len(self.node.view.descriptors)
            historicals = len(self.node.historicals)
        return {"healthy": True, "role": self.role, "id": self.id, "segments": segments, "historicals": historicals}

    def endpoints(self) -> dict:
        host = self.config.advertise_host
        return {"grpc": f"{host}:{self.grpc.port}", "flight": self.security.flight_location(host, self.flight.port),
                "http": f"{self.security.http_scheme}://{host}:{self.http.port}"}

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
        if self.queries.log_file is not None:
            self.queries.log_file.close()


def flight_auth(authorizer: Authorizer):
    """Flight SQL logins (Basic in the Handshake, a bearer token after) checked by the authorizer:
    the admin and the users of [auth] users_file. None (everyone in as user None) when auth is off."""
    return authorizer.authenticate if authorizer.enabled else None

