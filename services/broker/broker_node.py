"""BrokerNode: keeps the broker's ServedView in step with discovery and owns historical clients."""

from __future__ import annotations

import json
import logging
import threading
from urllib.parse import unquote

from services.rpc.gen.strata.v1 import historical_pb2_grpc
from common.segment.descriptor import SegmentDescriptor
from common.segment.segment_id import SegmentId
from services.broker.core.served_view import ServedView
from services.discovery import Announcer
from services.discovery.keys import node_key, nodes_prefix, parse_node_key, parse_served_key, served_prefix
from services.grpc_server import channel

log = logging.getLogger("strata.broker")


class BrokerNode:
    def __init__(self, server_id: str, server_info: dict, discovery, lease_ttl_s: int = 10) -> None:
        self.server_id = server_id
        self.server_info = server_info
        self.discovery = discovery
        self.view = ServedView()
        self.lock = threading.Lock()
        self.historicals: dict[str, dict] = {}
        self._served_keys: dict[str, tuple[str, SegmentId]] = {}
        self._stubs: dict[str, historical_pb2_grpc.HistoricalServiceStub] = {}
        self._coordinator_client = None  # a ClusterClient, rebuilt when the coordinator moves
        self._channels = []
        self._announcer = Announcer(discovery, lease_ttl_s)
        self._watches = []

    def start(self) -> BrokerNode:
        self._watches.append(self.discovery.watch_prefix(nodes_prefix("historical"), self._on_node))
        self._watches.append(self.discovery.watch_prefix(served_prefix(), self._on_served))
        self._announcer.set(node_key("broker", self.server_id), json.dumps(self.server_info).encode())
        return self

    def stop(self) -> None:
        for w in self._watches:
            w.cancel()
        self._announcer.close()
        for ch in self._channels:
            ch.close()

    def _on_node(self, event) -> None:
        server = parse_node_key(event.key).node_id
        with self.lock:
            if event.type == "put":
                self.historicals[server] = json.loads(event.value)
                self._stubs.pop(server, None)
            else:
                self.historicals.pop(server, None)
                self._stubs.pop(server, None)

    def _on_served(self, event) -> None:
        try:
            server = parse_served_key(event.key).server
            with self.lock:
                if event.type == "put":
                    descriptor = SegmentDescriptor.from_bytes(event.value)
                    self._served_keys[event.key] = (server, descriptor.id)
                    self.view.served(server, descriptor)
                else:
                    known = self._served_keys.pop(event.key, None)
                    if known is not None:
                        self.view.unserved(*known)
        except Exception:
            log.exception("bad served-segment announcement %s", unquote(event.key))

    def coordinator_client(self):
        """A ClusterClient on a coordinator, for sys tables and task submission (None if none is up)."""
        from services.cli.cluster_client import ClusterClient

        target = self.coordinator_target()
        if target is None:
            return None
        with self.lock:
            client = self._coordinator_client
            if client is None or client.coordinator_target != target:
                client = self._coordinator_client = ClusterClient(coordinator=target)
            return client

    def coordinator_http(self) -> str | None:
        for value in self.discovery.get_prefix(nodes_prefix("coordinator")).values():
            info = json.loads(value)
            return f"http://{info['host']}:{info['http_port']}"
        return None

    def coordinator_target(self) -> str | None:
        """Where a coordinator listens (any of them: they share the metadata store)."""
        for value in self.discovery.get_prefix(nodes_prefix("coordinator")).values():
            info = json.loads(value)
            return f"{info['host']}:{info['grpc_port']}"
        return None

    def stub_for(self, server: str) -> historical_pb2_grpc.HistoricalServiceStub:
        with self.lock:
            stub = self._stubs.get(server)
            if stub is None:
                info = self.historicals.get(server)
                if info is None:
                    raise ConnectionError(f"historical {server} is not announced")
                ch = channel(f"{info['host']}:{info['grpc_port']}")
                self._channels.append(ch)
                stub = self._stubs[server] = historical_pb2_grpc.HistoricalServiceStub(ch)
            return stub
