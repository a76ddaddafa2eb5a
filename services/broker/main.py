"""Broker process wiring: discovery view, the scatter/gather executor, gRPC, Arrow Flight, HTTP."""

from __future__ import annotations

import threading

from services.broker.broker_node import BrokerNode
from services.broker.flight import BrokerFlightServer
from services.broker.query_executor import QueryExecutor
from services.broker.server import BrokerServicer, add_to_server
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
        self.flight = BrokerFlightServer(f"grpc://{config.node.host}:{config.node.flight_port}",
                                         lambda q: self.executor.execute(q, timeout_s).table)
        self.id = self.node_id(self.grpc.port)
        info = self.server_info(self.id, self.grpc.port, self.http.port, self.flight.port)
        self.node = BrokerNode(self.id, info, self.discovery, config.discovery.lease_ttl_s)
        self.executor = QueryExecutor(self.node.view, self.node.stub_for, self.metrics, self.node.lock)
        self.servicer = BrokerServicer(self.executor, self.metrics, config.broker.query_timeout_ms)
        add_to_server(self.grpc, self.servicer)
        self._flight_thread = threading.Thread(target=self.flight.serve, name="strata-flight", daemon=True)

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
        return self

    def stop(self) -> None:
        super().stop()
        self.node.stop()
        self.flight.shutdown()
        self.http.stop()
        self.grpc.stop()
        self.discovery.close()
